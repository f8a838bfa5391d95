"""The GPT-2-style block (ModelConfig.arch="gpt2"): against Hugging Face's GPT2LMHeadModel (same parameter count,
same logits in float64 after loading its weights), the budget rule for tapered GELU widths, hook names, every
probe backend, the default "llama" style unchanged, `--arch` through TrainConfig, the GPT-2 tokenizer, export.

Everything builds from random init (no download); the tokenizer tests need scripts/setup.sh's GPT-2 asset."""

from __future__ import annotations

import functools
import math
import shutil

import pytest
import torch
from torch import nn

from interp import probes
from interp.model import (
    ARCHS,
    BLOCK_STYLES,
    ModelConfig,
    TaperedLM,
    flops_per_token,
    param_counts,
)
from interp.training import TrainConfig, config_diff
from tests.factories import random_tokens, tiny_config, tiny_lm
from tests.probes.test_probes import cached_naive_table

VOCAB, D, HEADS, CTX = 64, 32, 4, 16
TAPERED, UNIFORM = [96, 64, 32], [64, 64, 64]
gpt2_cfg = functools.partial(tiny_config, vocab_size=VOCAB, d_model=D, n_heads=HEADS, n_ctx=CTX, arch="gpt2")


def hf_gpt2(widths: list[int], seed: int = 0, **extra) -> nn.Module:
    """A random Hugging Face GPT-2 (uniform widths: GPT2LMHeadModel; tapered: our exported class), float64,
    no dropout, eager attention, with our LayerNorm eps."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from interp.hf.tapered_gpt2 import TaperedGPT2Config, TaperedGPT2LMHeadModel

    shape = dict(vocab_size=VOCAB, n_positions=CTX, n_embd=D, n_layer=len(widths), n_head=HEADS, resid_pdrop=0.0,
                 embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-6, bos_token_id=0, eos_token_id=0, **extra)
    torch.manual_seed(seed)
    if len(set(widths)) == 1:
        model = GPT2LMHeadModel(GPT2Config(n_inner=widths[0], **shape))
    else:
        model = TaperedGPT2LMHeadModel(TaperedGPT2Config(intermediate_sizes=widths, **shape))
    model.config._attn_implementation = "eager"
    return model.double().eval()


def ours_from_hf(hf: nn.Module) -> TaperedLM:
    """Our gpt2-style TaperedLM holding `hf`'s weights, mapped here independently of interp.hf.export: GPT-2's
    Conv1D weights are [in, out] (transposed into nn.Linear), c_attn holds q, k, v side by side."""
    c = hf.config
    widths = [block.mlp.c_fc.nf for block in hf.transformer.h]
    model = TaperedLM(ModelConfig(vocab_size=c.vocab_size, d_model=c.n_embd, n_layers=c.n_layer, n_heads=c.n_head,
                                  d_mlp=widths, n_ctx=c.n_positions, norm_eps=c.layer_norm_epsilon, arch="gpt2"))
    model = model.double().eval()
    t = hf.transformer
    with torch.no_grad():
        model.embed.weight.copy_(t.wte.weight)
        model.pos_embed.weight.copy_(t.wpe.weight)
        for ours, theirs in [(model.ln_final, t.ln_f)] + [(b.ln1, h.ln_1) for b, h in zip(model.blocks, t.h)] + \
                [(b.ln2, h.ln_2) for b, h in zip(model.blocks, t.h)]:
            ours.weight.copy_(theirs.weight)
            ours.bias.copy_(theirs.bias)
        for block, h in zip(model.blocks, t.h):
            q, k, v = h.attn.c_attn.weight.split(c.n_embd, dim=1)
            qb, kb, vb = h.attn.c_attn.bias.split(c.n_embd)
            for proj, w, b in ((block.attn.q_proj, q, qb), (block.attn.k_proj, k, kb), (block.attn.v_proj, v, vb),
                               (block.attn.o_proj, h.attn.c_proj.weight, h.attn.c_proj.bias),
                               (block.mlp.up_proj, h.mlp.c_fc.weight, h.mlp.c_fc.bias),
                               (block.mlp.down_proj, h.mlp.c_proj.weight, h.mlp.c_proj.bias)):
                proj.weight.copy_(w.T)
                proj.bias.copy_(b)
    return model


def manual_params(widths: list[int], d: int = D, vocab: int = VOCAB, ctx: int = CTX) -> int:
    """GPT-2's parameters counted by hand, layer by layer: ln_1 + c_attn + c_proj + ln_2 + c_fc + c_proj."""
    per_layer = [2 * d + (d * 3 * d + 3 * d) + (d * d + d) + 2 * d + (d * w + w) + (w * d + d) for w in widths]
    return vocab * d + ctx * d + sum(per_layer) + 2 * d  # wte, wpe, layers, ln_f; lm_head tied to wte


