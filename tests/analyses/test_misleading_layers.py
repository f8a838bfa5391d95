"""analyses.misleading_layers: on small synthetic tables with a planted misleading layer (every rho computed by
scipy, every per-document part written as removal_accuracy writes it), through `interp figures`; the rank rule
against interp.stats.rankdata, the pooled standard error against the documents' own np.std, the refusals (a stale
table, a rho from another probe, a bad option); and on the committed tables: the committed table is what the code
computes from them, and figures/README.md's section is generated from it (its prose claims checked row by row)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analyses import REPO_ROOT
from analyses import misleading_layers as ml
from analyses import removal_accuracy as ra
from interp.cli import main
from interp.stats import rankdata
from interp.stats_intervals import mean_ci

FIGURES = REPO_ROOT / "figures"
N_LAYERS, N_DOCS = 6, 20
TASKS = ("piqa", "arc_easy")
LOSS = np.array([5.0, 3.0, 0.1, 2.0, 0.5, 1.0])               # removal cost by loss: ranks 1 2 6 3 5 4
MEASURES = {"block_influence": np.array([0.9, 0.7, 0.8, 0.5, 0.1, 0.3]),   # ranks 1 3 2 4 6 5: layer 2 misleads
            "rho_mlp": np.array([0.1, 0.3, 0.2, 0.5, 0.4, 0.6]),
            "norm_ratio": np.array([2.0, 1.0, 0.1, 0.8, 0.2, 0.3])}
PROV = {"text_sha256": "a" * 64, "n_tokens": 240, "n_sequences": 16, "dtype": "float32", "hardware": "test CPU",
        "versions": "interp=0"}


def documents(seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """task -> (clean [docs], removed [docs, layers]) 0/1 accuracies; layer 0's removal fails every document the
    clean model gets right, so its change is the most negative in every resample."""
    rng = np.random.default_rng(seed)
    out = {}
    for task in TASKS:
        clean = (rng.random(N_DOCS) < 0.7).astype(float)
        removed = (rng.random((N_DOCS, N_LAYERS)) < 0.6).astype(float)
        removed[:, 0] = 0.0
        out[task] = (clean, removed)
    return out


def write_fixture(figures: Path, parts: Path, sem: float = 1e-3) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The four tables misleading_layers reads (and removal_accuracy's sidecar and parts), for model "m"."""
    figures.mkdir(parents=True, exist_ok=True)
    rows = [{"label": "m", "model": "m", "layer": layer, "metric": metric, "mean": float(values[layer]), "sem": sem,
             **PROV} for metric, values in [*MEASURES.items(), ("delta_loss_skip_block", LOSS),
                                              ("delta_loss_skip_mlp", LOSS[::-1].copy())]
            for layer in range(N_LAYERS)]
    pd.DataFrame(rows).to_csv(figures / ml.PROFILES, index=False)
    rho = [{"label": "m", "measure": m, "causal": c, "spearman_rho": stats.spearmanr(v, cost).statistic,
            "ci_low": -1.0, "ci_high": 1.0} for m, v in MEASURES.items()
           for c, cost in (("delta_loss_skip_block", LOSS), ("delta_loss_skip_mlp", LOSS[::-1]))]
    pd.DataFrame(rho).to_csv(figures / ml.LOSS_RHO, index=False)
    docs = documents()
    for task, (clean, removed) in docs.items():
        for layer in [None, *range(N_LAYERS)]:
            acc = clean if layer is None else removed[:, layer]
            path = ra.part_path(parts, "m", task, layer)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"model": "m", "task": task, "layer": layer, "n_layers": N_LAYERS,
                                        "limit": N_DOCS, "hardware": "test CPU", "dtype": "float32",
                                        "versions": "interp=0", "acc": acc.tolist()}))
    ra.drop_rows(ra.Config(tasks=TASKS, limit=N_DOCS), ["m"], parts).to_csv(figures / ml.ACC_COST, index=False)
    (figures / "removal_accuracy.meta.json").write_text(json.dumps({"config": {"confidence": 0.95}}))
    pooled = np.concatenate([removed - clean[:, None] for clean, removed in docs.values()])
    acc_rho = [{"model": "m", "task": task, "measure": m,
                "spearman_rho": stats.spearmanr(v, (removed - clean[:, None]).mean(0)).statistic,
                "ci_low": -1.0, "ci_high": 1.0} for task, (clean, removed) in docs.items() for m, v in MEASURES.items()]
    acc_rho += [{"model": "m", "task": ml.POOLED, "measure": m, "ci_low": -1.0, "ci_high": 1.0,
                 "spearman_rho": stats.spearmanr(v, pooled.mean(0)).statistic} for m, v in MEASURES.items()]
    pd.DataFrame(acc_rho).to_csv(figures / ml.ACC_RHO, index=False)
    return docs


def cfg(parts: Path, **kwargs) -> ml.Config:
    return ml.Config(models=("m",), parts_root=str(parts), n_draws=400, **kwargs)


def pick(table: pd.DataFrame, measure: str, cost: str, task: str = "") -> pd.DataFrame:
    return ml.selected(table, "m", measure, cost, task).set_index("layer")


