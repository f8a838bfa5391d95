"""TaperedLM: shapes, causality, hooks (TransformerLens and nnsight), analytic params/FLOPs, mixers."""

from __future__ import annotations

import functools
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from interp.model import (
    ModelConfig,
    TaperedLM,
    flops_per_token,
    param_counts,
    training_flops_per_token,
)
from interp.model.mixers import MIXERS, MixerFlops, register_mixer
from tests.factories import random_tokens, tiny_config, tiny_lm

VOCAB, D_MODEL, N_HEADS, N_CTX = 64, 32, 2, 16
WIDTHS = [96, 64, 32]
ATTENTION_MIXERS = ("attention", "gated_attention", "gated_attention_headwise")


# n_layers stays 3 when a test overrides d_mlp (a wrong-length d_mlp must fail validation).
SHAPE = dict(vocab_size=VOCAB, d_model=D_MODEL, n_layers=len(WIDTHS), n_heads=N_HEADS, d_mlp=WIDTHS, n_ctx=N_CTX)
tiny_cfg = functools.partial(tiny_config, **SHAPE)
tiny_model = functools.partial(tiny_lm, **SHAPE)


@pytest.fixture
def tokens() -> torch.Tensor:
    return random_tokens(VOCAB, pos=12)


# --- forward -----------------------------------------------------------------------------------

@pytest.mark.parametrize("mixer", ATTENTION_MIXERS)
def test_forward_shapes_and_loss(mixer, tokens):
    model = tiny_model(mixer=mixer)
    logits, loss = model(tokens, return_type="both")
    assert logits.shape == (*tokens.shape, VOCAB)
    assert torch.equal(logits, model(tokens))
    assert torch.equal(loss, model(tokens, return_type="loss"))
    expected = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
    torch.testing.assert_close(loss, expected)
    # Small init -> near-uniform predictions -> loss close to log(vocab).
    assert abs(loss.item() - math.log(VOCAB)) < 0.3


@pytest.mark.parametrize("mixer", ATTENTION_MIXERS)
def test_causal(mixer, tokens):
    model = tiny_model(mixer=mixer)
    changed = tokens.clone()
    changed[:, 6] = (changed[:, 6] + 1) % VOCAB
    before, after = model(tokens), model(changed)
    torch.testing.assert_close(before[:, :6], after[:, :6], atol=1e-6, rtol=0)
    assert (before[:, 6:] - after[:, 6:]).abs().amax(dim=-1).min() > 1e-4


def test_forward_rejects_bad_input(tokens):
    model = tiny_model()
    with pytest.raises(ValueError, match="return_type"):
        model(tokens, return_type="probs")
    with pytest.raises(ValueError, match="n_ctx"):
        model(torch.zeros(1, N_CTX + 1, dtype=torch.long))
    with pytest.raises(ValueError, match="2 positions"):
        model(tokens[:, :1], return_type="loss")


# --- hooks -------------------------------------------------------------------------------------

def expected_hook_shapes(cfg: ModelConfig, batch: int, pos: int) -> dict[str, tuple[int, ...]]:
    resid, heads = (batch, pos, cfg.d_model), (batch, pos, cfg.n_heads, cfg.d_head)
    shapes = {"hook_embed": resid, "ln_final.hook_normalized": resid}
    for l, width in enumerate(cfg.d_mlp):
        for name in ("hook_resid_pre", "hook_attn_out", "hook_resid_mid", "hook_mlp_out", "hook_resid_post",
                     "ln1.hook_normalized", "ln2.hook_normalized"):
            shapes[f"blocks.{l}.{name}"] = resid
        for name in ("hook_q", "hook_k", "hook_v", "hook_z"):
            shapes[f"blocks.{l}.attn.{name}"] = heads
        for name in ("hook_pre", "hook_pre_linear", "hook_post"):
            shapes[f"blocks.{l}.mlp.{name}"] = (batch, pos, width)
        if cfg.mixer == "gated_attention":
            shapes[f"blocks.{l}.attn.hook_gate"] = heads
        if cfg.mixer == "gated_attention_headwise":
            shapes[f"blocks.{l}.attn.hook_gate"] = (batch, pos, cfg.n_heads, 1)
    return shapes


