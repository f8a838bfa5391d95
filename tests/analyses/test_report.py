"""figures/REPORT.md (analyses.report): every number in it recomputed here from its table, independently (pandas
and scipy, not the report's code), the verdict rule checked on its edge cases, the committed report equal to a
fresh rendering of the committed tables, the HTML self-contained, and `interp report` through the CLI."""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analyses import report
from interp._util.paths import REPO_ROOT

FIGURES = REPO_ROOT / "figures"


def _rows() -> dict[str, str]:
    """claim text -> its markdown row, from the committed REPORT.md."""
    rows = {}
    for line in (FIGURES / report.MARKDOWN).read_text().splitlines():
        if line.startswith("| ") and not line.startswith("| claim") and not line.startswith("|---"):
            rows[line.split(" | ")[0].removeprefix("| ")] = line
    return rows


def _numbers(row: str) -> tuple[float, float, float]:
    cell = row.split(" | ")[3]
    found = re.findall(r"[+-]\d+(?:\.\d+)?", cell)
    return tuple(float(x) for x in found[:3])


def _close(row: str, want: tuple[float, float, float], digits: int) -> None:
    got = _numbers(row)
    for g, w in zip(got, want, strict=True):
        assert g == pytest.approx(round(w, digits), abs=10 ** -digits * 0.51), (row, want)


def _verdict(row: str) -> str:
    return re.search(r"\*\*(.+?)\*\*", row.split(" | ")[-1]).group(1)


def test_the_committed_report_is_current(tmp_path):
    for pattern in ("*.csv", "*.png", "*.meta.json"):   # a .meta.json names the writer of a table without hardware
        for path in FIGURES.glob(pattern):
            shutil.copy(path, tmp_path)
    report.render(tmp_path)
    assert (tmp_path / report.MARKDOWN).read_text() == (FIGURES / report.MARKDOWN).read_text(), \
        "figures/REPORT.md is stale: run `interp report`"
    page = (tmp_path / report.HTML).read_text()
    assert page.count("data:image/png;base64,") >= 5 and "src='http" not in page and "src=\"http" not in page


def test_every_measured_claim_says_which_dtype_and_hardware_produced_it():
    """The regime of each measured claim names a dtype and a machine, from the rows' columns or, for a table
    without them, from its .meta.json (said so); "not recorded" only where neither has it."""
    measured = [c for c in report.claims(FIGURES) if not c.missing]
    assert len(measured) > 40
    for c in measured:
        assert re.search(r"float32|bfloat16|float16|fp32|bf16|dtype not recorded", c.regime), (c.id, c.regime)
        assert re.search(r"AMD|Intel|cuda|NVIDIA|H100|H200|hardware not recorded|model not recorded", c.regime), (c.id, c.regime)
    by_id = {c.id: c for c in measured}
    accuracy = pd.read_csv(FIGURES / "removal_accuracy_vs_measures.csv")
    row = accuracy[(accuracy["measure"] == "block_influence") & (accuracy["model"] == "gemma3-270m")].iloc[0]
    assert by_id[f"accuracy-block-influence-gemma3-270m-{row['task']}"].regime.endswith(
        f"{row['dtype']}, {row['hardware']}")


