"""Figures of how layer-wise novelty develops over training: batch tables in, matplotlib Figures out.

Kept apart from interp/plots.py (one module per owner) but built the same way: `Figure` objects, no
pyplot, STYLE via rc_context, saved with interp.plots.save_figure. Input: the tidy rows of
interp.batch (one row per run, step, layer and metric; `mean` is the token-averaged metric).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from interp.plots import _require_columns, _styled

NOVELTY_COLUMNS = ("run", "label", "step", "layer", "metric", "mean")
CMAP = "RdBu_r"   # diverging: blue = writes against the stream, white = new directions (~0), red = reinforces


def novelty_grid(df: pd.DataFrame, run: str, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps, layers, values[layer, step]) of one run and metric; NaN where a (layer, step) is missing."""
    rows = df[(df["run"] == run) & (df["metric"] == metric)]
    grid = rows.pivot_table(index="layer", columns="step", values="mean", aggfunc="mean")
    return grid.columns.to_numpy(float), grid.index.to_numpy(int), grid.to_numpy(float)


def _edges(centers: np.ndarray) -> np.ndarray:
    """Cell edges half-way between centres, so unevenly spaced checkpoints get honest widths."""
    if len(centers) == 1:
        half = max(abs(centers[0]) * 0.5, 0.5)
        return np.array([centers[0] - half, centers[0] + half])
    mid = (centers[1:] + centers[:-1]) / 2
    return np.concatenate([[centers[0] - (mid[0] - centers[0])], mid, [centers[-1] + (centers[-1] - mid[-1])]])


def _run_order(df: pd.DataFrame) -> list[str]:
    """Uniform first (the baseline), then the others in order of appearance."""
    labels = df.groupby("run", sort=False)["label"].first()
    return sorted(labels.index, key=lambda r: (0 if str(labels[r]).startswith("uniform") else 1))


@_styled
def plot_novelty_over_training(df: pd.DataFrame, metrics: Sequence[str] = ("rho_mlp", "rho_block")) -> Figure:
    """Each metric as a layer x training-step heatmap, one column per run (uniform and tapered side by side).

    Colours are diverging around 0 with one symmetric scale per metric row, so a cell means the same in
    both runs: white = the layer writes new (orthogonal) directions, red = it reinforces the stream.
    """
    _require_columns(df, NOVELTY_COLUMNS, "plot_novelty_over_training")
    df = df[df["step"].notna()]
    missing = [m for m in metrics if m not in set(df["metric"])]
    if missing:
        raise ValueError(f"plot_novelty_over_training: metrics {missing} not in the table "
                         f"(it has {sorted(set(df['metric']))})")
    runs = _run_order(df)
    labels = df.groupby("run")["label"].first()
    fig = Figure(figsize=(4.2 * len(runs) + 0.9, 3.0 * len(metrics)), layout="constrained")
    axes = np.atleast_2d(fig.subplots(len(metrics), len(runs), squeeze=False, sharey=True))
    for row, metric in enumerate(metrics):
        limit = float(np.nanmax(np.abs(df.loc[df["metric"] == metric, "mean"]))) or 1.0
        norm = Normalize(-limit, limit)
        mesh = None
        for col, run in enumerate(runs):
            ax = axes[row, col]
            steps, layers, values = novelty_grid(df, run, metric)
            mesh = ax.pcolormesh(_edges(steps), _edges(layers.astype(float)), values, cmap=CMAP, norm=norm,
                                 shading="flat")
            ax.grid(False)
            ax.set_title(f"{labels[run]}: {metric}")
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_xlabel("training step" if row == len(metrics) - 1 else "")
            if col == 0:
                ax.set_ylabel("layer")
        fig.colorbar(mesh, ax=list(axes[row]), label=f"mean {metric}", shrink=0.9)
    n_tokens = df["n_tokens"].dropna() if "n_tokens" in df.columns else pd.Series(dtype=float)
    suffix = f" (mean over {int(n_tokens.median()):,} tokens per checkpoint)" if len(n_tokens) else ""
    fig.suptitle("layer-wise novelty over training" + suffix)
    return fig