@pytest.mark.parametrize("mixer", ATTENTION_MIXERS)
def test_run_with_cache_has_every_hook(mixer, tokens):
    model = tiny_model(mixer=mixer)
    logits, cache = model.run_with_cache(tokens)
    torch.testing.assert_close(logits, model(tokens), atol=0, rtol=0)
    expected = expected_hook_shapes(model.cfg, *tokens.shape)
    assert set(cache) == set(expected) == set(model.hook_dict)
    assert {name: tuple(t.shape) for name, t in cache.items()} == expected
    for l in range(model.cfg.n_layers):  # the residual stream is exactly the sum of what the hooks saw
        b = f"blocks.{l}."
        torch.testing.assert_close(cache[b + "hook_resid_pre"] + cache[b + "hook_attn_out"],
                                   cache[b + "hook_resid_mid"], atol=1e-6, rtol=0)
        torch.testing.assert_close(cache[b + "hook_resid_mid"] + cache[b + "hook_mlp_out"],
                                   cache[b + "hook_resid_post"], atol=1e-6, rtol=0)
        if l:
            assert torch.equal(cache[f"blocks.{l - 1}.hook_resid_post"], cache[b + "hook_resid_pre"])
        # mlp.hook_post is what down_proj reads: silu(gate pre-activation) * up
        torch.testing.assert_close(F.silu(cache[b + "mlp.hook_pre"]) * cache[b + "mlp.hook_pre_linear"],
                                   cache[b + "mlp.hook_post"])
    assert not any(hp.fwd_hooks for hp in model.hook_points()), "run_with_cache must remove its hooks"


def test_zeroing_mlp_out_hook_equals_zeroing_down_proj(tokens):
    model = tiny_model()
    clean = model(tokens)
    ablated = model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.hook_mlp_out", lambda act, hook: torch.zeros_like(act))])
    assert (ablated - clean).abs().max() > 1e-4
    torch.testing.assert_close(model(tokens), clean, atol=0, rtol=0)  # hook removed afterwards
    with torch.no_grad():
        model.blocks[1].mlp.down_proj.weight.zero_()
    torch.testing.assert_close(model(tokens), ablated, atol=1e-6, rtol=0)


def test_nnsight_trace_matches_cache(tokens):
    from nnsight import NNsight

    model = tiny_model()
    _, cache = model.run_with_cache(tokens)
    wrapped = NNsight(model)
    saved = []  # nnsight 0.8: collect into lists created outside the trace, touch modules in forward order
    with torch.no_grad(), wrapped.trace(tokens):
        for l in range(model.cfg.n_layers):
            saved.append(wrapped.blocks[l].mlp.output.save())
        logits = wrapped.output.save()
    assert all(isinstance(t, torch.Tensor) for t in saved)  # 0.8 returns the tensor itself
    for l, out in enumerate(saved):
        torch.testing.assert_close(out, cache[f"blocks.{l}.hook_mlp_out"], atol=1e-6, rtol=0)
    torch.testing.assert_close(logits, model(tokens), atol=1e-6, rtol=0)


# --- attention numerics ------------------------------------------------------------------------

def naive_rope(x: torch.Tensor, theta: float) -> torch.Tensor:
    """x [batch pos heads d_head]; rotates the pair (i, i + d_head/2) by pos * theta^(-2i/d_head)."""
    d_half = x.shape[-1] // 2
    out = x.clone()
    for p in range(x.shape[1]):
        for i in range(d_half):
            angle = p * theta ** (-2 * i / x.shape[-1])
            c, s = math.cos(angle), math.sin(angle)
            a, b = x[:, p, :, i], x[:, p, :, i + d_half]
            out[:, p, :, i], out[:, p, :, i + d_half] = a * c - b * s, a * s + b * c
    return out


def naive_attention(attn, x: torch.Tensor, theta: float) -> torch.Tensor:
    """Masked softmax attention written out in full, from the module's weights only."""
    batch, pos, _ = x.shape
    split = lambda w: (x @ w.T).view(batch, pos, attn.n_heads, attn.d_head)  # noqa: E731
    q, k, v = (split(w) for w in (attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight))
    q, k = naive_rope(q, theta), naive_rope(k, theta)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(attn.d_head)
    mask = torch.triu(torch.ones(pos, pos, dtype=torch.bool), diagonal=1)
    pattern = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)
    z = torch.einsum("bhqk,bkhd->bqhd", pattern, v)
    return z.reshape(batch, pos, -1) @ attn.o_proj.weight.T


