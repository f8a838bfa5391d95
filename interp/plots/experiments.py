"""Figures of the multi-run training experiments: summary tables in, matplotlib Figures out.

One module per figure family, built the same way: `Figure` objects,
no pyplot, STYLE via rc_context, colours from COLORS, saved with interp.plots.save_figure.
Inputs are the tables of interp.training.results.summarize plus the analyses' paper columns.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure

from interp.plots.style import _require_columns, _styled, color_for

GROUP_COLUMNS = ("variant", "label", "n_seeds", "params", "val_ppl_mean", "val_ppl_ci_low", "val_ppl_ci_high",
                 "rel_val_ppl_pct_mean", "rel_val_ppl_pct_ci_low", "rel_val_ppl_pct_ci_high",
                 "paper_val_ppl", "paper_rel_val_ppl_pct")
SWEEP_COLUMNS = ("variant", "schedule", "start", "end", "val_ppl_mean", "rel_val_ppl_pct_mean",
                 "paper_val_ppl", "paper_rel_val_ppl_pct")


def _error(mean: pd.Series, low: pd.Series, high: pd.Series) -> np.ndarray:
    """Asymmetric error-bar lengths [2, n]; 0 where the CI is undefined (one seed)."""
    return np.nan_to_num(np.vstack([mean - low, high - mean]).astype(float), nan=0.0)


@_styled
def plot_group_ablation(summary: pd.DataFrame, runs: pd.DataFrame | None = None) -> Figure:
    """Paper Figure 2 beside ours. Left: validation perplexity per variant (mean, 95% t-CI over seeds,
    one dot per seed). Right: change vs uniform in percent, paired by seed (ours with its CI) and the
    paper's 440M numbers (open diamonds); percent, because a 10M CPU model and a 440M model differ in
    absolute perplexity by an order of magnitude.
    """
    _require_columns(summary, GROUP_COLUMNS, "plot_group_ablation")
    fig = Figure(figsize=(10.5, 4.2), layout="constrained")
    ax_ppl, ax_rel = fig.subplots(1, 2)
    x = np.arange(len(summary))
    colors = [color_for(v, i) for i, v in enumerate(summary["variant"])]
    ax_ppl.errorbar(x, summary["val_ppl_mean"], yerr=_error(summary["val_ppl_mean"], summary["val_ppl_ci_low"],
                                                             summary["val_ppl_ci_high"]),
                    fmt="none", ecolor="black", elinewidth=1.2, capsize=5, zorder=2)
    ax_ppl.scatter(x, summary["val_ppl_mean"], s=80, c=colors, zorder=3, label="mean (95% CI)")
    if runs is not None and len(runs):
        position = dict(zip(summary["variant"], x))
        seeds = runs[runs["variant"].isin(position)]
        ax_ppl.scatter(seeds["variant"].map(position) + 0.18, seeds["val_ppl"], s=14, c="gray", alpha=0.7,
                       zorder=3, label="one seed")
    ax_ppl.set_xticks(x, summary["label"])
    ax_ppl.set_ylabel("validation perplexity (ours)")
    n = summary["n_seeds"]
    seeds_text = f"{int(n.min())}" if n.min() == n.max() else f"{int(n.min())}-{int(n.max())}"
    ax_ppl.set_title(f"ours: {float(summary['params'].iloc[0]) / 1e6:.2f}M params each, {seeds_text} seeds")
    ax_ppl.legend(loc="upper left")
    ax_ppl.grid(axis="x", visible=False)

    ax_rel.axhline(0.0, color="black", lw=0.8)
    ax_rel.errorbar(x - 0.1, summary["rel_val_ppl_pct_mean"],
                    yerr=_error(summary["rel_val_ppl_pct_mean"], summary["rel_val_ppl_pct_ci_low"],
                                summary["rel_val_ppl_pct_ci_high"]),
                    fmt="o", color="black", ms=0, elinewidth=1.2, capsize=5, zorder=2)
    ax_rel.scatter(x - 0.1, summary["rel_val_ppl_pct_mean"], s=70, c=colors, zorder=3,
                   label="ours (paired by seed, 95% CI)")
    ax_rel.scatter(x + 0.1, summary["paper_rel_val_ppl_pct"], s=70, marker="D", facecolors="none",
                   edgecolors=colors, linewidths=1.5, zorder=3, label="paper, 440M")
    for xi, name, ours, paper in zip(x, summary["variant"], summary["rel_val_ppl_pct_mean"],
                                     summary["paper_rel_val_ppl_pct"]):
        if name == "uniform":  # the baseline is 0 by definition
            continue
        annotate_ours_vs_paper(ax_rel, xi, ours, paper)
    ax_rel.set_xticks(x, summary["label"])
    ax_rel.set_xlim(-0.6, len(x) - 0.4)
    ax_rel.set_ylabel("val perplexity vs uniform (%)")
    ax_rel.set_title("change vs uniform (lower is better)")
    ax_rel.legend(loc="upper left")
    ax_rel.grid(axis="x", visible=False)
    fig.suptitle("Layer-group ablation (paper Figure 2): where should the MLP width go?")
    return fig


def annotate_ours_vs_paper(ax, x: float, ours: float, paper: float, offset: float = 0.1) -> None:
    """Label a pair of side-by-side points at x -/+ offset with their % values (ours left, paper right, grey)."""
    if np.isfinite(ours):
        ax.annotate(f"{ours:+.1f}%", (x - offset, ours), xytext=(-6, 0), textcoords="offset points",
                    ha="right", va="center", fontsize=8)
    if np.isfinite(paper):
        ax.annotate(f"{paper:+.1f}%", (x + offset, paper), xytext=(6, 0), textcoords="offset points",
                    ha="left", va="center", fontsize=8, color="dimgray")


def _pair_label(start: float, end: float) -> str:
    return f"{start:g}->{end:g}"


def sweep_grid(summary: pd.DataFrame, value: str) -> pd.DataFrame:
    """Tapered rows of the sweep summary as a start->end x schedule grid of `value` (uniform row dropped)."""
    tapered = summary[summary["schedule"].isin(("linear", "cosine", "sigmoid"))].copy()
    tapered["pair"] = [_pair_label(s, e) for s, e in zip(tapered["start"], tapered["end"])]
    order = [_pair_label(s, e) for s, e in sorted({(float(s), float(e)) for s, e in
                                                  zip(tapered["start"], tapered["end"])})]
    schedules = [s for s in ("cosine", "linear", "sigmoid") if s in set(tapered["schedule"])]
    return tapered.pivot(index="pair", columns="schedule", values=value).reindex(index=order, columns=schedules)


@_styled
def plot_schedule_sweep(summary: pd.DataFrame) -> Figure:
    """Paper Table 1 beside ours: heatmaps of validation perplexity relative to uniform (%), ours left,
    the paper's 440M numbers right, on one diverging colour scale (blue = better than uniform).
    Each cell prints the percentage and the absolute perplexity.
    """
    _require_columns(summary, SWEEP_COLUMNS, "plot_schedule_sweep")
    ours_rel, paper_rel = sweep_grid(summary, "rel_val_ppl_pct_mean"), sweep_grid(summary, "paper_rel_val_ppl_pct")
    ours_ppl, paper_ppl = sweep_grid(summary, "val_ppl_mean"), sweep_grid(summary, "paper_val_ppl")
    finite = np.concatenate([ours_rel.to_numpy(float).ravel(), paper_rel.to_numpy(float).ravel()])
    finite = finite[np.isfinite(finite)]
    limit = max(1.0, float(np.abs(finite).max())) if finite.size else 1.0
    norm = TwoSlopeNorm(vcenter=0.0, vmin=-limit, vmax=limit)
    uniform = summary[summary["variant"] == "uniform"]
    ours_base = float(uniform["val_ppl_mean"].iloc[0]) if len(uniform) else math.nan
    paper_base = float(uniform["paper_val_ppl"].iloc[0]) if len(uniform) else math.nan

    fig = Figure(figsize=(10.5, 4.6), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    image = None
    for ax, rel, ppl, title in ((axes[0], ours_rel, ours_ppl, f"ours (uniform {ours_base:.2f})"),
                                (axes[1], paper_rel, paper_ppl, f"paper, 440M (uniform {paper_base:.2f})")):
        values = rel.to_numpy(float)
        image = ax.imshow(np.ma.masked_invalid(values), cmap="RdBu_r", norm=norm, aspect="auto")
        for (i, j), v in np.ndenumerate(values):
            text = "n/a" if not np.isfinite(v) else f"{v:+.1f}%\n{ppl.iat[i, j]:.2f}"
            dark = np.isfinite(v) and abs(v) > 0.6 * limit
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color="white" if dark else "black")
        ax.set_xticks(range(rel.shape[1]), rel.columns)
        ax.set_yticks(range(rel.shape[0]), rel.index)
        ax.set_title(title)
        ax.grid(False)
        ax.set_xlabel("schedule")
    axes[0].set_ylabel("start -> end (x d_ff)")
    fig.colorbar(image, ax=axes, label="val perplexity vs uniform (%)", shrink=0.9)
    fig.suptitle("Schedule x ratio sweep (paper Table 1): validation perplexity relative to uniform")
    return fig


__all__ = ["plot_group_ablation", "plot_schedule_sweep", "sweep_grid"]
