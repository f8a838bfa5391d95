"""Causal importance of each layer: the held-out loss when one layer's MLP output is zeroed (skip_mlp),
replaced by its mean over the probe's tokens (mean_mlp), its attention output zeroed (skip_attn), or the whole
block removed (skip_block), paired per sequence against the clean loss of the same sequences.

Definitions (modules from the adapter table, interp.hf.SiteMap; TransformerLens names in brackets):
  skip_mlp   the MLP module returns zeros (interp.ablations.conditions.ablated): m_l := 0 [hook_mlp_out]; on
             Gemma's sandwich norm post_feedforward_layernorm(0) = 0, so nothing is added there either.
  mean_mlp   the module whose output is added to the stream (SiteMap.mlp_out_module: the MLP, or Gemma's
             post-MLP norm) returns mu_l at every position. mu_l = the mean of m_l over the SAME tokens the
             correlational rows average over (the probe's sequences after the position filter), gathered in
             the clean pass that also gives the baseline loss. Why not a separate text: the ablation should
             replace the layer by its average over exactly the distribution the correlational measures
             describe, and it costs no extra forward; each token's own share of mu_l is 1 / n_tokens (n in the
             thousands), a negligible leak. The table's `reference` column says so, with n.
  skip_attn  the module whose output is the attention term (SiteMap.attn_out_module) returns zeros: a_l := 0
             [hook_attn_out].
  skip_block the whole layer (SiteMap.layers[l]) returns its input: h_{l+1} := h_l [hook_resid_post :=
             hook_resid_pre], the layer removal of ShortGPT, Gromov et al. and the depth studies (Csordas et al.).
             For every block style this removes attention, MLP and their norms alike: sequential, parallel
             residual (GPT-NeoX, GPT-J, Phi: h + a + m), post-norm (OLMo-2) and sandwich norms (Gemma-2/3).
  loss       mean next-token cross-entropy (nats) of each sequence over all its seq_len - 1 predictions
             (interp.ablations.loss.sequence_losses): the predicted tokens sit at positions 1.., which are
             exactly the probe's positions under positions="skip_first".
  delta      per sequence, ablated - clean; mean over sequences with a Student-t CI
             (interp.ablations.loss.paired_delta): sequences, not tokens, are the independent units.
Each intervention acts at every position, in one layer at a time; the weights are never edited, and every
hook is removed on exit (also on error).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.ablations.conditions import _zero_hook, ablated
from interp.ablations.loss import sequence_losses
from interp.hf import get_submodule, layer_modules, root_and_sites
from interp.probes.names import POSITIONS

CAUSAL_KINDS = ("skip_mlp", "mean_mlp", "skip_attn", "skip_block")
CAUSAL_METRICS = {kind: f"delta_loss_{kind}" for kind in CAUSAL_KINDS}  # the table's metric names


def _per_layer(model: Any, which: str) -> list[nn.Module]:
    """Per layer, the module the model's SiteMap names by its property `which` (layer-relative)."""
    sites = root_and_sites(model)[1]
    return [get_submodule(layer, getattr(sites, which)) for layer in layer_modules(model)]


def mlp_out_modules(model: Any) -> list[nn.Module]:
    """Per layer, the module whose output is what the MLP adds to the stream (hook_mlp_out)."""
    return _per_layer(model, "mlp_out_module")


def attn_out_modules(model: Any) -> list[nn.Module]:
    """Per layer, the module whose output (or output[0]) is what attention adds to the stream (hook_attn_out)."""
    return _per_layer(model, "attn_out_module")


def site_names(model: Any) -> dict[str, str]:
    """Which module each kind hooks, as dotted paths with {l} (the table's hook_sites column)."""
    _root, sites = root_and_sites(model)
    where = f"{sites.layers}.{{l}}"
    return {"skip_mlp": f"{where}.{sites.mlp} output := 0",
            "mean_mlp": f"{where}.{sites.mlp_out_module} output := its mean over the probe's tokens",
            "skip_attn": f"{where}.{sites.attn_out_module} output := 0",
            "skip_block": f"{where} output := its input"}


