"""Figures of the paper's section 4 (layer-wise novelty): rho per layer and per normalised depth.

Reads the tidy tables of interp.probes (one row per model/run, layer and metric, with mean and 95% CI),
never a model. One figure layout serves pretrained models and our trained runs: a row per metric,
columns "per layer" and "vs depth l/(L-1)" (so models of different depth share an axis), one line per
series, 95% CI bands, y = 0 marked, and the Pearson and Spearman r of each per-layer mean with depth
in the legend -- the number the paper reports (0.49-0.71 for rho_MLP on GPT-2).

The correlation helpers live here because the legend is their only consumer; they use numpy alone
(scipy may be absent).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from interp.plots.style import COLORS, _require_columns, _styled, color_for
from interp.stats import DEFAULT_VARIANT, depth_correlations, pearson_r, rankdata, spearman_r  # noqa: F401 (re-exported)
from interp.stats import with_variant as _with_variant

NOVELTY_COLUMNS = ("layer", "depth", "metric", "mean", "ci_low", "ci_high")
# Line style per analysis variant (a `variant` column); unknown variants cycle through the rest.
VARIANT_STYLES = {DEFAULT_VARIANT: "-", "no_massive_dims": "--"}
_OTHER_STYLES = (":", "-.")
METRIC_TITLES = {
    "rho_mlp": r"$\rho_{MLP}(l) = \cos(F_l(z_l),\ h_l)$",
    "rho_block": r"$\rho_{block}(l) = \cos(h_{l+1} - h_l,\ h_l)$",
    "rho_mlp_normed": r"$\cos(F_l(z_l),\ \mathrm{norm}(z_l))$: vs the MLP's normalised input",
    "rho_mlp_mid": r"$\cos(F_l(z_l),\ z_l)$",
}
# Series that are not width schedules (pretrained models) get colours the schedules do not use, so a
# model is never read as "cosine" (red) or "uniform" (grey).
SERIES_COLORS = ("#1f77b4", "#8c564b", "#17becf", "#bcbd22", "#e377c2")
# The paper's section 4 on pretrained GPT-2 (/work/shared/paper-notes.md, "The mechanistic analysis"): the range
# over model sizes of the Pearson r of each per-layer curve with the layer index, and the shape it describes in
# words (the notes give no per-layer rho values, so none is drawn).
PAPER_DEPTH_R = {"rho_mlp": (0.49, 0.71), "rho_block": (0.27, 0.71)}
PAPER_MODELS = "GPT-2 124M-1.5B, 2,048 tokens of WikiText-2"
PAPER_SHAPE = ("both rho fall to about 0 (or slightly below) in early and middle layers and rise through the "
               "second half")
PAPER_NOTE = "paper, GPT-2 124M-1.5B: Pearson r with layer " + ", ".join(
    f"{lo:.2f}-{hi:.2f} ({metric.replace('mlp', 'MLP')})" for metric, (lo, hi) in PAPER_DEPTH_R.items())


def series_color(name: str, index: int) -> str:
    """A width schedule's figure-wide colour (interp.plots.COLORS), else the index-th of SERIES_COLORS."""
    if str(name).split(" ")[0] in COLORS:
        return color_for(str(name), index)
    return SERIES_COLORS[index % len(SERIES_COLORS)]


def _variant_style(variant: str, others: list[str]) -> str:
    if variant in VARIANT_STYLES:
        return VARIANT_STYLES[variant]
    if variant not in others:
        others.append(variant)
    return _OTHER_STYLES[others.index(variant) % len(_OTHER_STYLES)]


# --------------------------------------------------------------------------------------------------
# The figure
# --------------------------------------------------------------------------------------------------

