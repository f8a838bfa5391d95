"""One generated report of every claim and its verdict: figures/REPORT.md and a self-contained REPORT.html.

Every number is read from the committed tables under figures/ (never recomputed from a model), so the report
is as current as the tables and `make figures` regenerates it in a second. Each claim states what the paper (or
the literature) says, how we measured it, our value with its 95% CI, the regime it was measured in (parameters,
tokens per run, tokens per parameter, seeds, hardware, dtype), and a verdict computed by one stated rule:

    a claim predicts a sign (better = lower perplexity = negative change; a correlation that should be positive
    or negative). reproduces: the CI lies entirely on the predicted side of zero; contradicts: entirely on the
    other side; unresolved: the CI contains zero (or no CI could be formed). A table that is not there gives
    "not measured" and the command that computes it.

tests/analyses/test_report.py recomputes every number in the report from its table, independently, and checks it.
figures/README.md keeps the per-figure detail; this is the one-page view.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analyses import recompute_command
from interp._util.io import write_text_atomic

NAME = "report"
MARKDOWN = "REPORT.md"
HTML = "REPORT.html"
OUTPUTS = [MARKDOWN, HTML]
RULE = ("reproduces: the 95% CI lies entirely on the side of zero the claim predicts; contradicts: entirely on the "
        "other side; unresolved: the CI contains zero")
MIDDLE_PAIRS = "pairs (s, l) with s < l"


@dataclass
class Config:
    """Nothing to choose: the report reads the tables it finds under figures/."""


@dataclass
class Claim:
    id: str
    source: str                     # "paper" or a reference
    claim: str                      # what it says
    measure: str                    # how we measured it
    table: str                      # the table the numbers come from
    sign: int                       # -1: the claim predicts a negative value, +1 positive
    unit: str = ""
    value: float = math.nan
    ci: tuple[float, float] = (math.nan, math.nan)
    regime: str = ""
    figure: str = ""
    note: str = ""
    missing: str = ""               # the analysis whose table is absent
    digits: int = 2                 # decimals shown (accuracies: 3)

    @property
    def verdict(self) -> str:
        if self.missing:
            return "not measured"
        return verdict(self.ci, self.sign)


def verdict(ci: tuple[float, float], sign: int) -> str:
    """The stated rule (module docstring) applied to a CI and the predicted sign."""
    low, high = ci
    if not (math.isfinite(low) and math.isfinite(high)):
        return "unresolved"
    if (sign < 0 and high < 0) or (sign > 0 and low > 0):
        return "reproduces"
    if (sign < 0 and low > 0) or (sign > 0 and high < 0):
        return "contradicts"
    return "unresolved"


def fmt(x: float, digits: int = 2) -> str:
    """The one number format of the report (tests/analyses/test_report.py formats its own values with it)."""
    return "n/a" if not math.isfinite(x) else f"{x:+.{digits}f}"


def _labels(rows: pd.DataFrame, column: str) -> str:
    """The distinct values of `column`, joined; a hardware record stored as JSON (the eval tables') as its label."""
    from interp._util.provenance import hardware_label

    if column not in rows:
        return ""
    values = {hardware_label(hw=json.loads(v)) if v.startswith("{") else v
              for v in rows[column].dropna().astype(str) if v}
    return ", ".join(sorted(values))


def _made_by(rows: pd.DataFrame, figures: Path | None = None, table: str = "") -> str:
    """'dtype, hardware' of the rows behind a number, read from their columns. A table with no hardware column
    falls back to the machine its .meta.json recorded (the one that wrote the table), and says so."""
    from interp._util.provenance import hardware_label

    hardware = _labels(rows, "hardware")
    if not hardware and "device" in rows:   # older run tables name only the device kind
        hardware = "devices " + _labels(rows, "device") + " (model not recorded)"
    dtype = _labels(rows, "dtype")
    meta_path = figures / Path(table).with_suffix(".meta.json") if figures is not None and table else None
    meta = json.loads(meta_path.read_text()) if meta_path is not None and meta_path.is_file() else {}
    if not hardware and (recorded := meta.get("provenance", {}).get("hardware")):
        hardware = f"{hardware_label(hw=recorded)} (the table's writer, from its .meta.json)"
    config = meta.get("config", {})
    if not dtype and (configured := (config.get("probe") or {}).get("dtype") or config.get("dtype")):
        dtype = f"{configured} (its .meta.json config)"
    return f"{dtype or 'dtype not recorded'}, {hardware or 'hardware not recorded'}"


def _runs_regime(runs: pd.DataFrame, params: float, tokens: float, seeds: int) -> str:
    return (f"{params / 1e6:.1f}M params, {tokens / 1e6:.2f}M tokens/run ({tokens / params:.3f} tokens/param), "
            f"{seeds} seeds, {_made_by(runs)}")


def _read(figures: Path, name: str) -> pd.DataFrame | None:
    path = figures / name
    return pd.read_csv(path) if path.is_file() else None


# ---------------------------------------------------------------------------------------------- the claims

def _training_claim(figures: Path, table: str, variant: str, claim: Claim) -> Claim:
    """rel. val perplexity change of `variant` vs uniform, paired by seed (the study's own CI)."""
    df, runs = _read(figures, f"{table}.csv"), _read(figures, f"{table}_runs.csv")
    if df is None or runs is None or variant not in set(df["variant"]):
        claim.missing = table
        return claim
    row = df[df["variant"] == variant].iloc[0]
    claim.value = float(row["rel_val_ppl_pct_mean"])
    claim.ci = (float(row["rel_val_ppl_pct_ci_low"]), float(row["rel_val_ppl_pct_ci_high"]))
    claim.regime = _runs_regime(runs, float(row["params"]), float(row["tokens"]), int(row["n_seeds"]))
    return claim


def direction_claims(figures: Path) -> list[Claim]:
    early = Claim("allocation-early", "paper (Fig. 2)", "wider-early MLPs beat uniform at equal parameters",
                  "validation perplexity change vs uniform, % (paired by seed, t-CI)", "group_ablation.csv", -1, "%",
                  figure="group_ablation.png")
    late = Claim("allocation-late", "paper (Fig. 2)", "wider-late MLPs are worse than uniform",
                 "validation perplexity change vs uniform, % (paired by seed, t-CI)", "group_ablation.csv", +1, "%",
                 figure="group_ablation.png")
    return [_training_claim(figures, "group_ablation", "wider-early", early),
            _training_claim(figures, "group_ablation", "wider-late", late)]


def best_schedule_claim(figures: Path) -> Claim:
    """cosine 1.5->0.5 against the best other variant of the sweep, paired by seed on the runs table."""
    from interp.stats_intervals import mean_ci

    claim = Claim("best-schedule", "paper (Table 1)", "cosine 1.5 -> 0.5 is the best schedule of the sweep",
                  "val. perplexity of cosine 1.5->0.5 minus the sweep's best other taper (lowest mean), paired "
                  "by seed (t-CI)", "schedule_sweep_runs.csv", -1, " ppl", figure="schedule_sweep.png")
    df, runs = _read(figures, "schedule_sweep.csv"), _read(figures, "schedule_sweep_runs.csv")
    if df is None or runs is None:
        claim.missing = "schedule_sweep"
        return claim
    ok = runs[runs["status"] == "done"] if "status" in runs else runs
    means = ok.groupby("variant")["val_ppl"].mean().drop(["uniform", "cosine-1.5-0.5"], errors="ignore")
    rival = str(means.idxmin())
    wide = ok.pivot_table(index="seed", columns="variant", values="val_ppl")
    diff = (wide["cosine-1.5-0.5"] - wide[rival]).dropna()
    claim.value, low, high = mean_ci(diff.tolist())
    claim.ci = (low, high)
    row = df[df["variant"] == "cosine-1.5-0.5"].iloc[0]
    claim.regime = _runs_regime(runs, float(row["params"]), float(row["tokens"]), len(diff))
    claim.note = f"the best other taper by mean: {rival}"
    return claim


def mixer_claims(figures: Path) -> list[Claim]:
    df, runs = _read(figures, "architectures.csv"), _read(figures, "architectures_runs.csv")
    if df is None or runs is None:
        return [Claim("mixers", "paper (generalisation)", "the taper helps with every token mixer",
                      "", "architectures.csv", -1, missing="architectures")]
    claims = []
    for _, row in df[df["variant"] != "uniform"].iterrows():
        claim = Claim(f"mixer-{row['mixer']}", "paper (generalisation)",
                      f"cosine 1.5 -> 0.5 beats uniform with the {row['mixer']} mixer",
                      "validation perplexity change vs uniform, % (paired by seed, t-CI)", "architectures.csv", -1,
                      "%", figure="architectures.png")
        claim.value = float(row["rel_val_ppl_pct_mean"])
        claim.ci = (float(row["rel_val_ppl_pct_ci_low"]), float(row["rel_val_ppl_pct_ci_high"]))
        claim.regime = _runs_regime(runs[runs["mixer"] == row["mixer"]], float(row["params"]), float(row["tokens"]),
                                    int(row["n_seeds"]))
        claims.append(claim)
    return claims


def depth_claims(figures: Path) -> list[Claim]:
    """rho_mlp rises with depth: the Pearson r of rho_mlp with depth, mean over seeds with its t-CI, for our two
    block styles (novelty_block_styles; the paper measured GPT-2, which needs a network: novelty_gpt2)."""
    df = _read(figures, "novelty_block_styles.csv")
    if df is None:
        return [Claim("depth", "paper (section 4)", "rho_mlp rises with depth", "", "novelty_block_styles.csv", +1,
                      missing="novelty_block_styles")]
    rows = df[df["metric"] == "rho_mlp"].drop_duplicates(["arch", "variant"])
    claims = [gpt2_depth_claim(figures)]
    for _, row in rows.iterrows():
        claim = Claim(f"depth-{row['arch']}-{row['variant']}", "paper (section 4, GPT-2)",
                      f"rho_mlp (cos of MLP output with the stream) rises with depth: {row['arch']} block, "
                      f"{row['variant']}", "Pearson r of rho_mlp with depth across layers, mean over seeds (t-CI)",
                      "novelty_block_styles.csv", +1, "", figure="novelty_block_styles.png")
        claim.value = float(row["pearson_r_mean"])
        claim.ci = (float(row["pearson_r_ci_low"]), float(row["pearson_r_ci_high"]))
        claim.regime = (f"6-layer tiny models, {int(row['n_seeds'])} seeds, {int(row['tokens']) / 1e6:.2f}M "
                        f"tokens ({row['checkpoint_kind']}), "
                        f"{_made_by(df, figures, 'novelty_block_styles.csv')}")
        claims.append(claim)
    return claims


def gpt2_depth_claim(figures: Path) -> Claim:
    """The paper's own measurement (GPT-2 124M-1.5B, WikiText-2): novelty_gpt2, which needs the hub."""
    claim = Claim("depth-gpt2", "paper (section 4, GPT-2)", "rho_mlp rises with depth in GPT-2 (124M to 1.5B)",
                  "the paper's experiment, one command (needs a network: the models and WikiText-2 from the hub)",
                  "novelty_gpt2.csv", +1)
    df = _read(figures, "novelty_gpt2.csv")
    if df is None or "pearson_r" not in df:
        claim.missing = "novelty_gpt2"
        return claim
    row = df.iloc[0]
    claim.value, claim.ci = float(row["pearson_r"]), (float(row.get("ci_low", math.nan)),
                                                      float(row.get("ci_high", math.nan)))
    return claim


def eval_claims(figures: Path) -> list[Claim]:
    df = _read(figures, "downstream_groups.csv")
    if df is None:
        return [Claim("evals", "paper (evaluations)", "wider-early improves the commonsense tasks", "",
                      "downstream_groups.csv", +1, missing="downstream_groups")]
    runs = _read(figures, "downstream_groups_runs.csv")
    runs = runs if runs is not None else pd.DataFrame()
    made_by_training = _made_by(runs)
    claims = []
    for _, row in df[(df["variant"] == "wider-early") & (df["task"] != "training_val")].iterrows():
        if not (math.isfinite(row["d_ci_low"]) and (row["d_ci_low"] != 0 or row["d_ci_high"] != 0)):
            continue   # a task where every model scores the same (e.g. a constant answer): no comparison
        lower_better = "perplexity" in str(row["metric"]) or "ppl" in str(row["metric"])
        claim = Claim(f"eval-{row['task']}-{row['metric']}", "paper (evaluations)",
                      f"wider-early does better than uniform on {row['task']} ({row['metric']})",
                      f"{row['metric']} difference vs uniform (paired by seed, t-CI)", "downstream_groups.csv",
                      -1 if lower_better else +1, "", figure="downstream_groups.png", digits=0 if lower_better else 3)
        claim.value, claim.ci = float(row["d_mean"]), (float(row["d_ci_low"]), float(row["d_ci_high"]))
        docs = f", {int(row['n_docs'])} docs" if math.isfinite(row["n_docs"]) else ""
        claim.regime = (f"the group ablation's checkpoints, {int(row['n_seeds'])} seeds{docs}; trained "
                        f"{made_by_training}; evaluated {_labels(runs, 'eval_dtype') or 'dtype not recorded'}, "
                        f"{_labels(runs, 'eval_hardware') or 'hardware not recorded'}")
        claims.append(claim)
    return claims


def literature_claims(figures: Path) -> list[Claim]:
    claims = []
    causal = _read(figures, "novelty_vs_causal.csv")
    if causal is None:
        claims.append(Claim("rho-predicts", "paper's reading; critique 2605.14075", "", "", "novelty_vs_causal.csv",
                            -1, missing="novelty_vs_causal"))
    else:
        for _, row in causal[(causal["measure"] == "rho_mlp") & (causal["causal"] == "delta_loss_skip_mlp")].iterrows():
            claim = Claim(f"rho-predicts-{row['label']}", "paper's reading (critique: 2605.14075)",
                          f"a more reinforcing MLP (higher rho_mlp) matters less: {row['label']}",
                          "Spearman rho across layers of rho_mlp with the loss increase of skipping the MLP "
                          "(bootstrap CI over sequences)", "novelty_vs_causal.csv", -1, "",
                          figure="novelty_vs_causal.png", digits=3)
            claim.value, claim.ci = float(row["spearman_rho"]), (float(row["ci_low"]), float(row["ci_high"]))
            claim.regime = (f"{int(row['n_layers'])} layers, {int(row['n_sequences'])} sequences, "
                            f"{_made_by(causal[causal['label'] == row['label']], figures, 'novelty_vs_causal.csv')}")
            claims.append(claim)
    removal = _read(figures, "layer_removal.csv")
    smol = removal[removal["label"] == "smollm2-135m"] if removal is not None else None
    if smol is None or smol.empty:
        claims.append(Claim("anti-layers", "2603.19348", "", "", "layer_removal.csv", -1, missing="layer_removal"))
    else:
        for layer in (14, 17):
            row = smol[smol["layer"] == layer].iloc[0]
            claim = Claim(f"anti-layer-{layer}", "2603.19348 (SmolLM2-135M base)",
                          f"removing SmolLM2's layer {layer} lowers perplexity (an anti-layer)",
                          "perplexity change when the layer is removed (bootstrap CI over sequences)",
                          "layer_removal.csv", -1, " ppl", figure="layer_removal.png",
                          note="our copy is the Instruct model dequantized from Q4_1, not the base weights")
            claim.value = float(row["delta_ppl"])
            claim.ci = (float(row["delta_ppl_ci_low"]), float(row["delta_ppl_ci_high"]))
            claim.regime = (f"{int(row['n_tokens'])} held-out wiki tokens, {int(row['n_sequences'])} sequences, "
                            f"{_made_by(smol[smol['layer'] == layer], figures, 'layer_removal.csv')}")
            claims.append(claim)
    return claims + importance_claims(figures) + accuracy_claims(figures) + layout_claims(figures)


# importance_measures: (measure, causal effect, sign, source, claim, pretrained too?) per model or seeded group
IMPORTANCE_CLAIMS = (
    ("rho_mlp", "delta_loss_skip_mlp", -1, "paper's reading (critique: 2605.14075)",
     "a more reinforcing MLP (higher rho_mlp) matters less, over 5 seeds", False),
    ("block_influence", "delta_loss_skip_block", +1, "ShortGPT (Block Influence)",
     "a block that turns the stream more (higher Block Influence) costs more when removed", True),
    ("angular_distance", "delta_loss_skip_block", +1, "Gromov et al. (angular distance)",
     "a block with a larger angular distance between its input and output costs more when removed", True),
)


def importance_claims(figures: Path) -> list[Claim]:
    """Which cheap measure predicts the damage of removing a layer (importance_measures' summary): the paper's
    rho_mlp on our seeded checkpoints (the pretrained models' rows are novelty_vs_causal's claims already), and
    the pruning literature's two measures on every model."""
    table = _read(figures, "importance_measures_summary.csv")
    if table is None:
        return [Claim("importance", "ShortGPT; Gromov et al.; 2605.14075", "", "", "importance_measures_summary.csv",
                      +1, missing="importance_measures")]
    claims = []
    for measure, causal, sign, source, text, pretrained in IMPORTANCE_CLAIMS:
        rows = table[(table["measure"] == measure) & (table["causal"] == causal)]
        for _, row in rows.iterrows():
            seeded = int(row["n_seeds"]) > 1
            if not (seeded or pretrained):
                continue
            what = "mean over seeds of the per-seed Spearman rho, t-CI" if seeded else "bootstrap CI over sequences"
            claim = Claim(f"importance-{measure}-{row['group']}", source, f"{text}: {row['group']}",
                          f"Spearman rho across layers of {measure} with {causal} ({what})",
                          "importance_measures_summary.csv", sign, "", figure="importance_measures.png", digits=3)
            claim.value, claim.ci = float(row["spearman_rho"]), (float(row["ci_low"]), float(row["ci_high"]))
            seeds = f", {int(row['n_seeds'])} seeds" if seeded else ""
            claim.regime = (f"{int(row['n_layers'])} layers{seeds}, {int(row['n_sequences'])} sequences x "
                            f"{int(row['n_tokens']) // int(row['n_sequences'])} tokens, "
                            f"{_made_by(rows[rows['group'] == row['group']])}")
            if seeded and measure == "rho_mlp":
                claim.note = ("the single seed of train_comparison's tiny runs (novelty_vs_causal, above) is one draw; "
                              "here 5 seeds of a half-width shape, each a Spearman rho over only "
                              f"{int(row['n_layers'])} layers")
            claims.append(claim)
    return claims


def accuracy_claims(figures: Path) -> list[Claim]:
    """ShortGPT's measure against the accuracy lost when a block is removed (removal_accuracy), per model and task
    measured so far: a higher Block Influence should go with a larger loss, a more negative change (sign -1)."""
    table = _read(figures, "removal_accuracy_vs_measures.csv")
    rows = None if table is None else table[table["measure"] == "block_influence"]
    if rows is None or rows.empty:
        return [Claim("accuracy-block-influence", "ShortGPT (Block Influence)", "", "",
                      "removal_accuracy_vs_measures.csv", -1, missing="removal_accuracy")]
    claims = []
    for _, row in rows.iterrows():
        claim = Claim(f"accuracy-block-influence-{row['model']}-{row['task']}", "ShortGPT (Block Influence)",
                      f"a block with a higher Block Influence costs more accuracy when removed: {row['model']}, "
                      f"{row['task']}", "Spearman rho across layers of block_influence with the accuracy change "
                      "(lm-eval, paired per document; bootstrap CI over documents)",
                      "removal_accuracy_vs_measures.csv", -1, "", figure="removal_accuracy.png", digits=3)
        claim.value, claim.ci = float(row["spearman_rho"]), (float(row["ci_low"]), float(row["ci_high"]))
        claim.regime = (f"{int(row['n_layers'])} layers, {int(row['n_docs'])} documents, "
                        f"{_made_by(rows[(rows['model'] == row['model']) & (rows['task'] == row['task'])])}")
        claims.append(claim)
    return claims


# the literature's placements of the MLP budget, in the rival study (rival_profiles, --layouts): variant -> claim
LAYOUT_CLAIMS = {
    "middle-heavy-0.5-1.5-0.5": ("Ikeda/Lee et al. 2025 (2508.17734)",
                                 "MLP capacity concentrated in the middle layers beats uniform at the same budget"),
    "middle-ffn": ("Ikeda/Lee et al. 2025 (2508.17734)",
                   "FFNs only in the middle ~70% of the layers (none in the first and last ~15%) beat uniform"),
    "no-first-mlp": ("modded-nanogpt",
                     "the first layer's MLP can go (its budget spread over the others) without a loss vs uniform"),
}


def layout_claims(figures: Path) -> list[Claim]:
    """The rival study's literature placements, each its validation perplexity change vs uniform."""
    return [_training_claim(figures, "rival_profiles", variant,
                            Claim(f"layout-{variant}", source, text,
                                  "validation perplexity change vs uniform, % (paired by seed, t-CI)",
                                  "rival_profiles.csv", -1, "%", figure="rival_profiles.png"))
            for variant, (source, text) in LAYOUT_CLAIMS.items()]


BUILDERS: tuple[Callable[[Path], list[Claim]], ...] = (
    direction_claims, lambda f: [best_schedule_claim(f)], mixer_claims, depth_claims, eval_claims, literature_claims)


def claims(figures_dir: Path) -> list[Claim]:
    return [c for build in BUILDERS for c in build(Path(figures_dir))]


# ---------------------------------------------------------------------------------------------- the documents

def _cell(c: Claim) -> str:
    if c.missing:
        return f"not measured: `{recompute_command(c.missing)}`"
    return f"{fmt(c.value, c.digits)}{c.unit} [{fmt(c.ci[0], c.digits)}, {fmt(c.ci[1], c.digits)}]"


def markdown(items: list[Claim]) -> str:
    counts = {v: sum(c.verdict == v for c in items) for v in ("reproduces", "contradicts", "unresolved",
                                                               "not measured")}
    lines = ["# Report: every claim, our measurement, and its verdict", "",
             "Generated by `interp report` (and `make figures`) from the committed tables under figures/; do not "
             "edit by hand. figures/README.md has the detail of each figure.", "",
             f"**Verdict rule.** {RULE}. Every CI is 95%.", "",
             "**Summary:** " + ", ".join(f"{n} {v}" for v, n in counts.items()) + ".", "",
             "| claim | source | our measurement | value [95% CI] | regime | verdict |", "|---|---|---|---|---|---|"]
    for c in items:
        lines.append(f"| {c.claim or c.id} | {c.source} | {c.measure or '-'} ({c.table}) | {_cell(c)} | "
                     f"{c.regime or '-'} | **{c.verdict}** |")
    notes = [f"- {c.claim}: {c.note}" for c in items if c.note]
    if notes:
        lines += ["", "Notes:", *notes]
    lines += ["", "What the regime cannot tell: every training comparison here was trained on 2 CPU cores at "
              "0.05-0.2 tokens per parameter (the paper trains 440M-parameter models far longer); a verdict is "
              "about this regime, and the paper's may differ at its scale (issue 35 waits for a GPU to repeat the "
              "first two claims at ten times the tokens).", ""]
    return "\n".join(lines)


def html_page(items: list[Claim], figures_dir: Path) -> str:
    """The same table as one self-contained HTML file: the figures embedded as base64 PNGs."""
    colors = {"reproduces": "#d4edda", "contradicts": "#f8d7da", "unresolved": "#fff3cd", "not measured": "#e2e3e5"}
    rows = "".join(
        f"<tr style='background:{colors[c.verdict]}'><td>{html.escape(c.claim or c.id)}</td>"
        f"<td>{html.escape(c.source)}</td><td>{html.escape(c.measure)} ({html.escape(c.table)})</td>"
        f"<td>{html.escape(_cell(c))}</td><td>{html.escape(c.regime)}</td><td><b>{c.verdict}</b></td></tr>"
        for c in items)
    figures = []
    for name in dict.fromkeys(c.figure for c in items if c.figure and not c.missing):
        path = Path(figures_dir) / name
        if path.is_file():
            data = base64.b64encode(path.read_bytes()).decode()
            figures.append(f"<h3>{html.escape(name)}</h3>"
                           f"<img style='max-width:100%' src='data:image/png;base64,{data}'>")
    return ("<!doctype html><html><head><meta charset='utf-8'><title>interp report</title>"
            "<style>body{font-family:sans-serif;max-width:1200px;margin:auto}td,th{border:1px solid #ccc;"
            "padding:4px;vertical-align:top}table{border-collapse:collapse}</style></head><body>"
            "<h1>Report: every claim, our measurement, and its verdict</h1>"
            f"<p><b>Verdict rule.</b> {html.escape(RULE)}. Every CI is 95%.</p><table><tr><th>claim</th>"
            "<th>source</th><th>our measurement</th><th>value [95% CI]</th><th>regime</th><th>verdict</th></tr>"
            f"{rows}</table>{''.join(figures)}</body></html>\n")


def compute(cfg: Config, figures_dir: Path) -> None:
    render(figures_dir)


def render(figures_dir: Path) -> list[Path]:
    figures_dir = Path(figures_dir)
    items = claims(figures_dir)
    write_text_atomic(figures_dir / MARKDOWN, markdown(items))
    write_text_atomic(figures_dir / HTML, html_page(items, figures_dir))
    return [figures_dir / MARKDOWN, figures_dir / HTML]


__all__ = ["Claim", "claims", "fmt", "verdict", "markdown", "render", "RULE"]
