"""The two block styles of a TaperedLM (ModelConfig.arch) and their parts; the width d_mlp[l] is per layer in both.

  llama (Transformer++, the paper's)        gpt2 (GPT-2)
  RMSNorm (gain)                            LayerNorm (gain + bias)
  attention mixer from MIXERS, RoPE,        GPT2Attention: causal softmax attention, no RoPE, biases on
    no biases                                 q, k, v, o (the model adds learned absolute positions)
  SwiGLU: down(silu(gate(x)) * up(x))       GeluMLP: down(gelu_tanh(up(x))), biases on up and down
    3 * d_model * w parameters                2 * d_model * w + w + d_model parameters
  untied embeddings                         tied embeddings, final LayerNorm

A width of 0 is a layer without an MLP (Ikeda et al.'s layouts, modded-nanogpt's missing first MLP): its
projections have no rows and (gpt2 style) the down projection no bias, so hook_mlp_out is zeros; ln2 stays (d_model
gain parameters, or gain and bias, that get no gradient there: the count includes them, as it is numel). The probes mark
the MLP metrics of such a layer NaN (interp.probes.table.mask_absent_mlps); the parameter count stays exact.

Both keep the TransformerLens hook names (blocks.{l}.hook_resid_pre, hook_attn_out, hook_resid_mid,
hook_mlp_out, hook_resid_post, mlp.hook_pre / hook_post, ln1/ln2.hook_normalized, attn.hook_q/k/v/z) and the
Hugging Face Llama projection names (q_proj ... o_proj, up_proj, down_proj, nn.Linear [out, in]), so every
probe, ablation and weight surgery reads a GPT-2-style model as it reads a Transformer++ one.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint

from interp.model.config import ModelConfig
from interp.model.mixers import MIXERS
from interp.model.mixers.attention import CausalSelfAttention


class RMSNorm(nn.Module):
    """RMSNorm with a learned gain; hook_normalized is x / rms(x) before the gain (TransformerLens convention)."""

    def __init__(self, d_model: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.hook_normalized = HookPoint()

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        return self.hook_normalized(F.rms_norm(x, (x.shape[-1],), eps=self.eps)) * self.weight

    @staticmethod
    def n_params(d_model: int) -> int:
        return d_model


class LayerNorm(nn.Module):
    """LayerNorm with gain and bias (GPT-2); hook_normalized is (x - mean) / std before them (TransformerLens)."""

    def __init__(self, d_model: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        self.hook_normalized = HookPoint()

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        return self.hook_normalized(F.layer_norm(x, (x.shape[-1],), eps=self.eps)) * self.weight + self.bias

    @staticmethod
    def n_params(d_model: int) -> int:
        return 2 * d_model


class SwiGLU(nn.Module):
    """down_proj(silu(gate_proj(x)) * up_proj(x)); d_mlp is this layer's own width."""

    def __init__(self, d_model: int, d_mlp: int):
        super().__init__()
        self.gate_proj = nn.Linear(d_model, d_mlp, bias=False)
        self.up_proj = nn.Linear(d_model, d_mlp, bias=False)
        self.down_proj = nn.Linear(d_mlp, d_model, bias=False)
        self.down_proj.residual_out = True
        self.hook_pre, self.hook_pre_linear, self.hook_post = HookPoint(), HookPoint(), HookPoint()

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        pre = self.hook_pre(self.gate_proj(x))  # [batch pos d_mlp]
        post = self.hook_post(F.silu(pre) * self.hook_pre_linear(self.up_proj(x)))  # [batch pos d_mlp]
        return self.down_proj(post)

    @staticmethod
    def n_params(d_model: int, d_mlp: int) -> int:
        return 3 * d_model * d_mlp

    @staticmethod
    def matmul_params(d_model: int, d_mlp: int) -> int:
        """Weights that multiply (forward FLOPs = 2 x this): all of them."""
        return 3 * d_model * d_mlp


