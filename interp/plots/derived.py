"""The derived-taper figure: measured profiles -> widths -> validation perplexity vs uniform and cosine."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from interp.plots.experiments import _error
from interp.plots.style import _require_columns, _styled, color_for

DERIVED_COLUMNS = ("variant", "label", "n_seeds", "params", "widths", "val_ppl_mean", "val_ppl_ci_low",
                   "val_ppl_ci_high", "rel_val_ppl_pct_mean", "rel_val_ppl_pct_ci_low", "rel_val_ppl_pct_ci_high")


@_styled
def plot_derived_taper(summary: pd.DataFrame, runs: pd.DataFrame | None, profile: pd.DataFrame) -> Figure:
    """Left: the measured importance (skip-MLP delta loss) over normalised depth, per profile. Middle: the
    widths each variant trains. Right: validation perplexity change vs uniform, paired by seed (95% t-CI),
    one dot per seed pair."""
    _require_columns(summary, DERIVED_COLUMNS, "plot_derived_taper")
    fig = Figure(figsize=(13.5, 4.2), layout="constrained")
    ax_prof, ax_w, ax_rel = fig.subplots(1, 3)
    for i, (name, g) in enumerate(profile.groupby("profile", sort=False)):
        g = g.sort_values("layer")
        depth = g["layer"] / max(len(g) - 1, 1)
        ax_prof.errorbar(depth, g["delta"], yerr=_error(g["delta"], g["delta_ci_low"], g["delta_ci_high"]),
                         fmt="o-", ms=4, capsize=3, color=color_for(name, i + 3), label=f"{name} ({len(g)} layers)")
    ax_prof.axhline(0, color="black", lw=0.8)
    ax_prof.set_yscale("symlog", linthresh=0.1)  # SmolLM2's first MLP costs ~10 nats, the rest ~0.1
    ax_prof.set_xlabel("normalised depth")
    ax_prof.set_ylabel("loss increase when the MLP is skipped (nats)")
    ax_prof.set_title("measured importance")
    ax_prof.legend(loc="upper right")

    x = np.arange(len(summary))
    colors = [color_for(v, i) for i, v in enumerate(summary["variant"])]
    for i, row in enumerate(summary.itertuples()):
        widths = [int(w) for w in str(row.widths).split("/")]  # summarize writes "1536/1440/..."
        ax_w.plot(range(len(widths)), widths, "o-", ms=4, color=colors[i], label=row.variant)
    ax_w.set_xlabel("layer")
    ax_w.set_ylabel("MLP width")
    ax_w.set_title(f"widths ({float(summary['params'].iloc[0]) / 1e6:.2f}M params each)")
    ax_w.legend(loc="upper right")

    ax_rel.axhline(0.0, color="black", lw=0.8)
    ax_rel.errorbar(x, summary["rel_val_ppl_pct_mean"], yerr=_error(summary["rel_val_ppl_pct_mean"],
                    summary["rel_val_ppl_pct_ci_low"], summary["rel_val_ppl_pct_ci_high"]),
                    fmt="none", ecolor="black", elinewidth=1.2, capsize=5, zorder=2)
    ax_rel.scatter(x, summary["rel_val_ppl_pct_mean"], s=70, c=colors, zorder=3, label="mean, paired by seed (95% CI)")
    if runs is not None and len(runs):
        base = runs[runs["variant"] == "uniform"].set_index("seed")["val_ppl"]
        for xi, name in zip(x, summary["variant"]):
            g = runs[runs["variant"] == name].set_index("seed")["val_ppl"]
            common = g.index.intersection(base.index)
            ax_rel.scatter(np.full(len(common), xi + 0.15), 100 * (g[common] / base[common] - 1), s=12,
                           c="gray", alpha=0.7, zorder=3)
    n = summary["n_seeds"]
    ax_rel.set_xticks(x, summary["variant"], rotation=15)
    ax_rel.set_ylabel("val perplexity vs uniform (%)")
    ax_rel.set_title(f"change vs uniform ({int(n.min())}-{int(n.max())} seeds; lower is better)"
                     if n.min() != n.max() else f"change vs uniform ({int(n.min())} seeds; lower is better)")
    ax_rel.legend(loc="upper left")
    ax_rel.grid(axis="x", visible=False)
    fig.suptitle("A taper derived from measured MLP importance vs the paper's cosine 1.5->0.5")
    return fig
