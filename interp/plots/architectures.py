"""Figure of the architecture comparison (analyses/architectures.py): summary table in, Figure out.

Built like interp/plots_experiments.py (Figure objects, no pyplot, STYLE via _styled, schedule colours
from COLORS), from the table analyses.architectures.tables() writes: one row per mixer x width variant
with interp.training.results.summarize's columns plus mixer, architecture and the paper's columns.
"""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from interp.plots.experiments import _error, annotate_ours_vs_paper
from interp.plots.style import _require_columns, _styled, color_for

ARCH_COLUMNS = ("mixer", "architecture", "variant", "label", "n_seeds", "params", "val_ppl_mean",
                "val_ppl_ci_low", "val_ppl_ci_high", "rel_val_ppl_pct_mean", "rel_val_ppl_pct_ci_low",
                "rel_val_ppl_pct_ci_high", "paper_wiki_ppl", "paper_rel_wiki_ppl_pct")
BASELINE = "uniform"
OFFSET = 0.17  # horizontal offset of the two width variants around each mixer's tick


def _tapered_rows(summary: pd.DataFrame) -> pd.DataFrame:
    return summary[summary["variant"] != BASELINE]


def _seeds_text(n: pd.Series) -> str:
    count = f"{int(n.min())}" if n.min() == n.max() else f"{int(n.min())}-{int(n.max())}"
    return count + (" seed" if count == "1" else " seeds")


def _plot_ppl(ax: Axes, summary: pd.DataFrame, runs: pd.DataFrame | None, mixers: list[str]) -> None:
    """Validation perplexity per mixer: uniform left, tapered right of each tick; CI bars, seed dots."""
    x_of = {m: i for i, m in enumerate(mixers)}
    variants = list(dict.fromkeys(summary["variant"]))
    offsets = {v: (-OFFSET if v == BASELINE else OFFSET) for v in variants}
    for i, v in enumerate(variants):
        rows = summary[summary["variant"] == v]
        x = rows["mixer"].map(x_of).to_numpy(float) + offsets[v]
        color = color_for(rows["label"].iloc[0], i)
        ax.errorbar(x, rows["val_ppl_mean"], yerr=_error(rows["val_ppl_mean"], rows["val_ppl_ci_low"],
                                                          rows["val_ppl_ci_high"]),
                    fmt="none", ecolor="black", elinewidth=1.1, capsize=4, zorder=2)
        ax.scatter(x, rows["val_ppl_mean"], s=70, color=color, zorder=3, label=f"{rows['label'].iloc[0]} (95% CI)")
        if runs is not None and len(runs):
            seeds = runs[(runs["variant"] == v) & runs["mixer"].isin(x_of)]
            ax.scatter(seeds["mixer"].map(x_of) + offsets[v] + 0.07, seeds["val_ppl"], s=12, c="gray", alpha=0.7,
                       zorder=3, label="one seed" if i == 0 else None)
    if "n_diverged" in summary.columns:  # runs that finished with a NaN loss are not in the means
        for _, row in summary[summary["n_diverged"] > 0].iterrows():
            xy = (x_of[row["mixer"]] + offsets[row["variant"]], 0.02)
            ax.annotate(f"{int(row['n_diverged'])}/{int(row['n_seeds'])}\nNaN", xy,
                        xycoords=("data", "axes fraction"), ha="center", va="bottom", fontsize=8, color="firebrick")
    params = summary.groupby("mixer")["params"].first()
    names = summary.groupby("mixer")["architecture"].first()
    ax.set_xticks(range(len(mixers)), [f"{names[m]}\n{float(params[m]) / 1e6:.2f}M" for m in mixers])
    ax.set_xlim(-0.6, len(mixers) - 0.4)
    ax.set_ylabel("validation perplexity (ours)")
    ax.set_title(f"ours: val perplexity, {_seeds_text(summary['n_seeds'])} (params equal within a mixer)")
    ax.legend(loc="best")
    ax.grid(axis="x", visible=False)