def test_ranks_follow_rankdata_ties_included():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, size=(50, 7)).astype(float)    # many ties
    for reading in (+1, -1):
        got = ml.importance_ranks(x, reading)
        want = np.stack([rankdata(-reading * row) for row in x])
        np.testing.assert_array_equal(got, want)
    assert ml.importance_ranks(np.array([0.1, 0.9, 0.5]), +1).tolist() == [3, 1, 2]


def test_pooled_sem_is_the_documents_own():
    """From each task's mean and t-CI alone, the standard error np.std(ddof=1) / sqrt(N) of all documents gives."""
    docs = documents(seed=3)
    deltas = {t: removed - clean[:, None] for t, (clean, removed) in docs.items()}
    per_task = []
    for task, d in deltas.items():
        cis = [mean_ci(d[:, layer].tolist(), 0.95) for layer in range(N_LAYERS)]
        per_task.append(pd.DataFrame({"model": "m", "task": task, "layer": range(N_LAYERS), "n_docs": N_DOCS,
                                      "d_acc": [c[0] for c in cis], "d_acc_ci_low": [c[1] for c in cis],
                                      "d_acc_ci_high": [c[2] for c in cis]}))
    everything = np.concatenate(list(deltas.values()))
    got = ml.pooled_sem(per_task, everything.mean(0), 0.95)
    np.testing.assert_allclose(got, everything.std(0, ddof=1) / np.sqrt(len(everything)), rtol=1e-9)


def test_planted_layer_ranks_intervals_and_cli(tmp_path):
    figures, parts = tmp_path / "figures", tmp_path / "parts"
    write_fixture(figures, parts)
    rc = main(["figures", "--only", ml.NAME, "--recompute", "--figures-dir", str(figures),
               "--set", f"parts_root={json.dumps(str(parts))}", "--set", 'models=["m"]', "--set", "n_draws=400"])
    assert rc == 0
    table = pd.read_csv(figures / ml.TABLE)
    assert list(table.columns) == list(ml.COLUMNS)
    assert (figures / ml.FIGURE).read_bytes()[:4] == b"\x89PNG"
    meta = json.loads((figures / "misleading_layers.meta.json").read_text())
    assert meta["config"]["n_draws"] == 400 and "git_commit" in meta["provenance"]

    bi = pick(table, "block_influence", "delta_loss_skip_block")
    assert bi["rank_measure"].tolist() == [1, 3, 2, 4, 6, 5] and bi["rank_cost"].tolist() == [1, 2, 6, 3, 5, 4]
    top = bi.loc[2]
    assert top["misleading"] == 1 and bool(top["resolved"]) and top["rank_diff"] == -4
    assert (top["rank_diff_low"], top["rank_diff_high"]) == (-4, -4)       # sem 1e-3: no rank moves
    assert sorted(bi["misleading"]) == [0, 0, 0, 1, 2, 3]
    for side in ("measure", "cost", "diff"):                              # every interval holds its point
        assert (table[f"rank_{side}_low"] <= table[f"rank_{side}"]).all()
        assert (table[f"rank_{side}"] <= table[f"rank_{side}_high"]).all()
    assert set(table.loc[table["cost"] == ml.ACC_CAUSAL, "rank_ci"]) == {"measure t, cost documents"}
    assert set(table.loc[table["cost"] != ml.ACC_CAUSAL, "rank_ci"]) == {"measure t, cost t"}
    assert set(table["task"].fillna("")) == {"", *TASKS, ml.POOLED}
    # layer 0's removal fails every document the clean model gets right: rank 1 in every resample of documents
    pooled = pick(table, "block_influence", ml.ACC_CAUSAL, ml.POOLED)
    assert (pooled.loc[0, "rank_cost_low"], pooled.loc[0, "rank_cost_high"]) == (1, 1)
    assert set(pooled["n_docs"]) == {2 * N_DOCS} and set(pooled["hardware"]) == {"test CPU"}
    # the provenance of both sides, and the committed rho beside each pair
    assert set(bi["text_sha256"]) == {PROV["text_sha256"]} and set(bi["rho_table"]) == {ml.LOSS_RHO}
    assert bi["spearman_rho"].iloc[0] == pytest.approx(stats.spearmanr(MEASURES["block_influence"], LOSS).statistic)

    line = ml.misleading_line(table, "m", "block_influence", "delta_loss_skip_block")
    rho = stats.spearmanr(MEASURES["block_influence"], LOSS).statistic
    assert line.startswith(f"block_influence, m, loss, block removed: Spearman {rho:+.2f} [-1.00, +1.00]")
    assert "2: 2 [2, 2] vs 6 [6, 6]*" in line
    assert len(ml.report_lines(figures)) == len(MEASURES) * (2 + len(TASKS) + 1)


