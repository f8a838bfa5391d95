"""analyses.importance_measures end to end on one of our checkpoints: the correlation table (every measure
against every causal effect, skip_block included) checked against scipy's Spearman on the probe table's own
per-layer means, the figure, and the accuracy drop of removing each block on lm-eval's PIQA (3 documents)
checked against lm-eval run by hand with the layer deleted."""

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

    def keep(cfg):
        found = real(cfg)
        tables.update({label: df for label, _, df in found})
        return found

    monkeypatch.setattr(im, "model_tables", keep)
    cfg = im.Config(models=(), run_dirs=(str(run),), n_boot=50,
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
    [png] = im.render(tmp_path / "figures")
    assert png.stat().st_size > 10_000


@pytest.mark.slow
def test_accuracy_drop_pairs_documents_against_the_clean_model(run):
    """acc_removed of each layer = lm-eval's PIQA accuracy of the model rebuilt without that block (no hook)."""
    import torch

    from interp.evals.run import EvalTarget, lm_evaluate, load_lm

    rows = pd.DataFrame(im.accuracy_drop(str(run), ("piqa",), limit=6))
    lm, _ = load_lm(EvalTarget(str(run), "checkpoint", "run"), batch_size=8)
    blocks = list(lm.model.blocks)
    assert rows["layer"].tolist() == list(range(len(blocks))) and set(rows["n_docs"]) == {6}
    for layer in range(len(blocks)):
        lm.model.blocks = torch.nn.ModuleList([b for i, b in enumerate(blocks) if i != layer])
        want = lm_evaluate(lm, "piqa", {}, limit=6)["results"]["piqa"]["acc,none"]
        assert rows.loc[layer, "acc_removed"] == pytest.approx(want)
    lm.model.blocks = torch.nn.ModuleList(blocks)
    clean = lm_evaluate(lm, "piqa", {}, limit=6)["results"]["piqa"]["acc,none"]
    assert rows["acc_clean"].iloc[0] == pytest.approx(clean)
    assert (rows["d_acc"] - (rows["acc_removed"] - rows["acc_clean"])).abs().max() < 1e-12
