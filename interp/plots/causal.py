"""The novelty-vs-causal figure: per model, one correlational measure against one causal effect per layer
(top row), and the Spearman rho of every measure with every causal effect, with bootstrap CIs (bottom row).

Reads the two tables of analyses.novelty_vs_causal (the probe rows with causal rows, and the correlation
rows of interp.causal.correlations), never a model.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure

from interp.plots.ablation import _scale
from interp.plots.novelty import METRIC_TITLES
from interp.plots.style import _require_columns, _styled

LAYER_COLUMNS = ("label", "layer", "depth", "metric", "mean", "ci_low", "ci_high")
CORRELATION_COLUMNS = ("label", "measure", "causal", "spearman_rho", "ci_low", "ci_high")
CAUSAL_TITLES = {"delta_loss_skip_mlp": "MLP skipped", "delta_loss_mean_mlp": "MLP mean-ablated",
                 "delta_loss_skip_attn": "attention skipped", "delta_loss_skip_block": "block removed"}
CAUSAL_COLORS = {"delta_loss_skip_mlp": "#d62728", "delta_loss_mean_mlp": "#ff7f0e",
                 "delta_loss_skip_attn": "#1f77b4", "delta_loss_skip_block": "#2ca02c"}


def _rho_text(corr: pd.DataFrame, label: str, measure: str, causal: str) -> str:
    row = corr[(corr["label"] == label) & (corr["measure"] == measure) & (corr["causal"] == causal)]
    if row.empty:
        return ""
    r = row.iloc[0]
    return f"Spearman ρ = {r['spearman_rho']:+.2f} [{r['ci_low']:+.2f}, {r['ci_high']:+.2f}]"


def _halves(rows: pd.DataFrame) -> list[np.ndarray]:
    """Error-bar lengths below and above the mean (0 where a bound is missing or on the wrong side)."""
    mean = rows["mean"].to_numpy(float)
    low, high = (np.nan_to_num(v, nan=0.0).clip(min=0.0) for v in (mean - rows["ci_low"].to_numpy(float),
                                                                  rows["ci_high"].to_numpy(float) - mean))
    return [low, high]


def _scatter(ax: Axes, rows: pd.DataFrame, measure: str, causal: str) -> tuple[PathCollection, str]:
    x = rows[rows["metric"] == measure].set_index("layer")
    y = rows[rows["metric"] == causal].set_index("layer")
    layers = x.index.intersection(y.index)
    x, y = x.loc[layers], y.loc[layers]
    ax.errorbar(x["mean"], y["mean"], xerr=_halves(x), yerr=_halves(y), fmt="none", ecolor="#999999",
                elinewidth=0.8, zorder=1)
    points = ax.scatter(x["mean"], y["mean"], c=x["depth"], cmap="viridis", vmin=0, vmax=1, s=28, zorder=2,
                        edgecolor="black", linewidth=0.4)
    for layer in layers:
        ax.annotate(str(layer), (x.loc[layer, "mean"], y.loc[layer, "mean"]), fontsize=7, xytext=(3, 2),
                    textcoords="offset points")
    note = _scale(ax, y["mean"].to_numpy(float))  # symlog when one layer dwarfs the rest (CIs may cross 0)
    ax.axhline(0.0, color="black", lw=0.6, alpha=0.4, zorder=0)
    ax.set_xlabel(measure)
    ax.set_ylabel(f"Δ loss, {CAUSAL_TITLES.get(causal, causal)} (nats)")
    return points, note.strip(" ()")


def _forest(ax: Axes, corr: pd.DataFrame, measures: Sequence[str], causals: Sequence[str]) -> None:
    step = 0.8 / max(len(causals), 1)
    for j, causal in enumerate(causals):
        rows = corr[corr["causal"] == causal].set_index("measure").reindex(measures)
        ys = np.arange(len(measures)) + (j - (len(causals) - 1) / 2) * step
        color = CAUSAL_COLORS.get(causal, "#555555")
        # segments, not error bars: a percentile bootstrap interval need not contain the point estimate
        ax.hlines(ys, rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float), color=color, lw=1.0)
        ax.plot(rows["spearman_rho"].to_numpy(float), ys, "o", ms=3.5, color=color,
                label=CAUSAL_TITLES.get(causal, causal))
    ax.axvline(0.0, color="black", lw=0.6, alpha=0.5)
    if "n_layers" in corr.columns and len(corr):
        # the bootstrap resamples sequences, not layers: this band is what chance alone gives across L layers
        null = 1.96 / np.sqrt(max(int(corr["n_layers"].iloc[0]) - 1, 1))
        ax.axvspan(-null, null, color="#999999", alpha=0.15, lw=0, label="|ρ| < 1.96 / √(L − 1)")
    ax.set_yticks(range(len(measures)), measures)
    ax.invert_yaxis()
    ax.set_xlim(-1.05, 1.05)
    ax.set_xlabel("Spearman ρ across layers")


def panel_name(rows: pd.DataFrame, label: str) -> str:
    """What a panel shows, from its rows: `label (pretrained, L layers)` for a named model, `label (our run, L
    layers)` and the run's name on a second line for one of our checkpoints, so a reader of the figure alone can tell
    "uniform" is a tiny run of ours."""
    if rows.empty:
        return label
    first = rows.iloc[0]
    layers = f"{int(first['n_layers'])} layers" if "n_layers" in rows and pd.notna(first["n_layers"]) else ""
    checkpoint = first.get("checkpoint")
    if isinstance(checkpoint, str) and checkpoint:
        return f"{label} (our run" + (f", {layers})" if layers else ")") + f"\n{first['model']}"
    return f"{label} (pretrained, {layers})" if layers else label


@_styled
def plot_novelty_vs_causal(layers: pd.DataFrame, corr: pd.DataFrame, measure: str = "rho_mlp",
                           causal: str = "delta_loss_skip_mlp") -> Figure:
    """Top: per model (column `label`), `measure` vs `causal` per layer, coloured by depth, with 95% CIs on
    both; bottom: every measure's Spearman rho with every causal effect, with its bootstrap CI."""
    _require_columns(layers, LAYER_COLUMNS, "plot_novelty_vs_causal (layers)")
    _require_columns(corr, CORRELATION_COLUMNS, "plot_novelty_vs_causal (correlations)")
    labels = list(dict.fromkeys(corr["label"]))
    missing = [m for m in (measure, causal) if m not in set(layers["metric"])]
    if missing:
        raise ValueError(f"plot_novelty_vs_causal: the layers table has no metric {missing}; it has "
                         f"{sorted(set(layers['metric']))}")
    measures = list(dict.fromkeys(corr["measure"]))
    causals = list(dict.fromkeys(corr["causal"]))
    fig = Figure(figsize=(max(3.6 * len(labels), 8.0), 7.6), layout="constrained")
    axes = fig.subplots(2, len(labels), squeeze=False, gridspec_kw={"height_ratios": [1.0, 1.1]})
    points = None
    for i, label in enumerate(labels):
        top, bottom = axes[0, i], axes[1, i]
        points, note = _scatter(top, layers[layers["label"] == label], measure, causal)
        name = panel_name(layers[layers["label"] == label], label)
        top.set_title("\n".join(t for t in (name, _rho_text(corr, label, measure, causal), note) if t), fontsize=8)
        _forest(bottom, corr[corr["label"] == label], measures, causals)
        bottom.set_title(label, fontsize=9)
        if i:
            bottom.set_yticklabels([])
    if points is not None:
        fig.colorbar(points, ax=axes[0, :].tolist(), label="depth l / (L - 1)", shrink=0.8)
    handles, names = axes[1, 0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncol=len(names),
               title="causal effect (95% percentile-bootstrap CI over sequences); grey: chance level across layers")
    fig.suptitle(f"Does a correlational measure predict a layer's causal importance? "
                 f"({METRIC_TITLES.get(measure, measure)} vs Δ loss)")
    return fig
