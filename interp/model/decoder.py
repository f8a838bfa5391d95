"""The tapered decoder: a Transformer++ LM whose SwiGLU width d_mlp[l] is set per layer.

Transformer++ form (as in the paper): pre-norm RMSNorm, RoPE, SwiGLU MLP (gate_proj, up_proj,
down_proj; silu), no biases, untied embeddings by default. The token mixer comes from the
interp.model.mixers registry, so attention variants and recurrent/memory mixers share the block code.

Built from TransformerLens HookPoints on a HookedRootModule, so `run_with_cache` /
`run_with_hooks` use the names researchers know, and nnsight.NNsight wraps it unchanged:
  hook_embed
  blocks.{l}.hook_resid_pre  -> ln1 -> attn (mixer) -> blocks.{l}.hook_attn_out
  blocks.{l}.hook_resid_mid  =  resid_pre + attn_out            (exactly)
  ln2 -> mlp: mlp.hook_pre (gate pre-activation), mlp.hook_pre_linear (up), mlp.hook_post
        (silu(gate) * up, width d_mlp[l]) -> down_proj -> blocks.{l}.hook_mlp_out
  blocks.{l}.hook_resid_post =  resid_mid + mlp_out             (exactly)
  ln_final.hook_normalized (x / rms(x), before the gain, as in TransformerLens); also ln1/ln2.
  attention internals: blocks.{l}.attn.hook_q/k (pre-RoPE), hook_v, hook_z [batch pos head d_head].
An unhooked HookPoint is an identity nn.Module: a few microseconds of Python per call, no tensor work.

MLP weights are nn.Linear `gate_proj` / `up_proj` / `down_proj` (HF Llama names, weight shape
[out, in]), so weight surgery and pretrained site maps read the same on our model and on Llama.

Init (GPT-2 / nanoGPT): every Linear and the embedding ~ normal(0, init_std); projections that write
into the residual stream (attn o_proj, mlp down_proj, any mixer Linear flagged `residual_out`) use
init_std / sqrt(2 * n_layers), so the residual variance at init does not grow with depth. Norm gains = 1.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor, nn
from transformer_lens import HookedRootModule
from transformer_lens.hook_points import HookPoint

ReturnType = Literal["logits", "loss", "both"]
_RETURN_TYPES = ("logits", "loss", "both")


from interp.model.config import ModelConfig
from interp.model.loss import next_token_loss
from interp.model.mixers import MIXERS


class RMSNorm(nn.Module):
    """RMSNorm with a learned gain; hook_normalized is x / rms(x) before the gain (TransformerLens convention)."""

    def __init__(self, d_model: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.hook_normalized = HookPoint()

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        return self.hook_normalized(F.rms_norm(x, (x.shape[-1],), eps=self.eps)) * self.weight


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


class Block(nn.Module):
    """x -> x + mixer(ln1(x)) -> + mlp(ln2(x)); the mixer is whatever MIXERS[cfg.mixer] builds."""

    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__()
        self.ln1 = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = MIXERS[cfg.mixer](cfg, layer)
        self.ln2 = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = SwiGLU(cfg.d_model, cfg.d_mlp[layer])
        self.hook_resid_pre, self.hook_attn_out, self.hook_resid_mid = HookPoint(), HookPoint(), HookPoint()
        self.hook_mlp_out, self.hook_resid_post = HookPoint(), HookPoint()

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        resid_pre = self.hook_resid_pre(x)
        attn_out = self.hook_attn_out(self.attn(self.ln1(resid_pre)))
        resid_mid = self.hook_resid_mid(resid_pre + attn_out)
        mlp_out = self.hook_mlp_out(self.mlp(self.ln2(resid_mid)))
        return self.hook_resid_post(resid_mid + mlp_out)


class TaperedLM(HookedRootModule):
    """Decoder-only LM with per-layer MLP widths, hookable by TransformerLens names (see module doc)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.hook_embed = HookPoint()
        self.blocks = nn.ModuleList(Block(cfg, layer) for layer in range(cfg.n_layers))
        self.ln_final = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.unembed = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self._init_weights()
        if cfg.tie_embeddings:
            self.unembed.weight = self.embed.weight
        self.setup()

    @torch.no_grad()
    def _init_weights(self) -> None:
        """normal(0, init_std); residual-stream writers (`residual_out`) scaled by 1/sqrt(2 * n_layers)."""
        out_std = self.cfg.init_std / math.sqrt(2 * self.cfg.n_layers)
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                std = out_std if getattr(module, "residual_out", False) else self.cfg.init_std
                nn.init.normal_(module.weight, mean=0.0, std=std)

    def forward(self, tokens: Int[Tensor, "batch pos"], return_type: ReturnType = "logits"
                ) -> Float[Tensor, "batch pos d_vocab"] | Float[Tensor, ""] | tuple[Tensor, Tensor]:
        """Logits, mean next-token cross-entropy (logits[:, :-1] vs tokens[:, 1:]), or both as (logits, loss)."""
        if return_type not in _RETURN_TYPES:
            raise ValueError(f"TaperedLM.forward: return_type={return_type!r}, expected one of {_RETURN_TYPES}")
        if tokens.ndim != 2 or tokens.shape[1] > self.cfg.n_ctx:
            raise ValueError(f"TaperedLM.forward: tokens must be [batch, pos] with pos <= n_ctx={self.cfg.n_ctx}, "
                             f"got shape {tuple(tokens.shape)}; raise ModelConfig.n_ctx or shorten the input")
        x = self.hook_embed(self.embed(tokens))
        for block in self.blocks:
            x = block(x)
        logits = self.unembed(self.ln_final(x))
        if return_type == "logits":
            return logits
        loss = next_token_loss(logits, tokens)
        return loss if return_type == "loss" else (logits, loss)
