"""Layer-wise novelty probes (paper, section 4), streamed: per-layer cosines between what a layer writes
and the residual stream it reads, reduced per token INSIDE the forward hooks.

Metrics, per layer l and per token (TransformerLens names; h_l = blocks.l.hook_resid_pre):
  rho_mlp         = cos(hook_mlp_out, hook_resid_pre)                    the paper's rho_MLP
  rho_mlp_mid     = cos(hook_mlp_out, hook_resid_mid)                    vs the stream the MLP actually reads
  rho_block       = cos(hook_resid_post - hook_resid_pre, hook_resid_pre)  the paper's rho_block
  rho_attn        = cos(hook_attn_out, hook_resid_pre)
  norm_ratio      = |hook_mlp_out| / |hook_resid_pre|
  block_influence = 1 - cos(hook_resid_pre, hook_resid_post)             ShortGPT's Block Influence
Opt-in (not in METRIC_NAMES, so default tables are unchanged):
  rho_mlp_normed  = cos(hook_mlp_out, mlp.hook_in)   vs the NORMALISED input the MLP actually reads
                    (RMSNorm(resid_mid) with its gain; reference="normed" adds it)
Each is averaged over tokens (mean, std, sem, normal 95% CI) and summarised by histogram quantiles;
tokens whose value is NaN/inf are counted in n_nonfinite and never averaged in.

Massive activations: a few residual dimensions carry values orders of magnitude above the rest and
dominate every norm, so a cosine can mostly measure them. exclude_massive_dims=k measures the k
dimensions with the largest mean |resid_pre| (over layers and counted tokens) on a first pass and
zeroes them in EVERY operand before any metric; a list of dimensions is used as given. The rows
record the dimensions (column excluded_dims) and the `reference` formula says so.

Memory: a hook keeps an activation only until the metrics that need it are computed (resid_pre of
ONE layer lives until that layer's resid_post arrives); what survives is O(layers x bins), never
O(tokens) -- see NoveltyAccumulator.

Backends (all feed the same NoveltyAccumulator, so they agree to float rounding):
  torch             plain forward (pre-)hooks on the modules a SiteMap names (HF models), or on the
                    HookPoints of a HookedRootModule (our TaperedLM)
  transformer_lens  TransformerBridge.run_with_hooks on blocks.{l}.hook_* (no run_with_cache)
  nnsight           one trace per batch; per-token metrics computed inside the trace, only the
                    [batch, pos] results are saved
  hookpoints        run_with_hooks on any HookedRootModule with TransformerLens names (TaperedLM)

Text/token contract (probe()): the text is tokenized as ONE string without special tokens and cut
into consecutive sequences; `tokens` is the number of model positions, rounded DOWN to a multiple of
seq_len (n_seqs = tokens // seq_len); with prepend_bos each sequence is BOS + (seq_len - 1) text
tokens, so seq_len is always the model's input length. The remainder of the text is unused.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn

from interp.stats import DEFAULT_QUANTILES, RunningHistogram, RunningMoments

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["METRICS", "METRIC_NAMES", "OPTIONAL_METRICS", "SITES", "EXTRA_SITES", "ALL_SITES", "REFERENCES",
           "BACKENDS", "POSITIONS", "Metric", "LayerOperands", "cosine", "NoveltyAccumulator", "position_mask",
           "token_batches", "accumulate", "residual_abs_mean", "massive_dims", "to_frame", "probe_model", "probe",
           "save_table", "load_text", "encode_text", "sequence_plan", "text_sha256"]

SITES = ("resid_pre", "attn_out", "resid_mid", "mlp_out", "resid_post")  # forward order within a layer
# Opt-in sites, hooked only when a tracked metric reads them. mlp_in = the MLP module's input, i.e. the
# output of its input norm (RMSNorm(resid_mid) incl. gain); in forward order it sits after resid_mid.
EXTRA_SITES = ("mlp_in",)
ALL_SITES = ("resid_pre", "attn_out", "resid_mid", "mlp_in", "mlp_out", "resid_post")
REFERENCES = ("raw", "normed")  # reference="normed" adds rho_mlp_normed to the metrics
BACKENDS = ("torch", "transformer_lens", "nnsight", "hookpoints")
POSITIONS = ("skip_first", "all")
COMPUTE_DTYPES = {"float32": torch.float32, "float64": torch.float64}
DEFAULT_EPS = 1e-8
QUANTILE_COLUMNS = tuple(f"q{round(q * 100):02d}" for q in DEFAULT_QUANTILES)  # q05 q25 q50 q75 q95


# --------------------------------------------------------------------------------------------------
# Metric math: [batch, pos, d_model] operands -> [batch, pos] values
# --------------------------------------------------------------------------------------------------

def cosine(a: Float[Tensor, "*tok d"], b: Float[Tensor, "*tok d"], eps: float = DEFAULT_EPS) -> Float[Tensor, "*tok"]:
    """a.b / max(|a||b|, eps): a zero vector gives 0, not NaN (NaN/inf inputs still give NaN)."""
    return _dot(a, b) / (_norm(a) * _norm(b)).clamp_min(eps)


def _dot(a: Tensor, b: Tensor) -> Tensor:
    return torch.einsum("...d,...d->...", a, b)  # a batched matmul: ~2x faster than (a * b).sum(-1) on CPU


def _norm(a: Tensor) -> Tensor:
    return torch.linalg.vector_norm(a, dim=-1)


class LayerOperands:
    """The activations of one layer seen so far, with each site's norm computed once and kept after the
    activation itself is dropped (a [batch, pos] tensor), since 4 of the 6 metrics share |resid_pre|.

    Derived operands: block_out = resid_post - resid_pre (the block's update, computed explicitly:
    via dot products it would cancel catastrophically where the update is small), and, with
    derive_attn_out, attn_out = resid_mid - resid_pre.
    """

    DERIVED = {"block_out": ("resid_post", "resid_pre"), "attn_out": ("resid_mid", "resid_pre")}

    def __init__(self, eps: float, derive_attn_out: bool):
        self.eps = eps
        self.tensors: dict[str, Tensor] = {}
        self.norms: dict[str, Tensor] = {}
        self.derivable = {"block_out"} | ({"attn_out"} if derive_attn_out else set())

    def has(self, site: str) -> bool:
        if site in self.tensors:
            return True
        return site in self.derivable and all(s in self.tensors for s in self.DERIVED[site])

    def __getitem__(self, site: str) -> Tensor:
        if site not in self.tensors:  # derived on first use, then kept like any site
            minuend, subtrahend = self.DERIVED[site]
            self.tensors[site] = self.tensors[minuend] - self.tensors[subtrahend]
        return self.tensors[site]

    def norm(self, site: str) -> Float[Tensor, "batch pos"]:
        if site not in self.norms:
            self.norms[site] = _norm(self[site])
        return self.norms[site]

    def cos(self, a: str, b: str) -> Float[Tensor, "batch pos"]:
        return _dot(self[a], self[b]) / (self.norm(a) * self.norm(b)).clamp_min(self.eps)

    def drop_except(self, keep: set[str]) -> None:
        """Free activations no pending metric needs (a derived operand keeps its sources alive)."""
        keep = keep | {src for d in keep if d in self.DERIVED and d not in self.tensors for src in self.DERIVED[d]}
        for site in [s for s in self.tensors if s not in keep]:
            del self.tensors[site]


def _linear_bins(lo: float, hi: float, bins: int = 201) -> Callable[[int], RunningHistogram]:
    return lambda channels: RunningHistogram(channels, lo=lo, hi=hi, bins=bins)


def _geometric_bins(lo: float = 1e-3, hi: float = 1e3, bins: int = 600) -> Callable[[int], RunningHistogram]:
    edges = torch.logspace(torch.log10(torch.tensor(lo)).item(), torch.log10(torch.tensor(hi)).item(), bins + 1,
                           dtype=torch.float64)
    return lambda channels: RunningHistogram(channels, edges=edges)


@dataclass(frozen=True)
class Metric:
    """A per-token quantity of one layer; `operands` are the sites (or derived operands) it reads,
    `formula` names the exact hooks (with {l})."""

    name: str
    operands: tuple[str, ...]
    fn: Callable[[LayerOperands], Float[Tensor, "batch pos"]]
    formula: str
    histogram: Callable[[int], RunningHistogram]

    def reference(self, layer: int) -> str:
        return self.formula.format(l=layer)


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("rho_mlp", ("mlp_out", "resid_pre"), lambda o: o.cos("mlp_out", "resid_pre"),
           "cos(blocks.{l}.hook_mlp_out, blocks.{l}.hook_resid_pre)", _linear_bins(-1, 1)),
    Metric("rho_mlp_mid", ("mlp_out", "resid_mid"), lambda o: o.cos("mlp_out", "resid_mid"),
           "cos(blocks.{l}.hook_mlp_out, blocks.{l}.hook_resid_mid)", _linear_bins(-1, 1)),
    Metric("rho_block", ("block_out", "resid_pre"), lambda o: o.cos("block_out", "resid_pre"),
           "cos(blocks.{l}.hook_resid_post - blocks.{l}.hook_resid_pre, blocks.{l}.hook_resid_pre)",
           _linear_bins(-1, 1)),
    Metric("rho_attn", ("attn_out", "resid_pre"), lambda o: o.cos("attn_out", "resid_pre"),
           "cos(blocks.{l}.hook_attn_out, blocks.{l}.hook_resid_pre)", _linear_bins(-1, 1)),
    Metric("norm_ratio", ("mlp_out", "resid_pre"), lambda o: o.norm("mlp_out") / o.norm("resid_pre").clamp_min(o.eps),
           "|blocks.{l}.hook_mlp_out| / |blocks.{l}.hook_resid_pre|", _geometric_bins()),
    Metric("block_influence", ("resid_pre", "resid_post"), lambda o: 1.0 - o.cos("resid_pre", "resid_post"),
           "1 - cos(blocks.{l}.hook_resid_pre, blocks.{l}.hook_resid_post)", _linear_bins(0, 2)),
    Metric("rho_mlp_normed", ("mlp_out", "mlp_in"), lambda o: o.cos("mlp_out", "mlp_in"),
           "cos(blocks.{l}.hook_mlp_out, blocks.{l}.mlp.hook_in)", _linear_bins(-1, 1)),
)}
OPTIONAL_METRICS = ("rho_mlp_normed",)  # opt-in: they need extra sites (see EXTRA_SITES)
METRIC_NAMES = tuple(m for m in METRICS if m not in OPTIONAL_METRICS)  # the default set


def _check_metrics(metrics: Sequence[str]) -> tuple[str, ...]:
    metrics = tuple(metrics)
    unknown = [m for m in metrics if m not in METRICS]
    if unknown or not metrics:
        raise ValueError(f"metrics={list(metrics)}: choose a non-empty subset of {list(METRICS)}")
    return metrics


def _with_reference(metrics: Sequence[str], reference: str) -> tuple[str, ...]:
    """The metrics to track for reference="raw" (as given) or "normed" (plus rho_mlp_normed)."""
    if reference not in REFERENCES:
        raise ValueError(f"reference={reference!r}: choose one of {REFERENCES} ('normed' adds rho_mlp_normed, "
                         "the cosine against the MLP's normalised input)")
    metrics = _check_metrics(metrics)
    return metrics + ("rho_mlp_normed",) if reference == "normed" and "rho_mlp_normed" not in metrics else metrics


# --------------------------------------------------------------------------------------------------
# The accumulator: backend-agnostic, streaming
# --------------------------------------------------------------------------------------------------

class NoveltyAccumulator:
    """Receives per-layer activations as a forward produces them, reduces each metric to one number
    per token as soon as both its operands are there, and folds those into RunningMoments /
    RunningHistogram (one channel per layer). Order-independent within a layer; an activation is
    dropped as soon as no pending metric of its layer needs it.

    derive_attn_out: backends that have no attention-output site (HF forward hooks, nnsight) set
    attn_out = resid_mid - resid_pre, which is exact whenever the block adds the (normed) attention
    output to the stream unchanged (Llama; Gemma3 with its post-attention norm included).

    exclude_dims: residual dimensions zeroed in every operand before any metric (massive activations);
    a copy is zeroed, never the model's own tensor.

    Per batch: begin_batch(mask) -> feed(...) for every site of every layer -> end_batch(), which
    raises if some metric of some layer never saw both operands (a hook that did not fire).
    """

    def __init__(self, n_layers: int, metrics: Sequence[str] = METRIC_NAMES, dtype: torch.dtype = torch.float32,
                 eps: float = DEFAULT_EPS, derive_attn_out: bool = False, exclude_dims: Sequence[int] = ()):
        if n_layers < 1:
            raise ValueError(f"n_layers must be >= 1, got {n_layers}")
        self.n_layers = n_layers
        self.metrics = _check_metrics(metrics)
        self.dtype = dtype
        self.eps = eps
        self.derive_attn_out = derive_attn_out
        self.exclude_dims = _check_dims(exclude_dims)
        self._exclude_index = torch.tensor(self.exclude_dims, dtype=torch.long)
        self.meta: dict[str, Any] = {}
        self.moments = {m: RunningMoments(n_layers) for m in self.metrics}
        self.hists = {m: METRICS[m].histogram(n_layers) for m in self.metrics}
        derived = {"block_out"} | ({"attn_out"} if derive_attn_out else set())
        operands = {op for m in self.metrics for op in METRICS[m].operands}
        self.needed_sites = ({op for op in operands if op not in derived}
                             | {src for op in operands & derived for src in LayerOperands.DERIVED[op]})
        self.n_batches = 0
        self.peak_live_tensors = 0  # most [batch, pos, d_model] activations held at once (memory test)
        self._mask: Tensor | None = None
        self._live: dict[int, LayerOperands] = {}
        self._done: set[tuple[int, str]] = set()

    # -- per batch ------------------------------------------------------------------------------
    def begin_batch(self, mask: Bool[Tensor, "batch pos"] | None = None) -> None:
        """mask: which tokens count (position filter and padding); None counts all."""
        self._mask = mask
        self._live.clear()
        self._done.clear()

    def feed(self, layer: int, site: str, x: Float[Tensor, "batch pos d_model"]) -> None:
        """One activation of one layer, e.g. feed(3, "resid_pre", h). Unneeded sites are ignored."""
        if site not in ALL_SITES:
            raise ValueError(f"site={site!r}: expected one of {ALL_SITES}")
        if not 0 <= layer < self.n_layers:
            raise ValueError(f"layer={layer} out of range for n_layers={self.n_layers}")
        if site not in self.needed_sites:
            return
        ops = self._live.setdefault(layer, LayerOperands(self.eps, self.derive_attn_out))
        ops.tensors[site] = self._operand(x)
        for name, values in self._ready(layer, ops).items():
            self.add_values(layer, name, values)
        self.peak_live_tensors = max(self.peak_live_tensors, sum(len(o.tensors) for o in self._live.values()))
        pending = {op for m in self.metrics if (layer, m) not in self._done for op in METRICS[m].operands}
        ops.drop_except(pending)
        if not pending:
            del self._live[layer]

    def _operand(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        """x in the metric dtype, with the excluded dimensions zeroed (out of place)."""
        x = x.detach().to(self.dtype)
        if not self.exclude_dims:
            return x
        if self.exclude_dims[-1] >= x.shape[-1]:
            raise ValueError(f"exclude dims {list(self.exclude_dims)} out of range for d_model={x.shape[-1]}")
        return x.index_fill(-1, self._exclude_index.to(x.device), 0.0)

    def reference(self, metric: str, layer: int) -> str:
        """The exact formula of one row, including the excluded dimensions."""
        formula = METRICS[metric].reference(layer)
        return f"{formula} excluding d_model dims {list(self.exclude_dims)}" if self.exclude_dims else formula

    def _ready(self, layer: int, ops: LayerOperands) -> dict[str, Float[Tensor, "batch pos"]]:
        return {m: METRICS[m].fn(ops) for m in self.metrics
                if (layer, m) not in self._done and all(ops.has(op) for op in METRICS[m].operands)}

    def values(self, layer: int, sites: dict[str, Tensor]) -> dict[str, Float[Tensor, "batch pos"]]:
        """All metrics computable from `sites` at once, without touching the statistics (for backends that
        reduce elsewhere, e.g. inside an nnsight trace); fold them in later with add_values."""
        ops = LayerOperands(self.eps, self.derive_attn_out)
        ops.tensors.update({k: self._operand(v) for k, v in sites.items()})
        return {m: METRICS[m].fn(ops) for m in self.metrics if all(ops.has(op) for op in METRICS[m].operands)}

    def add_values(self, layer: int, metric: str, values: Float[Tensor, "batch pos"]) -> None:
        """Fold per-token values of one metric of one layer into the running statistics."""
        if metric not in self.moments:
            raise ValueError(f"metric {metric!r} is not tracked here; tracked: {list(self.metrics)}")
        if (layer, metric) in self._done:
            raise RuntimeError(f"{metric} of layer {layer} was fed twice in one batch: a site's hook fired "
                               "twice (is the model wrapped twice, or are hooks left from an earlier run?)")
        selected = values[self._mask] if self._mask is not None else values.reshape(-1)
        self.moments[metric].update(selected, channel=layer)
        self.hists[metric].update(selected, channel=layer)
        self._done.add((layer, metric))

    def end_batch(self) -> None:
        missing = [(l, m) for l in range(self.n_layers) for m in self.metrics if (l, m) not in self._done]
        self._live.clear()
        self._done.clear()
        self._mask = None
        if missing:
            layer, metric = missing[0]
            raise RuntimeError(
                f"{len(missing)} (layer, metric) pairs got no values this batch, e.g. {metric} of layer {layer} "
                f"(needs sites {METRICS[metric].operands}): the backend's hooks did not fire there")
        self.n_batches += 1

    # -- results and persistence ----------------------------------------------------------------
    def summary(self) -> list[dict[str, Any]]:
        """One row per (layer, metric): mean, std, sem, ci_low, ci_high, q05..q95, n_tokens, n_nonfinite."""
        rows = []
        for name in self.metrics:
            mom, hist = self.moments[name], self.hists[name]
            low, high = mom.ci95()
            quants = hist.quantiles(DEFAULT_QUANTILES)
            for layer in range(self.n_layers):
                row = {"layer": layer, "metric": name, "mean": mom.mean[layer].item(), "std": mom.std[layer].item(),
                       "sem": mom.sem[layer].item(), "ci_low": low[layer].item(), "ci_high": high[layer].item()}
                row.update({col: quants[layer, i].item() for i, col in enumerate(QUANTILE_COLUMNS)})
                row.update(n_tokens=int(mom.n[layer].item()), n_nonfinite=int(mom.n_nonfinite[layer].item()),
                           reference=self.reference(name, layer))
                rows.append(row)
        return rows

    def state_dict(self) -> dict[str, Any]:
        return {"n_layers": self.n_layers, "metrics": list(self.metrics), "n_batches": self.n_batches,
                "meta": dict(self.meta), "exclude_dims": list(self.exclude_dims),
                "moments": {m: s.state_dict() for m, s in self.moments.items()},
                "hists": {m: h.state_dict() for m, h in self.hists.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> NoveltyAccumulator:
        if (state["n_layers"] != self.n_layers or tuple(state["metrics"]) != self.metrics
                or tuple(state.get("exclude_dims", ())) != self.exclude_dims):
            raise ValueError("state does not match this accumulator's n_layers, metrics and exclude_dims")
        self.n_batches = int(state["n_batches"])
        self.meta = dict(state.get("meta", {}))
        for m in self.metrics:
            self.moments[m].load_state_dict(state["moments"][m])
            self.hists[m].load_state_dict(state["hists"][m])
        return self

    def merge(self, other: NoveltyAccumulator) -> NoveltyAccumulator:
        """Fold another accumulator over the same layers and metrics (another shard of tokens) into this one."""
        if (other.n_layers != self.n_layers or other.metrics != self.metrics
                or other.exclude_dims != self.exclude_dims):
            raise ValueError("can only merge NoveltyAccumulators with the same n_layers, metrics and exclude_dims")
        for m in self.metrics:
            self.moments[m].merge(other.moments[m])
            self.hists[m].merge(other.hists[m])
        self.n_batches += other.n_batches
        return self


def _check_dims(dims: Sequence[int]) -> tuple[int, ...]:
    """Sorted unique non-negative ints (exclude_dims / exclude_massive_dims as a list)."""
    if isinstance(dims, int | str) or not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        raise ValueError(f"exclude dims={dims!r}: expected a list of d_model indices, e.g. [138, 406]")
    if any(d < 0 for d in dims):
        raise ValueError(f"exclude dims={list(dims)}: indices must be >= 0")
    return tuple(sorted(set(int(d) for d in dims)))


# --------------------------------------------------------------------------------------------------
# Tokens
# --------------------------------------------------------------------------------------------------

def position_mask(tokens: Int[Tensor, "batch pos"], positions: str = "skip_first",
                  attention_mask: Int[Tensor, "batch pos"] | None = None) -> Bool[Tensor, "batch pos"]:
    """Which tokens count: by default not position 0 of a sequence (attention sinks, huge norms)."""
    if positions not in POSITIONS:
        raise ValueError(f"positions={positions!r}: choose one of {POSITIONS}")
    mask = torch.ones(tokens.shape, dtype=torch.bool, device=tokens.device)
    if positions == "skip_first":
        mask[:, 0] = False
    if attention_mask is not None:
        mask &= attention_mask.to(device=tokens.device, dtype=torch.bool)
    return mask


def token_batches(ids: Sequence[int] | Tensor, tokens: int, seq_len: int, batch_size: int,
                  bos_id: int | None = None) -> list[Int[Tensor, "batch seq_len"]]:
    """Consecutive sequences of seq_len positions from the start of `ids` (see the module docstring).

    ValueError if `ids` holds fewer text tokens than n_seqs * (seq_len - [bos]) needs.
    """
    n_seqs, per_seq = sequence_plan(tokens, seq_len, batch_size, bos_id is not None)
    ids = torch.as_tensor(ids, dtype=torch.long)
    need = n_seqs * per_seq
    if ids.numel() < need:
        raise ValueError(_too_little_text(ids.numel(), need, tokens, seq_len, bos_id is not None))
    seqs = ids[:need].reshape(n_seqs, per_seq)
    if bos_id is not None:
        seqs = torch.cat([torch.full((n_seqs, 1), bos_id, dtype=torch.long), seqs], 1)
    return list(seqs.split(batch_size))


def sequence_plan(tokens: int, seq_len: int, batch_size: int, bos: bool) -> tuple[int, int]:
    """(number of sequences, text tokens per sequence); raises before any model loads if the text is too short."""
    if seq_len < 1 + bos or batch_size < 1:
        raise ValueError(f"need seq_len >= {1 + bos} and batch_size >= 1, got seq_len={seq_len}, batch_size={batch_size}")
    n_seqs = tokens // seq_len
    if n_seqs < 1:
        raise ValueError(f"tokens={tokens} is less than one sequence of seq_len={seq_len}; raise tokens or lower seq_len")
    return n_seqs, seq_len - bos


def _too_little_text(have: int, need: int, tokens: int, seq_len: int, bos: bool) -> str:
    return (f"the text has {have} tokens but tokens={tokens} at seq_len={seq_len}"
            f"{' with prepend_bos' if bos else ''} needs {need}: pass a longer text (--text FILE) "
            f"or lower tokens to at most {have // (seq_len - bos) * seq_len}")


# --------------------------------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------------------------------

class _StopForward(Exception):
    """Raised from the last layer's resid_post hook: nothing after it (final norm, unembedding) is needed."""


