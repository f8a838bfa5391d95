"""interp.plots: each plot function turns a small table into a Figure with the expected artists."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from interp.plots import (
    final_val_ppl,
    plot_loss_curves,
    plot_schedules,
    save_figure,
    smooth,
)

N_LAYERS, D_FF, MULTIPLE = 6, 64, 16


def schedule_df(profile_budget_break: bool = False) -> pd.DataFrame:
    """Hand-made schedule table: a linear taper 1.5->0.5 and two group profiles on 6 layers."""
    rows = []
    lin = [1.5 - l / (N_LAYERS - 1) for l in range(N_LAYERS)]
    widths = [96, 80, 64, 64, 48, 32]  # sums to 384 = 6 * 64
    for l in range(N_LAYERS):
        rows.append((l, "schedule", "linear 1.5->0.5", lin[l], widths[l]))
        rows.append((l, "schedule", "uniform", 1.0, 64))
        rows.append((l, "profile", "uniform", math.nan, 64))
        early = [96, 96, 64, 64, 32, 32]
        if profile_budget_break:
            early[0] += 16
        rows.append((l, "profile", "wider-early", math.nan, early[l]))
    df = pd.DataFrame(rows, columns=["layer", "kind", "name", "ratio_unrounded", "width"])
    df["d_ff"], df["multiple"] = D_FF, MULTIPLE
    return df


def test_plot_schedules_axes_lines_and_data():
    df = schedule_df()
    fig = plot_schedules(df)
    assert isinstance(fig, Figure)
    ax_sched, ax_prof = fig.axes
    # left: per schedule one thin un-rounded line + one marker series; plus the y = 1 reference line
    assert len(ax_sched.lines) == 2 * 2 + 1
    markers = [ln for ln in ax_sched.lines if ln.get_linestyle() == "None" and ln.get_label().startswith("linear")]
    assert len(markers) == 1
    np.testing.assert_allclose(markers[0].get_ydata(), np.array([96, 80, 64, 64, 48, 32]) / D_FF)
    # right: one step line per profile, y = 1 reference, two group boundaries
    assert len(ax_prof.lines) == 2 + 1 + 2
    title = fig.get_suptitle()
    assert f"L = {N_LAYERS}" in title and f"d_ff = {D_FF}" in title and f"multiples of {MULTIPLE}" in title
    assert "same budget" in title and "384" in title


def test_plot_schedules_flags_unequal_budgets():
    assert "DIFFER" in plot_schedules(schedule_df(profile_budget_break=True)).get_suptitle()


def test_plot_schedules_names_missing_column():
    with pytest.raises(ValueError, match="multiple"):
        plot_schedules(schedule_df().drop(columns=["multiple"]))


def loss_df() -> pd.DataFrame:
    rows = []
    for run, label, final in (("a", "uniform", 5.0), ("b", "cosine 1.5->0.5", 4.8)):
        for step in range(1, 41):
            rows.append({"run": run, "label": label, "kind": "train", "step": step, "tokens": step * 1000,
                         "loss": final + 3.0 / step})
        for step in (20, 40):
            v = final + 3.0 / step
            rows.append({"run": run, "label": label, "kind": "eval", "step": step, "tokens": step * 1000,
                         "val_loss": v, "val_ppl": math.exp(v)})
        rows.append({"run": run, "label": label, "kind": "result", "step": 40, "tokens": 40_000,
                     "val_loss": final, "val_ppl": math.exp(final)})
    df = pd.DataFrame(rows)
    df["params"] = 1_234_567
    return df


def test_plot_loss_curves_axes_lines_and_bars():
    fig = plot_loss_curves(loss_df())
    ax_loss, ax_ppl = fig.axes
    assert len(ax_loss.lines) == 2 * 3  # per run: raw train, smoothed train, val
    points = ax_ppl.collections[0].get_offsets()
    np.testing.assert_allclose(points[:, 1], [math.exp(5.0), math.exp(4.8)])  # the result rows, not the last eval
    assert "1.23M in every run" in fig.get_suptitle()
    assert "1.23M params" in ax_ppl.get_xticklabels()[0].get_text()


def test_final_val_ppl_falls_back_to_last_eval():
    df = loss_df()
    df = df[df["kind"] != "result"]
    finals = final_val_ppl(df)
    np.testing.assert_allclose(finals["val_ppl"], [math.exp(5.0 + 3 / 40), math.exp(4.8 + 3 / 40)])


def test_smooth_is_centred_mean():
    s = pd.Series([0.0, 3.0, 6.0, 9.0])
    np.testing.assert_allclose(smooth(s, 3), [1.5, 3.0, 6.0, 7.5])


def test_save_figure_writes_png_deterministically(tmp_path):
    path = save_figure(plot_schedules(schedule_df()), tmp_path / "sub" / "s.png", dpi=40)
    first = path.read_bytes()
    assert first[:8] == b"\x89PNG\r\n\x1a\n"
    save_figure(plot_schedules(schedule_df()), path, dpi=40)  # same table, fresh figure -> same bytes
    assert path.read_bytes() == first
    assert [p.name for p in path.parent.iterdir()] == ["s.png"]  # no temp files left behind
