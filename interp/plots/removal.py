"""The layer-removal figure: per model, the damage of removing each layer (delta perplexity with its CI; top
row) and the layer-dependency map (how much removing layer s changes what a later layer l adds; bottom row).

Reads the two tables of analyses.layer_removal, never a model.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from interp.plots.style import _require_columns, _styled

REMOVAL_COLUMNS = ("label", "layer", "delta_ppl", "delta_ppl_ci_low", "delta_ppl_ci_high")
DEPENDENCY_COLUMNS = ("label", "skipped", "layer", "relative_change")
VMAX = 1.5  # the colour scale stops at a change 1.5x the layer's whole contribution (the colour bar says so)


def _short(label: str) -> str:
    """'tiny-cosine-1.5-0.5-seed0-steps160-fp32' -> 'tiny-cosine-1.5-0.5': a panel title, not a run name."""
    return re.sub(r"-seed\d+.*$", "", label)


@_styled
def plot_layer_removal(removal: pd.DataFrame, dependency: pd.DataFrame) -> Figure:
    """One column per model (in table order): delta ppl per removed layer, then the s x l dependency heatmap."""
    _require_columns(removal, REMOVAL_COLUMNS, "layer removal table")
    _require_columns(dependency, DEPENDENCY_COLUMNS, "layer dependency table")
    labels = list(dict.fromkeys(removal["label"]))
    fig = Figure(figsize=(4.2 * len(labels), 7.4))
    axes = fig.subplots(2, len(labels), squeeze=False)
    for i, label in enumerate(labels):
        rows = removal[removal["label"] == label].sort_values("layer")
        ax = axes[0, i]
        low = rows["delta_ppl"] - rows["delta_ppl_ci_low"]
        high = rows["delta_ppl_ci_high"] - rows["delta_ppl"]
        colors = ["#1f77b4" if v >= 0 else "#d62728" for v in rows["delta_ppl"]]
        ax.bar(rows["layer"], rows["delta_ppl"], color=colors, yerr=[low.clip(lower=0), high.clip(lower=0)],
               capsize=2, error_kw={"lw": 0.8})
        ax.axhline(0, color="0.3", lw=0.8)
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_title(f"{_short(label)}: one layer removed")
        ax.set_xlabel("removed layer")
        ax.set_ylabel("Δ perplexity (95% CI; red: lower)" if i == 0 else "")
        dep = dependency[dependency["label"] == label]
        n = int(rows["layer"].max()) + 1
        grid = np.full((n, n), np.nan)
        grid[dep["skipped"].astype(int), dep["layer"].astype(int)] = dep["relative_change"]
        ax = axes[1, i]
        image = ax.imshow(grid, origin="lower", cmap="viridis", vmin=0, vmax=VMAX, aspect="auto")
        ax.set_xlabel("later layer l")
        ax.set_ylabel("removed layer s" if i == 0 else "")
        ax.set_title("relative change of l's contribution")
        fig.colorbar(image, ax=ax, shrink=0.8, extend="max")
    fig.tight_layout()
    return fig