@dataclass(frozen=True)
class _Site:
    """Where a site lives: `module` (dotted path from the hooked root) and whether it is its input or output."""

    site: str
    module: str
    kind: str  # "input" | "output"

    def describe(self) -> str:
        return f"{self.module} {self.kind}"


@dataclass
class _Target:
    """What a backend hooks: the root module, the per-layer sites in forward order, and metadata for the table."""

    root: nn.Module
    n_layers: int
    sites: list[list[_Site]]
    derive_attn_out: bool
    mlp_out_site: str
    hook_sites: str                          # one line: site -> where it came from
    wrapper: Any = None                      # an nnsight wrapper built from the source object, if any


def _first(x: Any) -> Tensor:
    """A module's output may be a tensor or a tuple whose first element is the hidden state."""
    return x[0] if isinstance(x, tuple | list) else x


def _is_hooked_root(model: Any) -> bool:
    """A HookedRootModule or a TransformerBridge: run_with_hooks + TransformerLens hook names."""
    return hasattr(model, "run_with_hooks") and hasattr(model, "hook_dict")


def _hooked_n_layers(model: Any) -> int:
    n = 0
    while f"blocks.{n}.hook_resid_pre" in model.hook_dict:
        n += 1
    if n == 0:
        raise ValueError(f"{type(model).__name__} has no HookPoint 'blocks.0.hook_resid_pre': the probes need "
                         f"TransformerLens names blocks.{{l}}.hook_resid_pre/_mid/_post, hook_mlp_out, hook_attn_out")
    return n