class GeluMLP(nn.Module):
    """down_proj(gelu_tanh(up_proj(x))) with biases (GPT-2's MLP: c_fc, gelu_new, c_proj); d_mlp per layer.

    hook_pre = up_proj(x) (the pre-activation), hook_post = the activation: TransformerLens's GPT-2 names."""

    def __init__(self, d_model: int, d_mlp: int):
        super().__init__()
        self.up_proj = nn.Linear(d_model, d_mlp)
        self.down_proj = nn.Linear(d_mlp, d_model, bias=d_mlp > 0)   # width 0: no MLP, so no output bias either
        self.down_proj.residual_out = True
        self.hook_pre, self.hook_post = HookPoint(), HookPoint()

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        pre = self.hook_pre(self.up_proj(x))  # [batch pos d_mlp]
        return self.down_proj(self.hook_post(F.gelu(pre, approximate="tanh")))

    @staticmethod
    def n_params(d_model: int, d_mlp: int) -> int:
        return 2 * d_model * d_mlp + d_mlp + (d_model if d_mlp else 0)

    @staticmethod
    def matmul_params(d_model: int, d_mlp: int) -> int:
        """Weights that multiply (forward FLOPs = 2 x this): the biases are adds, not counted."""
        return 2 * d_model * d_mlp


class GPT2Attention(CausalSelfAttention):
    """GPT-2's attention: causal softmax, scale 1/sqrt(d_head), biases on q, k, v, o, no RoPE (positions are
    learned and added to the embeddings). Not a registered mixer: the gpt2 block style always uses it."""

    bias = True
    rope = False


@dataclass(frozen=True)
class BlockStyle:
    """What a block style builds: its norm, its MLP, its attention (None: the mixer MIXERS[cfg.mixer]) and
    whether the model adds learned absolute positions to the token embeddings."""

    norm: type[RMSNorm | LayerNorm]
    mlp: type[SwiGLU | GeluMLP]
    attention: type[CausalSelfAttention] | None
    learned_positions: bool

    def mixer(self, cfg: ModelConfig):
        """The mixer factory a block of `cfg` calls as factory(cfg, layer); with n_params / forward_flops."""
        return self.attention or MIXERS[cfg.mixer]


BLOCK_STYLES: dict[str, BlockStyle] = {  # keys = interp.model.arch.ARCHS (tested)
    "llama": BlockStyle(norm=RMSNorm, mlp=SwiGLU, attention=None, learned_positions=False),
    "gpt2": BlockStyle(norm=LayerNorm, mlp=GeluMLP, attention=GPT2Attention, learned_positions=True),
}


class Block(nn.Module):
    """x -> x + mixer(ln1(x)) -> + mlp(ln2(x)); norm, mixer and MLP are those of the block style cfg.arch."""

    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__()
        style = BLOCK_STYLES[cfg.arch]
        self.ln1 = style.norm(cfg.d_model, cfg.norm_eps)
        self.attn = style.mixer(cfg)(cfg, layer)
        self.ln2 = style.norm(cfg.d_model, cfg.norm_eps)
        with warnings.catch_warnings():   # d_mlp 0 (a layer without an MLP): torch warns that a zero-element
            warnings.filterwarnings("ignore", message="Initializing zero-element tensors")   # init is a no-op
            self.mlp = style.mlp(cfg.d_model, cfg.d_mlp[layer])
        self.hook_resid_pre, self.hook_attn_out, self.hook_resid_mid = HookPoint(), HookPoint(), HookPoint()
        self.hook_mlp_out, self.hook_resid_post = HookPoint(), HookPoint()

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        resid_pre = self.hook_resid_pre(x)
        attn_out = self.hook_attn_out(self.attn(self.ln1(resid_pre)))
        resid_mid = self.hook_resid_mid(resid_pre + attn_out)
        mlp_out = self.hook_mlp_out(self.mlp(self.ln2(resid_mid)))
        return self.hook_resid_post(resid_mid + mlp_out)
