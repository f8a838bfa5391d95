"""Memory token mixers: Titans (neural long-term memory) and Hope-attention (attention + CMS).

These are the paper's two non-attention-only architectures, as registered mixers, so a TaperedLM
built with `mixer="titans"` or `"hope_attention"` keeps every block hook name (hook_attn_out is the
mixer output) and tapers only the block's SwiGLU MLP. Memory sizes and chunk lengths come from
`ModelConfig.mixer_options` (a dict; missing keys take the defaults below) and are never tapered.
Design choices and every guessed detail are written down in docs/mixers.md.

  titans          Memory-as-Gate (MAG): causal softmax attention whose per-head output is gated by
                  sigmoid(RMSNorm(M(x))), M = titans_pytorch.NeuralMemory (chunk-wise test-time
                  gradient updates with momentum and weight decay).
  titans_lmm      Memory only (Titans "LMM"): the NeuralMemory retrieval is the mixer output.
  hope_attention  Causal softmax attention followed by a Continuum Memory System: a chain of residual
                  MLPs whose weights are fast weights, updated in-forward every C_l tokens (a
                  different C_l per level) by a gradient step on an associative-memory loss.

All three are causal: a position's output never depends on later positions (tested).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint

from interp.model.mixers.attention import CausalSelfAttention, _linear
from interp.model.mixers.registry import MixerFlops, parse_mixer_options, register_mixer

if TYPE_CHECKING:
    from interp.model.config import ModelConfig

Options = TypeVar("Options")


def mixer_options(cfg: ModelConfig, options_cls: type[Options]) -> Options:
    """Read `cfg.mixer_options` (a dict, may be absent or empty) into the mixer's options dataclass, checked
    (interp.model.mixers.registry.parse_mixer_options): unknown keys and wrong types are errors, not ignored,
    so a typo never silently trains the default memory."""
    return parse_mixer_options(cfg, options_cls)


def _positive_int(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"ModelConfig.mixer_options[{field!r}] must be a positive int, got {value!r}")
    return value


# ---------------------------------------------------------------------------------------------
# Titans (Behrouz, Zhong, Mirrokni 2024, arXiv 2501.00663), via titans-pytorch's NeuralMemory.

@dataclass(frozen=True)
class TitansOptions:
    """Neural-memory shape; fixed by config (not tapered). Defaults follow titans-pytorch's NeuralMemory."""

    chunk_size: int = 16           # tokens per memory update (weights change once per chunk)
    heads: int | None = None       # memory heads; None = the model's n_heads
    depth: int = 2                 # layers of the memory MLP (titans-pytorch default)
    expansion: float = 4.0         # memory MLP hidden width / head dim (NeuralMemory default)
    momentum: bool = True          # Titans' past-surprise momentum term

    def validate(self, cfg: ModelConfig) -> None:
        _positive_int(self.chunk_size, "chunk_size")
        _positive_int(self.depth, "depth")
        heads = self.memory_heads(cfg)
        if cfg.d_model % heads:
            raise ValueError(f"ModelConfig.mixer_options['heads']={heads} must divide d_model={cfg.d_model}")
        if self.expansion <= 0 or int(cfg.d_model // heads * self.expansion) < 1:
            raise ValueError(f"ModelConfig.mixer_options['expansion'] must be > 0, got {self.expansion!r}")

    def memory_heads(self, cfg: ModelConfig) -> int:
        return cfg.n_heads if self.heads is None else _positive_int(self.heads, "heads")


def _build_memory(cfg: ModelConfig, opts: TitansOptions) -> nn.Module:
    """NeuralMemory over d_model; its template MemoryMLP is frozen (see _freeze_memory_template)."""
    try:  # heavy import (x-transformers, tensordict): only when a Titans mixer is built
        # tensordict calls .item() at import time, so the first import must not run under a caller's
        # `with torch.device("meta")` (checkpoint validation builds the model there): import on the CPU.
        with torch.device("cpu"):
            from titans_pytorch import NeuralMemory
    except ImportError as err:
        raise ImportError("the titans mixers need titans-pytorch: pip install titans-pytorch==0.5.5 "
                          "torch==<your torch version> (pin torch in the same command)") from err

    opts.validate(cfg)
    heads = opts.memory_heads(cfg)
    memory = NeuralMemory(dim=cfg.d_model, chunk_size=opts.chunk_size, heads=heads,
                          dim_head=cfg.d_model // heads, momentum=opts.momentum,
                          default_model_kwargs=dict(depth=opts.depth, expansion_factor=opts.expansion))
    _freeze_memory_template(memory)
    return memory


def _freeze_memory_template(memory: nn.Module) -> None:
    """Two fixes to a fresh NeuralMemory, neither of which changes its forward pass.

    1. It keeps a template `memory_model` whose own weights never enter the forward pass
       (functional_call swaps in `memory_model_parameters`). Left trainable they get no gradient,
       which breaks DDP (unused parameters); frozen, DDP skips them. They stay in the state dict
       and in numel.
    2. Its per-head initial memory weights are `einops.repeat` views (stride 0 over heads), so an
       in-place optimizer step (AdamW's weight decay) fails; they are materialised as real tensors.
    """
    for p in memory.memory_model.parameters():
        p.requires_grad_(False)
    params = memory.memory_model_parameters
    for i, p in enumerate(params):
        params[i] = nn.Parameter(p.detach().clone())


def _memory_mlp_params(d_in: int, hidden: int, depth: int) -> int:
    dims = (d_in, *([hidden] * (depth - 1)), d_in)
    return sum(a * b for a, b in itertools.pairwise(dims))


def _memory_n_params(cfg: ModelConfig, opts: TitansOptions) -> int:
    """numel of NeuralMemory(dim=d_model, heads, dim_head=d_model/heads) as _build_memory makes it."""
    d, heads = cfg.d_model, opts.memory_heads(cfg)
    d_head = d // heads
    mlp = _memory_mlp_params(d_head, int(d_head * opts.expansion), opts.depth) + d_head  # + ResidualNorm gamma
    n = 2 * d                           # retrieve_norm, store_norm
    n += 3 * d * d                      # to_queries, to_keys, to_values
    n += (1 + heads) * mlp              # frozen template + per-head learned initial memory weights
    n += (2 + opts.momentum) * (d * heads + heads)  # adaptive step, decay, (momentum) heads with bias
    if heads > 1:
        n += d * d + d * heads          # combine_heads, retrieve_gate
    return n


def _memory_flops(cfg: ModelConfig, opts: TitansOptions) -> int:
    """Forward matmul FLOPs per token of the memory: projections + retrieve (1x the memory MLP) +
    store (per-token gradient of the MLP: ~3x its forward). Scans and norms are elementwise."""
    d, heads = cfg.d_model, opts.memory_heads(cfg)
    d_head = d // heads
    mlp = heads * _memory_mlp_params(d_head, int(d_head * opts.expansion), opts.depth)
    proj = 3 * d * d + (2 + opts.momentum) * d * heads + (d * d + d * heads if heads > 1 else 0)
    return 2 * proj + 2 * mlp * (1 + 3)


@register_mixer("titans")
class TitansMAG(CausalSelfAttention):
    """Titans Memory-as-Gate: causal attention z gated by sigmoid(RMSNorm(NeuralMemory(x))) before o_proj.

    Both branches read the same normed block input x. The gate is per channel of each head, the
    position GatedAttention uses, so the two gated mixers differ only in where the gate comes from
    (a linear map of x there; the test-time-trained memory here). Hooks: the attention hooks
    (hook_q/k/v/z, hook_z = gated output), hook_mem (memory retrieval [batch pos d_model]) and
    hook_gate (sigmoid gate [batch pos n_heads d_head]).
    """

    options = TitansOptions

    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__(cfg, layer)
        opts = mixer_options(cfg, TitansOptions)
        self.memory = _build_memory(cfg, opts)
        self.gate_norm = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.hook_mem, self.hook_gate = HookPoint(), HookPoint()

    def gate_heads(self, x: Float[Tensor, "batch pos d_model"],
                   z: Float[Tensor, "batch pos n_heads d_head"]) -> Float[Tensor, "batch pos n_heads d_head"]:
        retrieved, _state = self.memory(x)  # fresh memory per sequence: no state carried across batches
        gate = torch.sigmoid(self.gate_norm(self.hook_mem(retrieved)))
        return z * self.hook_gate(gate.view_as(z))

    @classmethod
    def n_params(cls, cfg: ModelConfig, layer: int) -> int:
        opts = mixer_options(cfg, TitansOptions)
        return super().n_params(cfg, layer) + _memory_n_params(cfg, opts) + cfg.d_model

    @classmethod
    def forward_flops(cls, cfg: ModelConfig, layer: int, seq_len: int, causal: bool = True) -> MixerFlops:
        attn = super().forward_flops(cfg, layer, seq_len, causal)
        return attn._replace(dense=attn.dense + _memory_flops(cfg, mixer_options(cfg, TitansOptions)))


@register_mixer("titans_lmm")
class TitansLMM(nn.Module):
    """Titans memory as the whole token mixer (the "Titans (LMM)" rows of the Titans/Hope tables).

    Output = NeuralMemory(x); its combine_heads projection writes into the residual stream, so it is
    flagged residual_out. Hook: hook_mem (= the mixer output). Needs memory heads > 1 (else the
    memory has no output projection to scale at init).
    """

    options = TitansOptions

    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__()
        opts = mixer_options(cfg, TitansOptions)
        if opts.memory_heads(cfg) < 2:
            raise ValueError("titans_lmm needs ModelConfig.mixer_options['heads'] >= 2 (or n_heads >= 2)")
        self.memory = _build_memory(cfg, opts)
        self.memory.combine_heads.residual_out = True
        self.hook_mem = HookPoint()

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        retrieved, _state = self.memory(x)
        return self.hook_mem(retrieved)

    @classmethod
    def n_params(cls, cfg: ModelConfig, layer: int) -> int:
        return _memory_n_params(cfg, mixer_options(cfg, TitansOptions))

    @classmethod
    def forward_flops(cls, cfg: ModelConfig, layer: int, seq_len: int, causal: bool = True) -> MixerFlops:
        return MixerFlops(dense=_memory_flops(cfg, mixer_options(cfg, TitansOptions)), attention_scores=0)


# ---------------------------------------------------------------------------------------------
# Hope-attention (Behrouz et al., Nested Learning, arXiv 2512.24695): attention + CMS chain.

@dataclass(frozen=True)
class HopeOptions:
    """Continuum Memory System shape; fixed by config (not tapered). One level per chunk size."""

    chunk_sizes: tuple[int, ...] = (16, 64, 256)  # update period C_l of each level, fastest first
    hidden_ratio: float = 1.0      # each level's MLP hidden width / d_model
    lr_max: float = 0.1            # inner learning rate eta_t = lr_max * sigmoid(w . k_t + b); 1.0 diverged
    lr_bias_init: float = -2.0     # b at init: eta ~ 0.12 * lr_max, small first updates

    def validate(self, cfg: ModelConfig | None = None) -> None:
        if not self.chunk_sizes:
            raise ValueError("ModelConfig.mixer_options['chunk_sizes'] must list at least one chunk size")
        for c in self.chunk_sizes:
            _positive_int(c, "chunk_sizes")
        if self.hidden_ratio <= 0 or self.lr_max < 0:
            raise ValueError("ModelConfig.mixer_options: hidden_ratio must be > 0 and lr_max >= 0, got "
                             f"{self.hidden_ratio!r}, {self.lr_max!r}")

    def hidden(self, d_model: int) -> int:
        return max(1, round(d_model * self.hidden_ratio))


def _silu_grad(h: Tensor) -> Tensor:
    """d silu(h) / dh = s * (1 + h * (1 - s)), s = sigmoid(h); differentiable (outer loss backprops through it)."""
    s = torch.sigmoid(h)
    return s * (1 + h * (1 - s))


class CMSLevel(nn.Module):
    """One CMS level: u -> u + W2 silu(W1 k), k = RMSNorm(u), with (W1, W2) fast weights.

    The learned W1, W2 are the initial state at the start of every sequence. After each chunk of
    C tokens the level takes one gradient step on the associative loss
        mean_{t in chunk} eta_t * mean_d (W2 silu(W1 k_t) - v_t)^2,   v_t = W_v k_t,
    (a MEAN over the chunk's tokens: with a sum, the step grows with C and the fast weights diverged
    within ~8 training steps on real text at lr 2e-3),
    and the next chunk reads with the updated weights. Outputs of chunk j use only weights built from
    chunks < j, so the level is causal. The inner step is written in closed form (no autograd inside
    the loop) and stays differentiable, so the outer loss meta-learns W1, W2, W_v and the lr gate.

    A level with C >= n_ctx can never update inside a context: it is built `adaptive=False`, a plain
    residual MLP trained only by the outer optimizer (the pre-training frequency), without W_v or
    the lr gate (which would be parameters that never receive a gradient).
    Hook: hook_out = the level's update to its input [batch pos d_model].
    """

    def __init__(self, d_model: int, hidden: int, chunk_size: int, opts: HopeOptions, eps: float,
                 adaptive: bool = True):
        super().__init__()
        self.chunk_size, self.lr_max, self.adaptive = chunk_size, opts.lr_max, adaptive
        self.norm = nn.RMSNorm(d_model, eps=eps)
        self.up = _linear(d_model, hidden)                       # W1: fast weight, learned init
        self.down = _linear(hidden, d_model, residual_out=True)  # W2: fast weight, learned init
        if adaptive:
            self.value = _linear(d_model, d_model)               # W_v: targets of the inner loss
            self.lr = nn.Linear(d_model, 1)                      # data-dependent inner learning rate
            nn.init.constant_(self.lr.bias, opts.lr_bias_init)   # the model's init leaves biases alone
        self.hook_out = HookPoint()

    def forward(self, u: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        k = self.norm(u)
        if not self.adaptive:
            return u + self.hook_out(self.down(F.silu(self.up(k))))
        v = self.value(k)
        eta = self.lr_max * torch.sigmoid(self.lr(k))  # [batch pos 1]
        batch, d_model = u.shape[0], u.shape[-1]
        w1 = self.up.weight.expand(batch, -1, -1)      # [batch hidden d_model]
        w2 = self.down.weight.expand(batch, -1, -1)    # [batch d_model hidden]
        chunks = list(zip(k.split(self.chunk_size, 1), v.split(self.chunk_size, 1),
                          eta.split(self.chunk_size, 1)))
        outs = []
        for j, (kc, vc, ec) in enumerate(chunks):
            h = torch.einsum("bcd,bhd->bch", kc, w1)
            a = F.silu(h)
            out = torch.einsum("bch,bdh->bcd", a, w2)
            outs.append(out)
            if j == len(chunks) - 1:
                break  # the last chunk's update would only serve tokens beyond this sequence
            err = (out - vc) * (2.0 / (d_model * kc.shape[1])) * ec  # d loss / d out: lr-weighted chunk mean
            grad_w2 = torch.einsum("bcd,bch->bdh", err, a)
            grad_h = torch.einsum("bcd,bdh->bch", err, w2) * _silu_grad(h)
            grad_w1 = torch.einsum("bch,bcd->bhd", grad_h, kc)
            w1, w2 = w1 - grad_w1, w2 - grad_w2
        delta = torch.cat(outs, dim=1)
        if len(chunks) == 1 and torch.is_grad_enabled():
            # A sequence shorter than C: no update, so W_v and the lr gate get no gradient. DDP (without
            # find_unused_parameters) requires one, so they enter with weight 0: same values, zero grads.
            delta = delta + 0.0 * (v.sum() + eta.sum())
        return u + self.hook_out(delta)

    @staticmethod
    def n_params(d_model: int, hidden: int, adaptive: bool) -> int:
        return d_model + 2 * d_model * hidden + adaptive * (d_model * d_model + d_model + 1)

    @staticmethod
    def forward_flops(d_model: int, hidden: int, adaptive: bool) -> int:
        """Per token: read (2 matmuls); if adaptive also W_v, the lr gate and the inner step
        (err @ W2 and two outer products)."""
        read = 2 * 2 * d_model * hidden
        return read + adaptive * (2 * (d_model * d_model + d_model) + 2 * 3 * d_model * hidden)


def _cms_levels(cfg: ModelConfig, opts: HopeOptions) -> list[tuple[int, bool]]:
    """(chunk size, adaptive) per level: a level adapts in-context only if its chunk fits in n_ctx."""
    opts.validate(cfg)
    return [(c, c < cfg.n_ctx) for c in opts.chunk_sizes]


class ContinuumMemory(nn.Module):
    """CMS: y = MLP^(f_k)(... MLP^(f_1)(x)), level l updating its fast weights every chunk_sizes[l] tokens."""

    def __init__(self, cfg: ModelConfig, opts: HopeOptions):
        super().__init__()
        hidden = opts.hidden(cfg.d_model)
        self.levels = nn.ModuleList(CMSLevel(cfg.d_model, hidden, c, opts, cfg.norm_eps, adaptive)
                                    for c, adaptive in _cms_levels(cfg, opts))

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        for level in self.levels:
            x = level(x)
        return x


@register_mixer("hope_attention")
class HopeAttention(CausalSelfAttention):
    """Hope-attention token mixer: causal softmax attention, then the Continuum Memory System.

    mixer(x) = CMS(o_proj(attention(x))); the block's own SwiGLU MLP follows as usual (and is the
    only tapered part). Hooks: the attention hooks, hook_attn_only (attention output entering the
    CMS [batch pos d_model]) and cms.levels.{i}.hook_out (each level's update).
    """

    options = HopeOptions

    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__(cfg, layer)
        self.cms = ContinuumMemory(cfg, mixer_options(cfg, HopeOptions))
        self.hook_attn_only = HookPoint()

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        return self.cms(self.hook_attn_only(super().forward(x)))

    @classmethod
    def n_params(cls, cfg: ModelConfig, layer: int) -> int:
        opts = mixer_options(cfg, HopeOptions)
        hidden = opts.hidden(cfg.d_model)
        cms = sum(CMSLevel.n_params(cfg.d_model, hidden, adaptive) for _, adaptive in _cms_levels(cfg, opts))
        return super().n_params(cfg, layer) + cms

    @classmethod
    def forward_flops(cls, cfg: ModelConfig, layer: int, seq_len: int, causal: bool = True) -> MixerFlops:
        opts = mixer_options(cfg, HopeOptions)
        hidden = opts.hidden(cfg.d_model)
        attn = super().forward_flops(cfg, layer, seq_len, causal)
        cms = sum(CMSLevel.forward_flops(cfg.d_model, hidden, adaptive and c < seq_len)
                  for c, adaptive in _cms_levels(cfg, opts))
        return attn._replace(dense=attn.dense + cms)