def _hookpoint_target(model: nn.Module, mlp_in: bool = False) -> _Target:
    """Sites of a HookedRootModule (TaperedLM): the outputs of its HookPoints; with mlp_in, also the
    input of the module blocks.{l}.mlp (what its ln2 hands the MLP, gain included)."""
    n = _hooked_n_layers(model)
    missing = [f"blocks.{l}.hook_{s}" for l in range(n) for s in SITES if f"blocks.{l}.hook_{s}" not in model.hook_dict]
    if missing:
        raise ValueError(f"{type(model).__name__} lacks HookPoints {missing[:3]}...: it needs all of "
                         f"{[f'hook_{s}' for s in SITES]} in every block")
    if mlp_in:
        _hooked_mlp_modules(model, n)  # error naming blocks.{l}.mlp if absent
    sites = [[_Site(s, f"blocks.{l}.hook_{s}", "output") for s in SITES] for l in range(n)]
    hook_sites = "; ".join(f"{s}=blocks.{{l}}.hook_{s}" for s in SITES)
    if mlp_in:
        for l, layer_sites in enumerate(sites):
            layer_sites.insert(SITES.index("resid_mid") + 1, _Site("mlp_in", f"blocks.{l}.mlp", "input"))
        hook_sites += "; " + _MLP_IN_MODULE
    return _Target(model, n, sites, derive_attn_out=False, mlp_out_site="blocks.{l}.hook_mlp_out",
                   hook_sites=hook_sites)


