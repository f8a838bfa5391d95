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


DROP_COLUMNS = ("model", "task", "layer", "d_acc", "d_acc_ci_low", "d_acc_ci_high")


def _task_label(rows: pd.DataFrame, task: str) -> str:
    """'hellaswag acc_norm (clean 0.405)': the task, its accuracy and the clean model's value, where recorded."""
    metric = f" {rows['metric'].iloc[0]}" if "metric" in rows else ""
    clean = f" (clean {rows['acc_clean'].iloc[0]:.3f})" if "acc_clean" in rows else ""
    return f"{task}{metric}{clean}"


@_styled
def plot_removal_accuracy(drops: pd.DataFrame, correlations: pd.DataFrame | None = None) -> Figure:
    """Per model: the accuracy change when each block is removed, per task with its 95% t-CI over documents
    (left); the Spearman rho of each measure with that change across layers, per task and pooled, bootstrap CI
    over documents (right; "pending" until every layer of the model is measured)."""
    _require_columns(drops, DROP_COLUMNS, "removal accuracy table")
    models = list(dict.fromkeys(drops["model"]))
    fig = Figure(figsize=(13, 3.6 * len(models)))
    axes = fig.subplots(len(models), 2, squeeze=False, gridspec_kw={"width_ratios": (1.6, 1), "hspace": 0.45})
    for (left, right), model in zip(axes, models, strict=True):
        rows = drops[drops["model"] == model]
        tasks = list(dict.fromkeys(rows["task"]))
        for k, task in enumerate(tasks):
            t = rows[rows["task"] == task].sort_values("layer")
            x = t["layer"].to_numpy() + (k - (len(tasks) - 1) / 2) * 0.2
            left.errorbar(x, t["d_acc"], yerr=[t["d_acc"] - t["d_acc_ci_low"], t["d_acc_ci_high"] - t["d_acc"]],
                          fmt="o-", ms=3, lw=1, capsize=2, label=_task_label(t, task))
        left.axhline(0, color="0.5", lw=0.8)
        left.set_xlabel("removed layer")
        left.set_ylabel("accuracy change (95% CI)")
        n_docs = f", {int(rows['n_docs'].iloc[0])} documents per task" if "n_docs" in rows else ""
        left.set_title(f"{model}: accuracy change when the block is removed{n_docs}", fontsize=9)
        left.legend(fontsize=7)
        corr = None if correlations is None else correlations[correlations["model"] == model]
        if corr is None or corr.empty:
            done = rows.groupby("task")["layer"].nunique().to_dict()
            right.text(0.5, 0.5, "correlations pending:\nlayers measured per task\n" +
                       "\n".join(f"{t}: {n}" for t, n in done.items()), ha="center", va="center",
                       transform=right.transAxes, fontsize=9)
            right.set_axis_off()
            continue
        measures = list(dict.fromkeys(corr["measure"]))
        ctasks = list(dict.fromkeys(corr["task"]))
        for k, task in enumerate(ctasks):
            c = corr[corr["task"] == task].set_index("measure").loc[measures]
            y = np.arange(len(measures)) + (k - (len(ctasks) - 1) / 2) * 0.18
            right.errorbar(c["spearman_rho"], y, xerr=[c["spearman_rho"] - c["ci_low"], c["ci_high"] - c["spearman_rho"]],
                           fmt="s" if task == "pooled" else "o", ms=4, capsize=2, label=task)
        right.axvline(0, color="0.5", lw=0.8)
        right.set_xlim(-1.05, 1.05)
        right.set_yticks(range(len(measures)), measures)
        right.invert_yaxis()
        right.set_xlabel("Spearman rho across layers with the accuracy change (95% CI)")
        right.legend(fontsize=7)
    return fig