# ------------------------------------------------------------------------------------------ against Hugging Face

def test_uniform_gpt2_has_hf_gpt2s_parameter_count_and_logits_in_float64():
    hf = hf_gpt2(UNIFORM)
    ours = ours_from_hf(hf)
    n_hf = sum(p.numel() for p in hf.parameters())
    assert n_hf == sum(p.numel() for p in ours.parameters()) == param_counts(ours.cfg)["total"] == manual_params(UNIFORM)
    assert ours.unembed.weight is ours.embed.weight and hf.lm_head.weight is hf.transformer.wte.weight
    tokens = random_tokens(VOCAB, batch=3, pos=CTX)
    with torch.no_grad():
        out = hf(tokens, output_hidden_states=True)
        logits, cache = ours.run_with_cache(tokens)
    assert logits.dtype == torch.float64
    torch.testing.assert_close(logits, out.logits, atol=1e-10, rtol=1e-10)
    assert out.logits.abs().max() > 0.1  # not a trivially small output
    for layer in range(len(UNIFORM)):  # HF's hidden_states[l] is block l's input = our hook_resid_pre
        torch.testing.assert_close(cache[f"blocks.{layer}.hook_resid_pre"], out.hidden_states[layer],
                                   atol=1e-10, rtol=1e-10)


def test_tapered_gpt2_matches_the_tapered_hf_class_after_export_mapping():
    """ours -> interp.hf.export's state dict -> TaperedGPT2LMHeadModel: same logits (float64)."""
    from interp.hf.export import hf_state_dict

    hf = hf_gpt2(TAPERED, seed=1)
    ours = ours_from_hf(hf_gpt2(TAPERED, seed=2))  # other weights than hf's, then copied over by the export map
    missing, unexpected = hf.load_state_dict(hf_state_dict(ours), strict=False)
    assert unexpected == [] and set(missing) <= {"lm_head.weight"}  # tied: lm_head is wte
    assert [b.mlp.c_fc.nf for b in hf.transformer.h] == TAPERED
    tokens = random_tokens(VOCAB, batch=2, pos=CTX, seed=3)
    with torch.no_grad():
        torch.testing.assert_close(ours(tokens), hf(tokens).logits, atol=1e-10, rtol=1e-10)


# ------------------------------------------------------------------------------------------ budget and counts

def test_tapered_gpt2_counts_per_layer_by_hand_and_tie_with_uniform():
    tapered, uniform = gpt2_cfg(d_mlp=TAPERED), gpt2_cfg(d_mlp=UNIFORM)
    assert sum(TAPERED) == sum(UNIFORM)  # the budget rule: sum of widths = n_layers x d_ff
    counts = param_counts(tapered)
    model = TaperedLM(tapered)
    for layer, (row, w) in enumerate(zip(counts["per_layer"], TAPERED)):
        assert row["mlp"] == 2 * D * w + w + D == sum(p.numel() for p in model.blocks[layer].mlp.parameters())
        assert row["mixer"] == 4 * D * D + 4 * D == sum(p.numel() for p in model.blocks[layer].attn.parameters())
        assert row["norms"] == 4 * D and row["total"] == sum(p.numel() for p in model.blocks[layer].parameters())
    assert counts["position_embedding"] == CTX * D and counts["unembedding"] == 0 and counts["final_norm"] == 2 * D
    assert counts["total"] == manual_params(TAPERED) == manual_params(UNIFORM) == param_counts(uniform)["total"]
    assert counts["total"] == sum(p.numel() for p in model.parameters())
    untied = gpt2_cfg(d_mlp=TAPERED, tie_embeddings=False)
    assert param_counts(untied)["total"] == counts["total"] + VOCAB * D == sum(
        p.numel() for p in TaperedLM(untied).parameters())