_MLP_IN_MODULE = "mlp_in=blocks.{l}.mlp input"
_MLP_IN_HOOK = "blocks.{l}.mlp.hook_in"  # TransformerBridge's name for the MLP's input


def _hooked_mlp_modules(model: nn.Module, n_layers: int) -> list[nn.Module]:
    try:
        return [model.get_submodule(f"blocks.{l}.mlp") for l in range(n_layers)]
    except AttributeError:
        raise ValueError(f"{type(model).__name__} has no module blocks.{{l}}.mlp, so the MLP's normalised input "
                         "(site mlp_in, metric rho_mlp_normed) cannot be read; use reference='raw'") from None


def _hf_target(loaded: Any, mlp_in: bool = False) -> _Target:
    """Sites of an HF model from its SiteMap (interp.hf). Accepts a LoadedModel or a bare HF model."""
    from interp import hf as pretrained

    model = loaded.model if isinstance(loaded, pretrained.LoadedModel) else loaded
    try:
        sm = loaded.sites if isinstance(loaded, pretrained.LoadedModel) else pretrained.site_map_for(model)
    except ValueError as err:
        raise ValueError(f"cannot probe {type(model).__name__}: its MLP and residual sites are unknown. {err}") from None
    layers = pretrained.layer_modules(loaded)
    for rel in (sm.mlp_input_norm, sm.mlp_out_module, sm.mlp):
        pretrained.get_submodule(layers[0], rel)  # AttributeError naming the SiteMap entry if it is wrong
    sites = [_hf_layer_sites(sm, l, mlp_in) for l in range(len(layers))]
    mlp_site = f"{sm.mlp_out_module} output" + (" (post-MLP norm, what is added to the stream)" if sm.post_mlp_norm else "")
    hook_sites = ("; ".join(f"{s.site}={s.describe()}" for s in _hf_layer_sites(sm, "{l}", mlp_in))
                  + "; attn_out=resid_mid-resid_pre")
    return _Target(model, len(layers), sites, derive_attn_out=True, mlp_out_site=mlp_site, hook_sites=hook_sites)


