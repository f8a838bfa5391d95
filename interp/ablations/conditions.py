"""The ablation conditions (baseline, neurons removed from a layer group, one MLP skipped) and `ablated`,
which applies one at run time with hooks and removes them on exit."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.ablations.config import GROUPS, SELECTIONS
from interp.ablations.scores import _layer_generator, n_to_remove, select_neurons
from interp.ablations.sites import mlp_sites
from interp.hf import mlp_modules

KINDS = ("baseline", "neurons", "skip_mlp")


@dataclass(frozen=True)
class Condition:
    """One ablation: the baseline, neurons removed from a layer group, or one layer's MLP skipped."""

    kind: str                       # one of KINDS
    group: str | None = None        # neurons: one of GROUPS
    fraction: float | None = None   # neurons: share of each layer's neurons removed
    selection: str | None = None    # neurons: one of SELECTIONS
    seed: int | None = None         # neurons + random
    layer: int | None = None        # skip_mlp

    @property
    def label(self) -> str:
        if self.kind == "neurons":
            seed = f" seed{self.seed}" if self.selection == "random" else ""
            return f"{self.group} {self.selection} {self.fraction:g}{seed}"
        return f"skip_mlp L{self.layer}" if self.kind == "skip_mlp" else "baseline"


def build_conditions(n_layers: int, fractions: Sequence[float] = (0.10, 0.25, 0.50), seeds: Sequence[int] = (0, 1, 2),
                     groups: Sequence[str] = GROUPS, selections: Sequence[str] = SELECTIONS,
                     skip_layers: Sequence[int] | None = None) -> list[Condition]:
    """Baseline first; then group x fraction x (lowest, random x seeds); then one MLP skip per layer
    (skip_layers=None: every layer; [] for none)."""
    for s in selections:
        if s not in SELECTIONS:
            raise ValueError(f"selections: {s!r} is not one of {SELECTIONS}")
    for g in groups:
        if g not in GROUPS:
            raise ValueError(f"groups: {g!r} is not one of {GROUPS}")
    for f in fractions:
        n_to_remove(1, f)  # range check
    conditions = [Condition("baseline")]
    for group in groups:
        for fraction in fractions:
            for selection in selections:
                for seed in (seeds if selection == "random" else (None,)):
                    conditions.append(Condition("neurons", group, float(fraction), selection, seed))
    layers = range(n_layers) if skip_layers is None else skip_layers
    for layer in layers:
        if not 0 <= layer < n_layers:
            raise ValueError(f"skip_layers: layer {layer} is out of range for a {n_layers}-layer model")
        conditions.append(Condition("skip_mlp", layer=int(layer)))
    return conditions


def removals(condition: Condition, scores: Sequence[Float[Tensor, " d_mlp"]],
             groups: Mapping[str, Sequence[int]]) -> dict[int, Int[Tensor, " k"]]:
    """{layer: neuron indices to remove} for a `neurons` condition ({} for the others)."""
    if condition.kind != "neurons":
        return {}
    if condition.group not in groups:
        raise ValueError(f"condition {condition.label!r}: group {condition.group!r} not in {list(groups)}")
    return {layer: select_neurons(scores[layer], condition.fraction, condition.selection,
                                  _layer_generator(condition.seed or 0, layer) if condition.selection == "random"
                                  else None)
            for layer in groups[condition.group]}


def _mask_hook(keep: Float[Tensor, " d_mlp"]) -> Callable:
    def hook(module: nn.Module, args: tuple) -> tuple:
        x = args[0]                                                    # [batch, pos, d_mlp]
        return (x * keep.to(device=x.device, dtype=x.dtype), *args[1:])
    return hook


def _zero_hook(module: nn.Module, args: tuple, output: Any) -> Any:
    if isinstance(output, tuple):
        return (torch.zeros_like(output[0]), *output[1:])
    return torch.zeros_like(output)


@contextmanager
def ablated(model: Any, remove: Mapping[int, Int[Tensor, " k"]] | None = None,
            skip: Iterable[int] = ()) -> Iterator[None]:
    """Within the block, `model` runs with the neurons in `remove` ({layer: indices}) masked out and the
    MLPs of the layers in `skip` returning zeros. The weights are never edited; every hook is removed
    on exit (also on error), so the model afterwards computes exactly what it did before."""
    skip = list(skip)
    sites = mlp_sites(model) if remove else []  # a mixture of experts has no neurons to mask: refused there only
    terms = mlp_modules(model) if skip else []  # whose output is the MLP's term (no down projection needed)
    handles = []
    try:
        for layer, idx in (remove or {}).items():
            site = sites[layer]
            keep = torch.ones(site.width)
            keep[torch.as_tensor(idx, dtype=torch.long)] = 0.0
            handles.append(site.down.register_forward_pre_hook(_mask_hook(keep)))
        for layer in skip:
            handles.append(terms[layer].register_forward_hook(_zero_hook))
        yield
    finally:
        for handle in handles:
            handle.remove()