def test_training_claims_match_their_tables():
    rows = _rows()
    group = pd.read_csv(FIGURES / "group_ablation.csv").set_index("variant")
    for variant, text in (("wider-early", "wider-early MLPs beat uniform"),
                          ("wider-late", "wider-late MLPs are worse")):
        row = next(r for k, r in rows.items() if k.startswith(text))
        g = group.loc[variant]
        _close(row, (g.rel_val_ppl_pct_mean, g.rel_val_ppl_pct_ci_low, g.rel_val_ppl_pct_ci_high), 2)
    assert _verdict(rows[next(k for k in rows if k.startswith("wider-early"))]) == "reproduces"
    rivals = pd.read_csv(FIGURES / "rival_profiles.csv").set_index("variant")
    for variant, (_, text) in report.LAYOUT_CLAIMS.items():
        r = rivals.loc[variant]
        _close(rows[text], (r.rel_val_ppl_pct_mean, r.rel_val_ppl_pct_ci_low, r.rel_val_ppl_pct_ci_high), 2)
        want = ("reproduces" if r.rel_val_ppl_pct_ci_high < 0 else "contradicts" if r.rel_val_ppl_pct_ci_low > 0
                else "unresolved")
        assert _verdict(rows[text]) == want
    arch = pd.read_csv(FIGURES / "architectures.csv")
    for _, a in arch[arch.variant != "uniform"].iterrows():
        row = rows[f"cosine 1.5 -> 0.5 beats uniform with the {a.mixer} mixer"]
        _close(row, (a.rel_val_ppl_pct_mean, a.rel_val_ppl_pct_ci_low, a.rel_val_ppl_pct_ci_high), 2)
        want = ("reproduces" if a.rel_val_ppl_pct_ci_high < 0 else "contradicts" if a.rel_val_ppl_pct_ci_low > 0
                else "unresolved")
        assert _verdict(row) == want


def test_best_schedule_is_a_paired_comparison_with_the_runner_up():
    runs = pd.read_csv(FIGURES / "schedule_sweep_runs.csv")
    runs = runs[runs.status == "done"]
    means = runs.groupby("variant").val_ppl.mean().drop(["uniform", "cosine-1.5-0.5"])
    rival = means.idxmin()
    wide = runs.pivot_table(index="seed", columns="variant", values="val_ppl")
    d = (wide["cosine-1.5-0.5"] - wide[rival]).to_numpy()
    half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    row = _rows()["cosine 1.5 -> 0.5 is the best schedule of the sweep"]
    _close(row, (d.mean(), d.mean() - half, d.mean() + half), 2)
    assert rival in (FIGURES / report.MARKDOWN).read_text()


def test_probe_eval_and_literature_claims_match_their_tables():
    rows = _rows()
    styles = pd.read_csv(FIGURES / "novelty_block_styles.csv")
    for _, s in styles[styles.metric == "rho_mlp"].drop_duplicates(["arch", "variant"]).iterrows():
        key = next(k for k in rows if k.endswith(f"{s.arch} block, {s.variant}"))
        _close(rows[key], (s.pearson_r_mean, s.pearson_r_ci_low, s.pearson_r_ci_high), 2)
    causal = pd.read_csv(FIGURES / "novelty_vs_causal.csv")
    for _, c in causal[(causal.measure == "rho_mlp") & (causal.causal == "delta_loss_skip_mlp")].iterrows():
        _close(rows[f"a more reinforcing MLP (higher rho_mlp) matters less: {c.label}"],
               (c.spearman_rho, c.ci_low, c.ci_high), 3)
    removal = pd.read_csv(FIGURES / "layer_removal.csv")
    for layer in (14, 17):
        r = removal[(removal.label == "smollm2-135m") & (removal.layer == layer)].iloc[0]
        row = rows[f"removing SmolLM2's layer {layer} lowers perplexity (an anti-layer)"]
        _close(row, (r.delta_ppl, r.delta_ppl_ci_low, r.delta_ppl_ci_high), 2)
        assert _verdict(row) == ("contradicts" if r.delta_ppl_ci_low > 0 else "reproduces" if r.delta_ppl_ci_high < 0
                                 else "unresolved")
    evals = pd.read_csv(FIGURES / "downstream_groups.csv")
    hellaswag = evals[(evals.variant == "wider-early") & (evals.task == "hellaswag")].iloc[0]
    _close(rows["wider-early does better than uniform on hellaswag (acc_norm)"],
           (hellaswag.d_mean, hellaswag.d_ci_low, hellaswag.d_ci_high), 3)
    assert "not measured: `interp figures --only novelty_gpt2 --recompute`" in rows[
        "rho_mlp rises with depth in GPT-2 (124M to 1.5B)"]


