"""Running the model: logits under optional autocast, per-sequence losses, paired deltas with t-CIs."""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp._util.devices import model_device
from interp.hf import unwrap
from interp.model import next_token_loss
from interp.stats import t_quantile


@functools.cache
def _takes_use_cache(cls: type) -> bool:
    """Whether a model class's forward has a `use_cache` parameter (Hugging Face causal LMs; our TaperedLM has not)."""
    try:
        return "use_cache" in inspect.signature(cls.forward).parameters
    except (TypeError, ValueError):
        return False


def forward_logits(root: nn.Module, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos vocab"]:
    """The logits of one forward. A Hugging Face model runs with use_cache=False: a single forward needs no key/value
    cache (the logits are the same; it saves the copies), and a cache shared by the layers would make a layer that
    is run again from its recorded inputs (interp.ablations.layers' resumed passes) attend to keys of another
    pass."""
    out = root(tokens, use_cache=False) if _takes_use_cache(type(root)) else root(tokens)
    return out.logits if hasattr(out, "logits") else out


_forward_logits = forward_logits   # the name interp.ablations.scores imports


def token_losses(root: nn.Module, tokens: Int[Tensor, "batch pos"],
                 autocast_dtype: torch.dtype | None = None) -> Float[Tensor, " batch"]:
    """Mean next-token cross-entropy (nats) of each sequence of one batch, float64 (float32 logits, or float64 for a
    float64 model), on the batch's device; the graph is kept where grad is enabled (attribution needs it)."""
    with _autocast(autocast_dtype, tokens.device):
        logits = forward_logits(root, tokens)
    ce = next_token_loss(logits, tokens, reduction="none", fp32=True)  # [batch, pos - 1]
    return ce.double().mean(1)


def _autocast(dtype: torch.dtype | None, device: torch.device):
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


@torch.no_grad()
def sequence_losses(model: Any, batches: Iterable[Int[Tensor, "batch pos"]],
                    autocast_dtype: torch.dtype | None = None,
                    each: Callable[[int], None] | None = None) -> Float[Tensor, " n_seq"]:
    """Mean next-token cross-entropy (nats) of each sequence, float64, in batch order.

    Logits are cast to float32 before the softmax, so bf16 autocast only affects the network itself.
    each: called with the batch's index after each batch (progress).
    """
    root = unwrap(model)
    device = model_device(root)
    out = []
    for i, tokens in enumerate(batches):
        out.append(token_losses(root, tokens.to(device), autocast_dtype).cpu())
        if each is not None:
            each(i)
    if not out:
        raise ValueError("sequence_losses: `batches` was empty")
    return torch.cat(out)


def paired_delta(losses: Float[Tensor, " n_seq"], baseline: Float[Tensor, " n_seq"],
                 confidence: float = 0.95) -> tuple[float, float, float]:
    """(mean, ci_low, ci_high) of the per-sequence differences losses - baseline (paired: same sequences).
    With one sequence the CI is (nan, nan)."""
    if losses.shape != baseline.shape:
        raise ValueError(f"paired_delta: {tuple(losses.shape)} vs {tuple(baseline.shape)}: the two loss vectors "
                         f"must come from the same sequences")
    diff = (losses.double() - baseline.double())
    mean = float(diff.mean())
    n = diff.numel()
    if n < 2:
        return mean, math.nan, math.nan
    half = t_quantile((1 + confidence) / 2, n - 1) * float(diff.std(correction=1)) / math.sqrt(n)
    return mean, mean - half, mean + half