def _plot_change(ax: Axes, summary: pd.DataFrame, mixers: list[str]) -> None:
    """Tapered vs uniform in percent, paired by seed (ours, with CI) and the paper's 760M (where public)."""
    tapered = _tapered_rows(summary).set_index("mixer").reindex(mixers)
    x = np.arange(len(mixers), dtype=float)
    color = color_for(str(tapered["label"].dropna().iloc[0]) if tapered["label"].notna().any() else "cosine")
    mean = tapered["rel_val_ppl_pct_mean"].astype(float)
    ax.axhline(0.0, color="black", lw=0.8)
    ax.errorbar(x - 0.1, mean, yerr=_error(mean, tapered["rel_val_ppl_pct_ci_low"].astype(float),
                                           tapered["rel_val_ppl_pct_ci_high"].astype(float)),
                fmt="none", ecolor="black", elinewidth=1.1, capsize=4, zorder=2)
    ax.scatter(x - 0.1, mean, s=70, color=color, zorder=3, label="ours (paired by seed, 95% CI)")
    paper = tapered["paper_rel_wiki_ppl_pct"].astype(float)
    if paper.notna().any():
        ax.scatter(x + 0.1, paper, s=70, marker="D", facecolors="none", edgecolors=color, linewidths=1.5,
                   zorder=3, label="paper, 760M (WikiText)")
    for xi, ours, theirs in zip(x, mean, paper):
        annotate_ours_vs_paper(ax, xi, ours, theirs)
    names = summary.groupby("mixer")["architecture"].first()
    ax.set_xticks(x, [str(names[m]).replace(" ", "\n", 1) for m in mixers])
    ax.set_xlim(-0.6, len(mixers) - 0.4)
    ax.set_ylabel("tapered vs uniform val perplexity (%)")
    ax.set_title("change from tapering (below 0 = tapered better)")
    ax.legend(loc="best")
    ax.grid(axis="x", visible=False)


def _paper_text(summary: pd.DataFrame, mixers: list[str]) -> str:
    """The paper's side as text: per-architecture 760M numbers where public, and the paper's claim."""
    lines = ["Paper, 760M (50B tokens),", "WikiText perplexity", "uniform -> tapered:", ""]
    for m in mixers:
        rows = summary[summary["mixer"] == m].set_index("variant")
        name = str(rows["architecture"].iloc[0])
        ppl = rows["paper_wiki_ppl"].astype(float)
        tapered = [v for v in rows.index if v != BASELINE]
        if BASELINE in rows.index and tapered and np.isfinite(ppl[BASELINE]) and np.isfinite(ppl[tapered[0]]):
            lines.append(f"{name}: {ppl[BASELINE]:.2f} -> {ppl[tapered[0]]:.2f}")
        else:
            lines.append(f"{name}: not public")
    note = summary["paper_note"].dropna() if "paper_note" in summary.columns else pd.Series(dtype=str)
    if len(note):
        lines += [""] + textwrap.wrap(str(note.iloc[0]), 34)
    return "\n".join(lines)


@_styled
def plot_architectures(summary: pd.DataFrame, runs: pd.DataFrame | None = None) -> Figure:
    """The taper across architectures. Left: validation perplexity per mixer, uniform vs cosine 1.5->0.5
    (mean, 95% t-CI over seeds, one dot per seed). Middle: tapered vs uniform in percent, paired by seed
    (our CI), with the paper's 760M change as open diamonds where it is public. Right: the paper's
    numbers as text, or the statement that they are not public (never invented).
    """
    _require_columns(summary, ARCH_COLUMNS, "plot_architectures")
    mixers = list(dict.fromkeys(summary["mixer"]))
    if runs is not None and len(runs) and "mixer" not in runs.columns:
        raise ValueError("plot_architectures: runs table lacks column 'mixer'; re-create it with "
                         "analyses.architectures (interp figures --only architectures --recompute)")
    fig = Figure(figsize=(13.5, 4.4), layout="constrained")
    ax_ppl, ax_rel, ax_text = fig.subplots(1, 3, width_ratios=[1.25, 1.0, 0.55])
    _plot_ppl(ax_ppl, summary, runs, mixers)
    _plot_change(ax_rel, summary, mixers)
    ax_text.axis("off")
    ax_text.text(0.0, 1.0, _paper_text(summary, mixers), va="top", ha="left", fontsize=8.5, family="monospace",
                 transform=ax_text.transAxes)
    tokens = summary["tokens"].dropna() if "tokens" in summary.columns else pd.Series(dtype=float)
    budget = f", {float(tokens.iloc[0]):,.0f} training tokens per run" if len(tokens) and math.isfinite(
        float(tokens.iloc[0])) else ""
    fig.suptitle(f"Tapered (cosine 1.5->0.5) vs uniform MLP width across token mixers{budget}{_hardware(runs)}")
    return fig


def _hardware(runs: pd.DataFrame | None) -> str:
    """' (cuda, bfloat16)', or per device which mixers trained there when they differ."""
    if runs is None or not {"device", "dtype", "mixer"} <= set(runs.columns):
        return ""
    known = runs.dropna(subset=["device", "dtype"])
    if not len(known):
        return ""
    dtypes = ", ".join(sorted(set(known["dtype"])))
    by_device = known.groupby("device")["mixer"].unique()
    if len(by_device) == 1:
        return f" ({by_device.index[0]}, {dtypes})"
    parts = "; ".join(f"{dev}: {', '.join(mixers)}" for dev, mixers in by_device.items())
    return f" ({dtypes}; {parts})"


__all__ = ["ARCH_COLUMNS", "plot_architectures"]