def test_exact_profiles_give_point_intervals_and_t_draws_when_asked(tmp_path):
    figures, parts = tmp_path / "figures", tmp_path / "parts"
    write_fixture(figures, parts, sem=0.0)
    table = ml.misleading_table(cfg(parts, rank_ci="t"), figures)
    loss = table[table["cost"] != ml.ACC_CAUSAL]
    for side in ("measure", "cost"):
        assert (loss[f"rank_{side}_low"] == loss[f"rank_{side}"]).all()
        assert (loss[f"rank_{side}_high"] == loss[f"rank_{side}"]).all()
    assert set(table["rank_ci"]) == {"measure t, cost t"}


def test_refusals_name_the_file_and_the_fix(tmp_path):
    figures, parts = tmp_path / "figures", tmp_path / "parts"
    write_fixture(figures, parts)
    part = ra.part_path(parts, "m", "piqa", 3)
    stale = json.loads(part.read_text())
    stale["acc"][0] = 1.0 - stale["acc"][0]
    part.write_text(json.dumps(stale))
    with pytest.raises(ValueError, match=r"stale.*--only removal_accuracy"):
        ml.misleading_table(cfg(parts), figures)
    assert ml.misleading_table(cfg(parts, rank_ci="t"), figures)["rank_ci"].str.endswith("t").all()

    write_fixture(figures, parts)
    rho = pd.read_csv(figures / ml.LOSS_RHO)
    rho.loc[0, "spearman_rho"] += 0.01
    rho.to_csv(figures / ml.LOSS_RHO, index=False)
    with pytest.raises(ValueError, match=r"importance_measures.csv: spearman_rho of m / block_influence"):
        ml.misleading_table(cfg(parts), figures)

    with pytest.raises(ValueError, match=r"field 'measures'.*choose from"):
        ml.Config(measures=("rho_mpl",))
    with pytest.raises(ValueError, match=r"field 'loss_costs'"):
        ml.Config(loss_costs=("delta_loss",))


# ------------------------------------------------------------------------------ the committed tables

@pytest.fixture(scope="module")
def committed() -> pd.DataFrame:
    return pd.read_csv(FIGURES / ml.TABLE)


def test_committed_table_is_what_the_code_computes(committed):
    fresh = ml.misleading_table(ml.Config(), FIGURES)
    def tasks(df: pd.DataFrame) -> pd.DataFrame:     # a loss row's task is "" (NaN once read from the CSV)
        return df.assign(task=df["task"].fillna("").astype(str)).reset_index(drop=True)
    pd.testing.assert_frame_equal(tasks(fresh), tasks(committed), check_dtype=False, rtol=1e-9)


def test_readme_section_is_generated_and_its_claims_hold(committed):
    readme = (FIGURES / "README.md").read_text()
    section = readme[readme.index("## misleading_layers.png"):readme.index("## downstream.png")]
    assert ml.markdown_summary(committed) in section
    assert ml.rank_ci_comparison(ml.Config(), FIGURES, committed).replace("\n", " ") in section.replace("\n", " ")
    assert "| misleading_layers.png | misleading_layers |" in readme

    def row(model: str, measure: str, cost: str, task: str, layer: int) -> pd.Series:
        return ml.selected(committed, model, measure, cost, task).set_index("layer").loc[layer]

    loss, acc = "delta_loss_skip_block", ml.ACC_CAUSAL
    # SmolLM2's layer 11 (issue 49): 19th of 30 by Block Influence, 3rd by both costs, the first misleading layer
    for cost, task in ((loss, ""), (acc, ml.POOLED)):
        r = row("smollm2-135m", "block_influence", cost, task, 11)
        assert (r["n_layers"], r["rank_measure"], r["rank_cost"], r["misleading"]) == (30, 19, 3, 1)
    r = row("smollm2-135m", "block_influence", loss, "", 0)
    assert r["spearman_rho"] == pytest.approx(0.80, abs=0.005)
    r = row("gemma3-270m", "block_influence", loss, "", 2)
    assert (r["n_layers"], r["rank_measure"], r["rank_cost"], r["misleading"]) == (18, 16, 5, 1)
    r = row("gemma3-270m", "block_influence", acc, ml.POOLED, 7)
    assert (r["rank_measure"], r["rank_cost"], r["misleading"]) == (4, 14.5, 1)
    r = row("gemma3-270m", "norm_ratio", loss, "", 13)
    assert (r["rank_measure"], r["rank_cost"]) == (14, 6) and r["misleading"] > 0
    assert [row("smollm2-135m", "norm_ratio", c, t, 20)[k] for c, t in ((loss, ""), (acc, ml.POOLED))
            for k in ("rank_measure", "rank_cost")] == [6, 18, 6, 26.5]
    assert [row("smollm2-135m", m, loss, "", layer)["rank_measure"] for layer in (1, 17)
            for m in ("rho_mlp", "rho_block")] == [30, 26, 5, 4]
    assert [row("smollm2-135m", "rho_mlp", loss, "", layer)["rank_cost"] for layer in (1, 17)] == [2, 30]
    assert [row("gemma3-270m", m, loss, "", 6)[k] for m in ("rho_mlp", "rho_block")
            for k in ("rank_measure", "rank_cost")] == [1, 17, 1, 17]
    assert set(committed["measure"]) == {"rho_mlp", "rho_block", "block_influence", "norm_ratio"}  # as the text says
