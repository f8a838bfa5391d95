"""The block-style figure of section 4: rho per normalised depth of our Transformer++ and GPT-2-style runs,
uniform vs tapered, mean over seeds, with the paper's range for pretrained GPT-2 beside our depth correlations.

Reads the summary table of analyses/novelty_block_styles (one row per block style, variant, metric and layer,
with the seed mean and its t-CI, and the per-(style, variant, metric) depth correlations and the paper's range
repeated on each layer), never a model.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from interp.plots.experiments import _error
from interp.plots.novelty import METRIC_TITLES, PAPER_MODELS, PAPER_SHAPE
from interp.plots.style import _require_columns, _styled, color_for

BLOCK_STYLE_COLUMNS = ("arch", "block_style", "label", "metric", "layer", "depth", "d_mlp", "mean", "ci_low",
                       "ci_high", "n_seeds", "pearson_r_mean", "pearson_r_ci_low", "pearson_r_ci_high",
                       "paper_pearson_r_low", "paper_pearson_r_high")
PAPER_COLOR = "0.8"


@_styled
def plot_novelty_block_styles(df: pd.DataFrame, metrics: Sequence[str] = ("rho_mlp", "rho_block")) -> Figure:
    """One row per block style: a panel per metric (rho against normalised depth l / (L - 1), one line per
    variant, 95% t-CI band over seeds), and a last panel with each variant's Pearson r of the curve with the layer
    index (mean over seeds, 95% t-CI) beside the paper's GPT-2 range (grey band, where the paper gives one)."""
    _require_columns(df, BLOCK_STYLE_COLUMNS, "plot_novelty_block_styles")
    present = [m for m in metrics if m in set(df["metric"])]
    if not present:
        raise ValueError(f"plot_novelty_block_styles: none of metrics {list(metrics)} is in the table "
                         f"(it has {sorted(set(df['metric']))})")
    archs = list(dict.fromkeys(df["arch"]))
    labels = list(dict.fromkeys(df["label"]))
    colors = {label: color_for(label, i) for i, label in enumerate(labels)}
    fig = Figure(figsize=(4.3 * len(present) + 3.4, 3.6 * len(archs) + 0.9), layout="constrained")
    axes = np.atleast_2d(fig.subplots(len(archs), len(present) + 1, squeeze=False,
                                      gridspec_kw={"width_ratios": [1.0] * len(present) + [0.75]}))
    for row, arch in enumerate(archs):
        style = df[df["arch"] == arch]
        name = str(style["block_style"].iloc[0])
        for col, metric in enumerate(present):
            ax = axes[row, col]
            for label, g in style[style["metric"] == metric].groupby("label", sort=False):
                g = g.sort_values("layer")
                widths = g["d_mlp"].astype(int).to_numpy()
                ax.fill_between(g["depth"], g["ci_low"], g["ci_high"], color=colors[label], alpha=0.2, lw=0)
                ax.plot(g["depth"], g["mean"], color=colors[label], marker="o", ms=3.5, lw=1.8,
                        label=f"{label} (d_mlp {widths[0]}->{widths[-1]}), {int(g['n_seeds'].min())} seeds")
            ax.axhline(0.0, color="black", lw=0.8, alpha=0.6, zorder=1)
            ax.set_xlim(-0.03, 1.03)
            ax.set_title(f"{name}: {METRIC_TITLES.get(metric, metric)}", fontsize=9.5)
            if col == 0:
                ax.set_ylabel(f"{name}\nrho (mean over seeds)")
            if row == len(archs) - 1:
                ax.set_xlabel("normalised depth l / (L - 1)")
            ax.legend(loc="best", fontsize=7.5)
        _depth_r_panel(axes[row, -1], style, present, colors, name, with_paper_label=row == 0)
    fig.suptitle(f"Layer-wise novelty of our two block styles{_trained(df)}: uniform vs tapered MLP width; "
                 f"bands: 95% t-CI over seeds\npaper ({PAPER_MODELS}): {PAPER_SHAPE};\ngrey: the paper's range "
                 "of the Pearson r with layer over its GPT-2 sizes", fontsize=10)
    return fig


def _trained(df: pd.DataFrame) -> str:
    """' (2.10M training tokens)' from the table's tokens column ('' without one)."""
    tokens = sorted({int(t) for t in df["tokens"].dropna()}) if "tokens" in df.columns else []
    if not tokens:
        return ""
    ends = tokens[:1] if len(tokens) == 1 else [tokens[0], tokens[-1]]
    return " (" + " to ".join(f"{t / 1e6:.2f}M" if t >= 100_000 else f"{t:,}" for t in ends) + " training tokens)"


def _depth_r_panel(ax, style: pd.DataFrame, metrics: list[str], colors: dict[str, str], name: str,
                   with_paper_label: bool) -> None:
    """Each variant's mean per-seed Pearson r with layer (95% t-CI) per metric, the paper's range behind it."""
    labels = list(dict.fromkeys(style["label"]))
    offsets = np.linspace(-0.15, 0.15, len(labels)) if len(labels) > 1 else np.zeros(1)
    for j, metric in enumerate(metrics):
        rows = style[style["metric"] == metric].drop_duplicates("label")
        low, high = rows["paper_pearson_r_low"].iloc[0], rows["paper_pearson_r_high"].iloc[0]
        if np.isfinite(low) and np.isfinite(high):
            ax.fill_between([j - 0.35, j + 0.35], low, high, color=PAPER_COLOR, lw=0, zorder=0,
                            label="paper, GPT-2 124M-1.5B" if with_paper_label and j == 0 else None)
        for offset, label in zip(offsets, labels):
            r = rows[rows["label"] == label]
            if r.empty:
                continue
            ax.errorbar([j + offset], r["pearson_r_mean"],
                        yerr=_error(r["pearson_r_mean"], r["pearson_r_ci_low"], r["pearson_r_ci_high"]),
                        fmt="o", ms=5, capsize=3, color=colors[label])
    ax.axhline(0.0, color="black", lw=0.8, alpha=0.6, zorder=1)
    ax.set_xticks(range(len(metrics)), [m.replace("rho_", "rho ") for m in metrics])
    ax.set_xlim(-0.6, len(metrics) - 0.4)
    ax.set_ylim(-1.05, 1.05)
    ax.set_title(f"{name}: Pearson r with layer", fontsize=9.5)
    ax.set_ylabel("r per seed: mean, 95% t-CI")
    if with_paper_label:
        ax.legend(loc="lower right", fontsize=7.5)
