"""Downstream evaluations of a multi-run experiment (analyses.downstream_groups): one panel per task, each
variant's mean over seeds with its t-CI, one dot per seed, the documents' stderr beside it, chance levels."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from interp.plots.style import _require_columns, _styled, color_for

DOWNSTREAM_COLUMNS = ("variant", "label", "task", "metric", "n_seeds", "value_mean", "value_ci_low",
                      "value_ci_high", "stderr_mean", "resolved")
# Accuracy of guessing uniformly among a task's choices (ARC has 3-5 choices: ~1/4; LAMBADA: an open word);
# the 8-task average's is the mean of the eight.
CHANCE = {"lambada_openai": 0.0, "piqa": 0.5, "hellaswag": 0.25, "winogrande": 0.5, "arc_easy": 0.25,
          "arc_challenge": 0.25, "social_iqa": 1 / 3, "boolq": 0.5}
CHANCE["paper_avg8"] = float(np.mean(list(CHANCE.values())))
PANEL_ORDER = ("lambada_openai", "piqa", "hellaswag", "winogrande", "arc_easy", "arc_challenge", "social_iqa",
               "boolq", "paper_avg8", "lambada_openai:perplexity", "wiki_heldout", "training_val")
TITLES = {"lambada_openai": "LAMBADA acc", "lambada_openai:perplexity": "LAMBADA ppl", "piqa": "PIQA",
          "hellaswag": "HellaSwag (norm)", "winogrande": "WinoGrande", "arc_easy": "ARC-e",
          "arc_challenge": "ARC-c (norm)", "social_iqa": "SIQA", "boolq": "BoolQ", "paper_avg8": "avg (8 tasks)",
          "wiki_heldout": "wiki_heldout word ppl", "training_val": "training val ppl"}
ACCURACY_METRICS = ("acc", "acc_norm")


def _panel(task: str, metric: str) -> str:
    return f"{task}:{metric}" if task == "lambada_openai" and metric not in ACCURACY_METRICS else task


@_styled
def plot_downstream_runs(summary: pd.DataFrame, rows: pd.DataFrame | None = None) -> Figure:
    """Panels in PANEL_ORDER (those present): per variant, mean over seeds (colour, black bar: 95% t-CI over
    seeds), the documents' 95% interval (1.96 x mean stderr, thin coloured bar, right), one grey dot per seed;
    a star over a variant whose paired difference from the baseline is resolved (the table's `resolved`: the
    report's rule, over seeds and documents; analyses.downstream_groups); chance as a dashed line."""
    _require_columns(summary, DOWNSTREAM_COLUMNS, "plot_downstream_runs")
    summary = summary.assign(panel=[_panel(t, m) for t, m in zip(summary["task"], summary["metric"])])
    panels = [p for p in PANEL_ORDER if p in set(summary["panel"])]
    panels += sorted(set(summary["panel"]) - set(panels))
    variants = list(dict.fromkeys(summary["variant"]))
    labels = dict(zip(summary["variant"], summary["label"]))
    # many variants (the four-mixer comparison's 8): fewer, wider panels, so the rotated labels stay apart
    ncols = min(6 if len(variants) <= 4 else 4, len(panels))
    nrows = -(-len(panels) // ncols)
    panel_width = max(2.1, 0.7 + 0.36 * len(variants))
    fig = Figure(figsize=(panel_width * ncols, 3.0 * nrows), layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
    x = np.arange(len(variants))
    for ax, panel in zip(axes, panels):
        s = summary[summary["panel"] == panel].set_index("variant").reindex(variants)
        colors = [color_for(v, i) for i, v in enumerate(variants)]
        mean = s["value_mean"].to_numpy(float)
        low = np.nan_to_num(mean - s["value_ci_low"].to_numpy(float))
        high = np.nan_to_num(s["value_ci_high"].to_numpy(float) - mean)
        ax.errorbar(x, mean, yerr=[low, high], fmt="none", ecolor="black", elinewidth=1.1, capsize=3, zorder=2)
        ax.scatter(x, mean, s=45, c=colors, zorder=3)
        docs = np.nan_to_num(1.96 * s["stderr_mean"].to_numpy(float))
        ax.errorbar(x + 0.22, mean, yerr=docs, fmt="none", ecolor=colors, elinewidth=2.2, alpha=0.6, zorder=2)
        if rows is not None and len(rows):
            task, _, metric = panel.partition(":")
            r = rows[(rows["task"] == task) & ((rows["metric"] == metric) if metric else
                                               ~rows["metric"].isin(["perplexity"]))]
            pos = {v: i for i, v in enumerate(variants)}
            r = r[r["variant"].isin(pos)]
            ax.scatter(r["variant"].map(pos) - 0.2, r["value"], s=9, c="gray", alpha=0.7, zorder=3)
        if panel == "lambada_openai:perplexity":
            ax.set_yscale("log")   # bootstrapped stderr of a perplexity in the 1e7s: read it in decades
        ax.margins(y=0.15)        # room for the stars below the title
        for xi, resolved in zip(x, s["resolved"].fillna(False).astype(bool)):
            if resolved:
                ax.annotate("*", (xi, 0.99), xycoords=("data", "axes fraction"), ha="center", va="top",
                            fontsize=13)
        if panel in CHANCE:
            ax.axhline(CHANCE[panel], color="gray", ls="--", lw=0.8)
        ax.set_xticks(x, [labels[v] for v in variants], rotation=55, ha="right")
        ax.set_xlim(-0.6, len(variants) - 0.4)
        ax.set_title(TITLES.get(panel, panel))
        ax.grid(axis="x", visible=False)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    seeds = summary["n_seeds"]
    n = f"{int(seeds.min())}" if seeds.min() == seeds.max() else f"{int(seeds.min())}-{int(seeds.max())}"
    fig.suptitle(f"Downstream evaluations per variant, {n} seeds\nmean; black: 95% t-CI over seeds; colour: the "
                 "documents' 95%; dots: seeds; *: change vs the baseline resolved (seeds + documents, Bonferroni per "
                 "family); dashed: chance")
    return fig