def _first(output: Any) -> Tensor:
    return output[0] if isinstance(output, tuple) else output


def _constant_hook(value: Float[Tensor, "d_model"]) -> Callable:
    """A forward hook that makes a module return `value` at every position (same shape and dtype)."""
    def hook(module: nn.Module, args: tuple, output: Any) -> Any:
        out = _first(output)
        const = value.to(device=out.device, dtype=out.dtype).expand_as(out).contiguous()
        return (const, *output[1:]) if isinstance(output, tuple) else const
    return hook


def _identity_hook(module: nn.Module, args: tuple, kwargs: dict, output: Any) -> Any:
    """A forward hook (with_kwargs) that makes a decoder layer return its input hidden states: h_{l+1} = h_l.
    The rest of a tuple output (attention weights, caches) is kept as the layer made it."""
    h = args[0] if args else kwargs.get("hidden_states", kwargs.get("x"))
    if not isinstance(h, Tensor):
        raise TypeError(f"skip_block: cannot find the hidden states among {type(module).__name__}'s inputs "
                        f"(positional {len(args)}, keywords {sorted(kwargs)})")
    out = _first(output)
    h = h.to(dtype=out.dtype)
    return (h, *output[1:]) if isinstance(output, tuple) else h


@contextmanager
def layer_ablated(model: Any, kind: str, layer: int,
                  means: Float[Tensor, "n_layers d_model"] | None = None) -> Iterator[None]:
    """Within the block, `model` runs with one layer ablated: kind in CAUSAL_KINDS (mean_mlp needs `means`,
    from mlp_out_means). Hooks are removed on exit, also on error."""
    if kind == "skip_mlp":
        with ablated(model, skip=[layer]):
            yield
        return
    if kind not in CAUSAL_KINDS:
        raise ValueError(f"kind={kind!r}: choose one of {CAUSAL_KINDS}")
    if kind == "mean_mlp" and means is None:
        raise ValueError("layer_ablated(kind='mean_mlp') needs means= (from mlp_out_means)")
    if kind == "skip_block":
        handle = layer_modules(model)[layer].register_forward_hook(_identity_hook, with_kwargs=True)
    else:
        module = (mlp_out_modules if kind == "mean_mlp" else attn_out_modules)(model)[layer]
        handle = module.register_forward_hook(_constant_hook(means[layer]) if kind == "mean_mlp" else _zero_hook)
    try:
        yield
    finally:
        handle.remove()


def _first_position(positions: str) -> int:
    if positions not in POSITIONS:
        raise ValueError(f"positions={positions!r}: choose one of {POSITIONS}")
    return 1 if positions == "skip_first" else 0


@torch.no_grad()
def mlp_out_means(model: Any, batches: Sequence[Int[Tensor, "batch pos"]], positions: str = "skip_first",
                  autocast_dtype: torch.dtype | None = None
                  ) -> tuple[Float[Tensor, "n_seq"], Float[Tensor, "n_layers d_model"], int]:
    """One clean pass: (per-sequence losses, each layer's mean MLP output over the probe's tokens in float64,
    the number of tokens averaged). The means are summed inside forward hooks: nothing is kept per token."""
    start = _first_position(positions)
    modules = mlp_out_modules(model)
    sums: list[Tensor | None] = [None] * len(modules)

    def summing(layer: int) -> Callable:
        def hook(module: nn.Module, args: tuple, output: Any) -> None:
            part = _first(output)[:, start:].double().sum((0, 1)).cpu()  # [d_model]
            sums[layer] = part if sums[layer] is None else sums[layer] + part
        return hook

    handles = [m.register_forward_hook(summing(l)) for l, m in enumerate(modules)]
    try:
        clean = sequence_losses(model, batches, autocast_dtype)
    finally:
        for handle in handles:
            handle.remove()
    n_tokens = sum(b.shape[0] * (b.shape[1] - start) for b in batches)
    if n_tokens < 1 or any(s is None for s in sums):
        raise ValueError(f"mlp_out_means: no token to average over (positions={positions!r}, sequences of "
                         f"{batches[0].shape[1] if batches else 0} positions); use longer sequences")
    return clean, torch.stack(sums) / n_tokens, n_tokens