def _hf_layer_sites(sm: Any, layer: int | str, mlp_in: bool = False) -> list[_Site]:
    """Layer input = resid_pre; input of the MLP's input norm = resid_mid; [input of the MLP = mlp_in, the
    normalised stream it reads]; output of the MLP (or of the post-MLP norm, Gemma) = mlp_out; layer
    output = resid_post (see interp.hf.SiteMap). Forward order."""
    return [_Site("resid_pre", f"{sm.layers}.{layer}", "input"),
            _Site("resid_mid", f"{sm.layers}.{layer}.{sm.mlp_input_norm}", "input"),
            *([_Site("mlp_in", f"{sm.layers}.{layer}.{sm.mlp}", "input")] if mlp_in else []),
            _Site("mlp_out", f"{sm.layers}.{layer}.{sm.mlp_out_module}", "output"),
            _Site("resid_post", f"{sm.layers}.{layer}", "output")]


def _model_device(model: nn.Module) -> torch.device:
    try:
        return next(model.parameters()).device
    except StopIteration:
        return torch.device("cpu")


def _batch_parts(batch: Tensor | dict) -> tuple[Tensor, Tensor | None]:
    if isinstance(batch, dict):
        return batch["input_ids"], batch.get("attention_mask")
    return batch, None


def _run_torch(target: _Target, batches: Iterable, acc: NoveltyAccumulator, positions: str) -> None:
    """Plain nn.Module hooks: pre-hooks read inputs, forward hooks read outputs; nothing is cached."""
    last = (target.n_layers - 1, "resid_post")
    handles = []

    def reader(layer: int, site: str, kind: str) -> Callable:
        def read(x: Tensor) -> None:
            acc.feed(layer, site, x)
            if (layer, site) == last:
                raise _StopForward
        if kind == "input":  # pre-hook with kwargs: hidden state is the first positional argument
            return lambda module, args, kwargs: read(args[0] if args else kwargs.get("hidden_states",
                                                                                     next(iter(kwargs.values()))))
        return lambda module, args, output: read(_first(output))

    try:
        for layer, layer_sites in enumerate(target.sites):
            for s in layer_sites:
                module = target.root.get_submodule(s.module)
                fn = reader(layer, s.site, s.kind)
                handles.append(module.register_forward_pre_hook(fn, with_kwargs=True) if s.kind == "input"
                               else module.register_forward_hook(fn))
        pass_mask = not _is_hooked_root(target.root)
        _drive(batches, acc, positions, _model_device(target.root),
               lambda ids, attn: target.root(ids, **({"attention_mask": attn} if pass_mask and attn is not None
                                                      else {})))
    finally:
        for h in handles:
            h.remove()


def _drive(batches: Iterable, acc: NoveltyAccumulator, positions: str, device: torch.device,
           forward: Callable[[Tensor, Tensor | None], Any]) -> None:
    """The batch loop every hook backend shares: mask positions, run the forward (whose hooks feed
    `acc` and stop it after the last layer), close the batch."""
    for batch in batches:
        ids, attn = _batch_parts(batch)
        ids = ids.to(device)
        attn = attn.to(device) if attn is not None else None
        acc.begin_batch(position_mask(ids, positions, attn))
        try:
            forward(ids, attn)
        except _StopForward:
            pass
        acc.end_batch()


def _run_hooked(model: Any, batches: Iterable, acc: NoveltyAccumulator, positions: str) -> None:
    """run_with_hooks on TransformerLens names (TransformerBridge or any HookedRootModule)."""
    n = acc.n_layers

    def reader(layer: int, site: str):
        def hook(x, hook):
            acc.feed(layer, site, x)
            if layer == n - 1 and site == "resid_post":
                raise _StopForward
        return hook

    hooks = [(f"blocks.{l}.hook_{s}", reader(l, s)) for l in range(n) for s in SITES if s in acc.needed_sites]
    handles = []
    if "mlp_in" in acc.needed_sites:
        if _MLP_IN_HOOK.format(l=0) in model.hook_dict:  # TransformerBridge
            hooks += [(_MLP_IN_HOOK.format(l=l), reader(l, "mlp_in")) for l in range(n)]
        else:  # TaperedLM: no HookPoint after ln2's gain; a pre-hook on the MLP module reads its input
            handles = [m.register_forward_pre_hook(lambda mod, args, l=l: acc.feed(l, "mlp_in", args[0]))
                       for l, m in enumerate(_hooked_mlp_modules(model, n))]
    # a bridge forwards attention_mask to the HF model; our TaperedLM has none (right padding only)
    pass_mask = _is_bridge(model)
    try:
        _drive(batches, acc, positions, _model_device(model),
               lambda ids, attn: model.run_with_hooks(
                   ids, fwd_hooks=hooks, **({"attention_mask": attn} if pass_mask and attn is not None else {})))
    finally:
        for h in handles:
            h.remove()


