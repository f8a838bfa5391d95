"""The tapered decoder: an LM whose MLP width d_mlp[l] is set per layer, in one of two block styles.

ModelConfig.arch picks the block (interp.model.blocks): "llama" = Transformer++ as in the paper (pre-norm
RMSNorm, RoPE, SwiGLU MLP with gate_proj, up_proj, down_proj; no biases; untied embeddings by default; the
token mixer comes from the interp.model.mixers registry, so attention variants and recurrent/memory mixers
share the block code), or "gpt2" = GPT-2 (pre-LayerNorm with biases, learned absolute positions added to
the embeddings (hook_pos_embed), GELU MLP up_proj -> down_proj with biases, biased attention, tied
embeddings by default). The hook names below are the same in both; in gpt2 mlp.hook_pre is up_proj's
output and there is no hook_pre_linear.

Built from TransformerLens HookPoints on a HookedRootModule, so `run_with_cache` /
`run_with_hooks` use the names researchers know, and nnsight.NNsight wraps it unchanged:
  hook_embed (gpt2: + hook_pos_embed, the learned position vectors; their sum is blocks.0.hook_resid_pre)
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
gpt2 also: the position embedding ~ normal(0, init_std), every bias and LayerNorm bias = 0 (as Hugging Face
GPT-2 initialises).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn
from transformer_lens import HookedRootModule
from transformer_lens.hook_points import HookPoint

ReturnType = Literal["logits", "loss", "both"]
_RETURN_TYPES = ("logits", "loss", "both")


from interp.model.blocks import BLOCK_STYLES, Block
from interp.model.config import ModelConfig
from interp.model.loss import next_token_loss


class TaperedLM(HookedRootModule):
    """Decoder-only LM with per-layer MLP widths, hookable by TransformerLens names (see module doc)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        style = BLOCK_STYLES[cfg.arch]
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.hook_embed = HookPoint()
        self.pos_embed = nn.Embedding(cfg.n_ctx, cfg.d_model) if style.learned_positions else None
        if style.learned_positions:
            self.hook_pos_embed = HookPoint()
        self.blocks = nn.ModuleList(Block(cfg, layer) for layer in range(cfg.n_layers))
        self.ln_final = style.norm(cfg.d_model, cfg.norm_eps)
        self.unembed = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self._init_weights()
        if cfg.tie_embeddings:
            self.unembed.weight = self.embed.weight
        self.setup()

    @torch.no_grad()
    def _init_weights(self) -> None:
        """normal(0, init_std); residual-stream writers (`residual_out`) scaled by 1/sqrt(2 * n_layers); gpt2:
        biases 0. (A llama block has no biases; memory mixers keep their own bias init, as before arch existed.)"""
        out_std = self.cfg.init_std / math.sqrt(2 * self.cfg.n_layers)
        zero_biases = self.cfg.arch == "gpt2"
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                std = out_std if getattr(module, "residual_out", False) else self.cfg.init_std
                nn.init.normal_(module.weight, mean=0.0, std=std)
                if zero_biases and getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)

    def forward(self, tokens: Int[Tensor, "batch pos"], return_type: ReturnType = "logits"
                ) -> Float[Tensor, "batch pos d_vocab"] | Float[Tensor, ""] | tuple[Tensor, Tensor]:
        """Logits, mean next-token cross-entropy (logits[:, :-1] vs tokens[:, 1:]), or both as (logits, loss)."""
        if return_type not in _RETURN_TYPES:
            raise ValueError(f"TaperedLM.forward: return_type={return_type!r}, expected one of {_RETURN_TYPES}")
        if tokens.ndim != 2 or tokens.shape[1] > self.cfg.n_ctx:
            raise ValueError(f"TaperedLM.forward: tokens must be [batch, pos] with pos <= n_ctx={self.cfg.n_ctx}, "
                             f"got shape {tuple(tokens.shape)}; raise ModelConfig.n_ctx or shorten the input")
        x = self.hook_embed(self.embed(tokens))
        if self.pos_embed is not None:  # gpt2: learned absolute positions, [batch pos d_model] as in TransformerLens
            positions = torch.arange(tokens.shape[1], device=tokens.device)
            x = x + self.hook_pos_embed(self.pos_embed(positions).expand(tokens.shape[0], -1, -1))
        for block in self.blocks:
            x = block(x)
        logits = self.unembed(self.ln_final(x))
        if return_type == "logits":
            return logits
        loss = next_token_loss(logits, tokens)
        return loss if return_type == "loss" else (logits, loss)