@_styled
def plot_novelty(df: pd.DataFrame, metrics: Sequence[str] = ("rho_mlp", "rho_block"), series: str = "model",
                 width_column: str | None = None, title: str | None = None) -> Figure:
    """rho per layer (left) and against normalised depth (right), one row per metric.

    `df`: tidy probe rows (NOVELTY_COLUMNS plus the `series` column that names a line: "model" for
    pretrained models, "label" for our runs). An optional `variant` column ("default", "no_massive_dims",
    ...) draws each non-default variant of a series dashed in the series' colour. `width_column` (e.g.
    "d_mlp") draws that per-layer value faintly on a secondary axis of the per-layer panels.
    """
    _require_columns(df, (series, *NOVELTY_COLUMNS), "plot_novelty")
    present = [m for m in metrics if m in set(df["metric"])]
    if not present:
        raise ValueError(f"plot_novelty: none of metrics {list(metrics)} is in the table "
                         f"(it has {sorted(set(df['metric']))})")
    df = _with_variant(df)
    corr = depth_correlations(df, series, present).set_index([series, "variant", "metric"])
    names = list(dict.fromkeys(df[series]))
    colors = {name: series_color(name, i) for i, name in enumerate(names)}
    others: list[str] = []

    fig = Figure(figsize=(11.5, 3.9 * len(present) + 0.6), layout="constrained")
    axes = np.atleast_2d(fig.subplots(len(present), 2, sharey="row"))
    for row, metric in enumerate(present):
        ax_layer, ax_depth = axes[row]
        handles = []
        for (name, variant), g in df[df["metric"] == metric].groupby([series, "variant"], sort=False):
            g = g.sort_values("layer")
            style = dict(color=colors[name], ls=_variant_style(variant, others), lw=1.8, marker="o", ms=3)
            for ax, x in ((ax_layer, g["layer"]), (ax_depth, g["depth"])):
                ax.fill_between(x, g["ci_low"], g["ci_high"], color=colors[name], alpha=0.2, lw=0)
                ax.plot(x, g["mean"], **style)
            r = corr.loc[(name, variant, metric)]
            label = str(name) + ("" if variant == DEFAULT_VARIANT else f" [{variant}{_dims_note(g)}]")
            handles.append((Line2D([], [], **style),
                            f"{label}\nPearson r = {r['pearson_r']:+.2f}, Spearman = {r['spearman_r']:+.2f}"))
        for ax in (ax_layer, ax_depth):
            ax.axhline(0.0, color="black", lw=0.8, alpha=0.6, zorder=1)
        ax_layer.set_ylabel(METRIC_TITLES.get(metric, metric))
        ax_layer.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=10))
        ax_depth.set_xlim(-0.03, 1.03)
        if width_column is not None and width_column in df.columns:
            _width_axis(ax_layer, df[df["metric"] == metric], series, width_column, colors)
        ax_depth.legend([h for h, _ in handles], [t for _, t in handles], loc="upper left",
                        bbox_to_anchor=(1.02, 1.0), title=f"{metric}: r of per-layer mean with depth",
                        title_fontsize=9, fontsize=8.5, labelspacing=0.9)
        if row == 0:
            ax_layer.set_title("per layer")
            ax_depth.set_title("against normalised depth l / (L - 1)")
        if row == len(present) - 1:
            ax_layer.set_xlabel("layer l")
            ax_depth.set_xlabel("normalised depth l / (L - 1)")
    tokens = _token_note(df)
    fig.suptitle((title or "Layer-wise novelty") + (f" ({tokens})" if tokens else "")
                 + f"\nshaded: 95% CI of the mean, sequences as the units; {PAPER_NOTE}", fontsize=10.5)
    return fig


def _dims_note(g: pd.DataFrame) -> str:
    """': dims 17, 247, 507' when the rows record excluded residual dimensions (interp.probes)."""
    if "excluded_dims" not in g.columns or g["excluded_dims"].isna().all():
        return ""
    return ": dims " + str(g["excluded_dims"].dropna().iloc[0]).strip("[]")


def _width_axis(ax: Axes, df: pd.DataFrame, series: str, column: str, colors: dict[Any, str]) -> None:
    """Per-layer MLP width, faint, on a right-hand axis (the taper that the curves may follow)."""
    twin = ax.twinx()
    twin.grid(False)
    twin.spines["right"].set_visible(True)
    default = df[df["variant"] == DEFAULT_VARIANT] if (df["variant"] == DEFAULT_VARIANT).any() else df
    for name, g in default.groupby(series, sort=False):
        g = g.sort_values("layer")
        twin.step(g["layer"], g[column], where="mid", color=colors[name], lw=3.5, alpha=0.18)
    twin.set_ylabel(f"MLP width {column}(l) (faint steps)", color="0.45", fontsize=8.5)
    twin.tick_params(axis="y", colors="0.45", labelsize=8)
    twin.set_ylim(0, float(default[column].max()) * 1.15)
    ax.set_zorder(twin.get_zorder() + 1)  # curves above the faint steps
    ax.patch.set_visible(False)


def _token_note(df: pd.DataFrame) -> str:
    if "n_tokens" not in df.columns:
        return ""
    counts = sorted({int(n) for n in df["n_tokens"].dropna()})
    if not counts:
        return ""
    return f"{counts[0]:,} tokens per layer" if len(counts) == 1 else f"{counts[0]:,}-{counts[-1]:,} tokens per layer"
