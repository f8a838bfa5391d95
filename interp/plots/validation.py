"""The cross-engine validation figure: per family (rows) and measure x backend x load dtype (columns), the largest
|backend - float64 reference| over layers as a share of its tolerance, on a log scale; a cell above 1 is outside
the tolerance (red, crossed), a grey cell a run the table gives a reason for instead.

Reads analyses.engine_validation's table, never a model.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from interp.plots.style import _require_columns, _styled

VALIDATION_COLUMNS = ("family", "kind", "measure", "backend", "dtype", "status", "tolerance_ratio")
LOW, HIGH = -6.0, 1.0   # the colour scale: log10(|difference| / tolerance) from 1e-6 to 10
BACKEND_SHORT = {"torch": "torch", "nnsight": "nns", "transformer_lens": "TL"}
MEASURE_SHORT = {"rho_mlp": "rho_mlp", "rho_block": "rho_block", "block_influence": "BI", "norm_ratio": "norm",
                 "logit_lens_kl": "lens KL", "delta_loss_skip_block": "skip dL"}


@_styled
def plot_engine_validation(df: pd.DataFrame) -> Figure:
    """A heat map of log10(max |difference| / tolerance), one panel per load dtype."""
    _require_columns(df, VALIDATION_COLUMNS, "engine validation table")
    checked = df[df["measure"] != "all"]   # a family the probes do not take is one row ("all"): not drawn
    families = list(dict.fromkeys(checked["family"]))
    others = df.loc[df["measure"] == "all", "family"].nunique()
    dtypes = list(dict.fromkeys(checked["dtype"])) or ["all"]
    columns = list(dict.fromkeys(zip(checked["measure"], checked["backend"])))
    fig = Figure(figsize=(2.6 + 0.2 * len(columns) * len(dtypes), 2.4 + 0.14 * len(families)), layout="constrained")
    axes = fig.subplots(1, len(dtypes), squeeze=False, sharey=True)[0]
    n_green = round(256 * -LOW / (HIGH - LOW))   # green up to a ratio of 1 (log 0), red beyond
    cmap = ListedColormap(np.vstack([colormaps["viridis"](np.linspace(0.0, 0.95, n_green)),
                                     np.tile([0.84, 0.15, 0.16, 1.0], (256 - n_green, 1))])).with_extremes(bad="#cccccc")
    image = None
    for ax, dtype in zip(axes, dtypes):
        grid = np.full((len(families), len(columns)), np.nan)
        part = checked[checked["dtype"] == dtype]
        for row in part.itertuples():
            if row.status in ("pass", "FAIL") and np.isfinite(row.tolerance_ratio):
                grid[families.index(row.family), columns.index((row.measure, row.backend))] = np.clip(
                    np.log10(max(row.tolerance_ratio, 10.0 ** LOW)), LOW, HIGH)
            elif row.status == "FAIL":
                grid[families.index(row.family), columns.index((row.measure, row.backend))] = HIGH
        image = ax.imshow(np.ma.masked_invalid(grid), aspect="auto", cmap=cmap, vmin=LOW, vmax=HIGH,
                          interpolation="nearest")
        for row in part[part["status"] == "FAIL"].itertuples():
            ax.text(columns.index((row.measure, row.backend)), families.index(row.family), "x", ha="center",
                    va="center", fontsize=7, color="black")
        ax.set_xticks(range(len(columns)))
        ax.set_xticklabels([f"{MEASURE_SHORT.get(m, m)} {BACKEND_SHORT.get(b, b)}" for m, b in columns],
                           rotation=90, fontsize=6)
        ax.set_yticks(range(len(families)))
        ax.set_yticklabels(families, fontsize=6)
        ax.set_title(f"load dtype {dtype}")
        ax.grid(False)
    fig.colorbar(image, ax=list(axes), shrink=0.6, label="log10(max |difference| / tolerance)")
    fig.suptitle("Each backend against an independent float64 reference from plain HF hooks\n(max over layers; "
                 "red: beyond the tolerance; grey: refused or in error, with the reason in the table"
                 + (f"; {others} families the probes do not take are rows of the table, not drawn)" if others else ")"))
    return fig
