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

Cost (resume=True, the default): an intervention at layer L leaves layers 0..L-1 as they are, so the stream
entering layer L is the clean one. Per batch, one clean forward keeps every layer's output (n_layers x batch x pos x
d_model floats: 142 MB for SmolLM2-135M at batch 4 x 512 in float32, one batch at a time, never the whole text),
and each intervention at L runs only layers L.. : layers 0..L-1 return their kept output without computing
(`_replaying`), while the model's own forward does everything else (embedding, masks, rotary tables, per-layer
kwargs such as Gemma-3's sliding windows, final norm, unembedding, soft-caps). k kinds over L layers cost about
2 + k x (L + 2) / 2 forwards' worth (the unembedding weighed as one layer: causal_pass_count) instead of 1 + k x L,
with the same numbers: layer L and everything after it compute on the same inputs as in a full forward. Before
relying on it, the first batch is replayed from the last layer without intervention and must give the clean loss
(within REPLAY_ATOL); a model that does not (a layer reading state another layer left, e.g. a cache shared across
layers) is run with full forwards, and the `log` says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp._util.devices import model_device
from interp.ablations.conditions import _zero_hook, ablated
from interp.ablations.loss import sequence_losses, token_losses
from interp.hf import get_submodule, layer_modules, root_and_sites, unflatten_tokens, unwrap
from interp.probes.names import POSITIONS

CAUSAL_KINDS = ("skip_mlp", "mean_mlp", "skip_attn", "skip_block")
CAUSAL_METRICS = {kind: f"delta_loss_{kind}" for kind in CAUSAL_KINDS}  # the table's metric names
METHODS = ("exact", "attribution")   # every row measured, or estimated to first order (interp.ablations.attribution)
# the attribution estimates' metric names: never the exact rows' own, so no analysis mixes the two unawares
ATTRIBUTION_METRICS = {kind: f"{name}_attribution" for kind, name in CAUSAL_METRICS.items()}
REPLAY_ATOL = 1e-5   # nats: a replayed clean pass must give the clean loss to this (it is the same arithmetic)


def causal_metric(kind: str, method: str = "exact") -> str:
    """The table's metric name of `kind` measured by `method` (METHODS)."""
    if method not in METHODS:
        raise ValueError(f"method={method!r}: choose one of {METHODS}")
    return (CAUSAL_METRICS if method == "exact" else ATTRIBUTION_METRICS)[kind]


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
    return {"skip_mlp": f"{where}.{sites.mlp_term_module} output := 0",
            "mean_mlp": f"{where}.{sites.mlp_out_module} output := its mean over the probe's tokens",
            "skip_attn": f"{where}.{sites.attn_out_module} output := 0",
            "skip_block": f"{where} output := its input"}


def _first(output: Any) -> Tensor:
    return output[0] if isinstance(output, tuple) else output


def _constant_hook(value: Float[Tensor, " d_model"]) -> Callable:
    """A forward hook that makes a module return `value` at every position (same shape and dtype)."""
    def hook(module: nn.Module, args: tuple, output: Any) -> Any:
        out = _first(output)
        const = value.to(device=out.device, dtype=out.dtype).expand_as(out).contiguous()
        return (const, *output[1:]) if isinstance(output, tuple) else const
    return hook


def hidden_input(module: nn.Module, args: tuple, kwargs: dict) -> Tensor:
    """The hidden states a decoder layer was called with (its first positional argument, or the keyword
    hidden_states / x); TypeError naming the layer's inputs when there is none."""
    h = args[0] if args else kwargs.get("hidden_states", kwargs.get("x"))
    if not isinstance(h, Tensor):
        raise TypeError(f"cannot find the hidden states among {type(module).__name__}'s inputs "
                        f"(positional {len(args)}, keywords {sorted(kwargs)})")
    return h


