"""The streaming accumulator: backend-agnostic, fed per-layer activations as a forward produces them.

Each metric is reduced to one number per token as soon as both its operands are there, then folded
into RunningMoments / RunningHistogram (one channel per layer): mean, std and histogram quantiles; tokens
whose value is NaN/inf are counted in n_nonfinite and never averaged in. The 95% CI treats sequences, not
tokens, as the independent units (tokens of one sequence are correlated): ClusteredMean's cluster-robust sem
over the sequences, with t(S - 1); `sem_tokens` is the per-token std / sqrt(n), which ignores that correlation
and is kept only for comparison.

Memory: an activation lives only until the metrics that need it are computed (resid_pre of ONE layer
lives until that layer's resid_post arrives); what survives is O(layers x bins), never O(tokens).

Massive activations: exclude_dims zeroes residual dimensions in EVERY operand before any metric (a few
dimensions orders of magnitude above the rest dominate every norm, so a cosine can mostly measure them);
the rows' `reference` formula says so.

Opt-in measures: the logit lens (interp.probes.lens; per token, needs `lens=` and a reference forward per
batch through prepare()) and the population metrics (interp.probes.population; covariances over all
tokens, a jackknife CI over groups of sequences). With a population metric every row gets `ci_method`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from interp.probes.config import check_dims, check_metrics
from interp.probes.metrics import METRICS, LayerOperands, derived_operands
from interp.probes.names import ALL_SITES, DEFAULT_EPS, JACKKNIFE_GROUPS, LENS_METRICS, METRIC_NAMES, POPULATION_METRICS
from interp.probes.population import FORMULAS, PopulationStats
from interp.stats import DEFAULT_QUANTILES, ClusteredMean, RunningMoments

QUANTILE_COLUMNS = tuple(f"q{round(q * 100):02d}" for q in DEFAULT_QUANTILES)  # q05 q25 q50 q75 q95
SEQUENCE_CI = "t over sequences: mean -+ t(0.975, S-1) * cluster-robust sem (CR1), S = n_sequences"


class NoveltyAccumulator:
    """Receives per-layer activations as a forward produces them, reduces each metric to one number
    per token as soon as both its operands are there, and folds those into RunningMoments /
    RunningHistogram (one channel per layer). Order-independent within a layer; an activation is
    dropped as soon as no pending metric of its layer needs it.

    derive_attn_out: backends that have no attention-output site (HF forward hooks, nnsight) set
    attn_out = resid_mid - resid_pre, which is exact whenever the block adds the (normed) attention
    output to the stream unchanged (Llama; Gemma3 with its post-attention norm included).
    derive_resid_mid: a parallel block (GPT-NeoX, GPT-J, Phi) has no resid_mid site; the backends feed attn_out
    and resid_mid := resid_pre + attn_out (docs/probes.md, "Block styles").

    exclude_dims: residual dimensions zeroed in every operand before any metric (massive activations);
    a copy is zeroed, never the model's own tensor.

    Per batch: begin_batch(mask) -> [prepare(ids, attention_mask), with a lens] -> feed(...) for every site
    of every layer -> end_batch(), which raises if some metric of some layer never saw both operands (a
    hook that did not fire).

    lens: an interp.probes.lens.LogitLens, required by logit_lens_kl / logit_lens_top1.
    jackknife_groups: groups of whole sequences for the population metrics' CI (memory grows with it).
    """

    def __init__(self, n_layers: int, metrics: Sequence[str] = METRIC_NAMES, dtype: torch.dtype = torch.float32,
                 eps: float = DEFAULT_EPS, derive_attn_out: bool = False, exclude_dims: Sequence[int] = (),
                 lens: Any = None, jackknife_groups: int = JACKKNIFE_GROUPS, derive_resid_mid: bool = False):
        if n_layers < 1:
            raise ValueError(f"n_layers must be >= 1, got {n_layers}")
        self.n_layers = n_layers
        self.metrics = check_metrics(metrics)
        self.token_metrics = tuple(m for m in self.metrics if m not in POPULATION_METRICS)
        population = tuple(m for m in self.metrics if m in POPULATION_METRICS)
        self.population = PopulationStats(n_layers, population, jackknife_groups) if population else None
        if lens is None and set(LENS_METRICS) & set(self.metrics):
            raise ValueError(f"metrics {[m for m in self.metrics if m in LENS_METRICS]} need the model's final norm "
                             "and unembedding: pass lens=interp.probes.lens.LogitLens.for_model(model)")
        self.lens = lens if set(LENS_METRICS) & set(self.metrics) else None
        self.dtype = dtype
        self.eps = eps
        self.derive_attn_out = derive_attn_out
        self.derive_resid_mid = derive_resid_mid
        self.exclude_dims = check_dims(exclude_dims)
        self._exclude_index = torch.tensor(self.exclude_dims, dtype=torch.long)
        self.meta: dict[str, Any] = {}
        self.moments = {m: RunningMoments(n_layers) for m in self.token_metrics}
        self.clustered = {m: ClusteredMean(n_layers) for m in self.token_metrics}  # the CI: sequences as units
        self.hists = {m: METRICS[m].histogram(n_layers) for m in self.token_metrics}
        derived = derived_operands(derive_attn_out, derive_resid_mid)
        operands = {op for m in self.token_metrics for op in METRICS[m].operands}
        operands |= self.population.sites if self.population else set()
        self.needed_sites = ({op for op in operands if op not in derived}
                             | {src for op in operands & derived for src in LayerOperands.sources(op)})
        self.n_batches = 0
        self.peak_live_tensors = 0  # most [batch, pos, d_model] activations held at once (memory test)
        self._mask: Tensor | None = None
        self._rows = 0  # sequences in this batch (the population metrics' jackknife groups)
        self._live: dict[int, LayerOperands] = {}
        self._done: set[tuple[int, str]] = set()

    # -- per batch ------------------------------------------------------------------------------
    def begin_batch(self, mask: Bool[Tensor, "batch pos"] | None = None) -> None:
        """mask: which tokens count (position filter and padding); None counts all."""
        self._mask = mask
        self._rows = 0 if mask is None else mask.shape[0]
        self._live.clear()
        self._done.clear()
        if self.population:
            self.population.begin_batch(mask)

    @property
    def needs_reference(self) -> bool:
        """Whether the backend must call prepare(ids, attention_mask) before each batch's hooked forward."""
        return self.lens is not None

    def prepare(self, ids: Tensor, attention_mask: Tensor | None = None) -> None:
        """The logit lens' reference forward for this batch (with the backend's hooks gated off)."""
        if self.lens is not None:
            self.lens.reference(ids, attention_mask)

    def feed(self, layer: int, site: str, x: Float[Tensor, "batch pos d_model"]) -> None:
        """One activation of one layer, e.g. feed(3, "resid_pre", h). Unneeded sites are ignored."""
        if site not in ALL_SITES:
            raise ValueError(f"site={site!r}: expected one of {ALL_SITES}")
        if not 0 <= layer < self.n_layers:
            raise ValueError(f"layer={layer} out of range for n_layers={self.n_layers}")
        if site not in self.needed_sites:
            return
        ops = self._live.setdefault(layer, LayerOperands(self.eps, self.derive_attn_out, self.lens,
                                                         self.derive_resid_mid))
        ops.tensors[site] = self._operand(x)
        self._rows = self._rows or x.shape[0]
        for name, values in self._ready(layer, ops).items():
            self.add_values(layer, name, values)
        if self.population:
            self.population.feed(layer, ops)
        self.peak_live_tensors = max(self.peak_live_tensors, sum(len(o.tensors) for o in self._live.values()))
        pending = {op for m in self.token_metrics if (layer, m) not in self._done for op in METRICS[m].operands}
        pending |= self.population.pending(layer) if self.population else set()
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
        if metric in POPULATION_METRICS:
            formula = FORMULAS[metric].format(l=layer)
        else:
            formula = METRICS[metric].reference(layer, *([self.lens.describe] if self.lens is not None else []))
        return f"{formula} excluding d_model dims {list(self.exclude_dims)}" if self.exclude_dims else formula

    def _ready(self, layer: int, ops: LayerOperands) -> dict[str, Float[Tensor, "batch pos"]]:
        return {m: METRICS[m].fn(ops) for m in self.token_metrics
                if (layer, m) not in self._done and all(ops.has(op) for op in METRICS[m].operands)}

    def values(self, layer: int, sites: dict[str, Tensor]) -> dict[str, Float[Tensor, "batch pos"]]:
        """All per-token metrics computable from `sites` at once, without touching the statistics (for a loop
        that reduces elsewhere); fold them in later with add_values. The population metrics need feed()."""
        ops = LayerOperands(self.eps, self.derive_attn_out, self.lens, self.derive_resid_mid)
        ops.tensors.update({k: self._operand(v) for k, v in sites.items()})
        return {m: METRICS[m].fn(ops) for m in self.token_metrics if all(ops.has(op) for op in METRICS[m].operands)}

    def add_values(self, layer: int, metric: str, values: Float[Tensor, "batch pos"]) -> None:
        """Fold per-token values of one metric of one layer into the running statistics."""
        if metric not in self.moments:
            raise ValueError(f"metric {metric!r} is not tracked here; tracked: {list(self.metrics)}")
        if values.dim() != 2 or (self._mask is not None and values.shape != self._mask.shape):
            raise ValueError(f"{metric} of layer {layer}: values must be [batch, pos] like the batch's mask "
                             f"{tuple(self._mask.shape) if self._mask is not None else ''}, got {tuple(values.shape)}: "
                             "each row is one sequence, the unit of the CI")
        if self._mask is not None and values.device != self._mask.device:
            values = values.to(self._mask.device)   # a layer placed on another device: reduced where the batch is
        if (layer, metric) in self._done:
            raise RuntimeError(f"{metric} of layer {layer} was fed twice in one batch: a site's hook fired "
                               "twice (is the model wrapped twice, or are hooks left from an earlier run?)")
        selected = values[self._mask] if self._mask is not None else values.reshape(-1)
        self.moments[metric].update(selected, channel=layer)
        self.hists[metric].update(selected, channel=layer)
        valid = torch.isfinite(values) if self._mask is None else (self._mask & torch.isfinite(values))
        sums = torch.where(valid, values.to(torch.float64), torch.zeros((), dtype=torch.float64, device=values.device))
        self.clustered[metric].update(sums.sum(-1), valid.sum(-1), channel=layer)  # one (sum, count) per sequence
        self._done.add((layer, metric))

    def end_batch(self) -> None:
        missing = [(l, m) for l in range(self.n_layers) for m in self.token_metrics if (l, m) not in self._done]
        missing += self.population.missing() if self.population else []
        self._live.clear()
        self._done.clear()
        self._mask = None
        if self.lens is not None:
            self.lens.clear()
        if self.population:
            self.population.end_batch(self._rows)
        if missing:
            layer, metric = missing[0]
            needs = METRICS[metric].operands if metric in METRICS else "resid_pre/mlp_out/resid_post"
            raise RuntimeError(
                f"{len(missing)} (layer, metric) pairs got no values this batch, e.g. {metric} of layer {layer} "
                f"(needs sites {needs}): the backend's hooks did not fire there")
        self.n_batches += 1

    # -- results and persistence ----------------------------------------------------------------
    def summary(self) -> list[dict[str, Any]]:
        """One row per (layer, metric): mean, std, sem, sem_tokens, ci_low, ci_high, ci_method, q05..q95, n_tokens,
        n_sequences, n_nonfinite (population metrics: their jackknife sem and CI, no std, quantiles or
        sem_tokens)."""
        rows = []
        population = self.population.summary() if self.population else {}
        for name in self.metrics:
            if name in population:
                rows += [{"layer": layer, "metric": name, "mean": r["mean"], "std": math.nan, "sem": r["sem"],
                          "sem_tokens": math.nan, "ci_low": r["ci_low"], "ci_high": r["ci_high"],
                          "ci_method": r["ci_method"], **dict.fromkeys(QUANTILE_COLUMNS, math.nan),
                          "n_tokens": r["n_tokens"], "n_sequences": r.get("n_sequences", math.nan),
                          "n_nonfinite": r["n_nonfinite"], "reference": self.reference(name, layer)}
                         for layer, r in enumerate(population[name])]
                continue
            mom, hist, seqs = self.moments[name], self.hists[name], self.clustered[name]
            low, high = seqs.ci95()
            sem = seqs.sem
            quants = hist.quantiles(DEFAULT_QUANTILES)
            for layer in range(self.n_layers):
                row = {"layer": layer, "metric": name, "mean": mom.mean[layer].item(), "std": mom.std[layer].item(),
                       "sem": sem[layer].item(), "sem_tokens": mom.sem[layer].item(), "ci_low": low[layer].item(),
                       "ci_high": high[layer].item(), "ci_method": SEQUENCE_CI}
                row.update({col: quants[layer, i].item() for i, col in enumerate(QUANTILE_COLUMNS)})
                row.update(n_tokens=int(mom.n[layer].item()), n_sequences=int(seqs.clusters[layer].item()),
                           n_nonfinite=int(mom.n_nonfinite[layer].item()), reference=self.reference(name, layer))
                rows.append(row)
        return rows

    def state_dict(self) -> dict[str, Any]:
        return {"n_layers": self.n_layers, "metrics": list(self.metrics), "n_batches": self.n_batches,
                "meta": dict(self.meta), "exclude_dims": list(self.exclude_dims),
                "moments": {m: s.state_dict() for m, s in self.moments.items()},
                "hists": {m: h.state_dict() for m, h in self.hists.items()},
                "clustered": {m: c.state_dict() for m, c in self.clustered.items()},
                **({"population": self.population.state_dict()} if self.population else {})}

    def load_state_dict(self, state: dict[str, Any]) -> NoveltyAccumulator:
        if (state["n_layers"] != self.n_layers or tuple(state["metrics"]) != self.metrics
                or tuple(state.get("exclude_dims", ())) != self.exclude_dims):
            raise ValueError("state does not match this accumulator's n_layers, metrics and exclude_dims")
        self.n_batches = int(state["n_batches"])
        self.meta = dict(state.get("meta", {}))
        for m in self.token_metrics:
            self.moments[m].load_state_dict(state["moments"][m])
            self.hists[m].load_state_dict(state["hists"][m])
            self.clustered[m].load_state_dict(state["clustered"][m])
        if self.population:
            self.population.load_state_dict(state["population"])
        return self

    def merge(self, other: NoveltyAccumulator) -> NoveltyAccumulator:
        """Fold another accumulator over the same layers and metrics (another shard of tokens) into this one."""
        if (other.n_layers != self.n_layers or other.metrics != self.metrics
                or other.exclude_dims != self.exclude_dims):
            raise ValueError("can only merge NoveltyAccumulators with the same n_layers, metrics and exclude_dims")
        for m in self.token_metrics:
            self.moments[m].merge(other.moments[m])
            self.hists[m].merge(other.hists[m])
            self.clustered[m].merge(other.clustered[m])
        if self.population:
            self.population.merge(other.population)
        self.n_batches += other.n_batches
        return self

