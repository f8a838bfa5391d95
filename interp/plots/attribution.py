"""The attribution-vs-exact figure: per model (rows) and causal kind (columns), each layer's exact delta loss with
its 95% CI and the first-order estimate of the same row, the panel titled with their Spearman rho across layers.

Reads the two tables of analyses.attribution_vs_exact, never a model.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from interp.plots.causal import CAUSAL_COLORS, CAUSAL_TITLES
from interp.plots.style import _require_columns, _styled

LAYER_COLUMNS = ("model", "kind", "layer", "exact_mean", "exact_ci_low", "exact_ci_high", "estimate_mean")
SUMMARY_COLUMNS = ("model", "kind", "spearman_rho", "ci_low", "ci_high")


@_styled
def plot_attribution_vs_exact(layers: pd.DataFrame, summary: pd.DataFrame) -> Figure:
    """One panel per model and kind: exact rows (line, CI band) and their first-order estimates (markers)."""
    import matplotlib.pyplot as plt

    _require_columns(layers, LAYER_COLUMNS, "attribution_vs_exact layers")
    _require_columns(summary, SUMMARY_COLUMNS, "attribution_vs_exact summary")
    models = list(dict.fromkeys(layers["model"]))
    kinds = list(dict.fromkeys(layers["kind"]))
    fig, axes = plt.subplots(len(models), len(kinds), figsize=(3.2 * len(kinds), 2.6 * len(models)), squeeze=False)
    for i, model in enumerate(models):
        for j, kind in enumerate(kinds):
            ax = axes[i][j]
            rows = layers[(layers["model"] == model) & (layers["kind"] == kind)].sort_values("layer")
            color = CAUSAL_COLORS.get(f"delta_loss_{kind}", "black")
            ax.fill_between(rows["layer"], rows["exact_ci_low"], rows["exact_ci_high"], color=color, alpha=0.2, lw=0)
            ax.plot(rows["layer"], rows["exact_mean"], color=color, lw=1.4, label="exact")
            ax.plot(rows["layer"], rows["estimate_mean"], "o", ms=3, mfc="none", color="black", label="attribution")
            ax.axhline(0.0, color="black", lw=0.5, alpha=0.4)
            ax.set_yscale("symlog", linthresh=0.05)
            found = summary[(summary["model"] == model) & (summary["kind"] == kind)]
            rho = "" if found.empty else (f"\nSpearman ρ {found['spearman_rho'].iloc[0]:+.2f} "
                                          f"[{found['ci_low'].iloc[0]:+.2f}, {found['ci_high'].iloc[0]:+.2f}]")
            ax.set_title(f"{model}: {CAUSAL_TITLES.get(f'delta_loss_{kind}', kind)}{rho}", fontsize=8)
            if i == len(models) - 1:
                ax.set_xlabel("layer")
            if j == 0:
                ax.set_ylabel("Δ loss (nats, symlog)")
    axes[0][0].legend(fontsize=7, loc="best")
    fig.suptitle("First-order estimates (attribution patching) against the exact causal rows", fontsize=10)
    fig.tight_layout()
    return fig
