"""First-order estimates of every causal row (`--causal-method attribution`): attribution patching (Nanda 2023;
TransformerLens's attribution patching), one forward and one backward per batch instead of a pass per row.

An intervention of interp.ablations.layers sets one activation a of layer l (at every position) to a'; to first order
the loss of a sequence then changes by

    delta ~= sum over positions of g . (a' - a),    g = d loss(sequence) / d a   (the clean pass's gradient)

with, per kind (a = the activation the exact row changes, in the SiteMap's modules):
  skip_mlp    a = what the MLP adds to the stream (SiteMap.mlp_out_module's output: the MLP, or Gemma's post-MLP
              norm), a' = 0. (Patched at the added term, not at the MLP inside a sandwich norm: a norm's output does
              not move to first order when its input is scaled, so the raw MLP's gradient would say nothing.)
  mean_mlp    the same a, a' = mu_l, its mean over the probe's tokens (as the exact row's): g . mu_l - g . a, summed
              per sequence as (sum_pos g) . mu_l - sum_pos g . a, so mu_l may come from the same forwards.
  skip_attn   a = what attention adds (SiteMap.attn_out_module's output), a' = 0.
  skip_block  a = the layer's output h_{l+1}, a' = its input h_l.
Each sequence's loss is the exact rows' (mean next-token CE, nats, float32 logits), so the gradient of the batch's
summed loss at a sequence's positions is that sequence's own. Products are summed in float64.

What it is not: exact. Removing a whole MLP or block is no small change, and the estimate ignores every later
layer's response beyond the linear one; analyses/attribution_vs_exact.py measures its agreement with the exact rows
(rank correlation across layers, the worst layers) per model, in figures/attribution_vs_exact.csv. The rows carry
their own metric names (interp.ablations.layers.ATTRIBUTION_METRICS), never the exact rows'.
Memory: one batch's autograd graph (activations of every layer, as in training without the weights' gradients).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp._util.devices import model_device
from interp.ablations.layers import (
    CAUSAL_KINDS,
    LayerEffects,
    ProgressFactory,
    Tally,
    _first,
    _first_position,
    attn_out_modules,
    check_kinds,
    hidden_input,
    mlp_out_modules,
    site_names,
)
from interp.ablations.loss import token_losses
from interp.hf import layer_modules, unflatten_tokens, unwrap

ATTRIBUTION_PASSES = 3.0   # one forward and one backward, in forwards (a backward costs about two)
# logits of one forward + backward: a batch is cut into chunks of whole sequences under this many (float32: 1 GiB;
# the softmax and the logits' gradient are as large again), so a 262k-token vocabulary (Gemma-3) fits in memory
MAX_LOGITS = 2**28


def chunks(model: Any, batches: Sequence[Int[Tensor, "batch pos"]]) -> list[Int[Tensor, "batch pos"]]:
    """`batches` cut into chunks of whole sequences whose logits stay under MAX_LOGITS (in order)."""
    from interp.hf import lens_modules

    weight = getattr(lens_modules(model)[1], "weight", None)
    vocab = int(weight.shape[0]) if weight is not None else 1
    out = []
    for tokens in batches:
        size = max(1, MAX_LOGITS // max(1, vocab * int(tokens.shape[1])))
        out.extend(tokens.split(size))
    return out


def _recording(store: dict[str, list[Tensor | None]], key: str, layer: int, batch_pos: tuple[int, int]) -> Callable:
    """A forward hook keeping its module's output (the first of a tuple) as [batch, pos, d], in the graph."""
    def hook(module: nn.Module, args: tuple, output: Any) -> None:
        store[key][layer] = unflatten_tokens(_first(output), batch_pos)
    return hook