def test_sdpa_attention_matches_naive_masked_softmax():
    model = tiny_model()
    attn = model.blocks[0].attn
    x = torch.randn(2, 10, D_MODEL, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        for w in (attn.q_proj.weight, attn.k_proj.weight):  # larger q/k: a sharp pattern exercises RoPE
            w.mul_(20)
        torch.testing.assert_close(attn(x), naive_attention(attn, x, model.cfg.rope_theta), atol=1e-5, rtol=0)


@pytest.mark.parametrize("mixer", ["gated_attention", "gated_attention_headwise"])
def test_gated_attention_differs_from_attention_only_by_the_gate(mixer, tokens):
    plain, gated = tiny_model(mixer="attention"), tiny_model(seed=5, mixer=mixer)
    missing, unexpected = gated.load_state_dict(plain.state_dict(), strict=False)
    assert not unexpected and sorted(missing) == [f"blocks.{l}.attn.head_gate.weight" for l in range(3)]
    gate_out = D_MODEL if mixer == "gated_attention" else N_HEADS
    assert gated.blocks[0].attn.head_gate.weight.shape == (gate_out, D_MODEL)

    # Layer 0 sees the same input in both models: gated z = plain z * sigmoid gate, gate in (0, 1).
    _, c_plain = plain.run_with_cache(tokens)
    _, c_gated = gated.run_with_cache(tokens)
    gate = c_gated["blocks.0.attn.hook_gate"]
    assert 0 < gate.min() and gate.max() < 1
    torch.testing.assert_close(c_gated["blocks.0.attn.hook_z"], c_plain["blocks.0.attn.hook_z"] * gate,
                               atol=1e-6, rtol=0)
    assert (gated(tokens) - plain(tokens)).abs().max() > 1e-4

    # A zero gate projection gives sigmoid(0) = 1/2 everywhere: exactly plain attention with o_proj halved.
    with torch.no_grad():
        for l in range(3):
            gated.blocks[l].attn.head_gate.weight.zero_()
            plain.blocks[l].attn.o_proj.weight.mul_(0.5)
    torch.testing.assert_close(gated(tokens), plain(tokens), atol=1e-6, rtol=0)


# --- analytic size and cost --------------------------------------------------------------------

@pytest.mark.parametrize("tie", [False, True])
@pytest.mark.parametrize("mixer", ATTENTION_MIXERS)
def test_param_counts_match_instantiated_model(mixer, tie):
    model = tiny_model(mixer=mixer, tie_embeddings=tie)
    counts = param_counts(model.cfg)
    assert counts["total"] == sum(p.numel() for p in model.parameters())
    for l, row in enumerate(counts["per_layer"]):
        block = model.blocks[l]
        assert row["mlp"] == sum(p.numel() for p in block.mlp.parameters())
        assert row["mixer"] == sum(p.numel() for p in block.attn.parameters())
        assert row["total"] == sum(p.numel() for p in block.parameters())
    assert counts["unembedding"] == (0 if tie else VOCAB * D_MODEL)
    if tie:
        assert model.unembed.weight is model.embed.weight


@pytest.mark.parametrize("mixer", ATTENTION_MIXERS)
def test_flops_per_token_matches_module_shapes(mixer):
    """Independent count: 2 * in * out for every Linear the model actually holds, plus attention scores."""
    model, seq_len = tiny_model(mixer=mixer), 12
    cfg = model.cfg
    linear = sum(2 * m.in_features * m.out_features for m in model.modules() if isinstance(m, nn.Linear))
    causal_scores = cfg.n_layers * sum(2 * 2 * D_MODEL * (t + 1) for t in range(seq_len)) // seq_len
    flops = flops_per_token(cfg, seq_len)
    assert flops["attention_scores"] == causal_scores
    assert flops["total"] == linear + causal_scores
    full = flops_per_token(cfg, seq_len, causal=False)
    assert full["attention_scores"] == cfg.n_layers * 4 * D_MODEL * seq_len
    assert training_flops_per_token(cfg, seq_len) == 3 * flops["total"]
    for l, row in enumerate(flops["per_layer"]):
        assert row["mlp"] == 6 * D_MODEL * WIDTHS[l]
        assert row["total"] == row["mixer"] + row["mlp"]


def same_budget_pairs() -> list[tuple[list[int], list[int]]]:
    """Hand-written tapered / uniform width lists with the same sum (independent of interp.widths)."""
    return [([96, 64, 32], [64, 64, 64]), ([100, 64, 28], [64, 64, 64]), ([48, 96, 48], [64, 64, 64])]


@pytest.mark.parametrize("tapered,uniform", same_budget_pairs())
def test_tapered_and_uniform_share_params_and_flops(tapered, uniform):
    a, b = tiny_cfg(d_mlp=tapered), tiny_cfg(d_mlp=uniform)
    assert param_counts(a)["total"] == param_counts(b)["total"]
    assert flops_per_token(a, 12)["total"] == flops_per_token(b, 12)["total"]
    assert [r["mlp"] for r in param_counts(a)["per_layer"]] != [r["mlp"] for r in param_counts(b)["per_layer"]]


def test_schedule_widths_share_params_and_flops_with_uniform():
    schedules = pytest.importorskip("interp.widths")
    n_layers, d_ff = 6, 256
    base = dict(vocab_size=VOCAB, d_model=D_MODEL, n_layers=n_layers, n_heads=N_HEADS)
    uniform = ModelConfig(**base, d_mlp=[d_ff] * n_layers)
    variants = [schedules.taper_widths(n_layers, d_ff, schedule=s) for s in ("linear", "cosine", "sigmoid")]
    variants += [schedules.profile_widths(p, n_layers, d_ff) for p in ("wider-early", "wider-middle", "wider-late")]
    for widths in variants:
        cfg = ModelConfig(**base, d_mlp=widths)
        assert widths != uniform.d_mlp
        assert param_counts(cfg)["total"] == param_counts(uniform)["total"], widths
        assert flops_per_token(cfg, 256)["total"] == flops_per_token(uniform, 256)["total"], widths
        assert sum(p.numel() for p in TaperedLM(cfg).parameters()) == param_counts(uniform)["total"]


# --- init, config, registry --------------------------------------------------------------------

def test_init_scales_residual_writers():
    cfg = ModelConfig(vocab_size=VOCAB, d_model=64, n_layers=8, n_heads=2, d_mlp=[128] * 8)
    model = tiny_lm(cfg=cfg)  # seed 0
    out_std = cfg.init_std / math.sqrt(2 * cfg.n_layers)
    assert model.blocks[3].attn.o_proj.weight.std().item() == pytest.approx(out_std, rel=0.05)
    assert model.blocks[3].mlp.down_proj.weight.std().item() == pytest.approx(out_std, rel=0.05)
    assert model.blocks[3].mlp.up_proj.weight.std().item() == pytest.approx(cfg.init_std, rel=0.05)
    assert model.embed.weight.std().item() == pytest.approx(cfg.init_std, rel=0.05)
    assert all(torch.equal(n.weight, torch.ones(64)) for n in (model.ln_final, model.blocks[0].ln1))


def test_config_roundtrip_and_validation():
    cfg = tiny_cfg(mixer="gated_attention", tie_embeddings=True)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.d_head == D_MODEL // N_HEADS
    with pytest.raises(ValueError, match="unknown keys"):
        ModelConfig.from_dict({**cfg.to_dict(), "d_ff": 4})
    bad = [dict(d_mlp=[96, 64]), dict(d_mlp=[96, -1, 32]), dict(d_mlp=[96, 64.5, 32]), dict(mixer="mamba"),
           dict(n_heads=3), dict(d_model=30, n_heads=2), dict(vocab_size=0)]
    for overrides in bad:
        with pytest.raises(ValueError, match="ModelConfig"):
            tiny_cfg(**overrides).validate()


def test_custom_mixer_plugs_in_without_touching_blocks(tokens):
    """A stateful, non-attention mixer (a causal running mean) registers and runs through the same block."""

    class RunningMean(nn.Module):
        def __init__(self, cfg, layer):
            super().__init__()
            self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
            self.proj.residual_out = True

        def forward(self, x):
            steps = torch.arange(1, x.shape[1] + 1, dtype=x.dtype)[:, None]
            return self.proj(x.cumsum(dim=1) / steps)

        @classmethod
        def n_params(cls, cfg, layer):
            return cfg.d_model**2

        @classmethod
        def forward_flops(cls, cfg, layer, seq_len, causal=True):
            return MixerFlops(dense=2 * cfg.d_model**2, attention_scores=0)

    register_mixer("test_running_mean")(RunningMean)
    try:
        model = tiny_model(mixer="test_running_mean")
        assert model(tokens).shape == (*tokens.shape, VOCAB)
        assert param_counts(model.cfg)["total"] == sum(p.numel() for p in model.parameters())
        assert flops_per_token(model.cfg, 12)["attention_scores"] == 0
        with pytest.raises(ValueError, match="already registered"):
            register_mixer("test_running_mean")(RunningMean)
    finally:
        MIXERS.pop("test_running_mean")
    with pytest.raises(TypeError, match="n_params"):
        register_mixer("test_incomplete")(lambda cfg, layer: nn.Identity())
    assert "test_incomplete" not in MIXERS
