"""The width-schedule figure: per-layer MLP widths of every schedule and group profile."""

from __future__ import annotations

import itertools

import matplotlib

matplotlib.use("Agg")  # headless and deterministic; must precede any backend use

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from interp.plots.style import SCHEDULE_COLUMNS, _require_columns, _styled, color_for

# --------------------------------------------------------------------------------------------------
# Width schedules
# --------------------------------------------------------------------------------------------------

def _layer_axis(ax: Axes, n_layers: int) -> None:
    ax.set_xlabel("layer")
    ax.set_xlim(-0.6, n_layers - 0.4)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=8))
    ax.axhline(1.0, color="black", lw=0.6, alpha=0.35, zorder=0)


@_styled
def plot_schedules(df: pd.DataFrame) -> Figure:
    """Per-layer MLP width d_ff(l)/d_ff for the taper schedules (left) and the layer-group profiles (right).

    `df` has one row per (kind, name, layer): kind "schedule" rows carry the un-rounded multiplier
    (`ratio_unrounded`, drawn as a thin line) and the rounded integer `width` (drawn as markers);
    kind "profile" rows are drawn as steps, with the layer groups from the optional `group` column
    (index of the layer's group in its profile) marked. Columns `d_ff` and `multiple` go into the titles.
    """
    _require_columns(df, SCHEDULE_COLUMNS, "plot_schedules")
    d_ff = int(df["d_ff"].iloc[0])
    multiple = int(df["multiple"].iloc[0])
    n_layers = int(df["layer"].max()) + 1
    fig = Figure(figsize=(11.0, 4.6), layout="constrained")
    ax_sched, ax_prof = fig.subplots(1, 2, sharey=True)

    schedules = df[df["kind"] == "schedule"]
    for i, (name, g) in enumerate(schedules.groupby("name", sort=False)):
        g = g.sort_values("layer")
        color = color_for(name, i)
        ax_sched.plot(g["layer"], g["ratio_unrounded"], color=color, lw=1.0, alpha=0.9)
        ax_sched.plot(g["layer"], g["width"] / d_ff, ls="none", marker="o", ms=3.6, color=color,
                      label=str(name))
    ax_sched.set_ylabel(r"$d_{ff}(l)\,/\,d_{ff}$")
    _layer_axis(ax_sched, n_layers)
    handles, labels = ax_sched.get_legend_handles_labels()
    handles += [Line2D([], [], color="black", lw=1.0), Line2D([], [], color="black", ls="none", marker="o", ms=3.6)]
    labels += ["un-rounded", f"rounded to multiple of {multiple}"]
    ax_sched.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3)

    profiles = df[df["kind"] == "profile"]
    for i, (name, g) in enumerate(profiles.groupby("name", sort=False)):
        g = g.sort_values("layer")
        ax_prof.step(g["layer"], g["width"] / d_ff, where="mid", color=color_for(name, i), lw=2.0,
                     alpha=0.85, label=str(name))
    edges = _group_edges(profiles, n_layers)
    for edge in edges[1:-1]:
        ax_prof.axvline(edge, color="black", lw=0.6, ls=":", alpha=0.5)
    if len(edges) == 4:
        for (a, b), group in zip(itertools.pairwise(edges), ("early", "middle", "late")):
            ax_prof.text((a + b) / 2, 1.01, group, transform=ax_prof.get_xaxis_transform(), ha="center",
                         va="bottom", fontsize=9, color="0.35")
    ax_prof.set_title("layer-group profiles", pad=16)
    ax_sched.set_title("taper schedules", pad=16)
    _layer_axis(ax_prof, n_layers)
    ax_prof.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4)

    budgets = df.groupby(["kind", "name"])["width"].sum()
    if budgets.nunique() == 1:
        budget = (f"every schedule and profile spends the same budget: "
                  f"Σ over layers of d_ff(l) = {int(budgets.iloc[0]):,} = L × d_ff")
    else:
        budget = (f"budgets DIFFER: Σ over layers of d_ff(l) ranges from {int(budgets.min()):,} "
                  f"to {int(budgets.max()):,}")
    fig.suptitle(f"MLP width per layer: L = {n_layers} layers, d_ff = {d_ff}, widths rounded to multiples of "
                 f"{multiple}\n{budget}", fontsize=11)
    return fig


def _group_edges(profiles: pd.DataFrame, n_layers: int) -> list[float]:
    """x positions bounding the layer groups: from the optional `group` column, else equal thirds."""
    if "group" in profiles.columns and profiles["group"].notna().any():
        groups = profiles.dropna(subset=["group"]).groupby("layer")["group"].max().sort_index()
        inner = [l - 0.5 for l in groups.index[1:] if groups[l] != groups[l - 1]]
    else:
        inner = [n_layers / 3 - 0.5, 2 * n_layers / 3 - 0.5]
    return [-0.5, *inner, n_layers - 0.5]


