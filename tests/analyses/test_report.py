"""figures/REPORT.md (analyses.report): every number in it recomputed here from its table, independently (pandas
and scipy, not the report's code), the verdict rule checked on its edge cases, the committed report equal to a
fresh rendering of the committed tables, and a missing table's row. The rendering (HTML = Markdown, links, the
CLI) is tests/analyses/test_report_render.py's; the rule's agreement with downstream_groups' `resolved` and its
figure's stars, test_report_rule.py's; the README's findings, test_report_readme.py's."""

from __future__ import annotations

import math
import re
import shutil

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analyses import report
from analyses.report_claims import LAYOUT_CLAIMS
from interp._util.paths import REPO_ROOT

FIGURES = REPO_ROOT / "figures"


def rows() -> dict[str, list[str]]:
    """claim id -> the cells of its row in the committed REPORT.md."""
    found = {}
    for line in (FIGURES / report.MARKDOWN).read_text().splitlines():
        if m := re.match(r'\| <a id="([^"]+)"></a>', line):
            found[m.group(1)] = line.strip("| ").split(" | ")
    return found


def numbers(cells: list[str]) -> tuple[float, ...]:
    """Value, CI low, CI high of a row's value cell (then the family-wise interval's bounds, if any)."""
    return tuple(float(x) for x in re.findall(r"[+-]\d+(?:\.\d+)?", cells[4]))


def close(cells: list[str], want: tuple[float, ...], digits: int) -> None:
    got = numbers(cells)[:len(want)]
    assert len(got) == len(want), (cells, want)
    for g, w in zip(got, want, strict=True):
        assert g == pytest.approx(round(w, digits), abs=10 ** -digits * 0.51), (cells[0], want)


def verdict_of(cells: list[str]) -> str:
    return re.search(r"\*\*(.+?)\*\*", cells[6]).group(1)


def rule(low: float, high: float, sign: int) -> str:
    """The stated rule, written out again."""
    side = 1 if low > 0 else -1 if high < 0 else 0
    return "unresolved" if side == 0 else "reproduces" if side == sign else "contradicts"


def test_the_committed_report_is_current(tmp_path):
    for pattern in ("*.csv", "*.png", "*.meta.json"):   # a .meta.json names the writer of a table without hardware
        for path in FIGURES.glob(pattern):
            shutil.copy(path, tmp_path)
    report.render(tmp_path)
    # REPORT.md only: REPORT.html (the same document, figures embedded) is generated, not committed
    fresh, committed = ((folder / report.MARKDOWN).read_text() for folder in (tmp_path, FIGURES))
    assert fresh == committed, f"figures/{report.MARKDOWN} is stale: run `interp report --out figures` (make figures)"


def test_every_measured_claim_says_which_dtype_and_hardware_produced_it():
    """The regime of each measured claim names a dtype and a machine, from the rows' columns or, for a table
    without them, from its .meta.json (said so); "not recorded" only where neither has it."""
    measured = [c for c in report.claims(FIGURES) if not c.missing]
    assert len(measured) > 50
    ids = [c.id for c in report.claims(FIGURES)]
    assert len(ids) == len(set(ids)) and all(re.fullmatch(r"[a-z0-9._-]+", i) for i in ids)
    for c in measured:
        assert re.search(r"float32|bfloat16|float16|fp32|bf16|dtype not recorded", c.regime), (c.id, c.regime)
        assert re.search(r"AMD|Intel|cuda|NVIDIA|H100|H200|hardware not recorded|model not recorded", c.regime), \
            (c.id, c.regime)
    by_id = {c.id: c for c in measured}
    accuracy = pd.read_csv(FIGURES / "removal_accuracy_vs_measures.csv")
    row = accuracy[(accuracy["measure"] == "block_influence") & (accuracy["model"] == "gemma3-270m")].iloc[0]
    assert by_id[f"accuracy-block-influence-gemma3-270m-{row['task']}"].regime.endswith(
        f"{row['dtype']}, {row['hardware']}")


