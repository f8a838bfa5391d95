"""Attention token mixers: causal self-attention with RoPE (Transformer++), and gated attention.

The registry contract is in interp.model.mixers.registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint

from interp.model.mixers.registry import MixerFlops, register_mixer

if TYPE_CHECKING:
    from interp.model.config import ModelConfig

def attended_keys(seq_len: int, causal: bool) -> float:
    """Keys one query attends to, averaged over positions: (T+1)/2 under a causal mask, T without.

    Causal average = the work a causal kernel (FlashAttention, SDPA is_causal) actually does;
    `causal=False` gives the PaLM/Chinchilla convention (every query sees all T keys).
    """
    return (seq_len + 1) / 2 if causal else float(seq_len)


class Rotary(nn.Module):
    """Rotary position embedding, rotate-half layout (GPT-NeoX / HF Llama), applied to q and k.

    cos/sin tables for n_ctx positions are non-persistent buffers: they follow .to(device) but are
    not saved in checkpoints (they are a pure function of the config).
    """

    def __init__(self, d_head: int, n_ctx: int, theta: float):
        super().__init__()
        inv_freq = 1.0 / theta ** (torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)
        angles = torch.outer(torch.arange(n_ctx, dtype=torch.float64), inv_freq)  # [n_ctx, d_head/2]
        angles = torch.cat([angles, angles], dim=-1)[:, None, :]  # [n_ctx, 1 (heads), d_head]
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def forward(self, x: Float[Tensor, "batch pos n_heads d_head"]) -> Float[Tensor, "batch pos n_heads d_head"]:
        n_pos = x.shape[1]
        cos, sin = self.cos[:n_pos].to(x.dtype), self.sin[:n_pos].to(x.dtype)
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def _linear(d_in: int, d_out: int, residual_out: bool = False, bias: bool = False) -> nn.Linear:
    """Linear layer, bias-free unless asked; `residual_out` marks projections that write into the residual stream."""
    layer = nn.Linear(d_in, d_out, bias=bias)
    layer.residual_out = residual_out
    return layer


@register_mixer("attention")
class CausalSelfAttention(nn.Module):
    """Multi-head causal softmax attention with RoPE on q/k (Transformer++), via fused SDPA.

    Hooks (TransformerLens layout [batch pos n_heads d_head]): hook_q, hook_k (before RoPE, as in
    TransformerLens), hook_v, hook_z (what enters o_proj, per head). There is no hook_pattern: the
    fused kernel never materialises the attention pattern; recompute it from hook_q/hook_k if needed.
    Subclasses change what happens to the per-head output through `gate_heads` only, and may turn on
    biases and turn off RoPE (`bias`, `rope`: the GPT-2 block's attention, interp.model.blocks).
    """

    options: type | None = None  # no settings: ModelConfig.mixer_options must be empty (registry contract)
    bias: bool = False  # biases on q, k, v and o
    rope: bool = True   # rotary positions on q and k (False: the model adds learned positions to its input)

    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__()
        self.n_heads, self.d_head = cfg.n_heads, cfg.d_head
        d_attn = cfg.n_heads * cfg.d_head
        self.q_proj = _linear(cfg.d_model, d_attn, bias=self.bias)
        self.k_proj = _linear(cfg.d_model, d_attn, bias=self.bias)
        self.v_proj = _linear(cfg.d_model, d_attn, bias=self.bias)
        self.o_proj = _linear(d_attn, cfg.d_model, residual_out=True, bias=self.bias)
        self.rotary = Rotary(cfg.d_head, cfg.n_ctx, cfg.rope_theta) if self.rope else nn.Identity()
        self.hook_q, self.hook_k, self.hook_v, self.hook_z = HookPoint(), HookPoint(), HookPoint(), HookPoint()

    def _heads(self, proj: nn.Linear, x: Tensor) -> Float[Tensor, "batch pos n_heads d_head"]:
        return proj(x).view(*x.shape[:-1], self.n_heads, self.d_head)

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        q = self.rotary(self.hook_q(self._heads(self.q_proj, x)))
        k = self.rotary(self.hook_k(self._heads(self.k_proj, x)))
        v = self.hook_v(self._heads(self.v_proj, x))
        # SDPA wants [batch heads pos d_head]; transposing back gives the TransformerLens layout.
        z = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True).transpose(1, 2)
        z = self.hook_z(self.gate_heads(x, z))
        return self.o_proj(z.reshape(*x.shape[:-1], self.n_heads * self.d_head))

    def gate_heads(self, x: Float[Tensor, "batch pos d_model"],
                   z: Float[Tensor, "batch pos n_heads d_head"]) -> Float[Tensor, "batch pos n_heads d_head"]:
        """Hook for subclasses to modulate each head's output; plain attention leaves it alone."""
        return z

    @classmethod
    def n_params(cls, cfg: ModelConfig, layer: int) -> int:
        d_attn = cfg.n_heads * cfg.d_head
        return 4 * cfg.d_model * d_attn + (3 * d_attn + cfg.d_model if cls.bias else 0)

    @classmethod
    def forward_flops(cls, cfg: ModelConfig, layer: int, seq_len: int, causal: bool = True) -> MixerFlops:
        d_attn = cfg.n_heads * cfg.d_head
        # QK^T and pattern @ V: 2 matmuls x 2 FLOPs x d_attn per attended key. 2*2*(T+1)/2 is an integer.
        scores = round(2 * 2 * d_attn * attended_keys(seq_len, causal))
        # q, k, v, o (and a subclass's gate) are matmuls; biases are elementwise adds: not counted
        matmul = cls.n_params(cfg, layer) - (3 * d_attn + cfg.d_model if cls.bias else 0)
        return MixerFlops(dense=2 * matmul, attention_scores=scores)


@register_mixer("gated_attention")
class GatedAttention(CausalSelfAttention):
    """Attention with a query-dependent sigmoid output gate per head (Qiu et al. 2025, position G1).

    z_h <- z_h * sigmoid(x @ W_gate)_h, right after SDPA and before o_proj, where x is the mixer input
    (the pre-normed block input). This is the paper's best variant: elementwise (one gate per channel
    of each head, W_gate: d_model -> n_heads * d_head), multiplicative, sigmoid, no bias; it is the
    gate used in Qwen3-Next. `gated_attention_headwise` registers the cheaper one-scalar-per-head
    variant the paper also reports. hook_gate holds the sigmoid gate values; hook_z is the gated output.
    """

    gate_per_head: int | None = None  # gates per head: None = d_head (elementwise), 1 = headwise

    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__(cfg, layer)
        self.gates_per_head = self._gates_per_head(cfg)
        self.head_gate = _linear(cfg.d_model, cfg.n_heads * self.gates_per_head)
        self.hook_gate = HookPoint()

    @classmethod
    def _gates_per_head(cls, cfg: ModelConfig) -> int:
        return cls.gate_per_head or cfg.d_head

    def gate_heads(self, x: Float[Tensor, "batch pos d_model"],
                   z: Float[Tensor, "batch pos n_heads d_head"]) -> Float[Tensor, "batch pos n_heads d_head"]:
        gate = torch.sigmoid(self.head_gate(x).view(*x.shape[:-1], self.n_heads, self.gates_per_head))
        return z * self.hook_gate(gate)  # gate broadcasts over d_head when headwise

    @classmethod
    def n_params(cls, cfg: ModelConfig, layer: int) -> int:
        return super().n_params(cfg, layer) + cfg.d_model * cfg.n_heads * cls._gates_per_head(cfg)


@register_mixer("gated_attention_headwise")
class HeadwiseGatedAttention(GatedAttention):
    """Gated attention with one sigmoid gate per head (W_gate: d_model -> n_heads); hook_gate is [.., n_heads, 1]."""

    gate_per_head = 1

