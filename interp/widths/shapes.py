"""Symmetric width profiles: middle-heavy (narrow edges, wide centre) and x-shaped (wide edges, narrow centre).

The rivals of the paper's monotone taper that related work proposes (issue 14 section 4): capacity
concentrated in the middle layers (Ikeda/Lee et al. 2025) and the MLP analogue of Variable-Width
Transformers' X shape (wide early and late). The reverse taper (OpenELM, DeLighT: growing with depth) needs
no new shape: it is `cosine 0.5->1.5`.

Parameterisation (a WidthSpec with schedule "middle-heavy" or "x-shaped"): `start` is the ratio of the two
edge layers (first and last), `end` the ratio at the centre, both multiples of d_ff; middle-heavy needs
start < end, x-shaped start > end, and as for a taper start + end = 2 keeps the budget. Each half of the
depth is the paper's cosine taper from `start` to `end` (ceil(L/2) layers; with an odd n_layers the centre
layer ends both halves), so the curve is smooth, flat at the centre and at the edges:

    m(l) = min(l, L-1-l),  s = m / (ceil(L/2) - 1),  r(l) = start + (end - start) (1 - cos(pi s)) / 2.

A cosine taper is point-symmetric, so with an even n_layers the mean is exactly (start + end) / 2 and the
edges and the two centre layers sit exactly at start and end (tiny, 6 layers, 0.5/1.5: 512/1024/1536/
1536/1024/512). With an odd n_layers the centre layer counts once, which moves the mean by
(start - end) / (2 L); all ratios are then scaled by the same factor to restore it (as interp.widths.schedules
.group_widths does for unequal groups), which keeps their proportions (7 layers: edges 0.538, centre 1.615).

Integer widths (shape_widths) are budget-exact through interp.widths.core's machinery: the ideal widths in
units of `multiple` are rounded by largest remainder (nudge) on mirror pairs, so the widths are symmetric
(w[l] == w[L-1-l]) and each half stays monotone; only when the symmetry cannot hold (an even n_layers with
an odd budget in units: d_ff not a multiple of `multiple`) is one layer of a pair one multiple wider than
its mirror. numpy + stdlib only.
"""

from __future__ import annotations

import numpy as np

from interp.widths.core import (
    budget_fix,
    check_int,
    check_mean,
    check_ratio,
    check_shape,
    nudge,
    to_widths,
)

SHAPES = ("middle-heavy", "x-shaped")
_WIDE_CENTRE = {"middle-heavy": True, "x-shaped": False}
_MIN_LAYERS_HINT = " (a symmetric profile needs two edge layers and a centre; use schedule='uniform')"


def check_shape_ratios(schedule: str, start: float, end: float) -> tuple[float, float]:
    """(start, end) as floats when they are valid for `schedule` (positive, finite, in its direction), else
    ValueError naming the fix. Shape-free, so WidthSpec checks it on construction."""
    if schedule not in SHAPES:
        raise ValueError(f"schedule={schedule!r} is not a symmetric shape; valid shapes: {', '.join(SHAPES)}")
    start, end = check_ratio(start, "start"), check_ratio(end, "end")
    if start == end:
        raise ValueError(f"schedule={schedule!r} with start == end ({start:g}) is no profile: start is the edge "
                         "layers' ratio and end the centre's; use schedule='uniform'")
    if (start < end) != _WIDE_CENTRE[schedule]:
        want, other = (("start < end", "x-shaped") if _WIDE_CENTRE[schedule] else ("start > end", "middle-heavy"))
        raise ValueError(f"schedule={schedule!r} needs {want} (start = the edge layers' ratio, end = the centre's), "
                         f"got start={start:g}, end={end:g}; swap them, or use schedule={other!r} for that shape")
    return start, end


def shape_ratios(n_layers: int, schedule: str = "middle-heavy", start: float = 0.5, end: float = 1.5) -> np.ndarray:
    """Un-rounded width multipliers r(l) (shape [n_layers]) of a symmetric shape, mean exactly (start + end) / 2
    (see the module docstring for the curve and the odd-n_layers scaling)."""
    start, end = check_shape_ratios(schedule, start, end)
    n_layers = check_int(n_layers, "n_layers", 3, _MIN_LAYERS_HINT)
    half = (n_layers + 1) // 2
    layer = np.arange(n_layers)
    s = np.minimum(layer, n_layers - 1 - layer) / (half - 1)
    r = start + (end - start) * (1 - np.cos(np.pi * s)) / 2
    if n_layers % 2:  # the centre layer counts once: restore the mean, keeping the proportions
        r *= n_layers * (start + end) / 2 / r.sum()
    return r


