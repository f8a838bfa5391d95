"""The capacity-ablation figure: a tidy table from interp.ablations in, a matplotlib Figure out.

Kept beside interp/plots/style.py (same STYLE, colours and save_figure) in its own module so each figure
module stays small. Group colours reuse the wider-early / -middle / -late profile colours, so a reader
sees the same thirds in the same colours across the training and ablation figures.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from interp.plots.style import COLORS, _require_columns, _styled

ABLATION_COLUMNS = ("kind", "group", "fraction", "selection", "seed", "layer", "delta", "delta_ci_low",
                    "delta_ci_high")
GROUP_ORDER = ("early", "middle", "late")
# A range of |delta| wider than this (largest / median of the positive ones) switches an axis to symlog.
SYMLOG_RATIO = 20.0


def group_color(group: str) -> str:
    return COLORS.get(f"wider-{group}", "#555555")


def random_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Random-selection rows reduced over seeds, per (group, fraction): the mean delta, and a band that
    spans every seed's CI (seed-to-seed variation and token sampling together)."""
    rand = df[(df["kind"] == "neurons") & (df["selection"] == "random")]
    return (rand.groupby(["group", "fraction"], as_index=False)
            .agg(delta=("delta", "mean"), delta_ci_low=("delta_ci_low", "min"),
                 delta_ci_high=("delta_ci_high", "max"), n_seeds=("seed", "nunique")))


def _use_symlog(values: np.ndarray) -> tuple[bool, float]:
    """(whether one large value would flatten the rest on a linear axis, the linear threshold to use)."""
    pos = np.abs(values[np.isfinite(values)])
    pos = pos[pos > 0]
    if pos.size < 3 or pos.max() <= SYMLOG_RATIO * np.median(pos):
        return False, 0.0
    return True, float(10 ** np.floor(np.log10(np.median(pos))))


def _scale(ax: Axes, values: np.ndarray) -> str:
    symlog, linthresh = _use_symlog(values)
    if symlog:
        ax.set_yscale("symlog", linthresh=linthresh, linscale=0.6)
        return f" (symlog y, linear below {linthresh:g})"
    return ""


def _fraction_panel(ax: Axes, df: pd.DataFrame) -> None:
    neurons = df[df["kind"] == "neurons"]
    groups = [g for g in GROUP_ORDER if g in set(neurons["group"])]
    rand = random_summary(df)
    values = [neurons["delta"].to_numpy()]
    for group in groups:
        color = group_color(group)
        for selection, table, style in (("lowest", neurons[neurons["selection"] == "lowest"], "-"),
                                        ("random", rand, "--")):
            rows = table[table["group"] == group].sort_values("fraction")
            if rows.empty:
                continue
            x = np.r_[0.0, rows["fraction"].to_numpy(float)]
            y = np.r_[0.0, rows["delta"].to_numpy(float)]
            lo = np.r_[0.0, rows["delta_ci_low"].to_numpy(float)]
            hi = np.r_[0.0, rows["delta_ci_high"].to_numpy(float)]
            ax.plot(x, y, style, color=color, marker="o" if selection == "lowest" else "s", ms=3.5, lw=1.6)
            ax.fill_between(x, lo, hi, color=color, alpha=0.18 if selection == "lowest" else 0.08, lw=0)
    note = _scale(ax, np.concatenate(values))
    ax.axhline(0.0, color="black", lw=0.6, alpha=0.4, zorder=0)
    ax.set_xlabel("fraction of each layer's MLP neurons removed")
    ax.set_ylabel("Δ held-out loss vs baseline (nats)")
    ax.set_title("removing neurons from one third of the layers" + note)
    fractions = sorted(set(neurons["fraction"].dropna()))
    ax.set_xticks([0.0, *fractions])
    n_seeds = int(rand["n_seeds"].max()) if not rand.empty else 0
    handles = [Line2D([], [], color=group_color(g), lw=2, label=g) for g in groups]
    handles += [Line2D([], [], color="black", lw=1.4, ls="-", marker="o", ms=3.5, label="lowest contribution"),
                Line2D([], [], color="black", lw=1.4, ls="--", marker="s", ms=3.5,
                       label=f"random (mean of {n_seeds} seed{'s' if n_seeds != 1 else ''})")]
    ax.legend(handles=handles, loc="upper left")


