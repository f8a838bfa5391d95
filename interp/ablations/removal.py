"""Whole-layer removal and what it does to the later layers: the removal map (2603.19348) and the layer-dependency
map of Csordas, Manning & Potts (2505.13898), from the same forwards.

For each layer s, one forward with s removed (skip_block: the layer returns its input, h_{s+1} = h_s; the
intervention of interp.ablations.layers) gives
  - the loss of every sequence (mean next-token CE, nats): removal damage, paired with the clean loss;
  - every later layer's contribution u_l = h_{l+1} - h_l (what block l adds to the stream), compared with the
    clean pass's u_l at the same token: r(s, l) = ||u_l(s removed) - u_l|| / ||u_l||, averaged over the counted
    positions of each sequence. r = 0: layer l computes what it computed anyway; r = 1: a change as large as its
    whole contribution.
Per sequence first, then mean and Student-t CI over sequences (the independent units, as every causal row).
Cost: n_layers + 1 forwards over the batches, processed one batch at a time, so memory holds one batch's
contributions (n_layers x batch x pos x d_model floats), never the whole text's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.ablations.layers import _first, _first_position, layer_ablated
from interp.ablations.loss import sequence_losses
from interp.hf import layer_modules
from interp.stats_intervals import mean_ci

EPS = 1e-12


@dataclass
class RemovalEffects:
    """Per-sequence results of removing each layer in turn (same sequences, in order)."""

    clean: Float[Tensor, " n_seq"]                                # float64 nats
    removed: Float[Tensor, "n_layers n_seq"]                     # loss with layer s removed
    dependency: Float[Tensor, "n_layers n_layers n_seq"]         # [s, l]: r(s, l); NaN where l <= s
    contribution: Float[Tensor, "n_layers n_seq"]                # clean ||u_l|| / ||h_l||, mean over positions
    positions: str

    @property
    def n_layers(self) -> int:
        return int(self.removed.shape[0])

    def removal_rows(self, confidence: float = 0.95, n_boot: int = 2000, seed: int = 0) -> list[dict[str, Any]]:
        """One row per removed layer: delta loss (t-CI over sequences) and delta perplexity, exp(mean removed loss)
        - exp(mean clean loss), with a percentile bootstrap CI over sequences (the same draws for every layer)."""
        clean = self.clean.numpy()
        n = clean.size
        draws = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
        ppl_clean = math.exp(clean.mean())
        rows = []
        for s in range(self.n_layers):
            removed = self.removed[s].numpy()
            mean, low, high = mean_ci(list(removed - clean), confidence)
            boot = np.exp(removed[draws].mean(1)) - np.exp(clean[draws].mean(1))
            q = (1 - confidence) / 2
            rows.append({"layer": s, "delta_loss": mean, "delta_loss_ci_low": low, "delta_loss_ci_high": high,
                         "ppl_clean": ppl_clean, "ppl_removed": math.exp(removed.mean()),
                         "delta_ppl": math.exp(removed.mean()) - ppl_clean,
                         "delta_ppl_ci_low": float(np.quantile(boot, q)),
                         "delta_ppl_ci_high": float(np.quantile(boot, 1 - q)), "n_sequences": n})
        return rows

    def dependency_rows(self, confidence: float = 0.95) -> list[dict[str, Any]]:
        """One row per pair s < l: mean r(s, l) over sequences with its t-CI."""
        rows = []
        for s in range(self.n_layers):
            for l in range(s + 1, self.n_layers):
                mean, low, high = mean_ci(self.dependency[s, l].tolist(), confidence)
                rows.append({"skipped": s, "layer": l, "relative_change": mean, "ci_low": low, "ci_high": high,
                             "n_sequences": int(self.dependency.shape[2])})
        return rows


def _inputs_and_outputs(layers: Sequence[nn.Module]) -> tuple[dict[int, Tensor], dict[int, Tensor], list]:
    """Hooks that record each layer's input and output hidden states of the current forward."""
    ins: dict[int, Tensor] = {}
    outs: dict[int, Tensor] = {}

    def pre(l: int) -> Callable:
        def hook(_m: nn.Module, args: tuple, kwargs: dict) -> None:
            ins[l] = args[0] if args else kwargs.get("hidden_states", kwargs.get("x"))
        return hook

    def post(l: int) -> Callable:
        def hook(_m: nn.Module, _args: tuple, output: Any) -> None:
            outs[l] = _first(output)
        return hook

    handles = [h for l, layer in enumerate(layers) for h in (
        layer.register_forward_pre_hook(pre(l), with_kwargs=True), layer.register_forward_hook(post(l)))]
    return ins, outs, handles


def _contributions(ins: dict[int, Tensor], outs: dict[int, Tensor], start: int) -> list[Float[Tensor, "b p d"]]:
    return [(outs[l] - ins[l])[:, start:].double() for l in range(len(outs))]


@torch.no_grad()
def removal_effects(model: Any, batches: Sequence[Int[Tensor, "batch pos"]], positions: str = "skip_first",
                    log: Callable[[str], None] | None = None) -> RemovalEffects:
    """Remove each layer in turn over `batches`: the losses and the dependency map (module docstring)."""
    batches = list(batches)
    if not batches:
        raise ValueError("removal_effects: `batches` was empty")
    start = _first_position(positions)
    layers = layer_modules(model)
    n_layers = len(layers)
    clean, removed, dependency, contribution = [], [], [], []
    for b, batch in enumerate(batches):
        ins, outs, handles = _inputs_and_outputs(layers)
        try:
            clean.append(sequence_losses(model, [batch]))
            base = _contributions(ins, outs, start)
            contribution.append(torch.stack([
                (u.norm(dim=-1) / ins[l][:, start:].double().norm(dim=-1).clamp_min(EPS)).mean(1)
                for l, u in enumerate(base)]))                                            # [L, b]
            lost, dep = [], torch.full((n_layers, n_layers, batch.shape[0]), math.nan, dtype=torch.float64)
            for s in range(n_layers):
                with layer_ablated(model, "skip_block", s):
                    lost.append(sequence_losses(model, [batch]))
                now = _contributions(ins, outs, start)
                for l in range(s + 1, n_layers):
                    change = (now[l] - base[l]).norm(dim=-1) / base[l].norm(dim=-1).clamp_min(EPS)
                    dep[s, l] = change.mean(1)
        finally:
            for h in handles:
                h.remove()
        removed.append(torch.stack(lost))
        dependency.append(dep)
        if log is not None:
            log(f"[removal] batch {b + 1}/{len(batches)}: {n_layers + 1} forwards")
    return RemovalEffects(torch.cat(clean), torch.cat(removed, 1), torch.cat(dependency, 2),
                          torch.cat(contribution, 1), positions)


__all__ = ["RemovalEffects", "removal_effects"]
