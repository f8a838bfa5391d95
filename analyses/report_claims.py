"""The report's claims (analyses/report.py lists them in SECTIONS): the Claim row, the one verdict rule (RULE,
applied by `verdict` through interp.stats_intervals.direction) with what each kind of interval covers (COVERAGE)
and how a claim tested on several tasks is read (MULTIPLE), and one builder per kind of claim, each reading its
committed table under figures/ (never a model). A row compared with something other than a predicted sign (our
evaluations beside the published numbers) carries another stated Rule, whose function computes its verdict from
the row's own numbers; its section states that rule. A new claim of an existing kind is one entry of a builder's
declarative table (LAYOUT_CLAIMS, IMPORTANCE_CLAIMS, ACCURACY_CLAIMS, analyses.report_evals.EVAL_VARIANTS); a new
kind, one builder and one Section of analyses.report.SECTIONS. The evaluations' builders are analyses/
report_evals.py's."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from interp.stats_intervals import direction, mean_ci, pearson_ci

LEVEL = 0.95
VERDICTS = ("reproduces", "contradicts", "unresolved", "not measured")
RULE = ("reproduces: the claim's interval lies entirely on the side of zero the claim predicts; contradicts: "
        "entirely on the other side; unresolved: the interval contains zero. Every interval is 95% and covers "
        "every source of noise its table measures (below); where one claim is tested on several tasks, the "
        "verdict reads the family-wise interval (Bonferroni), shown beside the 95% one")
COVERAGE = (
    ("training comparisons (perplexity change vs uniform): Student t over seeds, paired by seed; every model is "
     "validated on the same held-out text, whose sampling is not in the interval"),
    ("evaluations (lm-eval, the same documents for every model): the seeds' t interval and the documents' 95% "
     "interval (1.96 x the documents' standard error of the mean change) added in quadrature "
     "(interp.stats_intervals.change_ci); perplexities on a log scale (the mean log ratio per seed, shown as a % "
     "change), their documents' error by the delta method; a row without a documents' error says so"),
    ("correlations across layers of one model: a bootstrap over sequences or documents (the text's noise); of a "
     "seeded group: Student t over the seeds' correlations; a curve against depth (Pearson r): Fisher z over the "
     "layers, which treats the layers as the units"),
    "removing one layer (perplexity change): a bootstrap over sequences",
)
MULTIPLE = ("A claim tested on m tasks (a family, listed under 'Claims tested on several tasks') gives about "
            "0.05 x m chance hits at 95% each when nothing is there. Where the table holds the seeds' values and "
            "the documents' errors (the evaluations), each interval of the family is widened to the level "
            "1 - 0.05 / m (Bonferroni: the m intervals hold together with 95% probability) and the verdict reads "
            "that one; where it stores 95% bootstrap intervals only, the family's note says how many chance hits "
            "to expect.")


@dataclass
class Claim:
    """One row of the report: a claim, how we measured it, our value and 95% interval, and the verdict by RULE."""
    id: str                         # the row's anchor (REPORT.md#id); the README's findings cite it
    source: str                     # "paper" or a reference
    claim: str                      # what it says
    measure: str                    # how we measured it
    table: str                      # the table the numbers come from
    sign: int                       # -1: the claim predicts a negative value, +1 positive
    unit: str = ""
    value: float = math.nan
    ci: tuple[float, float] = (math.nan, math.nan)      # 95%
    regime: str = ""
    figure: str = ""
    note: str = ""                  # "[[id]]" names another row (a link in both documents)
    missing: str = ""               # the analysis whose table is absent
    command: str = ""               # what rebuilds it, when not recompute_command(missing)
    digits: int = 2                 # decimals shown (accuracies: 3)
    family: str = ""                # the claims that test one statement on several tasks
    family_size: int = 1            # the family's tests (those that can come out either way)
    verdict_ci: tuple[float, float] | None = None       # the family-wise interval the verdict reads, if corrected
    verdict_level: float = LEVEL
    tokens_per_param: float = math.nan                  # a training claim's, for the caveats
    rule: Rule | None = None        # another stated rule than RULE (its section states it); None: RULE
    basis: dict[str, float] = field(default_factory=dict)   # the row's numbers `rule` reads (e.g. z, shots)
    cites: tuple[str, ...] = ()     # further tables (and figures) the note quotes, listed with the others

    def __post_init__(self) -> None:
        self.id = slug(self.id)   # an anchor and a link target: no spaces, slashes or arrows

    @property
    def verdict(self) -> str:
        if self.missing:
            return "not measured"
        if self.rule is not None:
            return self.rule.decide(self)
        return verdict(self.verdict_ci or self.ci, self.sign)


@dataclass(frozen=True)
class Rule:
    """A verdict rule other than RULE: its words (each a colour of the HTML and a count of the summary), its text
    (stated in its section's intro) and the function that gives a claim's word from the claim's numbers."""
    name: str
    text: str
    words: tuple[str, ...]
    decide: Callable[[Claim], str]


@dataclass(frozen=True)
class Section:
    """A heading of the report and the builder of its claims (figures folder -> claims); `intro`, a paragraph
    under the heading (a section whose rows carry another Rule states it there)."""
    id: str
    title: str
    build: Callable[[Path], list[Claim]]
    intro: str = ""


def verdict_words(claims: list[Claim]) -> tuple[str, ...]:
    """The words a verdict can take in these claims: RULE's, then those of every other Rule they carry."""
    return tuple(dict.fromkeys([*VERDICTS, *(w for c in claims if c.rule is not None for w in c.rule.words)]))


def slug(text: str) -> str:
    """A row id from names of models and variants: lower case, runs of anything but [a-z0-9._-] as one '-'."""
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-")


def verdict(ci: tuple[float, float], sign: int) -> str:
    """The stated rule (RULE) applied to an interval and the predicted sign."""
    side = direction(*ci)
    return "unresolved" if side == 0 else "reproduces" if side == sign else "contradicts"


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


def table_meta(figures: Path, table: str) -> dict:
    """The .meta.json write_table stored beside `table` ({} when there is none)."""
    path = Path(figures) / Path(table).with_suffix(".meta.json")
    return json.loads(path.read_text()) if path.is_file() else {}


def _made_by(rows: pd.DataFrame, figures: Path | None = None, table: str = "") -> str:
    """'dtype, hardware' of the rows behind a number, read from their columns. A table with no hardware column
    falls back to the machine its .meta.json recorded (the one that wrote the table), and says so."""
    from interp._util.provenance import hardware_label

    hardware = _labels(rows, "hardware")
    if not hardware and "device" in rows:   # older run tables name only the device kind
        hardware = "devices " + _labels(rows, "device") + " (model not recorded)"
    dtype = _labels(rows, "dtype")
    meta = table_meta(figures, table) if figures is not None and table else {}
    if not hardware and (recorded := meta.get("provenance", {}).get("hardware")):
        hardware = f"{hardware_label(hw=recorded)} (the table's writer, from its .meta.json)"
    config = meta.get("config", {})
    if not dtype and (configured := (config.get("probe") or {}).get("dtype") or config.get("dtype")):
        dtype = f"{configured} (its .meta.json config)"
    return f"{dtype or 'dtype not recorded'}, {hardware or 'hardware not recorded'}"


def _runs_regime(runs: pd.DataFrame, params: float, tokens: float, seeds: int) -> str:
    return (f"{params / 1e6:.1f}M params, {tokens / 1e6:.2f}M tokens/run ({tokens / params:.3f} tokens/param), "
            f"{seeds} seeds, {_made_by(runs)}")


def _weights(model: str) -> str:
    """What our copy of a registry model is (its registry note up to the first ';'), or the name."""
    from interp.data.registry import REGISTRY

    entry = REGISTRY.get(model)
    return entry.notes.split(";")[0] if entry is not None else model


def _read(figures: Path, name: str) -> pd.DataFrame | None:
    path = figures / name
    return pd.read_csv(path) if path.is_file() else None


# ---------------------------------------------------------------------------------------------- training

def seed_pairs(runs: pd.DataFrame, variant: str, sign: int, baseline: str = "uniform") -> str:
    """'k of n seed pairs go the claimed way': `variant`'s finished runs against `baseline`'s of the same seed,
    the validation perplexity moving in the direction `sign` predicts."""
    ok = runs[runs["status"] == "done"] if "status" in runs else runs
    wide = ok.pivot_table(index="seed", columns="variant", values="val_ppl")
    if variant not in wide or baseline not in wide:
        return ""
    d = (wide[variant] - wide[baseline]).dropna()
    return f"{int((sign * d > 0).sum())} of {len(d)} seed pairs go the claimed way"


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
    claim.tokens_per_param = float(row["tokens"]) / float(row["params"])
    claim.note = seed_pairs(runs, variant, claim.sign)
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


def _sweep(figures: Path) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """schedule_sweep's summary and its finished runs as a seed x variant table of validation perplexities."""
    df, runs = _read(figures, "schedule_sweep.csv"), _read(figures, "schedule_sweep_runs.csv")
    if df is None or runs is None:
        return None
    ok = runs[runs["status"] == "done"] if "status" in runs else runs
    return df, ok


def best_schedule_claim(figures: Path) -> Claim:
    """cosine 1.5->0.5 against the best other variant of the sweep, paired by seed on the runs table."""
    claim = Claim("best-schedule", "paper (Table 1)", "cosine 1.5 -> 0.5 is the best schedule of the sweep",
                  "val. perplexity of cosine 1.5->0.5 minus the sweep's best other taper (lowest mean), paired "
                  "by seed (t-CI)", "schedule_sweep_runs.csv", -1, " ppl", figure="schedule_sweep.png")
    if (sweep := _sweep(figures)) is None:
        claim.missing = "schedule_sweep"
        return claim
    df, ok = sweep
    means = ok.groupby("variant")["val_ppl"].mean().drop(["uniform", "cosine-1.5-0.5"], errors="ignore")
    rival = str(means.idxmin())
    wide = ok.pivot_table(index="seed", columns="variant", values="val_ppl")
    diff = (wide["cosine-1.5-0.5"] - wide[rival]).dropna()
    claim.value, low, high = mean_ci(diff.tolist())
    claim.ci = (low, high)
    row = df[df["variant"] == "cosine-1.5-0.5"].iloc[0]
    claim.regime = _runs_regime(ok, float(row["params"]), float(row["tokens"]), len(diff))
    claim.tokens_per_param = float(row["tokens"]) / float(row["params"])
    claim.note = f"the best other taper by mean: {rival}"
    return claim


def taper_claim(figures: Path) -> Claim:
    """Every taper of the sweep against uniform: per seed, the mean over the tapers of the % change vs that
    seed's uniform model; t-CI over the seeds (the tapers of one seed share its uniform model)."""
    claim = Claim("taper-vs-uniform", "paper (Table 1)", "tapering beats uniform at equal parameters, whatever "
                  "the schedule and ratio", "validation perplexity change vs uniform, %, mean over the sweep's "
                  "tapers per seed (t-CI over seeds)", "schedule_sweep_runs.csv", -1, "%",
                  figure="schedule_sweep.png")
    if (sweep := _sweep(figures)) is None:
        claim.missing = "schedule_sweep"
        return claim
    df, ok = sweep
    wide = ok.pivot_table(index="seed", columns="variant", values="val_ppl").dropna(subset=["uniform"])
    rel = 100.0 * (wide.drop(columns="uniform").div(wide["uniform"], axis=0) - 1.0)
    claim.value, low, high = mean_ci(rel.mean(axis=1).tolist())
    claim.ci = (low, high)
    row = df[df["variant"] == "uniform"].iloc[0]
    claim.regime = _runs_regime(ok, float(row["params"]), float(row["tokens"]), len(rel))
    claim.tokens_per_param = float(row["tokens"]) / float(row["params"])
    claim.note = (f"{int((rel < 0).sum().sum())} of {int(rel.notna().sum().sum())} seed pairs favour the taper "
                  f"({rel.shape[1]} tapers, each against the uniform model of its seed)")
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
        claim.tokens_per_param = float(row["tokens"]) / float(row["params"])
        claim.note = seed_pairs(runs[runs["mixer"] == row["mixer"]], row["variant"], claim.sign)
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


def training_claims(figures: Path) -> list[Claim]:
    return (direction_claims(figures) + [taper_claim(figures), best_schedule_claim(figures)] + mixer_claims(figures)
            + layout_claims(figures))


# ---------------------------------------------------------------------------------------------- depth

def depth_claims(figures: Path) -> list[Claim]:
    """rho_mlp rises with depth: the paper's GPT-2 (novelty_gpt2, needs a network), the pretrained models we have
    offline (novelty_pretrained) and our two block styles over seeds (novelty_block_styles)."""
    return [gpt2_depth_claim(figures), *pretrained_depth_claims(figures), *block_style_claims(figures)]


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


def pretrained_depth_claims(figures: Path) -> list[Claim]:
    """The pretrained half of the paper's depth claim: per model and variant of novelty_pretrained (default, and
    with the massive residual dimensions left out), the Pearson r of the per-layer mean rho_mlp with depth."""
    df = _read(figures, "novelty_pretrained.csv")
    if df is None:
        return [Claim("depth-pretrained", "paper (section 4, GPT-2)", "rho_mlp rises with depth in pretrained "
                      "models", "", "novelty_pretrained.csv", +1, missing="novelty_pretrained")]
    rows = df[df["metric"] == "rho_mlp"].assign(variant=lambda d: d["variant"].fillna("default").astype(str))
    claims: dict[tuple[str, str], Claim] = {}
    for (model, variant), g in rows.groupby(["model", "variant"], sort=False):
        g = g.sort_values("layer")
        default = variant == "default"
        dims = "" if default else f", its {int(g['exclude_massive_dims'].iloc[0])} massive residual dimensions " \
                                  f"{g['excluded_dims'].iloc[0]} left out of every cosine"
        claim = Claim(f"depth-pretrained-{model}" + ("" if default else "-" + variant.replace("_", "-")),
                      "paper (section 4, GPT-2)", f"rho_mlp rises with depth in a pretrained model: {model}{dims}",
                      "Pearson r of the per-layer mean rho_mlp with depth (Fisher z CI, the layers as units)",
                      "novelty_pretrained.csv", +1, figure="novelty_pretrained.png")
        claim.value = float(np.corrcoef(g["layer"].to_numpy(float), g["mean"].to_numpy(float))[0, 1])
        claim.ci = pearson_ci(claim.value, len(g), LEVEL)
        claim.regime = (f"{len(g)} layers, {int(g['n_tokens'].iloc[0])} held-out wiki tokens "
                        f"({int(g['n_sequences'].iloc[0])} sequences); weights: {_weights(model)}; {_made_by(g)}")
        claims[model, variant] = claim
    for (model, variant), claim in claims.items():
        others = [c for (m, v), c in claims.items() if m == model and v != variant]
        if variant == "default" and others:
            claim.note = "; ".join(f"with the massive dimensions left out r is {fmt(c.value)} ([[{c.id}]])"
                                   for c in others)
    return list(claims.values())


def block_style_claims(figures: Path) -> list[Claim]:
    """The Pearson r of rho_mlp with depth, mean over seeds with its t-CI, for our two block styles."""
    df = _read(figures, "novelty_block_styles.csv")
    if df is None:
        return [Claim("depth-tiny", "paper (section 4, GPT-2)", "rho_mlp rises with depth", "",
                      "novelty_block_styles.csv", +1, missing="novelty_block_styles")]
    claims = []
    for _, row in df[df["metric"] == "rho_mlp"].drop_duplicates(["arch", "variant"]).iterrows():
        claim = Claim(f"depth-tiny-{row['arch']}-{row['variant']}", "paper (section 4, GPT-2)",
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


# ---------------------------------------------------------------------------------------------- importance

def beside_rho(figures: Path) -> Callable[..., None]:
    """add(claim, model, measure, cost, task=""): adds to a Spearman-rho claim's note the layers where its measure
    misleads about its cost (analyses.misleading_layers.misleading_line of the committed table: both ranks with
    their intervals) and cites that table and figure; leaves the claim as it is where the table or its rows are
    absent."""
    from analyses.misleading_layers import FIGURE, NAME, TABLE, misleading_line, selected

    table = _read(figures, TABLE)

    def add(claim: Claim, model: str, measure: str, cost: str, task: str = "") -> None:
        rows = selected(table, model, measure, cost, task) if table is not None else pd.DataFrame()
        if rows.empty:
            return
        if abs(float(rows["spearman_rho"].iloc[0]) - claim.value) < 1e-9:
            text = f"where it misleads ({TABLE}): {misleading_line(table, model, measure, cost, task)}"
        else:   # ranked from other probes than this rho: not shown beside it
            text = (f"{TABLE} ranks the layers for another Spearman rho ({rows['spearman_rho'].iloc[0]:+.3f}): "
                    f"stale; recompute it (`interp figures --only {NAME} --recompute`)")
        claim.note = "; ".join(x for x in (claim.note, text) if x)
        claim.cites = (*claim.cites, TABLE, FIGURE)
    return add


def rho_predicts_claims(figures: Path) -> list[Claim]:
    """The paper's reading of rho_mlp against the loss of skipping each MLP, per model (novelty_vs_causal)."""
    causal = _read(figures, "novelty_vs_causal.csv")
    if causal is None:
        return [Claim("rho-predicts", "paper's reading; critique 2605.14075", "", "", "novelty_vs_causal.csv", -1,
                      missing="novelty_vs_causal")]
    claims, misleads = [], beside_rho(figures)
    for _, row in causal[(causal["measure"] == "rho_mlp") & (causal["causal"] == "delta_loss_skip_mlp")].iterrows():
        claim = Claim(f"rho-predicts-{row['label']}", "paper's reading (critique: 2605.14075)",
                      f"a more reinforcing MLP (higher rho_mlp) matters less: {row['label']}",
                      "Spearman rho across layers of rho_mlp with the loss increase of skipping the MLP "
                      "(bootstrap CI over sequences)", "novelty_vs_causal.csv", -1, "",
                      figure="novelty_vs_causal.png", digits=3)
        claim.value, claim.ci = float(row["spearman_rho"]), (float(row["ci_low"]), float(row["ci_high"]))
        claim.regime = (f"{int(row['n_layers'])} layers, {int(row['n_sequences'])} sequences, "
                        f"{_made_by(causal[causal['label'] == row['label']], figures, 'novelty_vs_causal.csv')}")
        misleads(claim, row["label"], "rho_mlp", "delta_loss_skip_mlp")
        claims.append(claim)
    return claims


def anti_layer_claims(figures: Path) -> list[Claim]:
    removal = _read(figures, "layer_removal.csv")
    smol = removal[removal["label"] == "smollm2-135m"] if removal is not None else None
    if smol is None or smol.empty:
        return [Claim("anti-layers", "2603.19348", "", "", "layer_removal.csv", -1, missing="layer_removal")]
    claims = []
    for layer in (14, 17):
        row = smol[smol["layer"] == layer].iloc[0]
        claim = Claim(f"anti-layer-{layer}", "2603.19348 (SmolLM2-135M base)",
                      f"removing SmolLM2's layer {layer} lowers perplexity (an anti-layer)",
                      "perplexity change when the layer is removed (bootstrap CI over sequences)",
                      "layer_removal.csv", -1, " ppl", figure="layer_removal.png",
                      note=f"our copy is {_weights('smollm2-135m')}, not the base weights")
        claim.value = float(row["delta_ppl"])
        claim.ci = (float(row["delta_ppl_ci_low"]), float(row["delta_ppl_ci_high"]))
        claim.regime = (f"{int(row['n_tokens'])} held-out wiki tokens, {int(row['n_sequences'])} sequences, "
                        f"{_made_by(smol[smol['layer'] == layer], figures, 'layer_removal.csv')}")
        claims.append(claim)
    return claims


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
    claims, misleads = [], beside_rho(figures)
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
            misleads(claim, str(row["group"]), measure, causal)
            claims.append(claim)
    return claims


# removal_accuracy: (measure, sign of its Spearman rho with the accuracy change of removing a block, source, claim);
# the accuracy change is negative when removal hurts, so "costs more accuracy" predicts a negative rho
ACCURACY_CLAIMS = (
    ("block_influence", -1, "ShortGPT (Block Influence)",
     "a block with a higher Block Influence costs more accuracy when removed"),
    ("rho_mlp", +1, "paper's reading (critique: 2605.14075)",
     "a block whose MLP reinforces the stream more (higher rho_mlp) costs less accuracy when removed"),
)


def accuracy_claims(figures: Path) -> list[Claim]:
    """The accuracy change of removing each block (removal_accuracy) against ACCURACY_CLAIMS' measures, per
    model and task (and the tasks' documents pooled): one family per model and measure."""
    table = _read(figures, "removal_accuracy_vs_measures.csv")
    claims, misleads = [], beside_rho(figures)
    for measure, sign, source, text in ACCURACY_CLAIMS:
        rows = None if table is None else table[table["measure"] == measure]
        if rows is None or rows.empty:
            claims.append(Claim(f"accuracy-{measure.replace('_', '-')}", source, text, "",
                                "removal_accuracy_vs_measures.csv", sign, missing="removal_accuracy"))
            continue
        for _, row in rows.iterrows():
            claim = Claim(f"accuracy-{measure.replace('_', '-')}-{row['model']}-{row['task']}", source,
                          f"{text}: {row['model']}, {row['task']}", f"Spearman rho across layers of {measure} "
                          "with the accuracy change (lm-eval, paired per document; bootstrap CI over documents)",
                          "removal_accuracy_vs_measures.csv", sign, "", figure="removal_accuracy.png", digits=3,
                          family=f"{measure} against the accuracy change of removing a block: {row['model']}",
                          family_size=int((rows["model"] == row["model"]).sum()))
            claim.value, claim.ci = float(row["spearman_rho"]), (float(row["ci_low"]), float(row["ci_high"]))
            claim.regime = (f"{int(row['n_layers'])} layers, {int(row['n_docs'])} documents, "
                            f"{_made_by(rows[(rows['model'] == row['model']) & (rows['task'] == row['task'])])}")
            misleads(claim, row["model"], measure, row["causal"], row["task"])
            claims.append(claim)
    return claims


def attribution_claims(figures: Path) -> list[Claim]:
    """The fast mode as one more proxy (attribution_vs_exact): per model and kind, does the first-order estimate
    (attribution patching, `--causal-method attribution`) rank the layers at all like the exact removal? A weak bar
    (a positive rank correlation), so the note carries what it misses: the errors, the signs, the worst layers. One
    family per model (its four kinds)."""
    table = _read(figures, "attribution_vs_exact.csv")
    if table is None:
        return [Claim("attribution", "attribution patching (Nanda 2023; TransformerLens attribution_patch)",
                      "the first-order estimate's ranking of the layers correlates positively with the exact one", "",
                      "attribution_vs_exact.csv", +1, missing="attribution_vs_exact")]
    claims = []
    for _, row in table.iterrows():
        claim = Claim(f"attribution-{row['model']}-{row['kind']}",
                      "attribution patching (Nanda 2023; TransformerLens attribution_patch)",
                      f"the first-order estimate's ranking of the layers correlates positively with the exact "
                      f"{row['kind']} rows': {row['model']}",
                      f"Spearman rho across layers of {row['estimate_metric']} with {row['exact_metric']} "
                      "(same sequences; bootstrap CI over sequences)", "attribution_vs_exact.csv", +1, "",
                      figure="attribution_vs_exact.png", digits=3,
                      family=f"the fast mode against the exact rows: {row['model']}",
                      family_size=int((table["model"] == row["model"]).sum()))
        claim.value, claim.ci = float(row["spearman_rho"]), (float(row["ci_low"]), float(row["ci_high"]))
        claim.regime = (f"{int(row['n_layers'])} layers, {int(row['n_sequences'])} sequences, "
                        f"{int(row['n_tokens']):,} predicted tokens, {_made_by(table[table['model'] == row['model']])}")
        claim.note = (f"Pearson r {row['pearson_r']:+.2f}; signs agree at {row['sign_agreement']:.0%} of layers; "
                      f"median |estimate - exact| {row['median_abs_error']:.3g} nats beside a median |exact| of "
                      f"{row['median_abs_exact']:.3g}; worst layers {row['worst_layers']} (exact "
                      f"{row['worst_exact']}, estimated {row['worst_estimate']}); causal rows "
                      f"{row['exact_seconds']:.0f} s exact, {row['estimate_seconds']:.0f} s estimated")
        claims.append(claim)
    return claims


def importance_section(figures: Path) -> list[Claim]:
    return (rho_predicts_claims(figures) + anti_layer_claims(figures) + importance_claims(figures)
            + accuracy_claims(figures) + attribution_claims(figures))