def _skip_panel(ax: Axes, df: pd.DataFrame) -> None:
    skip = df[df["kind"] == "skip_mlp"].sort_values("layer")
    layers = skip["layer"].to_numpy(int)
    delta = skip["delta"].to_numpy(float)
    yerr = np.vstack([delta - skip["delta_ci_low"].to_numpy(float), skip["delta_ci_high"].to_numpy(float) - delta])
    note = _scale(ax, delta)
    spans = _group_spans(df)
    for group, (first, last) in spans.items():
        ax.axvspan(first - 0.5, last + 0.5, color=group_color(group), alpha=0.07, lw=0)
        in_group = delta[(layers >= first) & (layers <= last)]
        if in_group.size:  # a group with no skipped MLP has no median (and no "Mean of empty slice")
            median = np.median(in_group)   # robust to layer 0's outlier
            ax.hlines(median, first - 0.4, last + 0.4, color=group_color(group), lw=1.2, ls=":")
    ax.errorbar(layers, delta, yerr=np.nan_to_num(yerr), fmt="o-", color="#333333", ms=3.5, lw=1.0,
                capsize=2, elinewidth=0.8)
    ax.axhline(0.0, color="black", lw=0.6, alpha=0.4, zorder=0)
    ax.set_xlabel("layer whose MLP is skipped")
    ax.set_ylabel("Δ held-out loss vs baseline (nats)")
    ax.set_title("skipping one layer's whole MLP" + note)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=10))
    ax.set_xlim(-0.6, layers.max() + 0.6)
    handles = [Patch(color=group_color(g), alpha=0.3, label=f"{g} (dotted: median)") for g in spans]
    if handles:
        ax.legend(handles=handles, loc="upper right")


def _group_spans(df: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """First and last layer of each group, from the `layers` column ('0-9') of the neuron rows. A table of
    MLP skips only has none and says nothing of the model's depth (skip_layers may be any subset), so its
    groups are not guessed: no spans."""
    spans: dict[str, tuple[int, int]] = {}
    if "layers" in df.columns:
        for group, text in df[df["kind"] == "neurons"].groupby("group")["layers"].first().items():
            first, last = (int(v) for v in str(text).split("-"))
            spans[group] = (first, last)
    return {g: spans[g] for g in GROUP_ORDER if g in spans}


@_styled
def plot_capacity_ablation(df: pd.DataFrame) -> Figure:
    """Left: Δ loss vs fraction of neurons removed in the early / middle / late third (lowest-contribution
    solid with its paired 95% CI; random dashed, band = span of the seeds' CIs). Right: Δ loss of
    skipping each layer's MLP (95% CI bars; dotted = group median). Either axis turns symlog when one
    value dwarfs the rest (the title says so)."""
    _require_columns(df, ABLATION_COLUMNS, "plot_capacity_ablation")
    has_neurons, has_skip = (df["kind"] == "neurons").any(), (df["kind"] == "skip_mlp").any()
    if not (has_neurons or has_skip):
        raise ValueError("plot_capacity_ablation: the table has no 'neurons' or 'skip_mlp' rows to plot")
    panels = int(has_neurons) + int(has_skip)
    fig = Figure(figsize=(6.2 * panels, 4.4), layout="constrained")
    axes = fig.subplots(1, panels, squeeze=False)[0]
    if has_neurons:
        _fraction_panel(axes[0], df)
    if has_skip:
        _skip_panel(axes[-1], df)
    model = str(df["model"].iloc[0]) if "model" in df.columns else ""
    base = df.loc[df["kind"] == "baseline", "loss"]
    extra = ""
    if "n_tokens" in df.columns and not base.empty:
        extra = (f": baseline loss {float(base.iloc[0]):.3f} nats on {int(df['n_tokens'].iloc[0])} held-out tokens "
                 f"({int(df['n_sequences'].iloc[0])} sequences)")
    fig.suptitle(f"MLP capacity ablation of {model}{extra}")
    return fig
