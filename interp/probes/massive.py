"""Massive activations: the few residual dimensions whose mean |resid_pre| is orders of magnitude above
the median. They dominate every norm, so a cosine can mostly measure them; exclude_massive_dims=k measures
the k largest here (a first pass over the same batches) and the accumulator zeroes them in every operand."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from interp.probes.backends.base import Plan
from interp.probes.backends.choice import make_plan
from interp.probes.names import POSITIONS


class _DimScale:
    """Duck-typed accumulator for the runners: sums |resid_pre| per layer and d_model dimension over the
    counted tokens (a [layers, d_model] state, nothing per token)."""

    needed_sites = frozenset({"resid_pre", "resid_post"})  # resid_post: the last layer's one stops the forward

    def __init__(self, n_layers: int):
        self.n_layers = n_layers
        self.total: Tensor | None = None  # [layers, d_model] float64
        self.count = torch.zeros(n_layers, dtype=torch.float64)
        self._mask: Tensor | None = None

    def begin_batch(self, mask: Tensor | None = None) -> None:
        self._mask = mask

    def feed(self, layer: int, site: str, x: Float[Tensor, "batch pos d_model"]) -> None:
        if site != "resid_pre":
            return
        x = x.detach().to(torch.float64).abs()
        rows = x[self._mask] if self._mask is not None else x.reshape(-1, x.shape[-1])  # [tokens, d_model]
        if self.total is None:
            self.total = torch.zeros(self.n_layers, x.shape[-1], dtype=torch.float64)
        self.total[layer] += rows.sum(0).cpu()
        self.count[layer] += rows.shape[0]

    def end_batch(self) -> None:
        self._mask = None

    def mean(self) -> Float[Tensor, "layer d_model"]:
        if self.total is None or (self.count == 0).any():
            raise ValueError("no tokens counted while measuring residual dimensions: give more batches/positions")
        return self.total / self.count[:, None]


def _residual_abs_mean(plan: Plan, batches: Iterable, positions: str) -> Tensor:
    scale = _DimScale(plan.n_layers)
    plan.scan(batches, scale, positions)  # the nnsight backend scans with plain torch hooks on the same modules
    return scale.mean()


def residual_abs_mean(model: Any, batches: Iterable[Tensor | dict], backend: str = "torch",
                      positions: str = "skip_first") -> Float[Tensor, "layer d_model"]:
    """Mean |blocks.{l}.hook_resid_pre| per layer and residual dimension over the counted tokens: where
    the massive activations are (a few dimensions orders of magnitude above the median)."""
    if positions not in POSITIONS:
        raise ValueError(f"positions={positions!r}: choose one of {POSITIONS}")
    return _residual_abs_mean(make_plan(model, backend), batches, positions)


def massive_dims(model: Any, batches: Iterable[Tensor | dict], k: int, backend: str = "torch",
                 positions: str = "skip_first") -> list[int]:
    """The k residual dimensions with the largest mean |resid_pre| (averaged over layers), sorted by index:
    what exclude_massive_dims=k leaves out."""
    scale = residual_abs_mean(model, batches, backend, positions).mean(0)
    return sorted(scale.topk(k).indices.tolist())