def _run_nnsight(target: _Target, batches: Iterable, acc: NoveltyAccumulator, positions: str) -> None:
    """One trace per batch; the metric math runs inside the trace on the real tensors and only the
    [batch, pos] results are saved. Sites are touched in forward order (nnsight 0.8 requires it)."""
    import nnsight

    lm = target.wrapper if target.wrapper is not None else nnsight.NNsight(target.root)
    device = _model_device(target.root)
    for batch in batches:
        ids, attn = _batch_parts(batch)
        ids = ids.to(device)
        saved: list[dict[str, Tensor]] = []  # created outside the trace, filled inside it
        kwargs = {} if attn is None or _is_hooked_root(target.root) else {"attention_mask": attn.to(device)}
        with torch.no_grad(), lm.trace(ids, **kwargs) as tracer:
            for layer, layer_sites in enumerate(target.sites):
                got = {}
                for s in layer_sites:
                    envoy = _envoy(lm, s.module)
                    got[s.site] = envoy.input if s.kind == "input" else _first(envoy.output)
                saved.append({m: nnsight.save(v) for m, v in acc.values(layer, got).items()})
                del got  # only the [batch, pos] metric values outlive the layer
            tracer.stop()  # nothing after the last layer is needed
        acc.begin_batch(position_mask(ids, positions, attn))
        for layer, vals in enumerate(saved):
            for metric, v in vals.items():
                acc.add_values(layer, metric, v)
        acc.end_batch()


def _envoy(lm: Any, dotted: str) -> Any:
    """lm.a.b[3].c for dotted = "a.b.3.c" (nnsight envoys mirror the module tree)."""
    obj = lm
    for part in dotted.split("."):
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    return obj


# --------------------------------------------------------------------------------------------------
# Choosing a backend for a model object
# --------------------------------------------------------------------------------------------------

def _is_bridge(model: Any) -> bool:
    return _is_hooked_root(model) and not isinstance(model, _hooked_root_class())


def _hooked_root_class() -> type:
    from transformer_lens import HookedRootModule

    return HookedRootModule


def _hf_source(model: Any) -> Any:
    """A LoadedModel or a bare nn.Module that is neither a HookedRootModule nor a bridge, else None."""
    from interp import hf as pretrained

    if isinstance(model, pretrained.LoadedModel):
        return model
    if isinstance(model, nn.Module) and not _is_hooked_root(model):
        return model
    return None


def _plan(model: Any, backend: str, mlp_in: bool = False) -> tuple[Callable[..., None], Any, bool, str, str]:
    """(runner, runner target, derive_attn_out, mlp_out_site, hook_sites) for a model object and a backend;
    mlp_in: also hook the MLP's input (for rho_mlp_normed).

    A HookedRootModule (TaperedLM) works with every backend: torch hooks go on its HookPoints,
    transformer_lens/hookpoints use its run_with_hooks, nnsight wraps it with nnsight.NNsight.
    """
    from interp import hf as pretrained

    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}: choose one of {BACKENDS}")
    tl_sites = "; ".join(f"{s}=blocks.{{l}}.hook_{s}" for s in SITES)
    if _is_hooked_root(model):
        if backend in ("transformer_lens", "hookpoints"):
            if mlp_in:
                tl_sites += "; mlp_in=" + _MLP_IN_HOOK if _MLP_IN_HOOK.format(l=0) in model.hook_dict else "; " + _MLP_IN_MODULE
            return _run_hooked, model, False, "blocks.{l}.hook_mlp_out", tl_sites
        if _is_bridge(model):
            raise ValueError(f"backend={backend!r} cannot hook a TransformerBridge: use backend='transformer_lens', "
                             "or pass the LoadedModel / HF model itself")
        target = _hookpoint_target(model, mlp_in)
        return (_run_torch if backend == "torch" else _run_nnsight), target, False, target.mlp_out_site, target.hook_sites
    source = _hf_source(model)
    if source is None:
        raise TypeError(f"cannot probe a {type(model).__name__}: pass a registry name / path, an "
                        "interp.hf.LoadedModel, an HF causal LM, a TaperedLM or a TransformerBridge")
    if backend == "hookpoints":
        raise ValueError("backend='hookpoints' needs a HookedRootModule (e.g. our TaperedLM); for an HF model "
                         "use backend='transformer_lens' (it builds a TransformerBridge) or 'torch'")
    if backend == "transformer_lens":
        if not isinstance(source, pretrained.LoadedModel):
            raise ValueError("backend='transformer_lens' needs a LoadedModel (the bridge needs the tokenizer): "
                             "use interp.hf.load_pretrained(...) or pass the model by name")
        bridge = pretrained.to_transformer_bridge(source)
        return _plan(bridge, backend, mlp_in)
    target = _hf_target(source, mlp_in)
    if backend == "nnsight" and isinstance(source, pretrained.LoadedModel):
        target.wrapper = pretrained.to_nnsight(source)
    return (_run_torch if backend == "torch" else _run_nnsight), target, True, target.mlp_out_site, target.hook_sites


def _n_layers_of(target: Any) -> int:
    return target.n_layers if isinstance(target, _Target) else _hooked_n_layers(target)


