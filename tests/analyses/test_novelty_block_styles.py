"""analyses/novelty_block_styles on micro gain_vs_tokens runs of both block styles: the probe over each run's own
held-out text, the per-layer seed summary and depth correlations, one rho_mlp checked against plain float64 torch
hooks, a cooldown length, resuming, the figure, and the errors when the runs are missing."""

import json
from pathlib import Path

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from analyses import gain_vs_tokens as gvt
from analyses import meta_name
from analyses import novelty_block_styles as nbs
from interp.probes.config import ProbeConfig
from tests import factories

SEQ_LEN, TOKENS = 32, 128  # the micro preset's n_ctx; 4 sequences per checkpoint


def micro_config(corpus, root) -> nbs.Config:
    gain = gvt.Config(preset="micro", seeds=2, lengths=(4, 8), d_model=32, n_heads=2, d_ff=64, source=str(corpus),
                      eval_batches=2, eval_interval=4, check_steps=0, arms=(), root=str(root))
    probe = ProbeConfig(tokens=TOKENS, seq_len=SEQ_LEN, batch_size=4, backend="hookpoints", metrics=nbs.METRICS,
                        reference="normed")
    return nbs.Config(root=str(root), gain=gain, probe=probe)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, module_cache):
    """40 documents, 2 of them in the val split at the runs' val_fraction (0.05)."""
    return factories.write_corpus(tmp_path_factory.mktemp("text") / "corpus", n_docs=40, sentences=60)


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    """Both block styles x uniform/tapered x 2 seeds, 8 steps each with a cooldown branch at 4; the data is the
    trainer's own (tokenized at the run's val_fraction, so probe() rebuilds the run's tokenizer exactly)."""
    cfg = micro_config(corpus, tmp_path_factory.mktemp("runs"))
    gvt.compute(cfg.gain, tmp_path_factory.mktemp("gvt"))
    return cfg


