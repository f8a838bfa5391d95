"""Where the MLPs are: one MlpSite per layer (the MLP module and its down projection) from the adapter
table (interp.hf.adapters), and the contiguous layer groups the ablations remove capacity from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor, nn

from interp.ablations.config import GROUPS
from interp.hf import mlp_down_modules, mlp_modules


@dataclass(frozen=True)
class MlpSite:
    """One layer's MLP: `mlp` (its output is what skipping zeroes) and `down` (its input is the neurons)."""

    layer: int
    mlp: nn.Module
    down: nn.Module

    @property
    def width(self) -> int:
        """Number of neurons (d_mlp of this layer; layers of a TaperedLM differ)."""
        return int(down_column_norms(self.down).numel())


def mlp_sites(model: Any) -> list[MlpSite]:
    """Every layer's MlpSite, in depth order, for any model interp.hf.unwrap accepts (a LoadedModel, a bare HF
    causal LM, a TaperedLM, ...): the SiteMap names the MLP and its down projection."""
    return [MlpSite(layer, mlp, down)
            for layer, (mlp, down) in enumerate(zip(mlp_modules(model), mlp_down_modules(model), strict=True))]


def layer_groups(n_layers: int, groups: Sequence[str] = GROUPS) -> dict[str, list[int]]:
    """Contiguous layer groups (thirds by default), sized by interp.widths.group_sizes so the
    ablation groups are the same layers as the wider-early/-middle/-late training profiles."""
    from interp.widths import group_sizes

    out, start = {}, 0
    for name, size in zip(groups, group_sizes(n_layers, len(groups)), strict=True):
        out[name] = list(range(start, start + size))
        start += size
    return out


def down_column_norms(down: nn.Module) -> Float[Tensor, " d_mlp"]:
    """||W_down[:, i]||_2 per neuron i: the length of the vector neuron i writes per unit activation; float32,
    or float64 for a float64 model (a reference check keeps its precision)."""
    weight = getattr(down, "weight", None)
    if weight is not None and weight.device.type == "meta":   # offloaded by a device map: accelerate holds it
        weight = down._hf_hook.weights_map["weight"]
    if weight is not None:
        weight = weight.detach().to(torch.promote_types(weight.dtype, torch.float32))
    if isinstance(down, nn.Linear):          # weight [d_model, d_mlp]
        return weight.norm(dim=0)
    if type(down).__name__ == "Conv1D":      # GPT-2's transposed linear: weight [d_mlp, d_model]
        return weight.norm(dim=1)
    raise TypeError(f"down projection {type(down).__name__}: expected nn.Linear or transformers Conv1D")
