"""The importance-measures figure: per model (or trained group, its seeds pooled), the Spearman rho of every
correlational measure (rows) with every causal effect of removing a layer or its parts (columns), the 95% CI
written in each cell (bootstrap over sequences for one model, t over seeds for a group: the panel title says).

Reads analyses.importance_measures' summary table, never a model.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from interp.plots.style import _require_columns, _styled

COLUMNS = ("group", "measure", "causal", "spearman_rho", "ci_low", "ci_high")
CAUSAL_ORDER = ("delta_loss_skip_block", "delta_loss_skip_mlp", "delta_loss_mean_mlp", "delta_loss_skip_attn")


@_styled
def plot_importance_measures(summary: pd.DataFrame) -> Figure:
    _require_columns(summary, COLUMNS, "importance measures table")
    groups = list(dict.fromkeys(summary["group"]))
    measures = list(dict.fromkeys(summary["measure"]))
    causal = [c for c in CAUSAL_ORDER if c in set(summary["causal"])]
    n_cols = min(3, len(groups))
    n_rows = -(-len(groups) // n_cols)
    fig = Figure(figsize=(4.6 * n_cols + 1.2, (0.55 * len(measures) + 2.4) * n_rows))
    grid_axes = fig.subplots(n_rows, n_cols, squeeze=False, gridspec_kw={"hspace": 0.55})
    axes = list(grid_axes.flat)
    for ax in axes[len(groups):]:
        ax.set_visible(False)
    for ax, group in zip(axes, groups, strict=False):
        rows = summary[summary["group"] == group].set_index(["measure", "causal"])
        grid = np.array([[rows["spearman_rho"].get((m, c), np.nan) for c in causal] for m in measures])
        image = ax.imshow(grid, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
        for i, m in enumerate(measures):
            for j, c in enumerate(causal):
                if (m, c) in rows.index:
                    r = rows.loc[(m, c)]
                    ax.text(j, i, f"{r['spearman_rho']:+.2f}\n[{r['ci_low']:+.2f}, {r['ci_high']:+.2f}]",
                            ha="center", va="center", fontsize=6.5,
                            color="white" if abs(r["spearman_rho"]) > 0.7 else "black")
        ax.set_xticks(range(len(causal)), [c.removeprefix("delta_loss_") for c in causal], rotation=30, ha="right")
        ax.set_yticks(range(len(measures)), measures if ax in grid_axes[:, 0] else [""] * len(measures))
        first = summary[summary["group"] == group].iloc[0]
        how = (f"{int(first['n_seeds'])} seeds, t-CI" if "n_seeds" in first and first["n_seeds"] > 1
               else "bootstrap CI")
        layers = f"{int(first['n_layers'])} layers, " if "n_layers" in first else ""
        ax.set_title(f"{group[:44]}\n({layers}{how})", fontsize=9)
    fig.colorbar(image, ax=axes[:len(groups)], shrink=0.8, label="Spearman rho across layers (95% CI in each cell)")
    return fig