def test_training_claims_match_their_tables():
    found = rows()
    group = pd.read_csv(FIGURES / "group_ablation.csv").set_index("variant")
    runs = pd.read_csv(FIGURES / "group_ablation_runs.csv").query("status == 'done'")
    wide = runs.pivot_table(index="seed", columns="variant", values="val_ppl")
    for variant, key, sign in (("wider-early", "allocation-early", -1), ("wider-late", "allocation-late", +1)):
        g = group.loc[variant]
        close(found[key], (g.rel_val_ppl_pct_mean, g.rel_val_ppl_pct_ci_low, g.rel_val_ppl_pct_ci_high), 2)
        assert verdict_of(found[key]) == rule(g.rel_val_ppl_pct_ci_low, g.rel_val_ppl_pct_ci_high, sign)
        d = (wide[variant] - wide["uniform"]).dropna()
        assert f"{int((sign * d > 0).sum())} of {len(d)} seed pairs go the claimed way" in \
            {c.id: c for c in report.claims(FIGURES)}[key].note
    rivals = pd.read_csv(FIGURES / "rival_profiles.csv").set_index("variant")
    for variant in LAYOUT_CLAIMS:
        r = rivals.loc[variant]
        cells = found[report.slug(f"layout-{variant}")]
        close(cells, (r.rel_val_ppl_pct_mean, r.rel_val_ppl_pct_ci_low, r.rel_val_ppl_pct_ci_high), 2)
        assert verdict_of(cells) == rule(r.rel_val_ppl_pct_ci_low, r.rel_val_ppl_pct_ci_high, -1)
    arch = pd.read_csv(FIGURES / "architectures.csv")
    for _, a in arch[arch.variant != "uniform"].iterrows():
        cells = found[report.slug(f"mixer-{a.mixer}")]
        close(cells, (a.rel_val_ppl_pct_mean, a.rel_val_ppl_pct_ci_low, a.rel_val_ppl_pct_ci_high), 2)
        assert verdict_of(cells) == rule(a.rel_val_ppl_pct_ci_low, a.rel_val_ppl_pct_ci_high, -1)


def _sweep() -> pd.DataFrame:
    runs = pd.read_csv(FIGURES / "schedule_sweep_runs.csv")
    return runs[runs.status == "done"].pivot_table(index="seed", columns="variant", values="val_ppl")


def _t_interval(x: np.ndarray) -> tuple[float, float, float]:
    half = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    return x.mean(), x.mean() - half, x.mean() + half


def test_best_schedule_is_a_paired_comparison_with_the_runner_up():
    wide = _sweep()
    rival = wide.drop(columns=["uniform", "cosine-1.5-0.5"]).mean().idxmin()
    d = (wide["cosine-1.5-0.5"] - wide[rival]).dropna().to_numpy()
    close(rows()["best-schedule"], _t_interval(d), 2)
    assert rival in (FIGURES / report.MARKDOWN).read_text()


def test_tapering_against_uniform_over_the_whole_sweep():
    """Per seed the mean % change of the 15 tapers vs that seed's uniform model; t over the seeds; the count of
    seed pairs the note gives."""
    wide = _sweep()
    rel = 100 * (wide.drop(columns="uniform").to_numpy() / wide[["uniform"]].to_numpy() - 1)
    cells = rows()["taper-vs-uniform"]
    close(cells, _t_interval(rel.mean(axis=1)), 2)
    assert f"{int((rel < 0).sum())} of {rel.size} seed pairs favour the taper" in \
        (FIGURES / report.MARKDOWN).read_text()


def test_the_pretrained_depth_rows_are_fisher_intervals_of_the_probe_table():
    """The pretrained half of the depth claim: per model and variant, Pearson r of the per-layer mean rho_mlp with
    the layer index (scipy), its Fisher z interval over the layers (scipy's confidence_interval)."""
    found = rows()
    table = pd.read_csv(FIGURES / "novelty_pretrained.csv")
    table["variant"] = table["variant"].fillna("default")
    checked = 0
    for (model, variant), g in table[table.metric == "rho_mlp"].groupby(["model", "variant"]):
        result = stats.pearsonr(g["layer"], g["mean"])
        ci = result.confidence_interval(0.95)
        key = f"depth-pretrained-{model}" + ("" if variant == "default" else "-" + variant.replace("_", "-"))
        close(found[key], (result.statistic, ci.low, ci.high), 2)
        assert verdict_of(found[key]) == rule(ci.low, ci.high, +1)
        checked += 1
    assert checked == 4
    assert numbers(found["depth-pretrained-smollm2-135m"])[0] == -0.16   # the README's finding 3