def test_gpt2_flops_are_the_matmuls_the_model_holds_and_tie_with_uniform():
    seq = 12
    model = TaperedLM(gpt2_cfg(d_mlp=TAPERED))
    linear = sum(2 * m.in_features * m.out_features for m in model.modules() if isinstance(m, nn.Linear))
    scores = len(TAPERED) * sum(2 * 2 * D * (t + 1) for t in range(seq)) // seq
    flops = flops_per_token(model.cfg, seq)
    assert flops["total"] == linear + scores and flops["attention_scores"] == scores
    assert [r["mlp"] for r in flops["per_layer"]] == [4 * D * w for w in TAPERED]
    assert flops["total"] == flops_per_token(gpt2_cfg(d_mlp=UNIFORM), seq)["total"]


def test_swiglu_and_gelu_widths_map_to_parameters_differently():
    llama, gpt2 = tiny_config(d_mlp=UNIFORM, d_model=D), gpt2_cfg(d_mlp=UNIFORM)
    assert [r["mlp"] for r in param_counts(llama)["per_layer"]] == [3 * D * w for w in UNIFORM]
    assert [r["mlp"] for r in param_counts(gpt2)["per_layer"]] == [2 * D * w + w + D for w in UNIFORM]


# ------------------------------------------------------------------------------------------ hooks and probes

def test_gpt2_hook_names_are_the_llama_names():
    llama, gpt2 = tiny_lm(d_mlp=TAPERED), tiny_lm(cfg=gpt2_cfg(d_mlp=TAPERED))
    only_llama = {n for n in llama.hook_dict if n.endswith("mlp.hook_pre_linear")}  # SwiGLU's up branch
    assert set(gpt2.hook_dict) == (set(llama.hook_dict) - only_llama) | {"hook_pos_embed"}
    tokens = random_tokens(VOCAB)
    with torch.no_grad():
        _, cache = gpt2.run_with_cache(tokens)
    torch.testing.assert_close(cache["blocks.0.hook_resid_pre"], cache["hook_embed"] + cache["hook_pos_embed"],
                               atol=0, rtol=0)
    for l in range(3):
        b = f"blocks.{l}."
        assert torch.equal(cache[b + "hook_resid_mid"], cache[b + "hook_resid_pre"] + cache[b + "hook_attn_out"])
        assert torch.equal(cache[b + "hook_resid_post"], cache[b + "hook_resid_mid"] + cache[b + "hook_mlp_out"])
        assert cache[b + "mlp.hook_post"].shape[-1] == TAPERED[l]
        torch.testing.assert_close(cache[b + "mlp.hook_post"],
                                   torch.nn.functional.gelu(cache[b + "mlp.hook_pre"], approximate="tanh"))
        normed = cache[b + "ln1.hook_normalized"]  # (x - mean) / std, before gain and bias
        torch.testing.assert_close(normed.mean(-1), torch.zeros(normed.shape[:-1]), atol=1e-5, rtol=0)


@pytest.mark.parametrize("backend", probes.BACKENDS)
def test_every_probe_backend_reads_a_gpt2_model(backend):
    model, toks = tiny_lm(cfg=gpt2_cfg(d_mlp=TAPERED)), random_tokens(VOCAB)
    df = probes.probe_model(model, [toks[:1], toks[1:]], backend=backend)
    naive = cached_naive_table(model, toks)
    assert len(df) == 3 * len(probes.METRIC_NAMES)
    for row in df.itertuples():
        assert row.mean == pytest.approx(naive[(row.layer, row.metric)].mean().item(), abs=1e-6), (row.layer, row.metric)
    normed = probes.probe_model(model, [toks], backend=backend, metrics=("rho_mlp",), reference="normed")
    assert set(normed.metric) == {"rho_mlp", "rho_mlp_normed"}  # the MLP's input (ln2 output) is found too


def test_ablation_sites_of_a_gpt2_model_are_its_gelu_neurons():
    from interp.ablations.sites import mlp_sites

    model = tiny_lm(cfg=gpt2_cfg(d_mlp=TAPERED))
    sites = mlp_sites(model)
    assert [s.width for s in sites] == TAPERED and all(s.down is b.mlp.down_proj for s, b in zip(sites, model.blocks))


# ------------------------------------------------------------------------------------------ the default style

