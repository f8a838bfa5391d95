"""Figures of how layer-wise novelty develops over training: batch tables in, matplotlib Figures out.

One module per figure family, built the same way: `Figure` objects, no
pyplot, STYLE via rc_context, saved with interp.plots.save_figure. Input: the tidy rows of
interp.probes.batch (one row per run, step, layer and metric; `mean` is the token-averaged metric).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter, MaxNLocator

from interp.plots.style import LOSS_COLUMNS, _require_columns, _styled, color_for

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


# --------------------------------------------------------------------------------------------------
# Training curves
# --------------------------------------------------------------------------------------------------

def smooth(values: pd.Series, window: int) -> pd.Series:
    """Centred rolling mean (shrinking at the edges), so the smoothed curve is not shifted in tokens."""
    return values.rolling(window=max(1, window), center=True, min_periods=1).mean()


def final_val_ppl(df: pd.DataFrame) -> pd.DataFrame:
    """Final validation perplexity per run: the `result` row if present, else the last `eval` row."""
    rows = []
    for run, g in df.groupby("run", sort=False):
        result = g[(g["kind"] == "result") & g["val_ppl"].notna()]
        evals = g[(g["kind"] == "eval") & g["val_ppl"].notna()].sort_values("tokens")
        last = result.iloc[-1] if len(result) else (evals.iloc[-1] if len(evals) else None)
        if last is None:
            continue
        rows.append({"run": run, "label": g["label"].iloc[0], "val_ppl": float(last["val_ppl"]),
                     "val_loss": float(last["val_loss"]), "params": g["params"].iloc[0]})
    return pd.DataFrame(rows, columns=["run", "label", "val_ppl", "val_loss", "params"])


@_styled
def plot_loss_curves(df: pd.DataFrame, smooth_window: int | None = None) -> Figure:
    """Train loss (raw faint, smoothed solid) and val loss (dashed, markers) vs tokens, plus final val ppl.

    `df` is long-form: one row per log line, `kind` in {"train", "eval", "result"}; train rows carry
    `loss`, eval/result rows `val_loss` and `val_ppl`. `label` names the width profile of the run.
    `smooth_window` defaults to about 1/20 of each run's train points.
    """
    _require_columns(df, LOSS_COLUMNS, "plot_loss_curves")
    fig = Figure(figsize=(11.0, 4.4), layout="constrained")
    ax_loss, ax_ppl = fig.subplots(1, 2, width_ratios=[2.3, 1])

    for i, (run, g) in enumerate(df.groupby("run", sort=False)):
        label = str(g["label"].iloc[0])
        color = color_for(label, i)
        train = g[g["kind"] == "train"].sort_values("tokens")
        if len(train):
            window = smooth_window or max(1, len(train) // 20)
            ax_loss.plot(train["tokens"], train["loss"], color=color, lw=0.6, alpha=0.25)
            ax_loss.plot(train["tokens"], smooth(train["loss"], window), color=color, lw=1.8,
                         label=f"{label}: train")
        evals = g[g["kind"] == "eval"].sort_values("tokens")
        if len(evals):
            ax_loss.plot(evals["tokens"], evals["val_loss"], color=color, lw=1.4, ls="--", marker="o", ms=4,
                         label=f"{label}: val")
    ax_loss.set_xlabel("tokens")
    ax_loss.set_ylabel("cross-entropy loss (nats/token)")
    ax_loss.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax_loss.set_title("loss vs tokens (train smoothed; raw faint)")
    ax_loss.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4)
    _clip_loss_ylim(ax_loss, df)

    finals = final_val_ppl(df)
    labels = [str(x) for x in finals["label"]]
    x = np.arange(len(finals))
    # Points, not bars: the differences are a few percent, and a bar implies a zero baseline.
    ax_ppl.scatter(x, finals["val_ppl"], s=70, c=[color_for(lab, i) for i, lab in enumerate(labels)], zorder=3)
    base = float(finals["val_ppl"].iloc[0]) if len(finals) else math.nan
    for i, ppl in enumerate(finals["val_ppl"]):
        note = f"{ppl:.2f}" if i == 0 else f"{ppl:.2f}\n({ppl - base:+.2f})"
        ax_ppl.annotate(note, (i, ppl), xytext=(9, 0), textcoords="offset points", va="center", fontsize=9)
    ax_ppl.set_xticks(x, [_param_label(lab, p) for lab, p in zip(labels, finals["params"])])
    ax_ppl.set_xlim(-0.5, len(finals) - 0.2)
    ax_ppl.margins(y=0.25)
    ax_ppl.set_ylabel("final val perplexity")
    ax_ppl.set_title("final validation perplexity" + (f"\n(change vs {labels[0]})" if labels else ""))
    ax_ppl.grid(axis="x", visible=False)
    params = finals["params"].dropna().unique()
    if len(params) == 1:
        fig.suptitle(f"equal parameter count: {float(params[0]) / 1e6:.2f}M in every run", fontsize=10)
    elif len(params) > 1:
        fig.suptitle("parameter counts DIFFER between runs: not a like-for-like comparison", fontsize=10)
    return fig


def _param_label(label: str, params: Any) -> str:
    if params is None or (isinstance(params, float) and np.isnan(params)):
        return label
    return f"{label}\n{float(params) / 1e6:.2f}M params"


def _clip_loss_ylim(ax: Axes, df: pd.DataFrame) -> None:
    """Keep the first steps' loss (~ln vocab) from squashing the interesting end of the curves."""
    losses = pd.concat([df["loss"], df["val_loss"]]).dropna()
    if len(losses) < 4:
        return
    low = float(losses.min())
    high = float(losses.quantile(0.98))
    ax.set_ylim(low - 0.05 * (high - low), high + 0.05 * (high - low))
