"""One function per figure: a tidy DataFrame in, a matplotlib Figure out.

Plots read tables, never models, so any figure can be re-drawn in seconds from the CSV that an
analysis stored under figures/. Figures are built with `matplotlib.figure.Figure` (no pyplot), so
nothing leaks into pyplot's global state and nothing needs closing; the Agg canvas renders them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from functools import wraps
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless and deterministic; must precede any backend use

import pandas as pd
from matplotlib.figure import Figure

from interp._util.io import atomic_write

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

    def write(tmp: Path) -> None:
        with matplotlib.rc_context(STYLE):
            fig.savefig(tmp, format=fmt, dpi=dpi, bbox_inches="tight", metadata=metadata)
        os.chmod(tmp, 0o644)  # a figure is meant to be read, whatever the umask

    atomic_write(path.parent, {path.name: write})
    return path