def test_probe_and_literature_claims_match_their_tables():
    found = rows()
    styles = pd.read_csv(FIGURES / "novelty_block_styles.csv")
    for _, s in styles[styles.metric == "rho_mlp"].drop_duplicates(["arch", "variant"]).iterrows():
        close(found[report.slug(f"depth-tiny-{s.arch}-{s.variant}")],
              (s.pearson_r_mean, s.pearson_r_ci_low, s.pearson_r_ci_high), 2)
    causal = pd.read_csv(FIGURES / "novelty_vs_causal.csv")
    for _, c in causal[(causal.measure == "rho_mlp") & (causal.causal == "delta_loss_skip_mlp")].iterrows():
        close(found[report.slug(f"rho-predicts-{c.label}")], (c.spearman_rho, c.ci_low, c.ci_high), 3)
    removal = pd.read_csv(FIGURES / "layer_removal.csv")
    for layer in (14, 17):
        r = removal[(removal.label == "smollm2-135m") & (removal.layer == layer)].iloc[0]
        cells = found[f"anti-layer-{layer}"]
        close(cells, (r.delta_ppl, r.delta_ppl_ci_low, r.delta_ppl_ci_high), 2)
        assert verdict_of(cells) == rule(r.delta_ppl_ci_low, r.delta_ppl_ci_high, -1)
    assert "not measured: `interp figures --only novelty_gpt2 --recompute`" in found["depth-gpt2"][4]


def test_importance_claims_match_the_per_seed_table():
    """Recomputed from the per-model table (not the summary the report reads): a seeded group's mean of its
    seeds' Spearman rhos with scipy's t-interval (clipped to [-1, 1]); a pretrained model's own row."""
    found = rows()
    table = pd.read_csv(FIGURES / "importance_measures.csv")
    table["group"] = table["label"].str.replace(r"/seed\d+$", "", regex=True)
    checked = 0
    for measure, causal in [("rho_mlp", "delta_loss_skip_mlp"), ("block_influence", "delta_loss_skip_block")]:
        sel = table[(table.measure == measure) & (table.causal == causal)]
        for group, g in sel.groupby("group"):
            key = report.slug(f"importance-{measure}-{group}")
            if len(g) == 1:
                if measure == "rho_mlp":
                    assert key not in found      # a pretrained model's rho_mlp claim is novelty_vs_causal's
                    continue
                want = (g.spearman_rho.iloc[0], g.ci_low.iloc[0], g.ci_high.iloc[0])
            else:
                x = g.spearman_rho.to_numpy()
                low, high = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
                want = (x.mean(), max(low, -1.0), min(high, 1.0))
            close(found[key], want, 3)
            assert verdict_of(found[key]) == rule(*want[1:], -1 if measure == "rho_mlp" else +1)
            checked += 1
    assert checked == 4 + 6


def test_accuracy_claims_match_their_table_and_say_how_many_tasks_were_looked_at():
    """removal_accuracy's rows, one claim each, per measure of ACCURACY_CLAIMS; each model's rows are one family
    whose note (no correction: bootstrap intervals) counts them."""
    found = rows()
    table = pd.read_csv(FIGURES / "removal_accuracy_vs_measures.csv")
    text = (FIGURES / report.MARKDOWN).read_text()
    for measure, sign in (("block_influence", -1), ("rho_mlp", +1)):
        sel = table[table.measure == measure]
        assert len(sel) == 8
        for _, r in sel.iterrows():
            cells = found[report.slug(f"accuracy-{measure.replace('_', '-')}-{r.model}-{r.task}")]
            close(cells, (r.spearman_rho, r.ci_low, r.ci_high), 3)
            assert verdict_of(cells) == rule(r.ci_low, r.ci_high, sign)
        for model, g in sel.groupby("model"):
            assert f"{measure} against the accuracy change of removing a block: {model}: {len(g)} rows" in text
            assert f"at 95% each, {0.05 * len(g):.2f} of them would exclude zero by chance" in text


def test_the_fast_modes_agreement_with_the_exact_rows_is_a_claim_per_model_and_kind():
    """attribution_vs_exact's rows, one claim each (the estimate orders the layers as the exact removal: rho > 0),
    read from the table; each model's kinds are one family, and the note carries the errors and the worst layers."""
    found = rows()
    table = pd.read_csv(FIGURES / "attribution_vs_exact.csv")
    text = (FIGURES / report.MARKDOWN).read_text()
    assert set(table.kind) == {"skip_mlp", "mean_mlp", "skip_attn", "skip_block"}
    for _, r in table.iterrows():
        cells = found[report.slug(f"attribution-{r.model}-{r.kind}")]
        close(cells, (r.spearman_rho, r.ci_low, r.ci_high), 3)
        assert verdict_of(cells) == rule(r.ci_low, r.ci_high, +1)
        assert f"worst layers {r.worst_layers} (exact {r.worst_exact}" in text
    for model, g in table.groupby("model"):
        assert f"the fast mode against the exact rows: {model}: {len(g)} rows" in text


