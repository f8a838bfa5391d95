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
LINES = {"llama": "-", "gpt2": "--"}
BASELINE = "uniform"
# The taper keeps cosine's figure-wide colour; wider-early, which shares it elsewhere, takes linear's (absent here).
OWN_COLORS = {"cosine-1.5-0.5": color_for("cosine"), "wider-early": color_for("linear")}


@_styled
def plot_gain_vs_tokens(summary: pd.DataFrame, curves: pd.DataFrame, runs: pd.DataFrame | None = None) -> Figure:
    """Left: change in validation perplexity of each variant vs uniform (%, paired by seed, 95% t-CI) against
    training tokens (log scale): the taper and, where trained, the layer-group arms, one line per block style
    and variant from the wsd cooldown branches, the own-schedule check as an open marker, one dot per seed pair.
    Right: validation loss over tokens of the main (stable-phase) runs, mean over seeds, with the cooled-down
    lengths as markers: the gap a cooldown buys is visible there."""
    _require_columns(summary, GAIN_COLUMNS, "plot_gain_vs_tokens")
    _require_columns(curves, CURVE_COLUMNS, "plot_gain_vs_tokens")
    fig = Figure(figsize=(11.5, 4.4), layout="constrained")
    ax_gain, ax_loss = fig.subplots(1, 2)
    others = summary[summary["variant"] != BASELINE]
    ax_gain.axhline(0.0, color="black", lw=0.8)
    names = dict.fromkeys([*summary["variant"], *curves["variant"]])
    colors = {v: OWN_COLORS.get(v) or color_for(v, i) for i, v in enumerate(names)}
    for (arch, schedule, variant), g in others.groupby(["arch", "lr_schedule", "variant"], sort=False):
        g = g.sort_values("tokens")
        wsd = schedule == "wsd"
        n = g["n_pairs"].astype(int)
        pairs = f"{n.min()}" if n.min() == n.max() else f"{n.min()}-{n.max()}"
        what = "" if wsd else ", own cosine schedule (check)"
        label = f"{arch} {variant}{what}, {pairs} seed pair{'s' if n.max() > 1 else ''}"
        color = colors[variant]
        ax_gain.errorbar(g["tokens"] / 1e6, g["rel_val_ppl_pct_mean"],
                         yerr=_error(g["rel_val_ppl_pct_mean"], g["rel_val_ppl_pct_ci_low"],
                                     g["rel_val_ppl_pct_ci_high"]),
                         fmt=MARKERS.get(arch, "o"), ms=6, capsize=4, color=color,
                         mfc=color if wsd else "white", ls=LINES.get(arch, "-") if wsd else "none", label=label)
        if runs is not None and len(runs):
            for tokens, pair in _seed_pairs(runs[(runs["arch"] == arch) & (runs["lr_schedule"] == schedule)],
                                            variant):
                ax_gain.scatter(np.full(len(pair), tokens / 1e6) * 1.04, pair, s=10, color=color, alpha=0.45)
    ax_gain.set_xscale("log", base=2)
    ax_gain.set_xlabel("training tokens (millions, log scale)")
    ax_gain.set_ylabel("val perplexity vs uniform (%)")
    ax_gain.set_title("change vs uniform by training length (95% t-CI, dots: seed pairs)\n"
                      "Transformer++ (llama) solid, GPT-2-style dashed; open: own-schedule check", fontsize=10)
    ax_gain.legend(loc="best", fontsize=7)

    evals = curves[curves["kind"] == "eval"]
    for (arch, variant), g in evals.groupby(["arch", "variant"], sort=False):
        mean = g.groupby("tokens")["loss"].mean()
        style, color = LINES.get(arch, "-"), colors[variant]
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


def _seed_pairs(runs: pd.DataFrame, variant: str):
    """(tokens, per-seed % change of `variant` vs uniform) at each length, for the dots."""
    done = runs[runs["status"] == "done"]
    for tokens, g in done.groupby("tokens"):
        wide = g.pivot_table(index="seed", columns="variant", values="val_ppl")
        if {BASELINE, variant} <= set(wide.columns):
            pair = (100.0 * (wide[variant] / wide[BASELINE] - 1.0)).dropna()
            yield tokens, pair.to_numpy()
