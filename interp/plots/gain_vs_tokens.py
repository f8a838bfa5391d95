"""The training-length figure: the tapering gain against training tokens, per block style, and the loss curves."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from interp.plots.experiments import _error
from interp.plots.style import _require_columns, _styled, color_for

GAIN_COLUMNS = ("arch", "lr_schedule", "steps", "tokens", "variant", "n_pairs", "rel_val_ppl_pct_mean",
                "rel_val_ppl_pct_ci_low", "rel_val_ppl_pct_ci_high")
CURVE_COLUMNS = ("arch", "variant", "seed", "kind", "tokens", "loss")
MARKERS = {"llama": "o", "gpt2": "s"}


@_styled
def plot_gain_vs_tokens(summary: pd.DataFrame, curves: pd.DataFrame, runs: pd.DataFrame | None = None) -> Figure:
    """Left: change in validation perplexity of the taper vs uniform (%, paired by seed, 95% t-CI) against
    training tokens (log scale), one line per block style from the wsd cooldown branches, the own-schedule
    check as an open marker, one dot per seed pair. Right: validation loss over tokens of the main (stable-phase)
    runs, mean over seeds, with the cooled-down lengths as markers: the gap a cooldown buys is visible there."""
    _require_columns(summary, GAIN_COLUMNS, "plot_gain_vs_tokens")
    _require_columns(curves, CURVE_COLUMNS, "plot_gain_vs_tokens")
    fig = Figure(figsize=(11.5, 4.4), layout="constrained")
    ax_gain, ax_loss = fig.subplots(1, 2)
    taper = summary[summary["variant"] != "uniform"]
    ax_gain.axhline(0.0, color="black", lw=0.8)
    for i, ((arch, schedule), g) in enumerate(taper.groupby(["arch", "lr_schedule"], sort=False)):
        g = g.sort_values("tokens")
        wsd = schedule == "wsd"
        n = g["n_pairs"].astype(int)
        pairs = f"{n.min()}" if n.min() == n.max() else f"{n.min()}-{n.max()}"
        what = "wsd cooldown branches" if wsd else "own cosine schedule (check)"
        label = f"{arch}, {what}, {pairs} seed pair{'s' if n.max() > 1 else ''}"
        color = color_for(arch, i)
        ax_gain.errorbar(g["tokens"] / 1e6, g["rel_val_ppl_pct_mean"],
                         yerr=_error(g["rel_val_ppl_pct_mean"], g["rel_val_ppl_pct_ci_low"],
                                     g["rel_val_ppl_pct_ci_high"]),
                         fmt=MARKERS.get(arch, "o") + ("-" if wsd else ""), ms=6, capsize=4, color=color,
                         mfc=color if wsd else "white", label=label)
        if runs is not None and len(runs):
            for tokens, pair in _seed_pairs(runs[(runs["arch"] == arch) & (runs["lr_schedule"] == schedule)]):
                ax_gain.scatter(np.full(len(pair), tokens / 1e6) * 1.04, pair, s=10, color=color, alpha=0.45)
    ax_gain.set_xscale("log", base=2)
    ax_gain.set_xlabel("training tokens (millions, log scale)")
    ax_gain.set_ylabel("val perplexity, cosine 1.5->0.5 vs uniform (%)")
    ax_gain.set_title("tapering gain vs training length (95% t-CI)")
    ax_gain.legend(loc="best", fontsize=8)

    evals = curves[curves["kind"] == "eval"]
    for i, ((arch, variant), g) in enumerate(evals.groupby(["arch", "variant"], sort=False)):
        mean = g.groupby("tokens")["loss"].mean()
        style = "-" if variant == "uniform" else "--"
        color = color_for(variant, i)
        ax_loss.plot(mean.index / 1e6, mean.values, style, color=color, marker=MARKERS.get(arch, "o"), ms=3,
                     label=f"{arch} {variant}")
        cooled = summary[(summary["arch"] == arch) & (summary["variant"] == variant) &
                         (summary["lr_schedule"] == "wsd")]
        ax_loss.scatter(cooled["tokens"] / 1e6, cooled["val_loss_mean"], s=40, color=color,
                        marker=MARKERS.get(arch, "o"), edgecolor="black", zorder=3)
    ax_loss.set_xscale("log", base=2)
    ax_loss.set_xlabel("training tokens (millions, log scale)")
    ax_loss.set_ylabel("validation loss (nats/token)")
    ax_loss.set_title("loss curves of the runs (constant lr, own cooldown in the last 20%);\n"
                      "dots = the cooldown branches and the run's end (mean over seeds)", fontsize=10)
    ax_loss.legend(loc="upper right", fontsize=7)
    return fig


def _seed_pairs(runs: pd.DataFrame):
    """(tokens, per-seed % change of the taper vs uniform) at each length, for the dots."""
    done = runs[runs["status"] == "done"]
    for tokens, g in done.groupby("tokens"):
        wide = g.pivot_table(index="seed", columns="variant", values="val_ppl")
        if {"uniform", "cosine-1.5-0.5"} <= set(wide.columns):
            pair = (100.0 * (wide["cosine-1.5-0.5"] / wide["uniform"] - 1.0)).dropna()
            yield tokens, pair.to_numpy()