def _block_recording(store: dict[str, list[Tensor | None]], layer: int) -> Callable:
    """A forward hook (with_kwargs) keeping a decoder layer's input and output hidden states, in the graph."""
    def hook(module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        store["block_in"][layer] = hidden_input(module, args, kwargs)
        store["block_out"][layer] = _first(output)
    return hook


def _input_requiring_grad(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A forward pre-hook (with_kwargs) on the first layer: its hidden input as a leaf that requires grad, so the
    graph exists whether or not the weights require grad (the same values; no weight gradient is computed)."""
    h = hidden_input(module, args, kwargs).detach().requires_grad_(True)
    if args:
        return (h, *args[1:]), kwargs
    return args, {**kwargs, ("hidden_states" if "hidden_states" in kwargs else "x"): h}


def _dot(g: Tensor, a: Tensor) -> Float[Tensor, " batch"]:
    """sum over positions and features of g * a, per sequence, in float64."""
    return (g.double() * a.double()).sum((1, 2))


def attribution_effects(model: Any, batches: Sequence[Int[Tensor, "batch pos"]], positions: str = "skip_first",
                        kinds: Sequence[str] = CAUSAL_KINDS, autocast_dtype: torch.dtype | None = None,
                        progress: ProgressFactory | None = None) -> LayerEffects:
    """Every (kind, layer) row estimated to first order (module docstring), as a LayerEffects whose `ablated` is
    clean + the estimate and whose method is "attribution": the same table code reads both. Each batch is run in
    chunks of whole sequences (`chunks`: the logits under MAX_LOGITS). progress: called with the number of chunks,
    it returns the reporter told after each."""
    kinds = check_kinds(kinds)
    if not list(batches):
        raise ValueError("attribution_effects: `batches` was empty")
    batches = chunks(model, batches)
    root, layers = unwrap(model), layer_modules(model)
    mlp_mods, attn_mods = mlp_out_modules(model), attn_out_modules(model)
    n_layers, start = len(layers), _first_position(positions)
    device = model_device(root)
    clean: list[Tensor] = []
    linear: dict[str, list[Tensor]] = {kind: [] for kind in kinds}    # per batch [n_layers, batch]
    grad_sums: list[Tensor] = []                                      # per batch [n_layers, batch, d_model]
    mean_sums: Tensor | None = None                                   # [n_layers, d_model] float64
    n_mean = 0
    reporter = progress(len(batches)) if progress is not None else None
    tally = Tally(reporter)
    try:
        for b, tokens in enumerate(batches):
            tokens = tokens.to(device)
            batch_pos = (int(tokens.shape[0]), int(tokens.shape[1]))
            store: dict[str, list[Tensor | None]] = {k: [None] * n_layers
                                                     for k in ("mlp", "attn", "block_in", "block_out")}
            handles = [layers[0].register_forward_pre_hook(_input_requiring_grad, with_kwargs=True)]
            handles += [m.register_forward_hook(_recording(store, "mlp", l, batch_pos)) for l, m in enumerate(mlp_mods)]
            handles += [m.register_forward_hook(_recording(store, "attn", l, batch_pos))
                        for l, m in enumerate(attn_mods)]
            handles += [layer.register_forward_hook(_block_recording(store, l), with_kwargs=True)
                        for l, layer in enumerate(layers)]
            try:
                with torch.enable_grad():
                    losses = token_losses(root, tokens, autocast_dtype)
                    wanted = {"mlp": store["mlp"], "attn": store["attn"], "block_out": store["block_out"]}
                    flat = [t for key in wanted for t in wanted[key]]
                    if any(t is None or not t.requires_grad for t in flat):
                        raise RuntimeError(f"attribution: {type(root).__name__}'s forward did not reach every "
                                           "layer's sites through autograd, so there is no gradient to estimate "
                                           "with; use --causal-method exact")
                    grads = torch.autograd.grad(losses.sum(), flat)
            finally:
                for handle in handles:
                    handle.remove()
            g = dict(zip([(key, l) for key in wanted for l in range(n_layers)], grads, strict=True))
            with torch.no_grad():
                m = store["mlp"]
                part = torch.stack([t[:, start:].double().sum((0, 1)) for t in m]).cpu()
                mean_sums = part if mean_sums is None else mean_sums + part
                n_mean += batch_pos[0] * (batch_pos[1] - start)
                gm = torch.stack([_dot(g["mlp", l], m[l]) for l in range(n_layers)]).cpu()   # [n_layers, batch]
                for kind in kinds:
                    if kind == "skip_mlp":
                        linear[kind].append(-gm)
                    elif kind == "mean_mlp":
                        linear[kind].append(-gm)   # + (sum_pos g) . mu, once mu is known
                    elif kind == "skip_attn":
                        linear[kind].append(-torch.stack([_dot(g["attn", l], store["attn"][l])
                                                          for l in range(n_layers)]).cpu())
                    else:
                        linear[kind].append(torch.stack([
                            _dot(g["block_out", l], store["block_in"][l] - store["block_out"][l])
                            for l in range(n_layers)]).cpu())
                if "mean_mlp" in kinds:
                    grad_sums.append(torch.stack([g["mlp", l].double().sum(1) for l in range(n_layers)]).cpu())
                clean.append(losses.detach().cpu())
            del store, g, grads, flat, wanted
            tally.add(1, f"forward + backward, chunk {b + 1}/{len(batches)}")
    finally:
        if reporter is not None:
            reporter.close()
    if n_mean < 1 or mean_sums is None:
        raise ValueError(f"attribution_effects: no token to average over (positions={positions!r}, sequences of "
                         f"{batches[0].shape[1]} positions); use longer sequences")
    means = mean_sums / n_mean
    clean_all = torch.cat(clean)
    deltas = {kind: torch.cat(parts, dim=1) for kind, parts in linear.items()}
    if "mean_mlp" in deltas:
        deltas["mean_mlp"] = deltas["mean_mlp"] + torch.einsum("lsd,ld->ls", torch.cat(grad_sums, dim=1), means)
    return LayerEffects(clean_all, {kind: clean_all + d for kind, d in deltas.items()}, n_mean,
                        int(batches[0].shape[1]) - 1, positions,
                        {k: v for k, v in site_names(model).items() if k in kinds}, means, method="attribution")
