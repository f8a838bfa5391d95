"""The logit lens (nostalgebraist 2020), streamed: per layer l and token,

  p_l             = softmax(W_U final_norm(h_{l+1}) [+ b]),  h_{l+1} = blocks.l.hook_resid_post
  p_L             = the model's own output distribution (its logits, whatever follows the final norm)
  logit_lens_kl   = KL(p_L || p_l) in nats
  logit_lens_top1 = 1 if argmax p_l == argmax p_L else 0 (its mean is the share of tokens)

The final norm and the unembedding come from the adapter table (interp.hf.lens_modules: SiteMap.final_norm
and SiteMap.unembed). Why two forwards per batch: p_L exists only after the last layer, and keeping every
layer's h until then would cache activations. So a plain forward first (the reference, hooks gated off)
reduces p_L to what the lens needs per token: u = W_U^T p_L [d_model], sum_v p_L log p_L, p_L . b and
argmax p_L; then, in the hooked forward, each layer needs one unembedding z_l = W_U n_l + b of
n_l = final_norm(h_{l+1}) and

  KL(p_L || p_l) = sum_v p_L log p_L - u . n_l - p_L . b + logsumexp(z_l)     (exact: z_l is linear in n_l)

Vocab-sized tensors exist for one chunk of tokens of one layer at a time (LENS_CHUNK_ELEMENTS values),
besides the reference forward's own [batch, pos, vocab] logits (as in a bare forward). Float32 math cancels
terms of the size of the logits (logsumexp and u . n, tens of nats), so its rounding on the KL grows with them:
1.5e-4 nats on SmolLM2 and 1.4e-3 on Gemma-3 at worst (figures/engine_validation.csv, against a float64
reference); dtype="float64" removes it (4e-12 on SmolLM2's last layer).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.probes.model_kinds import _is_hooked_root

LENS_CHUNK_ELEMENTS = 1 << 24  # logits values per chunk (64 MiB in float32)


def _model_logits(root: nn.Module) -> Callable[[Tensor, Tensor | None], Tensor]:
    """ids, attention_mask -> the model's own logits [batch, pos, vocab] (a plain forward)."""
    if _is_hooked_root(root):  # our TaperedLM: logits by default, no attention mask (right padding only)
        return lambda ids, attn: root(ids)

    def forward(ids: Tensor, attn: Tensor | None) -> Tensor:
        out = root(input_ids=ids, **({"attention_mask": attn} if attn is not None else {}), use_cache=False)
        return out.logits if hasattr(out, "logits") else out[0]
    return forward


class LogitLens:
    """Per-batch reference (`reference`) then per-layer values (`values`), in the metric dtype."""

    def __init__(self, final_norm: nn.Module, unembed: nn.Module, logits: Callable[[Tensor, Tensor | None], Tensor],
                 dtype: torch.dtype = torch.float32, describe: str = "final_norm, unembed"):
        weight = getattr(unembed, "weight", None)
        if not isinstance(weight, Tensor) or weight.dim() != 2:
            raise ValueError(f"the logit lens needs a Linear unembedding (weight [vocab, d_model]); "
                             f"{describe} has {type(unembed).__name__}")
        if any(p.dtype != dtype for p in final_norm.parameters()):  # e.g. LayerNorm refuses a float64 input
            final_norm = copy.deepcopy(final_norm).to(dtype)           # with float32 weights: a d_model copy
        self.norm = final_norm
        self.weight = weight.detach().to(dtype)                       # [vocab, d_model]
        bias = getattr(unembed, "bias", None)
        self.bias = bias.detach().to(dtype) if isinstance(bias, Tensor) else None
        self.logits = logits
        self.dtype = dtype
        self.describe = describe
        self.chunk = max(1, LENS_CHUNK_ELEMENTS // self.weight.shape[0])
        self._ref: dict[str, Tensor] | None = None

    @classmethod
    def for_model(cls, model: Any, dtype: torch.dtype = torch.float32) -> LogitLens:
        """The lens of any model object the probes accept (LoadedModel, HF model, TaperedLM, bridge)."""
        from interp import hf

        root, sites = hf.root_and_sites(model)
        norm, unembed = hf.lens_modules(model)
        return cls(norm, unembed, _model_logits(root), dtype,
                   describe=f"p_l = softmax({sites.unembed}({sites.final_norm}(h)))")

    # -- per batch ------------------------------------------------------------------------------
    def reference(self, ids: Int[Tensor, "batch pos"], attn: Tensor | None = None) -> None:
        """Run the model once and keep, per token, what the KL and top-1 need of p_L (no vocab-sized state)."""
        with torch.no_grad():
            logits = self.logits(ids, attn).detach()
            b, p, vocab = logits.shape
            if vocab != self.weight.shape[0]:
                raise ValueError(f"the model's logits have vocab {vocab} but its unembedding "
                                 f"{self.weight.shape[0]}: the SiteMap's unembed does not produce the logits")
            flat = logits.reshape(b * p, vocab)
            parts: dict[str, list[Tensor]] = {"u": [], "neg_entropy": [], "top": [], "pb": []}
            for chunk in flat.split(self.chunk):
                logp = torch.log_softmax(chunk.to(self.dtype), -1)
                prob = logp.exp()
                parts["neg_entropy"].append(torch.where(prob > 0, prob * logp, torch.zeros_like(prob)).sum(-1))
                parts["u"].append(prob @ self.weight)
                parts["top"].append(chunk.argmax(-1))
                if self.bias is not None:
                    parts["pb"].append(prob @ self.bias)
            del logits, flat
        self._ref = {k: torch.cat(v) for k, v in parts.items() if v}
        self._shape = (b, p)

    def clear(self) -> None:
        self._ref = None

    def values(self, h: Float[Tensor, "batch pos d_model"]) -> tuple[Float[Tensor, "batch pos"], Float[Tensor, "batch pos"]]:
        """(KL(p_L || p_l), [argmax p_l == argmax p_L]) per token for one layer's resid_post."""
        if self._ref is None or tuple(h.shape[:2]) != self._shape:
            raise RuntimeError("LogitLens.values before its reference for this batch: the backend must call "
                               "acc.prepare(ids, attention_mask) before the hooked forward")
        flat = h.reshape(-1, h.shape[-1])
        kl, top1 = [], []
        with torch.no_grad():
            for start in range(0, flat.shape[0], self.chunk):
                sl = slice(start, start + self.chunk)
                n = self.norm(flat[sl]).to(self.dtype)
                z = n @ self.weight.T
                if self.bias is not None:
                    z = z + self.bias
                lse = torch.logsumexp(z, -1)
                cross = (self._ref["u"][sl] * n).sum(-1) + (self._ref["pb"][sl] if self.bias is not None else 0.0)
                kl.append(self._ref["neg_entropy"][sl] - cross + lse)
                top1.append((z.argmax(-1) == self._ref["top"][sl]).to(self.dtype))
        shape = h.shape[:2]
        return torch.cat(kl).reshape(shape), torch.cat(top1).reshape(shape)