def test_eval_claims_count_seeds_and_documents_and_their_family():
    """Recomputed from the per-run table (not the summary the report reads): per testable task of wider-early, the
    paired change over seeds (t) and documents (1.96 x sqrt(sum of both models' stderr^2) / pairs), added in
    quadrature; perplexities as 100 (exp(mean log ratio) - 1) with delta-method errors; the verdict at the
    Bonferroni level of the variant's accuracies (or perplexities)."""
    found = rows()
    runs = pd.read_csv(FIGURES / "downstream_groups_runs.csv")
    runs = runs[runs.task != "training_val"]
    pairs = {}
    for (task, metric), g in runs.groupby(["task", "metric"]):
        w = g.pivot(index="seed", columns="variant", values=["value", "stderr"])
        v, b = w["value"]["wider-early"], w["value"]["uniform"]
        log = "perplexity" in metric
        d = np.log(v / b).to_numpy() if log else (v - b).to_numpy()
        se = ((w["stderr"]["wider-early"] / v) ** 2 + (w["stderr"]["uniform"] / b) ** 2 if log
              else w["stderr"]["wider-early"] ** 2 + w["stderr"]["uniform"] ** 2)
        if (d != 0).any():
            pairs[task, metric] = (d, math.sqrt(se.sum()) / len(d), log)
    families = {log: sum(p[2] == log for p in pairs.values()) for log in (False, True)}
    assert families == {False: 7, True: 2}
    for (task, metric), (d, doc_se, log) in pairs.items():
        cells = found[report.slug(f"eval-wider-early-{task}-{metric}")]
        shown = (lambda x: 100 * math.expm1(x)) if log else (lambda x: x)
        out = []
        for level in (0.95, 1 - 0.05 / families[log]):
            h_seeds = stats.t.ppf((1 + level) / 2, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
            h_docs = stats.norm.ppf((1 + level) / 2) * doc_se if math.isfinite(doc_se) else 0.0
            half = math.hypot(h_seeds, h_docs)
            out += [shown(d.mean() - half), shown(d.mean() + half)]
        close(cells, (shown(d.mean()), *out), 1 if log else 3)
        assert verdict_of(cells) == rule(out[2], out[3], -1 if log else +1)
    hellaswag = found["eval-wider-early-hellaswag-acc_norm"]
    assert verdict_of(hellaswag) == "unresolved" and numbers(hellaswag)[1] < 0   # the false "reproduces"
    assert "not informative" in (FIGURES / report.MARKDOWN).read_text()   # LAMBADA's perplexity at chance
    assert "eval-wider-early-boolq-acc" not in found                     # every model answers alike: no test


@pytest.mark.parametrize("ci, sign, want", [
    ((-2.0, -1.0), -1, "reproduces"), ((1.0, 2.0), -1, "contradicts"), ((-1.0, 1.0), -1, "unresolved"),
    ((0.0, 1.0), +1, "unresolved"), ((0.5, 1.0), +1, "reproduces"), ((np.nan, 1.0), +1, "unresolved")])
def test_the_verdict_rule(ci, sign, want):
    assert report.verdict(ci, sign) == want


def test_a_family_verdict_reads_the_family_wise_interval():
    claim = report.Claim("x", "s", "c", "m", "t.csv", +1, value=0.1, ci=(0.01, 0.2), verdict_ci=(-0.05, 0.25))
    alone = report.Claim("y", "s", "c", "m", "t.csv", +1, ci=(0.01, 0.2))
    assert claim.verdict == "unresolved" and alone.verdict == "reproduces"


def test_a_missing_table_is_not_measured_with_its_command(tmp_path):
    for name in ("group_ablation.csv", "group_ablation_runs.csv"):
        shutil.copy(FIGURES / name, tmp_path)
    shutil.copy(FIGURES / "downstream_groups_runs.csv", tmp_path)
    old = pd.read_csv(FIGURES / "downstream_groups.csv").iloc[:, :20]   # a summary written before the verdict columns
    old.to_csv(tmp_path / "downstream_groups.csv", index=False)
    items = report.claims(tmp_path)
    by_id = {c.id: c for c in items}
    assert by_id["allocation-early"].verdict == "reproduces"
    assert by_id["best-schedule"].verdict == "not measured"
    assert by_id["evals"].verdict == "not measured" and "tabulate_only=true" in by_id["evals"].command
    report.render(tmp_path)
    text = (tmp_path / report.MARKDOWN).read_text()
    assert "interp figures --only schedule_sweep --recompute" in text and "not measured here:" in text


ENTRY = re.compile(r"(\d+): (\d+(?:\.\d+)?) \[(\d+(?:\.\d+)?), (\d+(?:\.\d+)?)\] vs "
                   r"(\d+(?:\.\d+)?) \[(\d+(?:\.\d+)?), (\d+(?:\.\d+)?)\](\*?)")


def test_each_spearman_rho_names_the_layers_where_its_measure_misleads():
    """Beside every Spearman rho of a measure the misleading-layers table ranks (importance, accuracy and the
    paper's rho_mlp against skipping the MLP), the note lists the table's misleading layers in their order, each
    with its rank by the measure and by the removal cost and both intervals as the table holds them, '*' where the
    table calls the difference resolved, and the line's rho is the row's own. SmolLM2's layer 11 ranks 19th of 30
    by Block Influence and 3rd by the loss of removing it."""
    from analyses.report_claims import ACCURACY_CLAIMS, IMPORTANCE_CLAIMS

    table = pd.read_csv(FIGURES / "misleading_layers.csv")
    table["task"] = table["task"].fillna("")
    eleven = table[(table.model == "smollm2-135m") & (table.measure == "block_influence")
                   & (table.cost == "delta_loss_skip_block") & (table.layer == 11)].iloc[0]
    assert (eleven.rank_measure, eleven.rank_cost, eleven.misleading) == (19, 3, 1)
    found, claims = rows(), {c.id: c for c in report.claims(FIGURES)}
    notes = {line.split("](#")[0].removeprefix("- ["): line
             for line in (FIGURES / report.MARKDOWN).read_text().splitlines() if line.startswith("- [")}
    wanted = {**{(m, c): f"importance-{m}-{{model}}" for m, c, *_, pretrained in IMPORTANCE_CLAIMS if pretrained},
              ("rho_mlp", "delta_loss_skip_mlp"): "rho-predicts-{model}",    # the pretrained models' rho_mlp rows
              **{(m, "d_acc_skip_block"): f"accuracy-{m.replace('_', '-')}-{{model}}-{{task}}"
                 for m, *_ in ACCURACY_CLAIMS}}
    checked = set()
    for (model, measure, cost, task), g in table.groupby(["model", "measure", "cost", "task"]):
        if (measure, cost) not in wanted:
            continue
        key = wanted[measure, cost].format(model=model, task=task)
        assert key in found, key
        note = notes[key]
        assert f"where it misleads (misleading_layers.csv): {measure}, {model}" in note
        rho = g.spearman_rho.iloc[0]
        assert claims[key].value == pytest.approx(rho, abs=1e-9)
        assert f"Spearman {rho:+.2f} [{g.rho_ci_low.iloc[0]:+.2f}, {g.rho_ci_high.iloc[0]:+.2f}]" in note
        picked = g[g.misleading > 0].sort_values("misleading")
        entries = ENTRY.findall(note.split("where it misleads", 1)[1])
        assert len(entries) == len(picked) == 3, (key, entries)
        for entry, (_, r) in zip(entries, picked.iterrows(), strict=True):
            assert int(entry[0]) == r.layer
            ranks = [r.rank_measure, r.rank_measure_low, r.rank_measure_high, r.rank_cost, r.rank_cost_low,
                     r.rank_cost_high]                 # the intervals are percentiles: shown to one decimal
            assert [float(x) for x in entry[1:7]] == [round(v, 1) for v in ranks], (key, entry)
            assert (entry[7] == "*") == bool(r.resolved)
        checked.add(key)
    assert "importance-block_influence-smollm2-135m" in checked and len(checked) == 2 + 2 + 16
    assert re.search(r"resolved\): 11: 19 \[\d+, \d+\] vs 3 \[\d+, \d+\]",
                     notes["importance-block_influence-smollm2-135m"])
    assert "- [misleading_layers.csv](misleading_layers.csv)" in (FIGURES / report.MARKDOWN).read_text()


def test_misleading_layers_of_another_rho_are_not_shown_and_a_missing_table_adds_nothing(tmp_path):
    for name in ("importance_measures_summary.csv", "misleading_layers.csv"):
        shutil.copy(FIGURES / name, tmp_path)
    key = "importance-block_influence-smollm2-135m"
    assert "where it misleads" in {c.id: c for c in report.claims(tmp_path)}[key].note
    table = pd.read_csv(tmp_path / "misleading_layers.csv")
    table.loc[table.model == "smollm2-135m", "spearman_rho"] += 0.1      # ranked from other probes than the rho
    table.to_csv(tmp_path / "misleading_layers.csv", index=False)
    claim = {c.id: c for c in report.claims(tmp_path)}[key]
    assert "where it misleads" not in claim.note and "stale" in claim.note
    (tmp_path / "misleading_layers.csv").unlink()
    claim = {c.id: c for c in report.claims(tmp_path)}[key]
    assert claim.note == "" and claim.cites == ()
