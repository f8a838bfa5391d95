"""The argument checks and budget-exact rounding steps that every width family shares (interp.widths.schedules:
tapers, layer groups, measured profiles; interp.widths.shapes: the symmetric shapes).

The families import these public helpers; the conventions (units of `multiple`, round half to even) are
interp.widths.schedules'. numpy + stdlib only.
"""

from __future__ import annotations

import math
import operator

import numpy as np

# --------------------------------------------------------------------------- argument checks

def check_int(value, name: str, minimum: int, hint: str = "") -> int:
    """An int (numpy ints welcome, bools not) >= minimum, else ValueError naming the argument."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    try:
        value = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}{hint}")
    return value


def check_ratio(value, name: str) -> float:
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive, finite multiple of d_ff (e.g. 0.5), got {value}: "
                         "a layer cannot have width <= 0")
    return value


def check_shape(n_layers, d_ff, multiple, min_layers: int = 1) -> tuple[int, int, int]:
    """Validate the model shape and that some widths in steps of `multiple` can sum to the budget."""
    n_layers = check_int(n_layers, "n_layers", min_layers,
                          " (a taper needs a first and a last layer; use schedule='uniform' for 1 layer)"
                          if min_layers == 2 else "")
    d_ff = check_int(d_ff, "d_ff", 1)
    multiple = check_int(multiple, "multiple", 1, " (the width granularity, e.g. 16, 64 or 128)")
    budget = n_layers * d_ff
    if budget % multiple:
        step = multiple // math.gcd(n_layers, multiple)   # d_ff must be a multiple of this
        below, above = (d_ff // step) * step, (d_ff // step + 1) * step
        d_ff_hint = f"d_ff={below} or d_ff={above}" if below > 0 else f"d_ff={above}"
        raise ValueError(
            f"budget n_layers*d_ff = {n_layers}*{d_ff} = {budget} is not divisible by multiple={multiple}, "
            f"so no widths in steps of {multiple} can sum to it; use {d_ff_hint}, "
            f"or multiple={math.gcd(budget, multiple)}")
    return n_layers, d_ff, multiple


def check_mean(mean: float, d_ff: int, multiple: int, what: str) -> None:
    """The ratios must average 1 (budget-neutral) up to the rounding slack: half a unit per layer."""
    if abs(mean - 1.0) * d_ff > multiple / 2:
        raise ValueError(f"{what} average {mean:.6g}, not 1, so the widths cannot keep the budget "
                         f"n_layers*d_ff (tolerance {multiple / (2 * d_ff):.3g} at multiple={multiple})")


def budget_fix(start: float, end: float) -> str:
    """Advice for a start/end pair that does not average 1: a pair with start + end = 2 that keeps the
    given value that allows it (both ratios must stay positive), else the paper's 1.5/0.5."""
    if start < 2:
        return f"use end = 2 - start = {2 - start:g}"
    if end < 2:
        return f"use start = 2 - end = {2 - end:g}"
    return "start + end must be 2 with both > 0, e.g. start=1.5 and end=0.5"


def uniform_widths(n_layers: int, d_ff: int, multiple: int) -> list[int]:
    if d_ff % multiple:
        raise ValueError(f"uniform widths need d_ff to be a multiple of multiple: d_ff={d_ff} is not a "
                         f"multiple of multiple={multiple}; use multiple={math.gcd(d_ff, multiple)} "
                         f"or d_ff={max(multiple, round(d_ff / multiple) * multiple)}")
    return [d_ff] * n_layers


# --------------------------------------------------------------------------- rounding

def nudge(units: np.ndarray, ideal: np.ndarray, residual: int, lo: np.ndarray, hi: np.ndarray,
           monotone: bool) -> np.ndarray:
    """Move `residual` single steps (+1 unit if positive, -1 if negative) onto layers, one at a time.

    Each step goes to the layer whose rounding error (ideal - units) is largest (for +1) or most
    negative (for -1) among the layers where the step keeps lo <= units <= hi and, if `monotone`,
    keeps the sequence non-increasing (callers flip increasing profiles first). Ties go to the
    lowest index for +1 and the highest for -1: the wide end gains first, the narrow end loses first.
    Starting from floors this is the largest-remainder method; a layer's error drops by 1 after a
    step, so no layer takes a second step before every eligible layer has taken one. Largest
    remainder already keeps order (a wider ideal never has the smaller error at equal units), so
    the monotone check is a guard for inputs off the swept grid, not the mechanism.
    """
    units = units.copy()
    for _ in range(abs(residual)):
        error = np.round(ideal - units, 9)        # round so float noise cannot break ties
        if residual > 0:
            ok = units + 1 <= hi
            if monotone:
                ok[1:] &= units[:-1] >= units[1:] + 1
            cand = np.flatnonzero(ok)
            if cand.size == 0:
                break
            units[cand[np.argmax(error[cand])]] += 1
        else:
            ok = units - 1 >= lo
            if monotone:
                ok[:-1] &= units[1:] <= units[:-1] - 1
            cand = np.flatnonzero(ok)[::-1]
            if cand.size == 0:
                break
            units[cand[np.argmin(error[cand])]] -= 1
    return units


def to_widths(units: np.ndarray, total: int, multiple: int) -> list[int]:
    """Final guard: every contract promise is re-checked here, so a bug cannot leak out silently."""
    if int(units.sum()) != total or (units < 1).any():
        raise AssertionError(f"schedules: internal error, units {units.tolist()} do not sum to {total}")
    return [int(u) * multiple for u in units]
