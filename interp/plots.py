"""One function per figure: a tidy DataFrame in, a matplotlib Figure out.

Plots read tables, never models, so any figure can be re-drawn in seconds from the CSV that an
analysis stored under figures/. Figures are built with `matplotlib.figure.Figure` (no pyplot), so
nothing leaks into pyplot's global state and nothing needs closing; the Agg canvas renders them.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Iterable
from functools import wraps
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless and deterministic; must precede any backend use

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import EngFormatter, MaxNLocator  # noqa: E402

DPI = 150
# README-sized figures: readable at GitHub's ~900 px column width.
STYLE: dict[str, Any] = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "figure.titlesize": 12,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "legend.frameon": False,
    "savefig.dpi": DPI,
}

# One colour per width schedule/profile, shared by every figure so a reader learns them once.
# Cosine is the paper's choice: the strongest colour.
COLORS: dict[str, str] = {
    "uniform": "#555555",
    "linear": "#1f77b4",
    "cosine": "#d62728",
    "sigmoid": "#2ca02c",
    "wider-early": "#d62728",
    "wider-middle": "#9467bd",
    "wider-late": "#ff7f0e",
}
_FALLBACK_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2")

SCHEDULE_COLUMNS = ("layer", "kind", "name", "ratio_unrounded", "width", "d_ff", "multiple")
LOSS_COLUMNS = ("run", "label", "kind", "tokens", "loss", "val_loss", "val_ppl", "params")


def _styled(fn: Callable[..., Figure]) -> Callable[..., Figure]:
    """Build the figure under STYLE without touching the global rcParams."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Figure:
        with matplotlib.rc_context(STYLE):
            return fn(*args, **kwargs)

    return wrapper


def _require_columns(df: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what}: table lacks column(s) {missing}; it has {list(df.columns)}. "
                         f"Re-create the table with the analysis that writes it (interp figures --recompute).")
    if df.empty:
        raise ValueError(f"{what}: table is empty; nothing to plot.")


def color_for(name: str, index: int = 0) -> str:
    """The figure-wide colour of a schedule/profile name ('cosine 1.5->0.5' -> cosine's colour)."""
    key = str(name).split(" ")[0]
    return COLORS.get(key, _FALLBACK_COLORS[index % len(_FALLBACK_COLORS)])


