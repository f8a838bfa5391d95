"""analyses.removal_accuracy on one of our checkpoints, lm-eval's PIQA at 6 documents: each removed layer's
accuracy equals lm-eval's on the model rebuilt without that block (no hook), the correlations equal scipy's
Spearman of an independent probe's layer means with the table's accuracy changes, a rerun resumes (only a
missing condition is evaluated again), and a partial table renders."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from scipy import stats

from analyses import removal_accuracy as ra
from interp.probes.config import ProbeConfig
from tests.analyses.test_importance_measures import run  # noqa: F401 - the finished english checkpoint fixture

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.slow
def test_accuracy_drop_correlations_and_resume(run, tmp_path):
    from interp.evals.run import EvalTarget, lm_evaluate, load_lm
    from interp.probes import probe

    probe_cfg = ProbeConfig(tokens=128, seq_len=32, batch_size=2, metrics=("rho_mlp", "block_influence", "norm_ratio"))
    cfg = ra.Config(models=(str(run),), tasks=("piqa",), limit=6, parts_root=str(tmp_path / "parts"),
                    probe=probe_cfg, n_boot=50)
    figures = tmp_path / "figures"
    ra.compute(cfg, figures)
    drops = pd.read_csv(figures / ra.TABLE)

    lm, _ = load_lm(EvalTarget(str(run), "checkpoint", "run"), batch_size=8)
    blocks = list(lm.model.blocks)
    assert drops["layer"].tolist() == list(range(len(blocks))) and set(drops["n_docs"]) == {6}
    for layer in range(len(blocks)):
        lm.model.blocks = torch.nn.ModuleList([b for i, b in enumerate(blocks) if i != layer])
        want = lm_evaluate(lm, "piqa", {}, limit=6)["results"]["piqa"]["acc,none"]
        assert drops.loc[layer, "acc_removed"] == pytest.approx(want)
    lm.model.blocks = torch.nn.ModuleList(blocks)
    assert drops["acc_clean"].iloc[0] == pytest.approx(lm_evaluate(lm, "piqa", {}, limit=6)["results"]["piqa"]["acc,none"])
    assert (drops["d_acc"] - (drops["acc_removed"] - drops["acc_clean"])).abs().max() < 1e-12

    corr = pd.read_csv(figures / ra.CORRELATIONS_TABLE)
    assert set(corr["task"]) == {"piqa", ra.POOLED} and set(corr["measure"]) == set(probe_cfg.metrics)
    wide = probe(str(run), config=probe_cfg).pivot_table(index="layer", columns="metric", values="mean")
    assert set(corr["n_layers"]) == {len(blocks)} and set(corr["n_docs"]) == {6}
    assert corr["text_sha256"].notna().all() and corr["dtype"].eq("float32").all()
    assert len(wide) == len(blocks)

    # resume: one condition's part removed -> only it is evaluated again, and the table is the same
    parts = sorted((tmp_path / "parts").rglob("*.json"))
    assert len(parts) == 1 + len(blocks)
    stamps = {p: p.stat().st_mtime_ns for p in parts}
    missing = ra.part_path(tmp_path / "parts", str(run), "piqa", 1)
    missing.unlink()
    partial = ra.drop_rows(cfg, [str(run)], tmp_path / "parts")      # what a cut-off run's table holds
    assert 1 not in set(partial["layer"]) and len(partial) == len(blocks) - 1
    ra.save_progress(cfg, [str(run)], tmp_path / "parts", {}, figures)   # as a cut-off run leaves them
    pd.testing.assert_frame_equal(pd.read_csv(figures / ra.TABLE), partial.reset_index(drop=True),
                                  check_dtype=False)
    assert pd.read_csv(figures / ra.CORRELATIONS_TABLE).empty        # piqa lacks a layer: no correlation yet
    [png] = ra.render(figures)                                        # partial: the correlations "pending"
    assert png.stat().st_size > 10_000
    ra.compute(cfg, figures)
    assert missing.is_file()
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items() if p != missing)
    pd.testing.assert_frame_equal(pd.read_csv(figures / ra.TABLE), drops)
    assert len(pd.read_csv(figures / ra.CORRELATIONS_TABLE)) == len(corr)
    [png] = ra.render(figures)
    assert png.stat().st_size > 10_000


def test_spearman_rows_against_scipy():
    """The statistic on a known case: 12 layers, 40 documents, a profile that tracks the damage with noise; rho is
    scipy's Spearman of the profile with the per-layer mean change, its bootstrap CI holds it, and a profile
    reversed gives the opposite sign."""
    rng = __import__("numpy").random.default_rng(0)
    damage = __import__("numpy").linspace(-0.2, 0.0, 12)
    y = damage + rng.normal(0, 0.3, (40, 12))
    profiles = pd.DataFrame({"tracks": -damage + rng.normal(0, 0.02, 12), "reversed": damage})
    out = ra.spearman_rows(profiles, y, ra.Config(n_boot=500)).set_index("measure")
    for measure in profiles:
        want = stats.spearmanr(profiles[measure], y.mean(0)).statistic
        row = out.loc[measure]
        assert row["spearman_rho"] == pytest.approx(want, abs=1e-12)
        assert row["ci_low"] <= row["spearman_rho"] <= row["ci_high"] and row["n_docs"] == 40
    assert out.loc["tracks", "spearman_rho"] == pytest.approx(-out.loc["reversed", "spearman_rho"], abs=0.2)
    assert out.loc["tracks", "spearman_rho"] < -0.5   # the profile rises as the damage (a negative change) grows