def accumulate(model: Any, batches: Iterable[Tensor | dict], backend: str = "torch",
               metrics: Sequence[str] = METRIC_NAMES, positions: str = "skip_first", dtype: str = "float32",
               eps: float = DEFAULT_EPS, reference: str = "raw",
               exclude_massive_dims: int | Sequence[int] | None = None) -> NoveltyAccumulator:
    """Stream `batches` ([batch, pos] token tensors, or dicts with input_ids and attention_mask) through
    `model` and return the filled accumulator (merge it with others for sharded analyses).

    `acc.meta` records the backend and where each site came from. The model is run under no_grad;
    padding (attention_mask == 0) is masked out of the statistics.
    reference: "raw" (default) or "normed", which adds rho_mlp_normed (cosine with the MLP's normalised input).
    exclude_massive_dims: None (default); k, to zero the k dimensions of largest mean |resid_pre| in every
        operand (measured on a first pass over the same batches, so it costs a second forward); or a list
        of dimensions. acc.meta then holds excluded_dims (and the measured dims' mean |resid_pre|).
    """
    if dtype not in COMPUTE_DTYPES:
        raise ValueError(f"dtype={dtype!r}: choose one of {tuple(COMPUTE_DTYPES)}")
    if positions not in POSITIONS:
        raise ValueError(f"positions={positions!r}: choose one of {POSITIONS}")
    metrics = _with_reference(metrics, reference)
    k, given_dims = _exclusion_request(exclude_massive_dims)
    runner, target, derive, mlp_site, hook_sites = _plan(model, backend, mlp_in="rho_mlp_normed" in metrics)
    meta: dict[str, Any] = {"backend": backend, "mlp_out_site": mlp_site, "hook_sites": hook_sites, "dtype": dtype,
                            "positions": positions, "eps": eps}
    if reference != "raw":
        meta["reference_mode"] = reference
    dims = given_dims
    if k:
        batches = list(batches)  # read twice: the first pass measures, the second probes
        scale = _residual_abs_mean(runner, target, batches, positions).mean(0)  # [d_model]
        if k >= scale.numel():
            raise ValueError(f"exclude_massive_dims={k} must be below d_model={scale.numel()}")
        top = scale.topk(k)
        dims = tuple(sorted(top.indices.tolist()))
        meta["excluded_dims_mean_abs"] = str([round(v, 4) for v in scale[list(dims)].tolist()])
        meta["median_dim_mean_abs"] = round(scale.median().item(), 6)
    if exclude_massive_dims is not None:
        meta["exclude_massive_dims"] = k if k else "given"
        meta["excluded_dims"] = str(list(dims))
    acc = NoveltyAccumulator(_n_layers_of(target), metrics, COMPUTE_DTYPES[dtype], eps, derive_attn_out=derive,
                             exclude_dims=dims)
    acc.meta = meta
    _run_eval(runner, target, batches, acc, positions)
    return acc


def _exclusion_request(spec: int | Sequence[int] | None) -> tuple[int, tuple[int, ...]]:
    """(k to measure, dims given) from exclude_massive_dims."""
    if spec is None:
        return 0, ()
    if isinstance(spec, int) and not isinstance(spec, bool):
        if spec < 1:
            raise ValueError(f"exclude_massive_dims={spec}: give k >= 1 (or None for no exclusion, or a list of dims)")
        return spec, ()
    return 0, _check_dims(spec)


def _run_eval(runner: Callable[..., None], target: Any, batches: Iterable, acc: Any, positions: str) -> None:
    """runner(...) in eval mode under no_grad, restoring the model's training flag."""
    root = target.root if isinstance(target, _Target) else target
    was_training = root.training
    root.eval()
    try:
        with torch.no_grad():
            runner(target, batches, acc, positions)
    finally:
        root.train(was_training)


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


def _residual_abs_mean(runner: Callable[..., None], target: Any, batches: Iterable, positions: str) -> Tensor:
    scale = _DimScale(_n_layers_of(target))
    # the nnsight runner reduces inside its trace via acc.values(); plain torch hooks on the same modules
    # read the same tensors (the backends agree to 1e-5, see tests)
    _run_eval(_run_torch if runner is _run_nnsight else runner, target, batches, scale, positions)
    return scale.mean()


def residual_abs_mean(model: Any, batches: Iterable[Tensor | dict], backend: str = "torch",
                      positions: str = "skip_first") -> Float[Tensor, "layer d_model"]:
    """Mean |blocks.{l}.hook_resid_pre| per layer and residual dimension over the counted tokens: where
    the massive activations are (a few dimensions orders of magnitude above the median)."""
    if positions not in POSITIONS:
        raise ValueError(f"positions={positions!r}: choose one of {POSITIONS}")
    runner, target, *_ = _plan(model, backend)
    return _residual_abs_mean(runner, target, batches, positions)


def massive_dims(model: Any, batches: Iterable[Tensor | dict], k: int, backend: str = "torch",
                 positions: str = "skip_first") -> list[int]:
    """The k residual dimensions with the largest mean |resid_pre| (averaged over layers), sorted by index:
    what exclude_massive_dims=k leaves out."""
    scale = residual_abs_mean(model, batches, backend, positions).mean(0)
    return sorted(scale.topk(k).indices.tolist())


TABLE_COLUMNS = ("model", "checkpoint", "layer", "n_layers", "depth", "metric", "mean", "std", "sem", "ci_low",
                 "ci_high", *QUANTILE_COLUMNS, "n_tokens", "n_nonfinite", "reference", "mlp_out_site", "hook_sites",
                 "positions", "seq_len", "prepend_bos", "text_source", "text_sha256", "dtype", "eps", "backend")


def to_frame(acc: NoveltyAccumulator, **columns: Any) -> pd.DataFrame:
    """The accumulator's summary as a tidy long table: TABLE_COLUMNS first (those present), then any
    other `columns` given, then `versions`. `columns` (model, checkpoint, seq_len, ...) and acc.meta
    (backend, sites, dtype, positions) are repeated on every row."""
    import pandas as pd

    from interp._util.provenance import versions_string

    df = pd.DataFrame(acc.summary())
    df["n_layers"] = acc.n_layers
    df["depth"] = df["layer"] / max(acc.n_layers - 1, 1)  # l / (L - 1): models of any depth share an axis
    for key, value in {"model": "", "checkpoint": "", **acc.meta, **columns}.items():
        df[key] = value
    df["versions"] = versions_string()
    first = [c for c in TABLE_COLUMNS if c in df.columns]
    return df[first + [c for c in df.columns if c not in first and c != "versions"] + ["versions"]]


def probe_model(model: Any, batches: Iterable[Tensor | dict], backend: str = "torch",
                metrics: Sequence[str] = METRIC_NAMES, positions: str = "skip_first", dtype: str = "float32",
                eps: float = DEFAULT_EPS, reference: str = "raw",
                exclude_massive_dims: int | Sequence[int] | None = None, **columns: Any) -> pd.DataFrame:
    """Lower-level entry for notebooks and batch analysis: an already-loaded model and token batches in,
    the tidy table out (`columns` are added to every row, e.g. model="...", checkpoint="...").
    reference / exclude_massive_dims: see accumulate()."""
    acc = accumulate(model, batches, backend, metrics, positions, dtype, eps, reference, exclude_massive_dims)
    return to_frame(acc, **{"model": _model_label(model), **columns})


def _model_label(model: Any) -> str:
    return getattr(model, "name", None) or type(model).__name__


# --------------------------------------------------------------------------------------------------
# Text and tokenizers
# --------------------------------------------------------------------------------------------------

