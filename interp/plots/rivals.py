"""The rival width profiles figure: five profiles over depth, and their paired change vs uniform."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from interp.plots.experiments import _error
from interp.plots.style import COLORS, _require_columns, _styled, color_for

RIVAL_COLUMNS = ("variant", "label", "schedule", "start", "end", "n_seeds", "params", "widths", "val_ppl_mean",
                 "rel_val_ppl_pct_mean", "rel_val_ppl_pct_ci_low", "rel_val_ppl_pct_ci_high")
# Where the width goes, one colour each: the paper's taper keeps cosine's red, the group-ablation profiles
# lend theirs to the shape that resembles them (growing ~ wider-late, middle-heavy ~ wider-middle).
SHAPE_COLORS = {"taper": COLORS["cosine"], "reverse": COLORS["wider-late"], "middle-heavy": COLORS["wider-middle"],
                "x-shaped": COLORS["linear"]}
COSINE = "cosine-1.5-0.5"  # the paper's taper: the second baseline of the tick labels


def rival_color(schedule: str, start: float, end: float, index: int = 0) -> str:
    """The colour of one profile, from its table row (schedule, start, end)."""
    if schedule in SHAPE_COLORS:
        return SHAPE_COLORS[schedule]
    if schedule == "uniform":
        return COLORS["uniform"]
    return SHAPE_COLORS["taper" if start > end else "reverse"] if start != end else color_for(schedule, index)


def seed_changes(runs: pd.DataFrame, variant: str, baseline: str = "uniform") -> pd.Series:
    """Per seed, 100 * (ppl / ppl_baseline - 1) for the seeds both finished (the dots beside a paired mean)."""
    base = runs[runs["variant"] == baseline].set_index("seed")["val_ppl"]
    ours = runs[runs["variant"] == variant].set_index("seed")["val_ppl"]
    common = ours.index.intersection(base.index)
    return 100.0 * (ours[common] / base[common] - 1.0)


def _tick(row) -> str:
    """A variant's tick label: its schedule, its ratios, and (when tabulated) its paired change vs cosine."""
    label = str(row.label).replace(" ", "\n", 1)
    vs = getattr(row, "rel_val_ppl_pct_mean_vs_cosine", float("nan"))
    if not np.isfinite(vs) or row.variant == COSINE:  # the cosine row is 0 by definition
        return label
    low, high = row.rel_val_ppl_pct_ci_low_vs_cosine, row.rel_val_ppl_pct_ci_high_vs_cosine
    ci = f"\n[{low:+.1f}, {high:+.1f}]" if np.isfinite(low) else ""
    return f"{label}\nvs cosine {vs:+.1f}%{ci}"


@_styled
def plot_rival_profiles(summary: pd.DataFrame, runs: pd.DataFrame | None = None) -> Figure:
    """Left: each variant's MLP width per layer as a multiple of the mean (= d_ff). Right: validation
    perplexity change vs uniform in percent, paired by seed (95% t-CI), one dot per seed pair, each point
    labelled below the axis with its change vs cosine 1.5->0.5 when the table has it."""
    _require_columns(summary, RIVAL_COLUMNS, "plot_rival_profiles")
    extra = max(0, len(summary) - 5)   # beyond the five rivals (e.g. the layouts): room for their tick labels
    fig = Figure(figsize=(11.5 + 1.3 * extra, 4.4), layout="constrained")
    ax_w, ax_rel = fig.subplots(1, 2, width_ratios=(1.0, 1.25 + 0.3 * extra))
    colors = [rival_color(r.schedule, r.start, r.end, i) for i, r in enumerate(summary.itertuples())]
    for row, color in zip(summary.itertuples(), colors):
        widths = np.array([int(w) for w in str(row.widths).split("/")], dtype=float)  # "512/1024/..."
        depth = np.arange(len(widths)) / max(len(widths) - 1, 1)
        ax_w.plot(depth, widths / widths.mean(), "o-", ms=4, lw=1.6, color=color, label=row.label)
    ax_w.set_xlabel("normalised depth (layer / (n_layers - 1))")
    ax_w.set_ylabel("MLP width / d_ff")
    ax_w.set_title(f"the profiles ({float(summary['params'].iloc[0]) / 1e6:.2f}M params each)")
    ax_w.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=8)

    x = np.arange(len(summary))
    mean = summary["rel_val_ppl_pct_mean"]
    ax_rel.axhline(0.0, color="black", lw=0.8)
    ax_rel.errorbar(x, mean, yerr=_error(mean, summary["rel_val_ppl_pct_ci_low"], summary["rel_val_ppl_pct_ci_high"]),
                    fmt="none", ecolor="black", elinewidth=1.2, capsize=5, zorder=2)
    ax_rel.scatter(x, mean, s=70, c=colors, zorder=3, label="mean, paired by seed (95% t-CI)")
    if runs is not None and len(runs):
        for xi, name in zip(x, summary["variant"]):
            dots = seed_changes(runs, name)
            ax_rel.scatter(np.full(len(dots), xi + 0.15), dots, s=12, c="gray", alpha=0.7, zorder=3)
    n = summary["n_seeds"]
    seeds = f"{int(n.min())}" if n.min() == n.max() else f"{int(n.min())}-{int(n.max())}"
    ax_rel.set_xticks(x, [_tick(row) for row in summary.itertuples()], fontsize=8)
    ax_rel.set_xlim(-0.6, len(x) - 0.4)
    ax_rel.set_ylabel("val perplexity vs uniform (%)")
    ax_rel.set_title(f"change vs uniform ({seeds} seeds; lower is better)")
    ax_rel.legend(loc="best")
    ax_rel.grid(axis="x", visible=False)
    fig.suptitle("Rival depth profiles at the same budget: where should the MLP width go?")
    return fig
