"""Next-token cross-entropy: the one place the shift (the logits at position t score token t + 1) is written.

The decoder's loss, the trainer's step and evaluation, and the ablations' per-sequence losses all call it."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor

Reduction = Literal["mean", "sum", "none"]
_REDUCTIONS = ("mean", "sum", "none")


def next_token_loss(logits: Float[Tensor, "batch pos d_vocab"], tokens: Int[Tensor, "batch n"],
                    reduction: Reduction = "mean", fp32: bool = False) -> Tensor:
    """Cross-entropy (nats) of logits[:, t] against tokens[:, t + 1].

    `tokens` is either what the model read (n = pos: the last position has no target; it gets target -100,
    ignored, instead of slicing the logits, so the [batch pos vocab] tensor is never copied) or a window one
    longer (n = pos + 1: the model read window[:, :-1], the targets are window[:, 1:], as the trainer samples).
    reduction "mean" (over the targets) | "sum" | "none" ([batch, targets]). fp32 raises logits below float32
    (bf16, fp16) to float32 before the softmax, so bf16 autocast only affects the network itself; float64 logits
    stay float64 (a float64 reference check keeps its precision).
    """
    if reduction not in _REDUCTIONS:
        raise ValueError(f"next_token_loss: reduction={reduction!r}, expected one of {_REDUCTIONS}")
    batch, pos, vocab = logits.shape
    if tokens.shape[1] == pos + 1:
        targets = tokens[:, 1:]
    elif tokens.shape[1] == pos:
        if pos < 2:
            raise ValueError(f"next_token_loss: need at least 2 positions for a next-token loss, got {pos}")
        targets = F.pad(tokens[:, 1:].long(), (0, 1), value=-100)
    else:
        raise ValueError(f"next_token_loss: logits cover {pos} positions, tokens {tokens.shape[1]}: pass the tokens "
                         f"the model read ({pos}) or the window they came from ({pos + 1})")
    if fp32 and logits.dtype not in (torch.float32, torch.float64):
        logits = logits.float()
    ce = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1), ignore_index=-100, reduction=reduction)
    return ce.view(batch, -1)[:, : tokens.shape[1] - 1] if reduction == "none" else ce


__all__ = ["Reduction", "next_token_loss"]