def _identity_hook(module: nn.Module, args: tuple, kwargs: dict, output: Any) -> Any:
    """A forward hook (with_kwargs) that makes a decoder layer return its input hidden states: h_{l+1} = h_l.
    The rest of a tuple output (attention weights, caches) is kept as the layer made it."""
    h = hidden_input(module, args, kwargs)
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
                  autocast_dtype: torch.dtype | None = None, each: Callable[[int], None] | None = None
                  ) -> tuple[Float[Tensor, " n_seq"], Float[Tensor, "n_layers d_model"], int]:
    """One clean pass: (per-sequence losses, each layer's mean MLP output over the probe's tokens in float64,
    the number of tokens averaged). The means are summed inside forward hooks: nothing is kept per token.
    each: called with each batch's index when it is done (progress)."""
    start = _first_position(positions)
    modules = mlp_out_modules(model)
    sums: list[Tensor | None] = [None] * len(modules)
    n_pos = int(batches[0].shape[-1]) if len(batches) else 1

    def summing(layer: int) -> Callable:
        def hook(module: nn.Module, args: tuple, output: Any) -> None:
            out = _first(output)
            out = unflatten_tokens(out, (out.shape[0] // n_pos, n_pos))  # OPT's MLP side: [batch * pos, d]
            part = out[:, start:].double().sum((0, 1)).cpu()  # [d_model]
            sums[layer] = part if sums[layer] is None else sums[layer] + part
        return hook

    handles = [m.register_forward_hook(summing(l)) for l, m in enumerate(modules)]
    try:
        clean = sequence_losses(model, batches, autocast_dtype, each)
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

    clean: Float[Tensor, " n_seq"]                        # float64 nats
    ablated: dict[str, Float[Tensor, "n_layers n_seq"]]  # kind -> per-layer per-sequence losses
    mean_tokens: int                                     # tokens mlp_means averaged over
    predicted: int                                       # predicted tokens per sequence (seq_len - 1)
    positions: str
    sites: dict[str, str] = field(default_factory=dict)  # kind -> the module it hooks
    mlp_means: Float[Tensor, "n_layers d_model"] | None = None  # what mean_mlp put in (not in to_dict)
    method: str = "exact"                                # "attribution": ablated = clean + a first-order estimate
    resumed: bool = False                                # exact rows from passes resumed at the layer (see above)

    def metric(self, kind: str) -> str:
        """The table's metric name of `kind` (an attribution estimate's is not an exact row's)."""
        return causal_metric(kind, self.method)

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
                "sites": dict(self.sites), "method": self.method, "resumed": self.resumed}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LayerEffects:
        return cls(torch.tensor(d["clean"], dtype=torch.float64),
                   {k: torch.tensor(v, dtype=torch.float64) for k, v in d["ablated"].items()},
                   int(d["mean_tokens"]), int(d["predicted"]), str(d["positions"]), dict(d.get("sites", {})),
                   method=str(d.get("method", "exact")), resumed=bool(d.get("resumed", False)))


def check_kinds(kinds: Sequence[str]) -> tuple[str, ...]:
    """`kinds` as a tuple; ValueError naming one that is not in CAUSAL_KINDS."""
    for kind in kinds:
        if kind not in CAUSAL_KINDS:
            raise ValueError(f"kinds: {kind!r} is not one of {CAUSAL_KINDS}")
    return tuple(kinds)


def _cloned(output: Any) -> Any:
    """A layer's output (a tensor, or a tuple holding tensors) with its tensors copied: what a later layer might
    change in place cannot reach what is kept."""
    if isinstance(output, Tensor):
        return output.detach().clone()
    if isinstance(output, tuple):
        return tuple(_cloned(o) for o in output)
    return output


@contextmanager
def _capturing(layers: Sequence[nn.Module]) -> Iterator[list[Any]]:
    """Within the block, every forward leaves each layer's output (copied) in the yielded list, by layer."""
    outputs: list[Any] = [None] * len(layers)

    def keeping(l: int) -> Callable:
        def hook(module: nn.Module, args: tuple, output: Any) -> None:
            outputs[l] = _cloned(output)
        return hook

    handles = [layer.register_forward_hook(keeping(l)) for l, layer in enumerate(layers)]
    try:
        yield outputs
    finally:
        for handle in handles:
            handle.remove()


_NO_FORWARD = object()


@contextmanager
def _replaying(layers: Sequence[nn.Module], outputs: Sequence[Any], start: int) -> Iterator[None]:
    """Within the block, layers[:start] compute nothing: each returns the kept clean output of layer start - 1 (what
    layer `start` received in the clean forward; what layers before it return is passed on to the next of them
    only, which ignores it), so a forward runs layers start.. and the model's own embedding and tail. Done by
    shadowing each layer's `forward` with an instance attribute; one that was there (accelerate's device-map hook)
    is put back on exit, also on error."""
    if start == 0:
        yield
        return
    kept = outputs[start - 1]

    def replay(*args: Any, **kwargs: Any) -> Any:
        return kept

    saved = [layer.__dict__.get("forward", _NO_FORWARD) for layer in layers[:start]]
    try:
        for layer in layers[:start]:
            layer.forward = replay
        yield
    finally:
        for layer, old in zip(layers[:start], saved):
            if old is _NO_FORWARD:
                layer.__dict__.pop("forward", None)
            else:
                layer.forward = old


def _pass_costs(n_layers: int) -> tuple[int, list[int]]:
    """(a full forward, a forward resumed at each layer) in units of one layer's compute; the embedding and the
    tail (final norm, unembedding, loss) count as one layer: the progress and its ETA weigh each pass so."""
    return n_layers + 1, [n_layers - layer + 1 for layer in range(n_layers)]


def causal_units(n_layers: int, n_batches: int, n_kinds: int = len(CAUSAL_KINDS), resume: bool = True) -> int:
    """The work of layer_effects in units of one layer's compute over one batch (_pass_costs): per batch the mean
    pass, then (resume) the kept clean pass and every resumed pass (and once the check, a pass resumed at the last
    layer), or (not) a full pass per intervention."""
    full, resumed = _pass_costs(n_layers)
    per_batch = full + (full + n_kinds * sum(resumed) if resume else n_kinds * n_layers * full)
    return n_batches * per_batch + (resumed[-1] if resume else 0)


def causal_pass_count(n_layers: int, n_kinds: int = len(CAUSAL_KINDS), resume: bool = True) -> float:
    """The exact rows' cost in full forwards over their tokens, by the weights of causal_units: about
    2 + n_kinds x (n_layers + 2) / 2 resumed, 1 + n_kinds x n_layers not (SmolLM2, 30 layers: 66 vs 121)."""
    return causal_units(n_layers, 1, n_kinds, resume) / _pass_costs(n_layers)[0]


class Tally:
    """Units of work done, told to a progress reporter (interp._util.progress; None: silent)."""

    def __init__(self, reporter: Any):
        self.reporter, self.done = reporter, 0

    def add(self, units: int, *details: str) -> None:
        self.done += units
        if self.reporter is not None:
            self.reporter.update(self.done, *details)


def kept_clean_pass(root: nn.Module, layers: Sequence[nn.Module], tokens: Int[Tensor, "batch pos"],
                    autocast_dtype: torch.dtype | None = None) -> tuple[list[Any], Float[Tensor, " batch"]]:
    """One clean forward of `tokens` that keeps every layer's output (_capturing): (the outputs, by layer; the
    per-sequence losses)."""
    with _capturing(layers) as outputs, torch.no_grad():
        losses = token_losses(root, tokens, autocast_dtype)
    return outputs, losses


def resume_gap(root: nn.Module, layers: Sequence[nn.Module], outputs: Sequence[Any], tokens: Int[Tensor, "batch pos"],
               clean: Float[Tensor, " batch"], autocast_dtype: torch.dtype | None = None) -> float:
    """max over the batch's sequences of |loss of a clean pass resumed at the last layer - `clean`| (nats), with the
    outputs and losses kept_clean_pass gave for the same tokens: 0 where a model can be run from the middle."""
    with torch.no_grad(), _replaying(layers, outputs, len(layers) - 1):
        again = token_losses(root, tokens, autocast_dtype)
    return float((again - clean).abs().max())


ProgressFactory = Callable[[int], Any]   # the total work (units) -> a reporter with update(done, *details), close()


def layer_effects(model: Any, batches: Sequence[Int[Tensor, "batch pos"]], positions: str = "skip_first",
                  kinds: Sequence[str] = CAUSAL_KINDS, autocast_dtype: torch.dtype | None = None,
                  log: Callable[[str], None] | None = None, progress: ProgressFactory | None = None,
                  resume: bool = True) -> LayerEffects:
    """Every layer, every kind, over `batches` (each [batch, pos] token ids), for any model interp.hf.unwrap
    accepts whose architecture the adapter table knows.

    resume: True (default), every intervention at layer L runs layers L.. only, from the clean stream entering L
    kept per batch (module docstring: about 2 + k x (L + 2) / 2 forwards), where the first batch shows that the
    model can be run so (resume_gap <= REPLAY_ATOL; else full forwards, and `log` is told why); False, 1 clean
    pass + len(kinds) x n_layers full forwards (the earlier algorithm; the same numbers).
    progress: called once with the total work (causal_units: units of one layer's compute over one batch), it
    returns the reporter told of each pass (interp._util.progress.progress(total, ...)); it is closed at the end."""
    kinds = check_kinds(kinds)
    batches = list(batches)
    if not batches:
        raise ValueError("layer_effects: `batches` was empty")
    root, layers = unwrap(model), layer_modules(model)
    n_layers, n_batches = len(layers), len(batches)
    full, resumed_cost = _pass_costs(n_layers)
    device = model_device(root)
    batches = [tokens.to(device) for tokens in batches]
    kept: list[Any] = []
    if resume:   # the check, on the first batch (its kept outputs serve its interventions below)
        kept, kept_losses = kept_clean_pass(root, layers, batches[0], autocast_dtype)
        gap = resume_gap(root, layers, kept, batches[0], kept_losses, autocast_dtype)
        if not gap <= REPLAY_ATOL:
            resume, kept = False, []
            if log is not None:
                log(f"[causal] {type(root).__name__} cannot be run from the middle (a clean pass resumed at its last "
                    f"layer is {gap:.2e} nats off the clean loss): full forwards for every intervention, "
                    f"{causal_pass_count(n_layers, len(kinds), False):.0f} passes")
    reporter = progress(causal_units(n_layers, n_batches, len(kinds), resume)) if progress is not None else None
    tally = Tally(reporter)
    try:
        if resume:
            tally.add(full + resumed_cost[-1], f"kept the clean stream, batch 1/{n_batches}")
        clean, means, n_mean = mlp_out_means(model, batches, positions, autocast_dtype,
                                             each=lambda b: tally.add(full, f"mean pass, batch {b + 1}/{n_batches}"))
        ablated = {kind: torch.empty(n_layers, clean.numel(), dtype=torch.float64) for kind in kinds}
        first = 0
        for b, tokens in enumerate(batches):
            rows = slice(first, first + tokens.shape[0])
            first += tokens.shape[0]
            if resume and b > 0:
                kept = kept_clean_pass(root, layers, tokens, autocast_dtype)[0]
                tally.add(full, f"kept the clean stream, batch {b + 1}/{n_batches}")
            for kind in kinds:
                for layer in range(n_layers):
                    start = layer if resume else 0
                    with layer_ablated(model, kind, layer, means), _replaying(layers, kept, start), torch.no_grad():
                        ablated[kind][layer, rows] = token_losses(root, tokens, autocast_dtype).cpu()
                    tally.add(resumed_cost[start], f"{kind} layer {layer + 1}/{n_layers}, batch {b + 1}/{n_batches}")
            kept = []
    finally:
        if reporter is not None:
            reporter.close()
    return LayerEffects(clean, ablated, n_mean, int(batches[0].shape[1]) - 1, positions,
                        {k: v for k, v in site_names(model).items() if k in kinds}, means, resumed=resume)