def save_figure(fig: Figure, path: str | Path, dpi: int = DPI) -> Path:
    """Write `fig` to `path` (format from the suffix) atomically, so a crash never leaves half a PNG.

    Metadata that changes from run to run (software version, date) is left out, so re-rendering an
    unchanged table gives a byte-identical PNG and a clean git diff.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fmt = path.suffix.lstrip(".").lower() or "png"
    metadata = {"Software": None} if fmt == "png" else None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        with matplotlib.rc_context(STYLE):
            fig.savefig(tmp, format=fmt, dpi=dpi, bbox_inches="tight", metadata=metadata)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a figure is meant to be read
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


# --------------------------------------------------------------------------------------------------
# Width schedules
# --------------------------------------------------------------------------------------------------

def _layer_axis(ax: Axes, n_layers: int) -> None:
    ax.set_xlabel("layer")
    ax.set_xlim(-0.6, n_layers - 0.4)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=8))
    ax.axhline(1.0, color="black", lw=0.6, alpha=0.35, zorder=0)


@_styled
def plot_schedules(df: pd.DataFrame) -> Figure:
    """Per-layer MLP width d_ff(l)/d_ff for the taper schedules (left) and the layer-group profiles (right).

    `df` has one row per (kind, name, layer): kind "schedule" rows carry the un-rounded multiplier
    (`ratio_unrounded`, drawn as a thin line) and the rounded integer `width` (drawn as markers);
    kind "profile" rows are drawn as steps, with the layer groups from the optional `group` column
    (index of the layer's group in its profile) marked. Columns `d_ff` and `multiple` go into the titles.
    """
    _require_columns(df, SCHEDULE_COLUMNS, "plot_schedules")
    d_ff = int(df["d_ff"].iloc[0])
    multiple = int(df["multiple"].iloc[0])
    n_layers = int(df["layer"].max()) + 1
    fig = Figure(figsize=(11.0, 4.6), layout="constrained")
    ax_sched, ax_prof = fig.subplots(1, 2, sharey=True)

    schedules = df[df["kind"] == "schedule"]
    for i, (name, g) in enumerate(schedules.groupby("name", sort=False)):
        g = g.sort_values("layer")
        color = color_for(name, i)
        ax_sched.plot(g["layer"], g["ratio_unrounded"], color=color, lw=1.0, alpha=0.9)
        ax_sched.plot(g["layer"], g["width"] / d_ff, ls="none", marker="o", ms=3.6, color=color,
                      label=str(name))
    ax_sched.set_ylabel(r"$d_{ff}(l)\,/\,d_{ff}$")
    _layer_axis(ax_sched, n_layers)
    handles, labels = ax_sched.get_legend_handles_labels()
    handles += [Line2D([], [], color="black", lw=1.0), Line2D([], [], color="black", ls="none", marker="o", ms=3.6)]
    labels += ["un-rounded", f"rounded to multiple of {multiple}"]
    ax_sched.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3)

    profiles = df[df["kind"] == "profile"]
    for i, (name, g) in enumerate(profiles.groupby("name", sort=False)):
        g = g.sort_values("layer")
        ax_prof.step(g["layer"], g["width"] / d_ff, where="mid", color=color_for(name, i), lw=2.0,
                     alpha=0.85, label=str(name))
    edges = _group_edges(profiles, n_layers)
    for edge in edges[1:-1]:
        ax_prof.axvline(edge, color="black", lw=0.6, ls=":", alpha=0.5)
    if len(edges) == 4:
        for (a, b), group in zip(zip(edges, edges[1:]), ("early", "middle", "late")):
            ax_prof.text((a + b) / 2, 1.01, group, transform=ax_prof.get_xaxis_transform(), ha="center",
                         va="bottom", fontsize=9, color="0.35")
    ax_prof.set_title("layer-group profiles", pad=16)
    ax_sched.set_title("taper schedules", pad=16)
    _layer_axis(ax_prof, n_layers)
    ax_prof.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4)

    budgets = df.groupby(["kind", "name"])["width"].sum()
    if budgets.nunique() == 1:
        budget = (f"every schedule and profile spends the same budget: "
                  f"Σ over layers of d_ff(l) = {int(budgets.iloc[0]):,} = L × d_ff")
    else:
        budget = (f"budgets DIFFER: Σ over layers of d_ff(l) ranges from {int(budgets.min()):,} "
                  f"to {int(budgets.max()):,}")
    fig.suptitle(f"MLP width per layer: L = {n_layers} layers, d_ff = {d_ff}, widths rounded to multiples of "
                 f"{multiple}\n{budget}", fontsize=11)
    return fig


def _group_edges(profiles: pd.DataFrame, n_layers: int) -> list[float]:
    """x positions bounding the layer groups: from the optional `group` column, else equal thirds."""
    if "group" in profiles.columns and profiles["group"].notna().any():
        groups = profiles.dropna(subset=["group"]).groupby("layer")["group"].max().sort_index()
        inner = [l - 0.5 for l in groups.index[1:] if groups[l] != groups[l - 1]]
    else:
        inner = [n_layers / 3 - 0.5, 2 * n_layers / 3 - 0.5]
    return [-0.5, *inner, n_layers - 0.5]


# --------------------------------------------------------------------------------------------------
# Training curves
# --------------------------------------------------------------------------------------------------

def smooth(values: pd.Series, window: int) -> pd.Series:
    """Centred rolling mean (shrinking at the edges), so the smoothed curve is not shifted in tokens."""
    return values.rolling(window=max(1, window), center=True, min_periods=1).mean()


def final_val_ppl(df: pd.DataFrame) -> pd.DataFrame:
    """Final validation perplexity per run: the `result` row if present, else the last `eval` row."""
    rows = []
    for run, g in df.groupby("run", sort=False):
        result = g[(g["kind"] == "result") & g["val_ppl"].notna()]
        evals = g[(g["kind"] == "eval") & g["val_ppl"].notna()].sort_values("tokens")
        last = result.iloc[-1] if len(result) else (evals.iloc[-1] if len(evals) else None)
        if last is None:
            continue
        rows.append({"run": run, "label": g["label"].iloc[0], "val_ppl": float(last["val_ppl"]),
                     "val_loss": float(last["val_loss"]), "params": g["params"].iloc[0]})
    return pd.DataFrame(rows, columns=["run", "label", "val_ppl", "val_loss", "params"])


@_styled
def plot_loss_curves(df: pd.DataFrame, smooth_window: int | None = None) -> Figure:
    """Train loss (raw faint, smoothed solid) and val loss (dashed, markers) vs tokens, plus final val ppl.

    `df` is long-form: one row per log line, `kind` in {"train", "eval", "result"}; train rows carry
    `loss`, eval/result rows `val_loss` and `val_ppl`. `label` names the width profile of the run.
    `smooth_window` defaults to about 1/20 of each run's train points.
    """
    _require_columns(df, LOSS_COLUMNS, "plot_loss_curves")
    fig = Figure(figsize=(11.0, 4.4), layout="constrained")
    ax_loss, ax_ppl = fig.subplots(1, 2, width_ratios=[2.3, 1])

    for i, (run, g) in enumerate(df.groupby("run", sort=False)):
        label = str(g["label"].iloc[0])
        color = color_for(label, i)
        train = g[g["kind"] == "train"].sort_values("tokens")
        if len(train):
            window = smooth_window or max(1, len(train) // 20)
            ax_loss.plot(train["tokens"], train["loss"], color=color, lw=0.6, alpha=0.25)
            ax_loss.plot(train["tokens"], smooth(train["loss"], window), color=color, lw=1.8,
                         label=f"{label}: train")
        evals = g[g["kind"] == "eval"].sort_values("tokens")
        if len(evals):
            ax_loss.plot(evals["tokens"], evals["val_loss"], color=color, lw=1.4, ls="--", marker="o", ms=4,
                         label=f"{label}: val")
    ax_loss.set_xlabel("tokens")
    ax_loss.set_ylabel("cross-entropy loss (nats/token)")
    ax_loss.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax_loss.set_title("loss vs tokens (train smoothed; raw faint)")
    ax_loss.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4)
    _clip_loss_ylim(ax_loss, df)

    finals = final_val_ppl(df)
    labels = [str(x) for x in finals["label"]]
    x = np.arange(len(finals))
    # Points, not bars: the differences are a few percent, and a bar implies a zero baseline.
    ax_ppl.scatter(x, finals["val_ppl"], s=70, c=[color_for(lab, i) for i, lab in enumerate(labels)], zorder=3)
    base = float(finals["val_ppl"].iloc[0]) if len(finals) else math.nan
    for i, ppl in enumerate(finals["val_ppl"]):
        note = f"{ppl:.2f}" if i == 0 else f"{ppl:.2f}\n({ppl - base:+.2f})"
        ax_ppl.annotate(note, (i, ppl), xytext=(9, 0), textcoords="offset points", va="center", fontsize=9)
    ax_ppl.set_xticks(x, [_param_label(lab, p) for lab, p in zip(labels, finals["params"])])
    ax_ppl.set_xlim(-0.5, len(finals) - 0.2)
    ax_ppl.margins(y=0.25)
    ax_ppl.set_ylabel("final val perplexity")
    ax_ppl.set_title("final validation perplexity" + (f"\n(change vs {labels[0]})" if labels else ""))
    ax_ppl.grid(axis="x", visible=False)
    params = finals["params"].dropna().unique()
    if len(params) == 1:
        fig.suptitle(f"equal parameter count: {float(params[0]) / 1e6:.2f}M in every run", fontsize=10)
    elif len(params) > 1:
        fig.suptitle("parameter counts DIFFER between runs: not a like-for-like comparison", fontsize=10)
    return fig


def _param_label(label: str, params: Any) -> str:
    if params is None or (isinstance(params, float) and np.isnan(params)):
        return label
    return f"{label}\n{float(params) / 1e6:.2f}M params"


def _clip_loss_ylim(ax: Axes, df: pd.DataFrame) -> None:
    """Keep the first steps' loss (~ln vocab) from squashing the interesting end of the curves."""
    losses = pd.concat([df["loss"], df["val_loss"]]).dropna()
    if len(losses) < 4:
        return
    low = float(losses.min())
    high = float(losses.quantile(0.98))
    ax.set_ylim(low - 0.05 * (high - low), high + 0.05 * (high - low))