def test_a_config_without_arch_is_the_llama_block_unchanged():
    stored = tiny_config(d_mlp=TAPERED).to_dict()
    del stored["arch"]  # as every config.json written before the field existed
    old, new = ModelConfig.from_dict(stored), tiny_config(d_mlp=TAPERED, arch="llama")
    assert old == new and old.arch == "llama" and old.tie_embeddings is False
    torch.manual_seed(0)
    a = TaperedLM(old)
    torch.manual_seed(0)
    b = TaperedLM(new)
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not any(k.endswith(".bias") or "pos_embed" in k for k in sa)  # no GPT-2 parameter crept in
    assert param_counts(old)["position_embedding"] == 0


def test_arch_tables_agree_and_bad_combinations_name_the_fix():
    from interp.hf.export import STYLES
    from interp.hf.resolve import EXPORT_MODEL_TYPES

    assert list(ARCHS) == list(BLOCK_STYLES) == list(STYLES)
    assert sorted(s.classes()[0].model_type for s in STYLES.values()) == sorted(EXPORT_MODEL_TYPES)
    with pytest.raises(ValueError, match=r"arch='gpt2'.*mixer='attention'.*arch='llama'"):
        gpt2_cfg(mixer="titans").validate()
    with pytest.raises(ValueError, match="arch='gpt3' is not a block style.*llama.*gpt2"):
        tiny_config(arch="gpt3").validate()
    gpt2_cfg(d_model=30, n_heads=10).validate()  # d_head 3 is fine without RoPE
    with pytest.raises(ValueError, match="RoPE"):
        tiny_config(d_model=30, n_heads=10).validate()


# ------------------------------------------------------------------------------------------ TrainConfig --arch

def test_train_config_arch_reaches_the_model_and_the_cli():
    from interp.cli import build_parser
    from interp.cli.train import config_from_args

    args = build_parser().parse_args(["train", "--preset", "micro", "--arch", "gpt2", "--out", "r"])
    cfg = config_from_args(args)
    model_cfg = cfg.model_config(100)
    assert cfg.arch == "gpt2" and model_cfg.arch == "gpt2" and model_cfg.tie_embeddings is True
    assert TrainConfig.from_preset("micro").arch == "llama"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--preset", "micro", "--arch", "gpt3", "--out", "r"])


def test_a_stored_train_config_without_arch_still_matches():
    """Runs trained before the field existed were llama: resume and experiment skipping must not call them stale."""
    cfg = TrainConfig.from_preset("micro")
    stored = cfg.to_dict()
    del stored["arch"]
    assert config_diff(stored, cfg) == []
    assert config_diff(stored, cfg.with_overrides(arch="gpt2")) == ["arch: 'llama' -> 'gpt2'"]


def test_trainer_check_model_refuses_gpt2_with_another_mixer():
    from interp.training.trainer import check_model

    check_model(TrainConfig.from_preset("micro", arch="gpt2"))
    with pytest.raises(ValueError, match="--mixer attention"):
        check_model(TrainConfig.from_preset("micro", arch="gpt2", mixer="gated_attention"))


# ------------------------------------------------------------------------------------------ GPT-2 tokenizer

def _installed_gpt2_files():
    """The GPT-2 tokenizer files scripts/setup.sh put in the default cache (before any test moved the cache)."""
    import os
    from pathlib import Path

    from interp.data.tokenizers import GPT2_CACHE, GPT2_FILES

    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "interp"
    folder = Path(os.environ.get("INTERP_CACHE_DIR", root)).joinpath(*GPT2_CACHE)
    return [folder / f for f in GPT2_FILES] if all((folder / f).is_file() for f in GPT2_FILES) else None


GPT2_FILES_FOUND = _installed_gpt2_files()
needs_gpt2_tokenizer = pytest.mark.skipif(GPT2_FILES_FOUND is None,
                                          reason="GPT-2 tokenizer not fetched: run bash scripts/setup.sh")


@needs_gpt2_tokenizer
def test_gpt2_tokenizer_gives_gpt2s_ids(private_cache):
    from interp.data import get_tokenizer
    from interp.data.tokenizers import GPT2_CACHE
    from interp.data.tokens import token_dtype

    folder = private_cache.joinpath(*GPT2_CACHE)
    folder.mkdir(parents=True)
    for f in GPT2_FILES_FOUND:
        shutil.copy(f, folder / f.name)
    tok = get_tokenizer("gpt2")
    assert tok.encode("Hello world") == [15496, 995] and tok.vocab_size == 50257
    assert tok.eos_id == 50256 and tok.encode("<|endoftext|>") == [50256]
    assert tok.decode(tok.encode(" naïve café, 1984!")) == " naïve café, 1984!"
    assert (folder / "tokenizer.json").is_file() and get_tokenizer("gpt2").hash == tok.hash  # cached, same
    assert token_dtype(tok.vocab_size) == "uint16"  # 50257 ids fit