def load_text(text: str | Path | None) -> tuple[str, str]:
    """(text, label): None -> held-out wiki split; a corpus name (interp.data.CORPORA) -> its held-out
    split; otherwise a path to a UTF-8 text file."""
    from interp import data

    if text is None or str(text) in data.CORPORA:
        source = "wiki" if text is None else str(text)
        return data.heldout_text(source, "val"), f"{source}:val"
    path = Path(text).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"text={str(text)!r}: no such file; pass a UTF-8 text file, a corpus name "
                                f"{data.CORPORA} or None (held-out wiki)")
    return path.read_text(encoding="utf-8"), str(path)


def encode_text(tokenizer: Any, text: str) -> list[int]:
    """Token ids of `text` WITHOUT special tokens, for interp.data.TextTokenizer or an HF tokenizer."""
    from interp import data

    if isinstance(tokenizer, data.TextTokenizer):
        return tokenizer.encode(text)
    ids = tokenizer.encode(text, add_special_tokens=False)
    return list(getattr(ids, "ids", ids))


def _bos_id(tokenizer: Any, model: Any) -> int:
    """BOS for prepend_bos: the tokenizer's bos_token_id, else the model config's, else (our BPE
    models) the document separator eos_id, which is what marks a document start in training."""
    for candidate in (getattr(tokenizer, "bos_token_id", None),
                      getattr(getattr(_unwrap_model(model), "config", None), "bos_token_id", None),
                      getattr(tokenizer, "eos_id", None)):
        if isinstance(candidate, int):
            return candidate
    raise ValueError("prepend_bos=True but neither the tokenizer nor the model config defines a BOS token; "
                     "use prepend_bos=False")


def _unwrap_model(model: Any) -> Any:
    return getattr(model, "model", model) if not isinstance(model, nn.Module) else model


def text_sha256(text: str) -> str:
    """Content hash of the probed text: result rows and batch-analysis keys name the exact text by it."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------------------------------
# The entry point
# --------------------------------------------------------------------------------------------------

def probe(model: Any = "smollm2-135m", text: str | Path | None = None, tokens: int = 16384, seq_len: int = 512,
          batch_size: int = 4, backend: str = "torch", positions: str = "skip_first", prepend_bos: bool = False,
          dtype: str = "float32", metrics: Sequence[str] = METRIC_NAMES, tokenizer: Any = None,
          eps: float = DEFAULT_EPS, reference: str = "raw",
          exclude_massive_dims: int | Sequence[int] | None = None) -> pd.DataFrame:
    """Per-layer novelty metrics of one model over held-out text, as a tidy long table (one row per
    layer and metric; columns in the module docstring of the table, see to_frame).

    model: a registry name / HF dir / .gguf / hub id (interp.hf.load_pretrained), one of our
        checkpoint directories (interp.training.checkpoints; tokenized with the checkpoint's own tokenizer), or
        an already-loaded object (LoadedModel, HF model, TaperedLM, TransformerBridge) with tokenizer=.
    text: None (held-out wiki), a corpus name, or a text file; see the module docstring for how tokens,
        seq_len and prepend_bos cut it. Too little text raises ValueError before any weights are loaded
        (the tokenizer is loaded alone first).
    dtype: precision of the metric math ("float32" or "float64"); the model runs in its own dtype.
    reference: "raw" (default) | "normed": also rho_mlp_normed, the cosine with the MLP's normalised input.
    exclude_massive_dims: None | k (measure the top-k mean-|resid_pre| dims on a first pass; a second
        forward) | a list of dims: zeroed in every operand; rows get columns excluded_dims etc.
    The table's attrs["timing"] holds load and probe seconds.
    """
    from interp import hf

    # validate cheap arguments before touching any file
    _with_reference(metrics, reference)
    _exclusion_request(exclude_massive_dims)
    for name, value, allowed in (("backend", backend, BACKENDS), ("positions", positions, POSITIONS),
                                 ("dtype", dtype, tuple(COMPUTE_DTYPES))):
        if value not in allowed:
            raise ValueError(f"{name}={value!r}: choose one of {allowed}")
    sequence_plan(tokens, seq_len, batch_size, prepend_bos)
    text_str, text_source = load_text(text)

    def check_ids(tok: Any) -> list[int]:
        ids = encode_text(tok, text_str)
        n_seqs, per_seq = sequence_plan(tokens, seq_len, batch_size, prepend_bos)
        if len(ids) < n_seqs * per_seq:
            raise ValueError(_too_little_text(len(ids), n_seqs * per_seq, tokens, seq_len, prepend_bos))
        return ids

    ids: list[int] | None = None
    checkpoint = ""
    start = time.perf_counter()
    if isinstance(model, str | Path):
        ref = hf.resolve_model(model)
        checkpoint = ref.checkpoint
        tok = tokenizer if tokenizer is not None else ref.load_tokenizer()
        ids = check_ids(tok)
        model_obj = ref.load()
        label = ref.label if ref.kind == "checkpoint" else str(model)
    else:
        model_obj = model
        tok = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
        if tok is None:
            raise ValueError(f"probe(model=<{type(model).__name__}>): pass tokenizer= for an object without one")
        label = _model_label(model)
    if ids is None:
        ids = check_ids(tok)
    load_s = time.perf_counter() - start
    bos = _bos_id(tok, model_obj) if prepend_bos else None
    batches = token_batches(ids, tokens, seq_len, batch_size, bos)
    if backend == "transformer_lens" and isinstance(model_obj, hf.LoadedModel) and model_obj is not model:
        model_obj = hf.to_transformer_bridge(model_obj, inplace=True)  # we own it: no copy needed
    start = time.perf_counter()
    acc = accumulate(model_obj, batches, backend, metrics, positions, dtype, eps, reference, exclude_massive_dims)
    probe_s = time.perf_counter() - start
    df = to_frame(acc, model=label, checkpoint=checkpoint, seq_len=seq_len, prepend_bos=prepend_bos,
                  text_source=text_source, text_sha256=text_sha256(text_str))
    n_positions = sum(b.numel() for b in batches)
    df.attrs["timing"] = {"load_s": load_s, "probe_s": probe_s, "positions": n_positions,
                          "positions_per_s": n_positions / probe_s if probe_s else float("nan")}
    return df


def save_table(df: pd.DataFrame, path: str | Path, csv: bool = False) -> list[Path]:
    """Write the table as parquet (or CSV when `path` ends in .csv); csv=True also writes a .csv beside
    the parquet file. Parent folders are created. Returns the written paths."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = []
    if path.suffix == ".csv":
        df.to_csv(path, index=False)
        return [path]
    df.to_parquet(path, index=False)
    written.append(path)
    if csv:
        df.to_csv(path.with_suffix(".csv"), index=False)
        written.append(path.with_suffix(".csv"))
    return written
