"""The tidy result table: one row per (layer, metric), the run's settings repeated on every row."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp._util.io import atomic_write
from interp.probes.accumulator import QUANTILE_COLUMNS, NoveltyAccumulator
from interp.probes.metrics import METRICS
from interp.probes.outputs import check_output
from interp.probes.population import OPERANDS as POPULATION_OPERANDS

if TYPE_CHECKING:
    import pandas as pd

TABLE_COLUMNS = ("model", "checkpoint", "layer", "n_layers", "depth", "metric", "mean", "std", "sem", "sem_tokens",
                 "ci_low", "ci_high", "ci_method", *QUANTILE_COLUMNS, "n_tokens", "n_sequences", "n_nonfinite",
                 "reference", "mlp_out_site", "hook_sites",
                 "positions", "seq_len", "prepend_bos", "text_source", "text_sha256", "weights_sha256", "tokenizer",
                 "dtype", "eps", "backend", "device", "hardware")

# the metrics that read a layer's MLP (its output or its input): undefined at a layer without one
MLP_METRICS = tuple(name for name, operands in [*((m.name, m.operands) for m in METRICS.values()),
                                                *POPULATION_OPERANDS.items()]
                    if {"mlp_out", "mlp_in"} & set(operands))
STAT_COLUMNS = ("mean", "std", "sem", "sem_tokens", "ci_low", "ci_high", *QUANTILE_COLUMNS)


def mask_absent_mlps(df: pd.DataFrame, layers: set[int]) -> pd.DataFrame:
    """The MLP metrics' statistics at `layers` (layers without an MLP, d_mlp[l] = 0) set to NaN, and a column
    `mlp_absent`: hook_mlp_out is zeros there, and the probes' convention (the cosine of a zero vector is 0)
    would report a cosine of 0 and a norm ratio of 0, a claim about a module that does not exist."""
    if not layers:
        return df
    rows = df["metric"].isin(MLP_METRICS) & df["layer"].isin(sorted(layers))
    df.loc[rows, [c for c in STAT_COLUMNS if c in df.columns]] = float("nan")
    df.insert(df.columns.get_loc("metric") + 1, "mlp_absent", df["layer"].isin(sorted(layers)))
    return df


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


def save_table(df: pd.DataFrame, path: str | Path, csv: bool = False) -> list[Path]:
    """Write the table as parquet (or CSV when `path` ends in .csv); csv=True also writes a .csv beside
    the parquet file. Parent folders are created; each file is written atomically (a killed write leaves
    the previous table). Returns the written paths."""
    path = check_output(path, flag="path")
    writers = {path.name: (lambda p: df.to_csv(p, index=False)) if path.suffix == ".csv"
               else (lambda p: df.to_parquet(p, index=False))}
    if csv and path.suffix != ".csv":
        writers[path.with_suffix(".csv").name] = lambda p: df.to_csv(p, index=False)
    atomic_write(path.parent, writers)
    return [path.parent / name for name in writers]
