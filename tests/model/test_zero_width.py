"""Layers without an MLP (ModelConfig.d_mlp[l] = 0; issue #34 item 5): the literature's layouts (Ikeda et al.'s
FFNs in the middle only, modded-nanogpt's missing first MLP) build, count their parameters exactly, train, probe
(the MLP metrics of an absent MLP are NaN, not the 0 a zero vector's cosine would read), export (the export gives
the same logits and the same probe table) and ablate, in both block styles."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from interp.cli import main
from interp.model import TaperedLM, flops_per_token, param_counts
from interp.probes.table import MLP_METRICS
from interp.widths import LAYOUTS, WidthSpec, absent_layers, layout_widths
from tests.factories import WORDS, random_tokens, tiny_config, tiny_lm, word_tokenizer_json

ARCHS = ("llama", "gpt2")


def _model(arch: str, seed: int = 0) -> TaperedLM:
    return tiny_lm(seed=seed, d_mlp=[0, 160, 32], arch=arch, init_std=0.2)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_layer_without_an_mlp_counts_exactly_and_computes_nothing(arch):
    model = _model(arch)
    assert sum(p.numel() for p in model.parameters()) == param_counts(model.cfg)["total"]
    per_layer = param_counts(model.cfg)["per_layer"]
    assert per_layer[0]["mlp"] == 0 and per_layer[1]["mlp"] > 0
    assert sum(p.numel() for p in model.blocks[0].mlp.parameters()) == 0   # no output bias in gpt2 style either
    assert flops_per_token(model.cfg, 8)["per_layer"][0]["mlp"] == 0
    # the same budget as uniform: MLP FLOPs tie (parameters too in the llama style; gpt2 lacks one output bias)
    uniform = tiny_config(d_mlp=[64, 64, 64], arch=arch)
    assert sum(r["mlp"] for r in flops_per_token(model.cfg, 8)["per_layer"]) == \
        sum(r["mlp"] for r in flops_per_token(uniform, 8)["per_layer"])
    gap = param_counts(uniform)["total"] - param_counts(model.cfg)["total"]
    assert gap == (0 if arch == "llama" else model.cfg.d_model)
    # hook_mlp_out is exactly zero there, and the block is its attention alone; gradients flow
    _, cache = model.run_with_cache(random_tokens(64), names_filter=lambda n: n.startswith("blocks.0."))
    assert torch.count_nonzero(cache["blocks.0.hook_mlp_out"]) == 0
    torch.testing.assert_close(cache["blocks.0.hook_resid_post"], cache["blocks.0.hook_resid_mid"])
    model.train()
    model(random_tokens(64)).logsumexp(-1).mean().backward()
    assert model.blocks[1].mlp.down_proj.weight.grad.abs().sum() > 0


def test_layouts_are_budget_exact_with_zeros_where_they_say():
    for layout in LAYOUTS:
        for n_layers in (3, 6, 12, 24, 30):
            widths = layout_widths(layout, n_layers, 1024, 64)
            zeros = absent_layers(layout, n_layers)
            assert sum(widths) == n_layers * 1024 and all(w % 64 == 0 for w in widths)
            assert [i for i, w in enumerate(widths) if w == 0] == zeros
            assert max(widths) - min(w for w in widths if w) <= 64   # spread evenly over the rest
    assert layout_widths("middle-ffn", 6, 1024, 64) == [0, 1536, 1536, 1536, 1536, 0]   # 15% of 6: one each end
    assert absent_layers("middle-ffn", 24) == [0, 1, 2, 3, 20, 21, 22, 23]
    assert absent_layers("no-first-mlp", 30) == [0]
    spec = WidthSpec("profile", profile="middle-ffn")
    assert spec.label == "middle-ffn" and spec.widths(6, 1024) == [0, 1536, 1536, 1536, 1536, 0]
    with pytest.raises(ValueError, match="leaves no layer an MLP"):
        layout_widths("middle-ffn", 2, 1024, 64)
    with pytest.raises(ValueError, match="middle-ffn"):
        WidthSpec("profile", profile="no-such-layout")


@pytest.fixture
def checkpoints(tmp_path, tiny_checkpoint):
    tok = word_tokenizer_json(tmp_path / "tokenizer.json", WORDS)
    text = tmp_path / "text.txt"
    text.write_text(" ".join(WORDS[(i * 7) % len(WORDS)] for i in range(600)))
    return {arch: tiny_checkpoint(f"ck-{arch}", _model(arch), tokenizer=tok) for arch in ARCHS}, text


@pytest.mark.parametrize("arch", ARCHS)
def test_probe_export_and_ablate_a_model_with_a_layer_without_an_mlp(arch, checkpoints, tmp_path):
    from interp.hf import resolve_model
    from interp.hf.adapters import unwrap

    cks, text = checkpoints
    ck = cks[arch]
    probe = ["--text", str(text), "--tokens", "64", "--seq-len", "16", "--metrics",
             "rho_mlp,rho_block,norm_ratio,rho_attn"]
    assert main(["probe", "--model", str(ck), *probe, "--out", str(tmp_path / "ck.parquet")]) == 0
    table = pd.read_parquet(tmp_path / "ck.parquet")
    absent = table[table["layer"] == 0].set_index("metric")
    assert set(MLP_METRICS) >= {"rho_mlp", "norm_ratio"}
    assert absent.loc[["rho_mlp", "norm_ratio"], "mean"].isna().all() and absent["mlp_absent"].all()
    assert absent.loc[["rho_mlp", "norm_ratio"], "n_tokens"].gt(0).all()
    assert absent.loc[["rho_block", "rho_attn"], "mean"].notna().all()
    # with no MLP the block's update is its attention's: rho_block = rho_attn at layer 0, token for token
    assert absent.loc["rho_block", "mean"] == pytest.approx(absent.loc["rho_attn", "mean"], abs=1e-6)
    assert not table[table["layer"] > 0]["mlp_absent"].any() and table[table["layer"] > 0]["mean"].notna().all()
    # the export: same logits, and its probe table marks the same layer
    assert main(["export", str(ck), "--out", str(tmp_path / "hf")]) == 0
    widths = json.loads((tmp_path / "hf" / "config.json").read_text())["intermediate_sizes"]
    assert widths == [0, 160, 32]
    tokens = random_tokens(64, batch=2, pos=16)
    with torch.no_grad():
        torch.testing.assert_close(unwrap(resolve_model(tmp_path / "hf").load().model)(tokens).logits,
                                   _model(arch)(tokens), atol=1e-5, rtol=1e-5)
    assert main(["probe", "--model", str(tmp_path / "hf"), *probe, "--out", str(tmp_path / "hf.parquet")]) == 0
    exported = pd.read_parquet(tmp_path / "hf.parquet").set_index(["layer", "metric"])["mean"]
    pd.testing.assert_series_equal(exported, table.set_index(["layer", "metric"])["mean"], atol=1e-5, rtol=1e-4)
    # causal rows: removing an absent MLP changes nothing
    assert main(["probe", "--model", str(ck), *probe, "--causal", "--out", str(tmp_path / "c.parquet")]) == 0
    causal = pd.read_parquet(tmp_path / "c.parquet").set_index(["layer", "metric"])["mean"]
    assert causal[(0, "delta_loss_skip_mlp")] == pytest.approx(0.0, abs=1e-6)
    assert causal[(1, "delta_loss_skip_mlp")] != 0
    # the capacity ablation: the group holding only layer 0 has no neuron to remove
    assert main(["ablate", str(ck), "--text", str(text), "--seq-len", "16", "--score-sequences", "2",
                 "--eval-sequences", "3", "--batch-size", "2", "--fractions", "0.5", "--seeds", "0",
                 "--skip-layers", "none", "--out", str(tmp_path / "abl")]) == 0


def test_train_a_layout_from_the_cli(tmp_path, private_cache, capsys):
    """`interp train --profile no-first-mlp` (micro preset, synthetic corpus): trains, and the run records the
    widths and the exact parameter count."""
    from tests.factories import write_corpus

    corpus = write_corpus(tmp_path / "corpus", n_docs=12, sentences=30, words=WORDS, sentence_len=8)
    out = tmp_path / "run"
    assert main(["train", "--preset", "micro", "--profile", "no-first-mlp", "--source", str(corpus), "--steps", "2",
                 "--set", "warmup_steps=1", "--set", "eval_batches=1", "--set", "threads=1", "--set",
                 "val_fraction=0.25", "--out",
                 str(out)]) == 0
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "done" and result["widths"][0] == 0 and sum(result["widths"]) > 0
    from interp.training.checkpoints import load_checkpoint

    model, _ = load_checkpoint(out)
    assert result["params"] == sum(p.numel() for p in model.parameters()) == param_counts(model.cfg)["total"]


def test_the_rival_study_takes_the_layouts_paired_by_seed():
    """`interp experiment rivals --layouts`: the five rivals plus the two layouts, in one experiment root (so each
    layout run pairs by seed with the committed runs), at equal parameter counts (llama style)."""
    from analyses import rival_profiles as rp
    from interp.training.experiments import check_equal_params

    exp = rp.experiment(rp.Config(layouts=True))
    names = [v.name for v in exp.variants]
    assert names[-2:] == ["middle-ffn", "no-first-mlp"] and len(names) == 7
    assert exp.name == "rivals-tiny" and rp.experiment(rp.Config()).variants == exp.variants[:5]
    assert check_equal_params([cfg for _, _, cfg in exp.configs()]) == 10_489_088   # the committed runs' count
    assert [v.name for v in rp.experiment(rp.Config(layouts=True, only=("middle-ffn",))).variants] == ["middle-ffn"]


def test_batch_and_eval_take_checkpoints_without_an_mlp(checkpoints, tmp_path):
    """`interp batch` over a folder of zero-width checkpoints (both block styles) gives, per checkpoint, the rows
    a single `interp probe` gives, the absent MLP flagged; `interp eval` scores a zero-width checkpoint and its
    HF export alike (text_ppl on the same text)."""
    cks, text = checkpoints
    probe = ["--text", str(text), "--tokens", "64", "--seq-len", "16", "--metrics", "rho_mlp,rho_block,norm_ratio"]
    folder = cks["llama"].parent
    assert main(["batch", str(folder), *probe, "--out", str(tmp_path / "batch.parquet")]) == 0
    table = pd.read_parquet(tmp_path / "batch.parquet")
    assert set(table["status"]) == {"ok"} and {str(cks[a]) for a in ARCHS} <= set(table["path"])
    for arch in ARCHS:
        assert main(["probe", "--model", str(cks[arch]), *probe, "--out", str(tmp_path / f"{arch}.parquet")]) == 0
        one = pd.read_parquet(tmp_path / f"{arch}.parquet").set_index(["layer", "metric"])
        rows = table[table["path"] == str(cks[arch])].set_index(["layer", "metric"]).loc[one.index]
        pd.testing.assert_series_equal(rows["mean"], one["mean"], atol=1e-6, rtol=1e-5)
        assert rows.loc[0, "mlp_absent"].all() and rows.loc[(0, "rho_mlp"), "mean"] != rows.loc[(0, "rho_mlp"), "mean"]
    assert main(["export", str(cks["gpt2"]), "--out", str(tmp_path / "hf")]) == 0
    flags = ["--tasks", "text_ppl", "--text", str(text), "--limit", "2"]
    assert main(["eval", str(cks["gpt2"]), str(tmp_path / "hf"), *flags, "--out", str(tmp_path / "e.parquet")]) == 0
    scores = pd.read_parquet(tmp_path / "e.parquet")
    assert set(scores["status"]) == {"ok"}
    for metric, g in scores.groupby("metric"):
        assert len(g) == 2 and g["value"].notna().all(), metric
        assert g["value"].iloc[0] == pytest.approx(g["value"].iloc[1], rel=1e-4), metric
