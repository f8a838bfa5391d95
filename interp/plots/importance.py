"""The importance-measures figure: per model, the Spearman rho of every correlational measure (rows) with every
causal effect of removing a layer or its parts (columns), the 95% bootstrap CI written in each cell.

Reads analyses.importance_measures' table, never a model.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from interp.plots.style import _require_columns, _styled

COLUMNS = ("label", "measure", "causal", "spearman_rho", "ci_low", "ci_high")
CAUSAL_ORDER = ("delta_loss_skip_block", "delta_loss_skip_mlp", "delta_loss_mean_mlp", "delta_loss_skip_attn")


@_styled
def plot_importance_measures(summary: pd.DataFrame) -> Figure:
    _require_columns(summary, COLUMNS, "importance measures table")
    labels = list(dict.fromkeys(summary["label"]))
    measures = list(dict.fromkeys(summary["measure"]))
    causal = [c for c in CAUSAL_ORDER if c in set(summary["causal"])]
    fig = Figure(figsize=(4.6 * len(labels), 0.55 * len(measures) + 2.2))
    axes = fig.subplots(1, len(labels), squeeze=False)[0]
    for ax, label in zip(axes, labels, strict=True):
        rows = summary[summary["label"] == label].set_index(["measure", "causal"])
        grid = np.array([[rows["spearman_rho"].get((m, c), np.nan) for c in causal] for m in measures])
        image = ax.imshow(grid, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
        for i, m in enumerate(measures):
            for j, c in enumerate(causal):
                if (m, c) in rows.index:
                    r = rows.loc[(m, c)]
                    ax.text(j, i, f"{r['spearman_rho']:+.2f}\n[{r['ci_low']:+.2f}, {r['ci_high']:+.2f}]",
                            ha="center", va="center", fontsize=6.5)
        ax.set_xticks(range(len(causal)), [c.removeprefix("delta_loss_") for c in causal], rotation=30, ha="right")
        ax.set_yticks(range(len(measures)), measures if ax is axes[0] else [""] * len(measures))
        ax.set_title(label[:40])
    fig.colorbar(image, ax=list(axes), shrink=0.8, label="Spearman rho across layers (95% bootstrap CI)")
    return fig