def shape_widths(n_layers: int, d_ff: int, schedule: str = "middle-heavy", start: float = 0.5, end: float = 1.5,
                 multiple: int = 16) -> list[int]:
    """Per-layer MLP widths of a symmetric shape: multiples of `multiple`, summing to n_layers * d_ff.

    1. x(l) = shape_ratios(...)(l) * d_ff / multiple, scaled so that sum(x) is the budget in units exactly.
    2. Fold: one item per mirror pair (weight 2) and, with an odd n_layers, the centre layer (weight 1),
       ordered wide to narrow; each starts at floor(x) (at least one unit).
    3. With an odd n_layers an odd residual needs an odd step of the centre: +1 (-1 for a negative
       residual) or, if that cannot keep the shape, the other way. The centre is then fixed and bounds the
       pairs (none wider than a middle-heavy centre, none narrower than an x-shaped one).
    4. The rest by largest remainder on pairs (nudge, monotone). With an even n_layers and an odd
       residual, the last step goes to one layer only (the shallower of its pair).
    So every layer is within one multiple of x (the odd centre within two) whenever every x is at least one
    unit; coarser requests (a layer below one multiple) still get budget-exact, symmetric widths of the
    shape, but parity can flatten them (9 layers of 2 units each, x-shaped: all 2).
    Raises ValueError naming the argument for every infeasible request.
    """
    start, end = check_shape_ratios(schedule, start, end)
    n_layers = check_int(n_layers, "n_layers", 3, _MIN_LAYERS_HINT)
    n_layers, d_ff, multiple = check_shape(n_layers, d_ff, multiple, min_layers=3)
    check_mean((start + end) / 2, d_ff, multiple, f"start={start:g} and end={end:g} ({budget_fix(start, end)})")
    total = n_layers * d_ff // multiple
    x = shape_ratios(n_layers, schedule, start, end)
    x = x * (total / x.sum())
    narrow = ("start", start) if _WIDE_CENTRE[schedule] else ("end", end)
    if float(x.min()) < 0.5 - 1e-9:                  # under half a multiple (a tolerance: 0.5 is no float coin toss)
        raise ValueError(f"{narrow[0]}={narrow[1]:g} makes a width of {x.min() * multiple:.4g}, which rounds to 0 "
                         f"at multiple={multiple}; the minimum {narrow[0]} ratio that works is about "
                         f"{multiple / d_ff:.4g} (one multiple), or use a smaller multiple")
    n_half, odd = (n_layers + 1) // 2, n_layers % 2 == 1
    half = x[:n_half]                                   # edge -> centre
    wide_first = half[::-1].copy() if _WIDE_CENTRE[schedule] else half.copy()
    centre = (0 if _WIDE_CENTRE[schedule] else n_half - 1) if odd else None
    weight = np.full(n_half, 2, dtype=np.int64)
    if centre is not None:
        weight[centre] = 1
    floors = np.maximum(np.floor(wide_first), 1).astype(np.int64)
    residual = total - int(weight @ floors)
    for centre_step, single in _plans(residual, odd):
        units = floors.copy()
        lo, hi = np.ones(n_half, dtype=np.int64), np.full(n_half, total, dtype=np.int64)
        if centre is not None:  # the centre is fixed, and bounds the pairs: no pair wider (narrower) than it
            value = int(units[centre]) + centre_step
            if value < 1:
                continue
            (hi if _WIDE_CENTRE[schedule] else lo)[:] = value
            units = np.clip(units, lo, hi)
            units[centre] = lo[centre] = hi[centre] = value
        pair_steps, odd_unit = divmod(total - single - int(weight @ units), 2)
        if odd_unit:
            continue
        units = nudge(units, wide_first, pair_steps, lo, hi, monotone=True)
        stepped = nudge(units, wide_first, single, lo, hi, monotone=True) if single else units
        if int(weight @ units) + single != total or not _monotone(stepped) or not _monotone(units):
            continue
        edge_first = (lambda u: u[::-1]) if _WIDE_CENTRE[schedule] else (lambda u: u)
        left, right = edge_first(stepped), edge_first(units)
        full = np.concatenate([left, right[::-1][1:] if odd else right[::-1]])
        return to_widths(full, total, multiple)
    raise ValueError(f"cannot round a {schedule} profile from start={start:g} to end={end:g} to widths in steps of "
                     f"multiple={multiple} that sum to n_layers*d_ff={n_layers * d_ff} and keep its shape; "
                     "use a smaller multiple or a larger d_ff")


def _plans(residual: int, odd: bool) -> list[tuple[int, int]]:
    """(centre step, single-layer step) choices for an odd or even residual, preferred first; the pairs take
    the rest. An odd residual needs an odd centre step (odd n_layers) or one unpaired layer (even n_layers)."""
    if residual % 2 == 0:
        return [(0, 0)]
    sign = 1 if residual > 0 else -1
    return [(sign, 0), (-sign, 0)] if odd else [(0, sign), (0, -sign)]


def _monotone(units: np.ndarray) -> bool:
    """Non-increasing (the folded half is ordered wide to narrow)."""
    return bool((np.diff(units) <= 0).all())