def test_gpt2_tokenizer_missing_names_the_setup_command(private_cache):
    from interp.data import get_tokenizer

    with pytest.raises(FileNotFoundError, match=r"vocab\.json, merges\.txt missing.*bash scripts/setup\.sh"):
        get_tokenizer("gpt2")


def test_gpt2_tokenizer_from_wrong_files_is_refused(private_cache, tmp_path):
    """Files that are not GPT-2's (here a 3-merge BPE) are named, never used silently."""
    import json

    from interp.data import get_tokenizer
    from interp.data.tokenizers import GPT2_CACHE

    folder = private_cache.joinpath(*GPT2_CACHE)
    folder.mkdir(parents=True)
    vocab = {c: i for i, c in enumerate("Hellowrd Ġ")} | {"<|endoftext|>": 11}
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    with pytest.raises(ValueError, match="do not give GPT-2's tokenizer.*scripts/setup.sh"):
        get_tokenizer("gpt2")
    assert not (folder / "tokenizer.json").exists()


def test_gelu_is_gpt2s_gelu_new():
    """F.gelu(approximate="tanh") is GPT-2's gelu_new: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""
    x = torch.linspace(-6, 6, 1001, dtype=torch.float64)
    gelu_new = 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    torch.testing.assert_close(torch.nn.functional.gelu(x, approximate="tanh"), gelu_new, atol=1e-14, rtol=0)


# ------------------------------------------------------------------------------------------ export

def test_gpt2_export_loads_with_remote_code_in_a_fresh_process(tmp_path, tiny_checkpoint):
    """modeling_tapered_gpt2.py is self-contained: transformers alone (no interp on the path) builds the tapered
    GPT-2 and gives our logits; a tied model stays tied."""
    import os
    import subprocess
    import sys

    from interp.cli import main
    from tests.factories import word_tokenizer_json

    tok = word_tokenizer_json(tmp_path / "tokenizer.json", [f"w{i}" for i in range(14)],
                              specials=("[UNK]", "<|endoftext|>"))
    model = tiny_lm(cfg=gpt2_cfg(vocab_size=16, d_mlp=TAPERED, init_std=0.2))
    run = tiny_checkpoint("run", model, tokenizer=tok)
    assert main(["export", str(run), "--hf", str(tmp_path / "hf")]) == 0
    assert (tmp_path / "hf" / "modeling_tapered_gpt2.py").is_file()
    tokens = random_tokens(16, batch=2, pos=CTX)
    with torch.no_grad():
        torch.save({"tokens": tokens, "logits": model(tokens)}, tmp_path / "ref.pt")
    code = ("import sys, torch; from transformers import AutoModelForCausalLM; "
            "m = AutoModelForCausalLM.from_pretrained(sys.argv[1], trust_remote_code=True).eval(); "
            "ref = torch.load(sys.argv[2]); d = (m(ref['tokens']).logits - ref['logits']).abs().max().item(); "
            "tied = m.lm_head.weight is m.transformer.wte.weight; "
            "print(type(m).__name__, [b.mlp.c_fc.nf for b in m.transformer.h], tied, d)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HOME=str(tmp_path / "hf_home"), HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "hf"), str(tmp_path / "ref.pt")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-2000:]
    name, *widths, tied, diff = proc.stdout.split()
    assert name == "TaperedGPT2LMHeadModel" and " ".join(widths) == str(TAPERED) and tied == "True"
    assert float(diff) < 1e-5


def test_export_refuses_an_unknown_block_style_in_one_line(tmp_path, tiny_checkpoint, capsys):
    import json

    from interp.cli import main

    run = tiny_checkpoint("run", tiny_lm(cfg=gpt2_cfg(d_mlp=TAPERED)))
    config = json.loads((run / "config.json").read_text())
    config["model"]["arch"] = "gpt3"
    (run / "config.json").write_text(json.dumps(config))
    assert main(["export", str(run), "--hf", str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err.strip()
    assert "gpt3" in err and "model.arch" in err and not (tmp_path / "hf").exists()