@dataclass
class LayerEffects:
    """Per-sequence losses of the clean model and of every (kind, layer) ablation, same sequences, in order."""

    clean: Float[Tensor, "n_seq"]                        # float64 nats
    ablated: dict[str, Float[Tensor, "n_layers n_seq"]]  # kind -> per-layer per-sequence losses
    mean_tokens: int                                     # tokens mlp_means averaged over
    predicted: int                                       # predicted tokens per sequence (seq_len - 1)
    positions: str
    sites: dict[str, str] = field(default_factory=dict)  # kind -> the module it hooks
    mlp_means: Float[Tensor, "n_layers d_model"] | None = None  # what mean_mlp put in (not in to_dict)

    @property
    def n_layers(self) -> int:
        return int(next(iter(self.ablated.values())).shape[0])

    @property
    def n_sequences(self) -> int:
        return int(self.clean.numel())

    def deltas(self, kind: str) -> Float[Tensor, "n_layers n_seq"]:
        """ablated - clean per layer and sequence (the paired differences)."""
        return self.ablated[kind] - self.clean

    def to_dict(self) -> dict[str, Any]:
        """JSON-able (a table's attrs, which parquet keeps); the means are left out (n_layers x d_model)."""
        return {"clean": self.clean.tolist(), "ablated": {k: v.tolist() for k, v in self.ablated.items()},
                "mean_tokens": self.mean_tokens, "predicted": self.predicted, "positions": self.positions,
                "sites": dict(self.sites)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LayerEffects:
        return cls(torch.tensor(d["clean"], dtype=torch.float64),
                   {k: torch.tensor(v, dtype=torch.float64) for k, v in d["ablated"].items()},
                   int(d["mean_tokens"]), int(d["predicted"]), str(d["positions"]), dict(d.get("sites", {})))


def layer_effects(model: Any, batches: Sequence[Int[Tensor, "batch pos"]], positions: str = "skip_first",
                  kinds: Sequence[str] = CAUSAL_KINDS, autocast_dtype: torch.dtype | None = None,
                  log: Callable[[str], None] | None = None) -> LayerEffects:
    """Every layer, every kind: 1 clean pass + len(kinds) x n_layers ablated passes over `batches` (each
    [batch, pos] token ids). Any model interp.hf.unwrap accepts whose architecture the adapter table knows."""
    for kind in kinds:
        if kind not in CAUSAL_KINDS:
            raise ValueError(f"kinds: {kind!r} is not one of {CAUSAL_KINDS}")
    batches = list(batches)
    if not batches:
        raise ValueError("layer_effects: `batches` was empty")
    clean, means, n_mean = mlp_out_means(model, batches, positions, autocast_dtype)
    n_layers = means.shape[0]
    out: dict[str, Tensor] = {}
    for kind in kinds:
        rows = []
        for layer in range(n_layers):
            with layer_ablated(model, kind, layer, means):
                rows.append(sequence_losses(model, batches, autocast_dtype))
            if log is not None:
                log(f"[causal] {kind} layer {layer + 1}/{n_layers}: delta loss "
                    f"{float((rows[-1] - clean).mean()):+.4f}")
        out[kind] = torch.stack(rows)
    return LayerEffects(clean, out, n_mean, int(batches[0].shape[1]) - 1, positions,
                        {k: v for k, v in site_names(model).items() if k in kinds}, means)