def _reference_rho_mlp(checkpoint, text: str) -> list[float]:
    """Per-layer mean over tokens (position 0 left out) of cos(mlp_out, resid_pre), float64 weights and
    activations, from plain torch hooks on the blocks."""
    from interp.hf import resolve_model
    from interp.training.checkpoints import load_checkpoint

    model, _ = load_checkpoint(checkpoint)
    model = model.double().eval()
    ids = resolve_model(str(checkpoint)).load_tokenizer().encode(text)
    seqs = torch.tensor(ids[:TOKENS]).reshape(TOKENS // SEQ_LEN, SEQ_LEN)
    pre, out = {}, {}
    handles = []
    for l, block in enumerate(model.blocks):
        handles.append(block.register_forward_pre_hook(lambda _m, a, l=l: pre.setdefault(l, []).append(a[0])))
        handles.append(block.mlp.register_forward_hook(lambda _m, _a, o, l=l: out.setdefault(l, []).append(o)))
    try:
        with torch.no_grad():
            model(seqs)
    finally:
        for h in handles:
            h.remove()
    return [float(F.cosine_similarity(torch.cat(out[l])[:, 1:], torch.cat(pre[l])[:, 1:], dim=-1, eps=0.0).mean())
            for l in range(len(model.blocks))]


def test_tables_match_plain_hooks_resume_and_render(trained, corpus, tmp_path):
    from interp import data
    from interp._util.io import text_sha256

    figures = tmp_path / "figures"
    figures.mkdir()
    summary = nbs.compute(trained, figures)
    # every block style x variant x metric x layer, 2 seeds each, in the study's order
    keys = summary[["arch", "variant", "metric", "layer"]].drop_duplicates()
    assert len(keys) == len(summary) == 2 * 2 * 4 * 2
    assert list(dict.fromkeys(summary["arch"])) == ["llama", "gpt2"]
    assert set(summary["metric"]) == {"rho_mlp", "rho_block", "rho_attn", "rho_mlp_normed"}
    assert (summary["n_seeds"] == 2).all() and summary[["mean", "ci_low", "ci_high"]].notna().all().all()
    assert (summary["steps"] == 8).all() and set(summary["block_style"]) == {"Transformer++", "GPT-2-style"}
    tapered = summary[(summary["variant"] == gvt.TAPER) & (summary["metric"] == "rho_mlp")]
    assert (tapered.groupby("arch")["d_mlp"].apply(lambda d: d.iloc[0] > d.iloc[-1])).all()  # widths shrink
    paper = summary[summary["metric"] == "rho_mlp"]
    assert (paper["paper_pearson_r_low"] == 0.49).all() and (paper["paper_pearson_r_high"] == 0.71).all()
    assert summary.loc[summary["metric"] == "rho_attn", "paper_pearson_r_low"].isna().all()

    runs = pd.read_csv(figures / nbs.RUNS_TABLE)
    assert list(runs.columns) == nbs.RUN_TABLE_COLUMNS
    assert len(runs) == 2 * 2 * 2 * 4 * 2 and runs["probed_now"].all() and runs["probe_cpu"].notna().all()
    assert set(runs["dtype_train"]) == {"float32"} and runs["train_cpu"].notna().all()
    assert runs["text_sha256"].nunique() == 1 and (runs["n_tokens"] == TOKENS - TOKENS // SEQ_LEN).all()
    # the summary is the seed mean of the run rows, and the depth r the mean of the per-seed r
    one = runs[(runs["arch"] == "gpt2") & (runs["variant"] == gvt.TAPER) & (runs["metric"] == "rho_block")]
    got = summary[(summary["arch"] == "gpt2") & (summary["variant"] == gvt.TAPER) & (summary["metric"] == "rho_block")]
    assert got["mean"].tolist() == pytest.approx(one.groupby("layer")["mean"].mean().tolist(), rel=1e-12)
    signs = one.pivot(index="seed", columns="layer", values="mean").apply(lambda c: float(c[1] > c[0]) * 2 - 1, axis=1)
    assert got["pearson_r_mean"].iloc[0] == pytest.approx(signs.mean())  # two layers: r = +-1 per seed

    # one run's rho_mlp against an independent float64 computation on its checkpoint and held-out text
    row = runs[(runs["arch"] == "gpt2") & (runs["variant"] == gvt.TAPER) & (runs["seed"] == 1)
               & (runs["metric"] == "rho_mlp")].sort_values("layer")
    text = data.heldout_text(str(corpus), "val", 0.05)  # the run's own source and val_fraction
    (probed,) = {Path(t).read_text() for t in runs["text_source"]}  # its start, cut at a paragraph break
    assert text.startswith(probed) and len(probed) < len(text) and (runs["val_fraction"] == 0.05).all()
    assert (runs["text_sha256"] == text_sha256(probed)).all()
    want = _reference_rho_mlp(row["checkpoint"].iloc[0], text)
    assert row["mean"].tolist() == pytest.approx(want, abs=1e-5)

    meta = json.loads((figures / meta_name(nbs.TABLE)).read_text())
    assert meta["config"]["paper"]["pearson_r_with_layer"]["rho_mlp"] == [0.49, 0.71]

    # a rerun probes nothing (batch parts are keyed) and writes the same numbers
    again = nbs.compute(trained, figures)
    pd.testing.assert_frame_equal(again, summary)
    assert not pd.read_csv(figures / nbs.RUNS_TABLE)["probed_now"].any()

    (png,) = nbs.render(figures)
    assert png.name == nbs.FIGURE and png.stat().st_size > 10_000


def test_a_cooldown_length_probes_the_branches(trained, tmp_path):
    cfg = nbs.Config(root=trained.root, gain=trained.gain, probe=trained.probe, length=4)
    summary = nbs.compute(cfg, tmp_path)
    assert (summary["steps"] == 4).all() and (summary["n_seeds"] == 2).all()
    runs = pd.read_csv(tmp_path / nbs.RUNS_TABLE)
    assert runs["checkpoint"].str.contains("cooldowns/step_000004").all()


def test_missing_runs_name_the_command_and_bad_settings_are_refused(corpus, tmp_path):
    cfg = micro_config(corpus, tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="interp figures --only gain_vs_tokens --recompute"):
        nbs.compute(cfg, tmp_path)
    assert not (tmp_path / nbs.TABLE).exists()
    with pytest.raises(ValueError, match="length=5"):
        nbs.compute(nbs.Config(root=cfg.root, gain=cfg.gain, length=5), tmp_path)
    with pytest.raises(ValueError, match="gain.root"):
        nbs.compute(nbs.Config(root="elsewhere", gain=cfg.gain), tmp_path)


def test_heldout_text_refuses_a_changed_or_unreadable_source(corpus, tmp_path):
    from interp import data
    from interp._util.errors import InputError

    docs_hash = data.documents_hash(data.load_documents(str(corpus)))
    path = nbs.heldout_file(tmp_path, str(corpus), 0.05, docs_hash, tokens=TOKENS)
    assert path.parent == tmp_path and data.heldout_text(str(corpus), "val", 0.05).startswith(path.read_text())
    with pytest.raises(InputError, match=r"probe\.text: the documents of the runs' source .* changed"):
        nbs.heldout_file(tmp_path / "changed", str(corpus), 0.05, "0" * 64, tokens=TOKENS)
    with pytest.raises(InputError, match=r"probe\.text: the runs' source .* cannot be read"):
        nbs.heldout_file(tmp_path / "gone", str(tmp_path / "no-such-folder"), 0.05, docs_hash, tokens=TOKENS)
    assert not (tmp_path / "changed").exists() and not (tmp_path / "gone").exists()
