"""analyses.importance_measures end to end on one of our checkpoints: the correlation table (every measure
against every causal effect, skip_block included) checked against scipy's Spearman on the probe table's own
per-layer means, the figure, the per-group summary against scipy's t-interval, and the trained side of the study
(the accuracy drop of removing each block is analyses.removal_accuracy's: tests/analyses/test_removal_accuracy.py)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from scipy import stats

from analyses import importance_measures as im
from interp.probes.config import ProbeConfig
from tests.evals.test_evals_fixtures import english_bpe, english_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def run(tmp_path):
    path = english_checkpoint(tmp_path / "run", english_bpe(tmp_path / "bpe" / "tokenizer.json"))
    (path / "result.json").write_text(json.dumps({"status": "done"}))
    return path


def test_table_matches_spearman_of_the_layer_means(run, tmp_path, monkeypatch):
    tables = {}
    real = im.model_tables

    def keep(cfg, figures_dir=None):
        found = real(cfg, figures_dir)
        tables.update({label: df for label, _, df in found})
        return found

    monkeypatch.setattr(im, "model_tables", keep)
    cfg = im.Config(models=(), archs=(), run_dirs=(str(run),), n_boot=50,
                    tiny_probe=ProbeConfig(tokens=128, seq_len=32, batch_size=2, causal=True, metrics=im.MEASURES))
    im.compute(cfg, tmp_path / "figures")
    summary = pd.read_csv(tmp_path / "figures" / im.TABLE)
    assert set(summary["measure"]) == set(im.MEASURES)
    assert set(summary["causal"]) == {"delta_loss_skip_block", "delta_loss_skip_mlp", "delta_loss_mean_mlp",
                                      "delta_loss_skip_attn"}
    wide = tables["run"].pivot_table(index="layer", columns="metric", values="mean")
    for _, row in summary.iterrows():
        want = stats.spearmanr(wide[row["measure"]], wide[row["causal"]]).statistic
        assert row["spearman_rho"] == pytest.approx(want, abs=1e-9), (row["measure"], row["causal"])
    assert {"text_sha256", "n_tokens", "dtype", "checkpoint"} <= set(summary.columns)
    pooled = pd.read_csv(tmp_path / "figures" / im.SUMMARY_TABLE)   # one unseeded run: its own bootstrap CI
    assert list(pooled["group"].unique()) == ["run"] and set(pooled["ci"]) == {"bootstrap over sequences"}
    assert pooled["spearman_rho"].tolist() == summary["spearman_rho"].tolist()
    [png] = im.render(tmp_path / "figures")
    assert png.stat().st_size > 10_000


def test_our_checkpoints_are_paired_budget_exact_experiments(tmp_path):
    """The trained side of the study: per block style, uniform and cosine 1.5 -> 0.5 with equal parameters, the
    same seeds, fp32 and the configured shape; the run labels name experiment, variant and seed."""
    from interp.training.experiments import check_equal_params

    cfg = im.Config(root=str(tmp_path), seeds=3, steps=64)
    exps = im.experiments(cfg)
    assert [e.name for e in exps] == ["importance-tiny-gpt2", "importance-tiny-llama"]
    for exp in exps:
        configs = exp.configs()
        assert [v.name for v in exp.variants] == ["uniform", "cosine-1.5-0.5"] and exp.seeds == [0, 1, 2]
        assert check_equal_params(c for _, _, c in configs) is not None
        assert {(c.arch, c.d_model, c.steps, c.dtype) for _, _, c in configs} == {(exp.name[16:], 128, 64, "fp32")}
        assert im.run_label(exp.run_dir(exp.variants[1], 2)) == f"{exp.name}/cosine-1.5-0.5/seed2"
    assert im.run_label(tmp_path / "my-run") == "my-run"


def test_seed_summary_pools_seeds_with_a_t_interval_and_keeps_a_single_model():
    """A seeded group: the mean of its seeds' rhos and scipy's t-interval over them (clipped to [-1, 1]); a
    pretrained model: its row unchanged, bootstrap CI and all."""
    common = dict(measure="rho_mlp", causal="delta_loss_skip_block", n_layers=6, n_sequences=64, n_tokens=100,
                  text_sha256="x", dtype="float32", hardware="cpu")
    rhos = [0.2, 0.5, 0.6, 0.8]
    rows = [dict(label=f"exp/uniform/seed{k}", spearman_rho=r, ci_low=r - 0.1, ci_high=r + 0.1, **common)
            for k, r in enumerate(rhos)]
    rows += [dict(label="exp/cosine/seed0", spearman_rho=0.9, **common),
             dict(label="exp/cosine/seed1", spearman_rho=1.0, **common),
             dict(label="smollm2-135m", spearman_rho=0.3, ci_low=0.1, ci_high=0.4, **{**common, "n_layers": 30})]
    out = im.seed_summary(pd.DataFrame(rows)).set_index("group")
    low, high = stats.t.interval(0.95, len(rhos) - 1, loc=sum(rhos) / len(rhos), scale=stats.sem(rhos))
    row = out.loc["exp/uniform"]
    assert (row["spearman_rho"], row["ci_low"], row["ci_high"]) == pytest.approx((sum(rhos) / 4, low, min(high, 1.0)))
    assert row["n_seeds"] == 4 and row["ci"] == "t over seeds"
    assert out.loc["exp/cosine", "ci_high"] == 1.0 and out.loc["exp/cosine", "ci_low"] < 0.95   # clipped above
    smol = out.loc["smollm2-135m"]
    assert (smol["spearman_rho"], smol["ci_low"], smol["ci_high"], smol["n_layers"]) == (0.3, 0.1, 0.4, 30)
    assert smol["ci"] == "bootstrap over sequences"
