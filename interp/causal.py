"""The causal rows of a probe table (`interp probe --causal`): interp.ablations.layers' per-layer effects as
rows of the correlational table's own format, for the same model, tokens and positions, so the two join on
everything but `metric`; and, across layers, the Spearman correlation of each correlational measure with
each causal one, with a bootstrap CI over sequences.

Why a top-level module: ablations imports probes (token batches, names, the accumulator), so probes cannot
import ablations back. This module sits one layer above both and nothing in either imports it; probe() and
run_batch() here are interp.probes' with add_causal_rows passed as their extra_rows when causal=True.

Which tokens: the probe's first sequences, as many as ProbeConfig.causal_tokens holds (0: all; causal_batches),
in batches of its batch_size: the deltas are paired per sequence and converge faster than the probe's means need
(docs/probes.md, 'Causal rows'). How: exact (interp.ablations.layers.layer_effects, each pass resumed at the layer
it ablates) or, with causal_method="attribution", first-order estimates (interp.ablations.attribution), whose
metrics end in "_attribution".

Rows (TABLE_COLUMNS of interp.probes.table): metric = delta_loss_skip_mlp | delta_loss_mean_mlp |
delta_loss_skip_attn | delta_loss_skip_block; mean / std / sem / ci_low / ci_high / q05..q95 are over the
per-sequence paired deltas (nats; Student-t CI); n_tokens = predicted tokens (n_sequences x (seq_len - 1));
reference = the exact intervention; hook_sites = the module hooked; n_sequences and clean_loss are added.
Every column that is constant over the correlational rows (model, checkpoint, text, positions, seq_len,
backend, ...) is copied, except the massive-dimension ones (the interventions exclude no dimension).

The bootstrap needs per-sequence values on both sides: sequence_profiles reruns the probe one sequence at
a time over the causal rows' sequences (one more forward over their tokens, against the ~2 + 2 x (n_layers + 2) of
the exact rows), and the mean over sequences of those profiles is the probe's mean over those sequences (every
sequence has as many counted tokens); with causal_tokens=0 it is the table's mean.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from jaxtyping import Int
from torch import Tensor

from interp._util.progress import format_duration
from interp._util.progress import progress as progress_reporter
from interp.ablations.attribution import ATTRIBUTION_PASSES, attribution_effects
from interp.ablations.layers import CAUSAL_KINDS, LayerEffects, causal_pass_count, layer_effects
from interp.ablations.loss import paired_delta
from interp.probes import run as probe_run  # by module: a test can stand in for probe_run.probe
from interp.probes.accumulator import QUANTILE_COLUMNS
from interp.probes.names import POPULATION_METRICS
from interp.stats import DEFAULT_QUANTILES, bootstrap_spearman

if TYPE_CHECKING:
    import pandas as pd

    from interp.probes.batch import BatchConfig, BatchResult
    from interp.probes.config import ProbeConfig

# What the rows of one model and layer share with the correlational rows: join on these.
JOIN_KEYS = ("model", "checkpoint", "layer", "n_layers", "depth", "positions", "seq_len", "prepend_bos",
             "text_source", "text_sha256")
# Per-row columns (never copied from the correlational rows) and the massive-dimension settings (not true of
# an intervention).
_ROW_COLUMNS = ("layer", "depth", "metric", "mean", "std", "sem", "sem_tokens", "ci_low", "ci_high", "ci_method",
                *QUANTILE_COLUMNS, "n_tokens", "n_sequences", "n_nonfinite", "reference", "hook_sites")
# The causal passes run sdpa attention where the model can switch (interp.hf.attention.attention_within): the probe
# loads eager; sdpa is the same math, ~25% faster on CPU (SmolLM2-135M, 4 x 512), and what `interp ablate` loads.
# A float64 model keeps its own attention: it is a reference computation, and float64 sdpa on CPU is ~1e-9 off eager
# (Mixtral, tests/hf/test_families.py). The rows' attn_implementation column says which ran.
CAUSAL_ATTENTION = "sdpa"
CAUSAL_CI = "paired t over sequences: mean -+ t(0.975, S-1) * std / sqrt(S) of the per-sequence loss deltas"
_CORRELATIONAL_ONLY = ("exclude_massive_dims", "excluded_dims", "excluded_dims_mean_abs", "median_dim_mean_abs",
                       "reference_mode")


CAUSAL_CI_ATTRIBUTION = ("paired t over sequences of the per-sequence first-order estimates (the estimate's spread "
                         "over sequences, not its error against the exact row)")


def _intervention(kind: str, layer: int, effects: LayerEffects) -> str:
    what = {"skip_mlp": "MLP output := 0",
            "mean_mlp": f"MLP output := its mean over the {effects.mean_tokens} probe tokens (positions="
                        f"{effects.positions}, same sequences, clean pass)",
            "skip_attn": "attention output := 0",
            "skip_block": "block output := its input (h_{l+1} = h_l)"}[kind]
    how = ("" if effects.method == "exact" else
           "first-order estimate (attribution patching: sum over positions of grad . (patched - clean), from one "
           "forward and one backward) of ")
    return (f"{how}loss(layer {layer} {what}, every position) - clean loss; per sequence = mean CE (nats, fp32 "
            f"logits) over its {effects.predicted} predicted tokens; mean, quantiles and Student-t CI over "
            f"{effects.n_sequences} sequences")


def causal_frame(effects: LayerEffects, like: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """The causal rows in the format of `like` (the correlational rows of the same run)."""
    import pandas as pd

    constant = {c: like[c].iloc[0] for c in like.columns
                if c not in _ROW_COLUMNS and c not in _CORRELATIONAL_ONLY and like[c].nunique(dropna=False) <= 1}
    if "n_layers" in constant and int(constant["n_layers"]) != effects.n_layers:
        raise ValueError(f"causal rows: the model has {effects.n_layers} layers in the adapter table but the probe "
                         f"table has {constant['n_layers']}: they must be the same model")
    rows = []
    for kind in effects.ablated:
        deltas = effects.deltas(kind)                                    # [n_layers, n_seq]
        quantiles = torch.quantile(deltas, torch.tensor(DEFAULT_QUANTILES, dtype=deltas.dtype), dim=1)
        for layer in range(effects.n_layers):
            d = deltas[layer]
            mean, low, high = paired_delta(effects.ablated[kind][layer], effects.clean, confidence)
            std = float(d.std(correction=1)) if d.numel() > 1 else math.nan
            rows.append({**constant, "layer": layer, "depth": layer / max(effects.n_layers - 1, 1),
                         "metric": effects.metric(kind), "mean": mean, "std": std,
                         "sem": std / math.sqrt(d.numel()), "ci_low": low, "ci_high": high,
                         "ci_method": CAUSAL_CI if effects.method == "exact" else CAUSAL_CI_ATTRIBUTION,
                         **{col: float(quantiles[i, layer]) for i, col in enumerate(QUANTILE_COLUMNS)},
                         "n_tokens": effects.n_sequences * effects.predicted,
                         "n_nonfinite": int((~torch.isfinite(d)).sum()),
                         "reference": _intervention(kind, layer, effects), "hook_sites": effects.sites.get(kind, ""),
                         "n_sequences": effects.n_sequences, "clean_loss": float(effects.clean.mean())})
    df = pd.DataFrame(rows)
    first = [c for c in like.columns if c in df.columns]
    return df[first + [c for c in df.columns if c not in first]]


def _excluded_dims(df: pd.DataFrame) -> list[int]:
    """The massive dimensions the correlational rows excluded (their `excluded_dims` column), or []."""
    if "excluded_dims" not in df.columns or df["excluded_dims"].isna().all():
        return []
    return list(json.loads(str(df["excluded_dims"].dropna().iloc[0])))


def sequence_profiles(model: Any, batches: Sequence[Int[Tensor, "batch pos"]], cfg: ProbeConfig,
                      exclude_dims: Sequence[int] = ()) -> dict[str, np.ndarray]:
    """{metric: [n_layers, n_seq]}: each per-token metric's per-layer mean over each sequence alone, with the
    probe settings of `cfg` (exclude_dims: the dimensions the whole-table pass measured). Population metrics
    (erank, participation, CKA) have no per-sequence value: they get no causal correlation."""
    metrics = [m for m in cfg.metrics if m not in POPULATION_METRICS]
    if not metrics:
        return {}
    means: list[dict[str, Tensor]] = []
    for batch in batches:
        for seq in batch.split(1):
            acc = probe_run.accumulate(model, [seq], cfg, metrics=tuple(metrics),
                                       exclude_massive_dims=tuple(exclude_dims) or None)
            means.append({m: acc.moments[m].mean.double().cpu() for m in acc.metrics})
    return {m: torch.stack([s[m] for s in means], 1).numpy() for m in means[0]}


def causal_batches(batches: Sequence[Int[Tensor, "batch pos"]], cfg: ProbeConfig) -> list[Int[Tensor, "batch pos"]]:
    """The sequences the causal rows run over: the first cfg.causal_sequences(n) of the probe's, in batches of
    cfg.batch_size (the probe's own batches when that is all of them)."""
    batches = list(batches)
    n_seq = sum(int(b.shape[0]) for b in batches)
    keep = cfg.causal_sequences(n_seq)
    if keep == n_seq:
        return batches
    return list(torch.cat(batches)[:keep].split(cfg.batch_size))


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def causal_plan(df: pd.DataFrame, batches: Sequence[Int[Tensor, "batch pos"]], n_layers: int,
                method: str = "exact") -> str:
    """One line saying what the causal phase will run, and how long it should take at the probe's own pace
    (df.attrs["timing"]["positions_per_s"], when the probe measured it)."""
    positions, n_seq = sum(int(b.numel()) for b in batches), sum(int(b.shape[0]) for b in batches)
    passes = causal_pass_count(n_layers) if method == "exact" else ATTRIBUTION_PASSES
    pace = df.attrs.get("timing", {}).get("positions_per_s")
    eta = f", about {format_duration(passes * positions / pace)} at the probe's pace" if pace else ""
    return (f"[causal] {df['model'].iloc[0]}: {method} rows over {n_seq} sequences x {int(batches[0].shape[1])} "
            f"positions ({positions:,}): {passes:.0f} forwards' worth of passes{eta}")


def add_causal_rows(df: pd.DataFrame, model: Any, batches: Sequence[Int[Tensor, "batch pos"]], cfg: ProbeConfig,
                    log: Callable[[str], None] | None = None, progress: bool = False) -> pd.DataFrame:
    """`df` (the correlational rows of `model` over `batches`) with the causal rows appended, over the first
    sequences cfg.causal_tokens holds (causal_batches), exact or estimated (cfg.causal_method). attrs["causal"]
    holds the per-sequence data for correlations() (JSON-able, read back by causal_data) and its seconds.
    progress: the plan and a progress line (with the ETA) on stderr; log: where a fallback is said (stderr)."""
    import pandas as pd

    from interp.hf import layer_modules, unwrap
    from interp.hf.attention import attention_of, attention_within

    start = time.perf_counter()
    batches = causal_batches(batches, cfg)
    log = log or _stderr
    label = f"causal {df['model'].iloc[0]}"
    if progress:
        _stderr(causal_plan(df, batches, len(layer_modules(model)), cfg.causal_method))
    root = unwrap(model)
    float64 = any(p.dtype == torch.float64 for p in root.parameters())   # a reference computation: its own attention
    with attention_within(root, attention_of(root) if float64 else CAUSAL_ATTENTION) as attention:
        if cfg.causal_method == "attribution":
            effects = attribution_effects(model, batches, cfg.positions, CAUSAL_KINDS, progress=lambda total: (
                progress_reporter(total, label, "chunks", enabled=progress)))
        else:
            effects = layer_effects(model, batches, cfg.positions, CAUSAL_KINDS, log=log, progress=lambda total: (
                progress_reporter(total, label, "layer-batches", enabled=progress)))
    profiles = sequence_profiles(model, batches, cfg, _excluded_dims(df))
    attrs = dict(df.attrs)
    rows = causal_frame(effects, df).assign(attn_implementation=attention)
    out = pd.concat([df, rows], ignore_index=True)
    out.attrs = {**attrs, "causal": {**effects.to_dict(), "profiles": {m: v.tolist() for m, v in profiles.items()},
                                     "attn_implementation": attention, "seconds": time.perf_counter() - start}}
    return out


def causal_data(df: pd.DataFrame) -> tuple[LayerEffects, dict[str, np.ndarray]]:
    """(effects, profiles) that add_causal_rows left in df.attrs["causal"] (a parquet file keeps them, a CSV
    does not): the per-sequence input of correlations()."""
    data = df.attrs.get("causal")
    if not data:
        raise ValueError("the table carries no per-sequence causal data (attrs['causal']): probe with "
                         "interp.causal.probe(..., causal=True) (`interp probe --causal`), and read it back from "
                         "parquet, not CSV")
    return LayerEffects.from_dict(data), {m: np.asarray(v, dtype=float) for m, v in data["profiles"].items()}


def joined(df: pd.DataFrame, value: str = "mean") -> pd.DataFrame:
    """One row per model and layer, one column per metric (correlational and causal side by side)."""
    keys = [k for k in JOIN_KEYS if k in df.columns]
    wide = df.groupby([*keys, "metric"], dropna=False, sort=False)[value].first().unstack("metric")
    wide = wide[list(dict.fromkeys(df["metric"]))]  # the table's metric order, not alphabetical
    wide.columns.name = None
    return wide.reset_index().sort_values(keys, kind="stable", ignore_index=True)


def correlations(effects: LayerEffects, profiles: dict[str, np.ndarray], n_boot: int = 2000,
                 confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Across layers: Spearman rho of each correlational measure's profile with each causal delta, with a
    percentile bootstrap CI over sequences (interp.stats.bootstrap_spearman; the same resampled sequences
    for every pair). One row per (measure, causal)."""
    import pandas as pd

    rows = []
    for measure, x in profiles.items():
        if x.shape != (effects.n_layers, effects.n_sequences):
            raise ValueError(f"profile {measure!r} is {x.shape}, expected (n_layers, n_sequences) = "
                             f"{(effects.n_layers, effects.n_sequences)}: not the same sequences")
        for kind in effects.ablated:
            rho, low, high = bootstrap_spearman(x.T, effects.deltas(kind).numpy().T, n_boot, confidence, seed)
            rows.append({"measure": measure, "causal": effects.metric(kind), "spearman_rho": rho, "ci_low": low,
                         "ci_high": high, "n_layers": effects.n_layers, "n_sequences": effects.n_sequences,
                         "n_boot": n_boot, "confidence": confidence})
    return pd.DataFrame(rows)


def correlation_table(df: pd.DataFrame, n_boot: int = 2000, confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """correlations() of one model's causal probe table, each row with what produced it (constant over the
    table): model, checkpoint, text_sha256, n_tokens, dtype and hardware."""
    first = df.iloc[0]
    checkpoint = first.get("checkpoint")
    checkpoint = "" if checkpoint is None or checkpoint != checkpoint else str(checkpoint)   # NaN != NaN
    return correlations(*causal_data(df), n_boot, confidence, seed).assign(
        model=first["model"], checkpoint=checkpoint, text_sha256=first["text_sha256"],
        n_tokens=int(first["n_tokens"]), dtype=first["dtype"], hardware=first.get("hardware", ""))


def probe(model: Any = "smollm2-135m", text: str | Path | None = None, *, config: ProbeConfig | None = None,
          **kwargs: Any) -> pd.DataFrame:
    """interp.probes.probe (the same arguments), with the causal rows joined when causal=True (given here, else
    config's): interp.probes.probe alone refuses causal=True, since probes cannot import ablations."""
    causal = bool(kwargs["causal"]) if "causal" in kwargs else config is not None and config.causal
    extra = {"extra_rows": add_causal_rows} if causal else {}
    return probe_run.probe(model, text, config=config, **extra, **kwargs)


def run_batch(cfg: BatchConfig | None = None, **kwargs: Any) -> BatchResult:
    """interp.probes.batch.run_batch (the same arguments), with the causal rows joined to each checkpoint's when
    cfg.probe.causal (BatchRunner's extra_rows; it reaches child processes in the runner's pickled factory)."""
    from interp.probes.batch import BatchConfig, BatchRunner

    cfg = cfg if cfg is not None else BatchConfig.build(**kwargs)
    return BatchRunner(cfg, extra_rows=add_causal_rows if cfg.probe.causal else None).run()