def test_importance_claims_match_the_per_seed_table():
    """Recomputed from the per-model table (not the summary the report reads): a seeded group's mean of its
    seeds' Spearman rhos with scipy's t-interval (clipped to [-1, 1]); a pretrained model's own row."""
    rows = _rows()
    table = pd.read_csv(FIGURES / "importance_measures.csv")
    table["group"] = table["label"].str.replace(r"/seed\d+$", "", regex=True)
    checked = 0
    for text, measure, causal in [("a more reinforcing MLP (higher rho_mlp) matters less, over 5 seeds",
                                   "rho_mlp", "delta_loss_skip_mlp"),
                                  ("a block that turns the stream more (higher Block Influence) costs more when "
                                   "removed", "block_influence", "delta_loss_skip_block")]:
        sel = table[(table.measure == measure) & (table.causal == causal)]
        for group, g in sel.groupby("group"):
            key = f"{text}: {group}"
            if len(g) == 1:
                if measure == "rho_mlp":
                    assert key not in rows       # a pretrained model's rho_mlp claim is novelty_vs_causal's
                    continue
                want = (g.spearman_rho.iloc[0], g.ci_low.iloc[0], g.ci_high.iloc[0])
            else:
                x = g.spearman_rho.to_numpy()
                low, high = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
                want = (x.mean(), max(low, -1.0), min(high, 1.0))
            _close(rows[key], want, 3)
            assert _verdict(rows[key]) == report.verdict(want[1:], -1 if measure == "rho_mlp" else +1)
            checked += 1
    assert checked == 4 + 6


def test_accuracy_claims_match_their_table():
    """removal_accuracy's Block Influence rows, one claim each; none yet: "not measured" with its command."""
    rows = _rows()
    path = FIGURES / "removal_accuracy_vs_measures.csv"
    bi = pd.read_csv(path).query("measure == 'block_influence'") if path.is_file() else pd.DataFrame()
    text = "a block with a higher Block Influence costs more accuracy when removed"
    if bi.empty:   # not computed yet (or no task complete): one "not measured" row with the command
        assert any("interp figures --only removal_accuracy --recompute" in r for r in rows.values())
    for _, r in bi.iterrows():
        key = f"{text}: {r.model}, {r.task}"
        _close(rows[key], (r.spearman_rho, r.ci_low, r.ci_high), 3)
        assert _verdict(rows[key]) == report.verdict((r.ci_low, r.ci_high), -1)


@pytest.mark.parametrize("ci, sign, want", [
    ((-2.0, -1.0), -1, "reproduces"), ((1.0, 2.0), -1, "contradicts"), ((-1.0, 1.0), -1, "unresolved"),
    ((0.0, 1.0), +1, "unresolved"), ((0.5, 1.0), +1, "reproduces"), ((np.nan, 1.0), +1, "unresolved")])
def test_the_verdict_rule(ci, sign, want):
    assert report.verdict(ci, sign) == want


def test_a_missing_table_is_not_measured_with_its_command(tmp_path):
    shutil.copy(FIGURES / "group_ablation.csv", tmp_path)
    shutil.copy(FIGURES / "group_ablation_runs.csv", tmp_path)
    items = report.claims(tmp_path)
    by_id = {c.id: c for c in items}
    assert by_id["allocation-early"].verdict == "reproduces"
    assert by_id["best-schedule"].verdict == "not measured"
    assert "interp figures --only schedule_sweep --recompute" in report.markdown(items)


def test_interp_report_cli(tmp_path):
    from interp.cli import main

    for path in FIGURES.glob("*.csv"):
        shutil.copy(path, tmp_path)
    assert main(["report", "--out", str(tmp_path)]) == 0
    assert (tmp_path / report.MARKDOWN).read_text().startswith("# Report")
    assert (tmp_path / report.HTML).is_file()
