"""Which neurons to remove: streamed contribution scores, and the lowest / random selections."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp._util.devices import model_device
from interp.ablations.config import SELECTIONS
from interp.ablations.loss import _autocast, _forward_logits
from interp.ablations.sites import down_column_norms, mlp_sites
from interp.hf import unwrap


@torch.no_grad()
def contribution_scores(model: Any, batches: Iterable[Int[Tensor, "batch pos"]],
                        autocast_dtype: torch.dtype | None = None) -> tuple[list[Float[Tensor, " d_mlp"]], int]:
    """(per-layer scores s_i = mean_tokens |a_i| * ||W_down[:, i]||, number of tokens scored).

    Every position of every sequence counts (the loss is measured at every position too). The hooks
    sum |a| in float64 per batch and drop the activation; they are removed even if the forward fails.
    """
    root, sites = unwrap(model), mlp_sites(model)
    sums = [torch.zeros(site.width, dtype=torch.float64) for site in sites]
    n_tokens = 0

    def make_hook(layer: int) -> Callable:
        def hook(module: nn.Module, args: tuple) -> None:
            acts = args[0].detach()                                    # [batch, pos, d_mlp]
            sums[layer] += acts.abs().flatten(0, -2).sum(0, dtype=torch.float64).cpu()   # width 0: no neuron
        return hook

    handles = [site.down.register_forward_pre_hook(make_hook(site.layer)) for site in sites]
    try:
        device = model_device(root)
        for tokens in batches:
            with _autocast(autocast_dtype, device):
                _forward_logits(root, tokens.to(device))
            n_tokens += tokens.numel()
    finally:
        for handle in handles:
            handle.remove()
    if n_tokens == 0:
        raise ValueError("contribution_scores: `batches` was empty; pass at least one [batch, pos] token tensor")
    scores = []
    for s, site in zip(sums, sites):   # float32 (float64 for a float64 model), as down_column_norms
        norms = down_column_norms(site.down).cpu()
        scores.append((s / n_tokens).to(norms.dtype) * norms)
    return scores, n_tokens


def n_to_remove(width: int, fraction: float) -> int:
    """round(fraction * width) (half to even): the same count for 'lowest' and its random control."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction={fraction!r}: must be in [0, 1], e.g. 0.25 to remove a quarter of the neurons")
    return round(fraction * width)


def select_neurons(scores: Float[Tensor, " d_mlp"], fraction: float, selection: str,
                   generator: torch.Generator | None = None) -> Int[Tensor, " k"]:
    """Indices of the neurons to remove from one layer.

    lowest: the k lowest-scoring (ties to the lower index, so the choice is deterministic);
    random: a uniformly random k-subset drawn with `generator` (seed it for reproducibility).
    Both are nested in `fraction`: the 10% set is inside the 25% set (same scores / same generator state).
    """
    k = n_to_remove(scores.numel(), fraction)
    if selection == "lowest":
        return torch.sort(torch.argsort(scores, stable=True)[:k]).values
    if selection == "random":
        return torch.sort(torch.randperm(scores.numel(), generator=generator)[:k]).values
    raise ValueError(f"selection={selection!r}: choose one of {SELECTIONS}")


def _layer_generator(seed: int, layer: int) -> torch.Generator:
    """One stream per (seed, layer): a layer's random set does not depend on which group or fraction asks."""
    return torch.Generator().manual_seed(int(seed) * 100_003 + layer)
