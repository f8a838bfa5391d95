"""Taper schedules and budget-exact integer MLP widths (paper section 2.1, "Schedules").

A Tapered LM gives layer l an MLP width d(l) that shrinks (or grows) with depth while the
*sum* of widths stays n_layers * d_ff, so parameters and FLOPs match the uniform baseline.
The paper rounds to multiples of 16 and "nudges" interior layers until the budget holds, but
does not publish how; this module fixes one deterministic algorithm and documents it, so every
caller (model configs, plots, parameter counts) gets the same integers.

numpy + stdlib only: imported by the CLI and by plots, so it must stay instant to import.

Conventions
-----------
* Ratios are multiples of the baseline d_ff (1.5 means 1.5 * d_ff).
* Widths are computed in *units* of `multiple` (width = units * multiple); the budget in units
  is T = n_layers * d_ff / multiple, which must be an integer.
* Rounding to the nearest unit uses Python's `round` (half to even) everywhere. For the swept
  pairs (start + end = 2) this keeps round(start*D) + round(end*D) = 2*D when 2*D is an integer,
  so pinned endpoints never disturb the budget (half-up would round both 64.5 and 21.5 up).

Modules of interp.widths: the argument checks and rounding steps every family shares live in interp.widths.core;
the symmetric shapes (SHAPES: middle-heavy, x-shaped; start = the edge layers' ratio, end = the centre's) in
interp.widths.shapes; a widths file derived from a measured table in interp.widths.derived. WidthSpec, here,
resolves every family.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np

from interp.widths.core import (
    budget_fix,
    check_int,
    check_mean,
    check_ratio,
    check_shape,
    nudge,
    to_widths,
    uniform_widths,
)
from interp.widths.shapes import (
    SHAPES,
    check_shape_ratios,
    shape_widths,
)

SCHEDULES = ("uniform", "linear", "cosine", "sigmoid")
MEASURED = "measured"   # widths from a measured per-layer importance (measured_widths)
MEASURED_FIELDS = ("measure", "exponent", "monotone", "smooth", "min_ratio", "origin")
PROFILES = {
    "uniform": (1.0,),
    "wider-early": (1.5, 1.0, 0.5),
    "wider-middle": (0.75, 1.5, 0.75),
    "wider-late": (0.5, 1.0, 1.5),
}

# Layouts from the depth literature that leave some layers WITHOUT an MLP (width 0; interp.model.blocks), the
# budget spread evenly over the others: the fraction of layers at each end that get none.
LAYOUTS = {
    "middle-ffn": (0.15, 0.15),     # Ikeda/Lee et al. 2025 (2508.17734): no FFN in the first and last ~15%
    "no-first-mlp": (None, 0.0),    # modded-nanogpt: the first layer has no MLP (None: exactly one layer)
}


# --------------------------------------------------------------------------- the schedules

def ratios(n_layers: int, schedule: str = "cosine", start: float = 1.5, end: float = 0.5,
           k: float = 10.0) -> np.ndarray:
    """Un-rounded width multipliers r(l), l = 0..n_layers-1 (shape [n_layers]); for plots and rounding.

    linear: start - (start-end) t;  cosine: end + (start-end)/2 (1 + cos(pi t));
    sigmoid: end + (start-end) / (1 + exp(k (t - 1/2)));  t = l/(L-1).  uniform: all ones.
    The sigmoid does not reach start/end exactly at t = 0, 1 (off by (start-end)/(1+e^(k/2))).
    All three are point-symmetric about mid-depth, so their mean is exactly (start + end) / 2.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule={schedule!r} is unknown; valid schedules: {', '.join(SCHEDULES)}")
    if schedule == "uniform":
        return np.ones(check_int(n_layers, "n_layers", 1))
    n_layers = check_int(n_layers, "n_layers", 2,
                          " (a taper needs a first and a last layer; use schedule='uniform' for 1 layer)")
    start, end = check_ratio(start, "start"), check_ratio(end, "end")
    t = np.arange(n_layers) / (n_layers - 1)
    if schedule == "linear":
        return start - (start - end) * t
    if schedule == "cosine":
        return end + (start - end) / 2 * (1 + np.cos(np.pi * t))
    k = float(k)
    if not math.isfinite(k) or k <= 0:
        raise ValueError(f"k must be a positive, finite sigmoid steepness (the paper uses 10), got {k}")
    return end + (start - end) / (1 + np.exp(k * (t - 0.5)))


def taper_widths(n_layers: int, d_ff: int, schedule: str = "cosine", start: float = 1.5,
                 end: float = 0.5, multiple: int = 16, k: float = 10.0) -> list[int]:
    """Per-layer MLP widths for a tapered model: multiples of `multiple`, summing to n_layers * d_ff.

    Algorithm (deterministic; the paper did not publish its own):
    1. x(l) = ratios(...)(l) * d_ff / multiple, the ideal width in units of `multiple`.
    2. Pin the endpoints: units[0] = round(start*d_ff/multiple), units[-1] = round(end*d_ff/multiple)
       (exactly the rounded endpoints, also for the sigmoid, whose curve stops short of them).
    3. Interior layers start at floor(x(l)), clipped to lie between the two endpoints.
    4. The missing units (budget minus current sum) are added one at a time by `nudge`: each to
       the interior layer with the largest rounding error x - units whose step keeps the widths
       monotone (an excess is removed symmetrically). This is largest-remainder rounding, so for
       linear and cosine with start + end = 2 every interior width is within one `multiple` of
       d_ff * r(l) (endpoints within half a multiple), and with d_ff a multiple of `multiple`
       the widths are point-symmetric: w[l] + w[L-1-l] = 2 * d_ff.
    An increasing schedule (start < end) is solved mirrored and flipped back.

    `schedule="uniform"` ignores start, end and k and returns [d_ff] * n_layers (d_ff must then
    be a multiple of `multiple`). Raises ValueError naming the argument for every infeasible request.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule={schedule!r} is unknown; valid schedules: {', '.join(SCHEDULES)}")
    if schedule == "uniform":
        n_layers, d_ff, multiple = check_shape(n_layers, d_ff, multiple)
        return uniform_widths(n_layers, d_ff, multiple)
    n_layers, d_ff, multiple = check_shape(n_layers, d_ff, multiple, min_layers=2)
    x = ratios(n_layers, schedule, start, end, k) * d_ff / multiple
    start, end = float(start), float(end)
    check_mean((start + end) / 2, d_ff, multiple, f"start={start:g} and end={end:g} ({budget_fix(start, end)})")
    first, last = round(start * d_ff / multiple), round(end * d_ff / multiple)
    for name, value, pinned in (("start", start, first), ("end", end, last)):
        if pinned < 1:
            raise ValueError(f"{name}={value:g} makes a width of {value * d_ff:g}, which rounds to 0 at "
                             f"multiple={multiple}; the minimum {name} ratio that works is "
                             f"{multiple / d_ff:.4g} (one multiple), or use a smaller multiple")
    increasing = start < end
    if increasing:                                 # solve the mirror image, flip back at the end
        x, first, last = x[::-1].copy(), last, first
    hi, lo = first, last
    units = np.clip(np.floor(x), lo, hi).astype(np.int64)
    units[0], units[-1] = first, last
    total = n_layers * d_ff // multiple
    interior = total - first - last
    if n_layers == 2 and interior != 0:
        raise ValueError(f"with n_layers=2 both widths are the rounded endpoints, {first * multiple} + "
                         f"{last * multiple} != n_layers*d_ff={2 * d_ff}; use end = 2 - start exactly")
    if not (n_layers - 2) * lo <= interior <= (n_layers - 2) * hi:
        raise ValueError(
            f"cannot keep the widths monotone from start={start:g} to end={end:g} and sum to "
            f"n_layers*d_ff={n_layers * d_ff} at multiple={multiple}: the pinned endpoints "
            f"{first * multiple}/{last * multiple} leave {interior * multiple} for {n_layers - 2} interior "
            f"layers; use schedule='uniform' if start == end, a smaller multiple, or a d_ff that is "
            f"a multiple of multiple")
    lo_arr, hi_arr = np.full(n_layers, lo), np.full(n_layers, hi)
    lo_arr[0] = hi_arr[0] = first
    lo_arr[-1] = hi_arr[-1] = last
    units = nudge(units, x, total - int(units.sum()), lo_arr, hi_arr, monotone=True)
    if increasing:
        units = units[::-1]
    return to_widths(units, total, multiple)


# --------------------------------------------------------------------------- layer groups

def group_sizes(n_layers: int, n_groups: int) -> list[int]:
    """Sizes of `n_groups` contiguous groups over `n_layers` layers, differing by at most 1.

    Layer l joins the group that covers its mid-depth position: group = floor(n_groups * (l + 1/2) / n_layers).
    Where the extra layers go follows from that: 31 layers in thirds are 10/11/10, 32 are 11/10/11.
    For an odd number of groups the sizes are always a palindrome, so a profile and its mirror
    (wider-early, wider-late) get mirrored sizes and mirrored widths.
    """
    n_groups = check_int(n_groups, "n_groups", 1)
    n_layers = check_int(n_layers, "n_layers", n_groups, f" (at least one layer per group, n_groups={n_groups})")
    group = (2 * np.arange(n_layers) + 1) * n_groups // (2 * n_layers)
    return np.bincount(group, minlength=n_groups).tolist()


def group_widths(n_layers: int, d_ff: int, ratios: Sequence[float] = (1.5, 1.0, 0.5),
                 multiple: int = 16) -> list[int]:
    """Per-layer widths for contiguous layer groups, one ratio per group, summing to n_layers * d_ff.

    1. Sizes come from `group_sizes` (nearly equal, extras placed by mid-depth position).
    2. The ratios must average 1 (as if the groups were equal), up to the rounding slack. When
       the groups are unequal the size-weighted mean can still miss 1 (wider-middle over 31 layers
       weighs its 1.5 group by 11 of 31); then all ratios are scaled by n_layers / sum(size * ratio),
       which keeps their proportions and the budget (31 layers: 0.738/1.476/0.738 instead of 0.75/1.5/0.75).
    3. Each group's width is round(ratio * d_ff / multiple) units (half to even).
    4. The rounding residual is fixed by single `multiple` steps on individual layers with `nudge`
       (largest rounding error first; the wide end of a group gains first, the narrow end loses
       first), keeping monotone profiles monotone. So a group's widths differ by at most one
       `multiple`. Usually no layer is nudged: over n_layers 3..64, d_ff 256..4096 and multiples
       16/64/128, wider-early/late need none unless d_ff is not a multiple of `multiple`
       (2752 at 128: up to 11 layers), and wider-middle needs up to 10 when n_layers % 3 != 0
       (its unequal groups cannot all be constant and sum exactly).
    All ratios equal means uniform: [d_ff] * n_layers, requiring d_ff to be a multiple of `multiple`.
    """
    r = np.asarray([check_ratio(v, f"ratios[{i}]") for i, v in enumerate(ratios)], dtype=float)
    if r.size == 0:
        raise ValueError("ratios must hold at least one group ratio, e.g. (1.5, 1.0, 0.5)")
    n_layers, d_ff, multiple = check_shape(n_layers, d_ff, multiple)
    if n_layers < r.size:
        raise ValueError(f"n_layers={n_layers} is fewer than the {r.size} groups in ratios; "
                         f"use n_layers >= {r.size} or fewer ratios")
    sizes = np.asarray(group_sizes(n_layers, r.size))
    check_mean(float(r.mean()), d_ff, multiple,
                f"ratios {tuple(r.tolist())} (size-weighted mean {float(sizes @ r) / n_layers:.6g})")
    if np.all(r == r[0]):
        return uniform_widths(n_layers, d_ff, multiple)
    ideal_group = r * (n_layers / float(sizes @ r)) * d_ff / multiple
    rounded = np.array([round(v) for v in ideal_group], dtype=np.int64)
    if (rounded < 1).any():
        i = int(np.argmin(rounded))
        raise ValueError(f"ratios[{i}]={r[i]:g} makes a width that rounds to 0 at multiple={multiple}; "
                         f"the minimum ratio that works is about {multiple / d_ff:.4g} (one multiple)")
    diffs = np.diff(r)
    increasing = bool((diffs >= 0).all())
    monotone = increasing or bool((diffs <= 0).all())
    x, units = np.repeat(ideal_group, sizes), np.repeat(rounded, sizes)
    if increasing:                                 # solve the mirror image, flip back at the end
        x, units = x[::-1].copy(), units[::-1].copy()
    total = n_layers * d_ff // multiple
    lo, hi = np.ones(n_layers, dtype=np.int64), np.full(n_layers, np.iinfo(np.int64).max // 2)
    units = nudge(units, x, total - int(units.sum()), lo, hi, monotone=monotone)
    if increasing:
        units = units[::-1]
    return to_widths(units, total, multiple)


def profile_widths(profile: str | None, n_layers: int, d_ff: int, multiple: int = 16) -> list[int]:
    """Widths for a named layer-group profile from PROFILES (the paper's early/middle/late thirds) or a layout
    from LAYOUTS (layers without an MLP)."""
    if profile in LAYOUTS:
        return layout_widths(profile, n_layers, d_ff, multiple)
    if profile not in PROFILES:
        raise ValueError(f"profile={profile!r} is unknown; valid profiles: {', '.join([*PROFILES, *LAYOUTS])}")
    return group_widths(n_layers, d_ff, PROFILES[profile], multiple)


def absent_layers(layout: str, n_layers: int) -> list[int]:
    """The layers a LAYOUTS entry leaves without an MLP: round(fraction * n_layers) at each end (at least one
    where the fraction is positive; None: exactly one)."""
    first, last = LAYOUTS[layout]
    count = [1 if f is None else (max(1, round(f * n_layers)) if f > 0 else 0) for f in (first, last)]
    return [*range(count[0]), *range(n_layers - count[1], n_layers)]


def layout_widths(layout: str, n_layers: int, d_ff: int, multiple: int = 16) -> list[int]:
    """Budget-exact widths of a LAYOUTS entry: 0 at its absent_layers, the budget n_layers * d_ff spread evenly
    over the rest in units of `multiple` (the units left over by the division go to the centre-most of them,
    one each), so the sum is exactly the uniform model's and parameters and FLOPs tie with it."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout={layout!r} is unknown; valid layouts: {', '.join(LAYOUTS)}")
    n_layers, d_ff, multiple = check_shape(n_layers, d_ff, multiple)
    absent = set(absent_layers(layout, n_layers))
    present = [layer for layer in range(n_layers) if layer not in absent]
    if not present:
        raise ValueError(f"layout {layout!r} on {n_layers} layers leaves no layer an MLP; use more layers")
    total = n_layers * d_ff // multiple
    base, extra = divmod(total, len(present))
    centre = (n_layers - 1) / 2
    units = np.zeros(n_layers, dtype=np.int64)
    units[present] = base
    for layer in sorted(present, key=lambda l: (abs(l - centre), l))[:extra]:
        units[layer] += 1
    if int(units.sum()) != total or (units[present] < 1).any():
        raise ValueError(f"layout {layout!r}: {n_layers} x d_ff {d_ff} does not fill {len(present)} layers in "
                         f"steps of {multiple}; use a larger d_ff or a smaller multiple")
    return [int(u) * multiple for u in units]


# --------------------------------------------------------------------------- measured profiles

def resample(values: Sequence[float], n_layers: int) -> np.ndarray:
    """`values` (one per layer of some model) at n_layers points of normalised depth t = l / (L - 1),
    by linear interpolation: a profile measured on a 30-layer model can shape a 12-layer one."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size == 0 or not np.isfinite(v).all():
        raise ValueError(f"a measured profile must be a non-empty list of finite numbers, got {list(values)!r}")
    n_layers = check_int(n_layers, "n_layers", 1)
    if v.size == 1 or n_layers == 1:
        return np.full(n_layers, v.mean()) if v.size > 1 else np.full(n_layers, v[0])
    return np.interp(np.linspace(0, 1, n_layers), np.linspace(0, 1, v.size), v)


def decreasing_fit(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """The least-squares non-increasing sequence closest to `values` (isotonic regression, pool adjacent
    violators): a measured profile forced monotone, as a taper is."""
    blocks: list[list[float]] = []  # [mean, weight]
    for v in np.asarray(values, dtype=float):
        blocks.append([v, 1.0])
        while len(blocks) > 1 and blocks[-2][0] < blocks[-1][0]:
            (m2, w2), (m1, w1) = blocks.pop(), blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2])
    return np.concatenate([np.full(int(w), m) for m, w in blocks])


def smoothed(values: np.ndarray, window: int) -> np.ndarray:
    """Centred moving average over `window` layers (edges padded with the end values); 0 or 1: unchanged."""
    window = check_int(window, "smooth", 0)
    if window <= 1:
        return values
    pad = np.pad(values, (window // 2, window - 1 - window // 2), mode="edge")
    return np.convolve(pad, np.ones(window) / window, mode="valid")


def measured_ratios(measure: Sequence[float], n_layers: int, exponent: float = 1.0, monotone: bool = False,
                    min_ratio: float = 0.25, smooth: int = 0) -> np.ndarray:
    """Width multipliers r(l) proportional to importance(l) ** exponent, averaging exactly 1.

    1. Resample the profile to n_layers over normalised depth and, if smooth > 1, take a moving average
    over that many layers; 2. if monotone, fit the closest
    non-increasing sequence; 3. clip at a small positive floor (an importance <= 0 cannot set a width)
    and raise to `exponent` (0: uniform, 1: proportional, > 1: sharper); 4. scale to mean 1, and lift
    layers below `min_ratio` to it, rescaling the others, so no layer is starved (a layer at
    importance ~0 would otherwise get width 0)."""
    exponent, min_ratio = float(exponent), float(min_ratio)
    if not math.isfinite(exponent) or exponent < 0:
        raise ValueError(f"exponent must be a finite number >= 0 (0 = uniform, 1 = proportional), got {exponent}")
    if not 0 < min_ratio < 1:
        raise ValueError(f"min_ratio must be in (0, 1) (the narrowest layer as a multiple of d_ff), got {min_ratio}")
    v = smoothed(resample(measure, n_layers), smooth)
    if monotone:
        v = decreasing_fit(v)
    scale = float(np.abs(v).max()) or 1.0
    r = np.maximum(v / scale, 1e-6) ** exponent
    r = r / r.mean()
    for _ in range(n_layers):  # water-filling: pin the starved layers at min_ratio, rescale the rest
        low = r < min_ratio - 1e-12
        if not low.any():
            break
        free = ~low
        r[low] = min_ratio
        r[free] *= (n_layers - min_ratio * low.sum()) / r[free].sum()
    return r


def measured_widths(measure: Sequence[float], n_layers: int, d_ff: int, multiple: int = 16,
                    exponent: float = 1.0, monotone: bool = False, min_ratio: float = 0.25,
                    smooth: int = 0) -> list[int]:
    """Budget-exact integer widths for measured_ratios: multiples of `multiple` summing to n_layers * d_ff,
    first and last layer pinned at their rounded ideal, the rest by largest remainder (nudge), kept
    non-increasing when monotone. When the rounded ends leave a sum the interior cannot reach (a nearly
    flat profile: ends 65 and 64 units, interior ideal 63.8), every layer is rounded by largest remainder
    instead, so an end may sit one unit off its rounded ideal."""
    n_layers, d_ff, multiple = check_shape(n_layers, d_ff, multiple)
    x = measured_ratios(measure, n_layers, exponent, monotone, min_ratio, smooth) * d_ff / multiple
    total = n_layers * d_ff // multiple
    first, last = max(1, round(x[0])), max(1, round(x[-1]))
    lo, hi = np.ones(n_layers, dtype=np.int64), np.full(n_layers, total)
    if monotone:  # interior layers between the pinned ends, as in taper_widths
        lo[:], hi[:] = min(first, last), max(first, last)
    lo[[0, -1]], hi[[0, -1]] = (first, last), (first, last)
    units = np.clip(np.floor(x), lo, hi).astype(np.int64)
    units = nudge(units, x, total - int(units.sum()), lo, hi, monotone=monotone)
    if int(units.sum()) != total:  # rounding the ends made pinning infeasible (a nearly flat profile):
        lo, hi = np.ones(n_layers, dtype=np.int64), np.full(n_layers, total)  # largest remainder on all layers
        units = np.maximum(np.floor(x), 1).astype(np.int64)
        units = nudge(units, x, total - int(units.sum()), lo, hi, monotone=monotone)
    if int(units.sum()) != total:
        raise ValueError(f"measured widths cannot sum to n_layers*d_ff={n_layers * d_ff} in steps of "
                         f"multiple={multiple}{' and stay monotone' if monotone else ''}; use a smaller "
                         "multiple or a larger d_ff")
    return to_widths(units, total, multiple)


# --------------------------------------------------------------------------- config object

@dataclass(frozen=True)
class WidthSpec:
    """What a training config stores about MLP widths; resolves to integers for a model shape.

    For schedule "uniform" and "profile" the start/end ratios mean nothing and are stored as 1.0,
    so equal specs compare (and serialise) equal whatever the caller passed.
    For the symmetric shapes of SHAPES ("middle-heavy", "x-shaped"; interp.widths.shapes) `start` is the
    ratio of the two edge layers and `end` the centre's: middle-heavy needs start < end, x-shaped start > end
    (checked here), and start + end = 2 keeps the budget (checked with the model shape, in widths()).
    schedule "measured" (measured_widths) uses `measure` (one importance per layer of the model it was
    measured on), exponent, monotone, smooth, min_ratio and `origin` (where the profile came from, e.g.
    "rho_mlp of smollm2-135m, table sha256 1a2b..."); only then are those fields serialised, so the
    config.json of every other spec is what it always was.
    """

    schedule: str = "uniform"      # one of SCHEDULES, SHAPES, "profile" or "measured"
    start: float = 1.0
    end: float = 1.0
    profile: str | None = None     # one of PROFILES or LAYOUTS when schedule == "profile"
    multiple: int = 16
    k: float = 10.0
    measure: tuple[float, ...] = ()   # schedule == "measured": the importance profile
    exponent: float = 1.0
    monotone: bool = False
    smooth: int = 0
    min_ratio: float = 0.25
    origin: str = ""  # not `source`: TrainConfig.source (the corpus) shares the override namespace

    def __post_init__(self) -> None:
        valid = SCHEDULES + SHAPES + ("profile", MEASURED)
        if self.schedule not in valid:
            raise ValueError(f"WidthSpec.schedule={self.schedule!r} is unknown; valid: {', '.join(valid)}")
        object.__setattr__(self, "measure", tuple(float(v) for v in self.measure))
        if self.schedule == MEASURED:
            measured_ratios(self.measure, max(len(self.measure), 1), self.exponent, self.monotone,
                            self.min_ratio, self.smooth)  # validates the profile and the knobs now, not at train time
        elif self.measure or self.origin:
            raise ValueError(f"WidthSpec.measure / origin are only used with schedule='measured', not "
                             f"schedule={self.schedule!r}")
        if self.schedule == "profile":
            if self.profile not in PROFILES and self.profile not in LAYOUTS:
                raise ValueError(f"WidthSpec.profile={self.profile!r} is unknown; with schedule='profile' "
                                 f"use one of: {', '.join([*PROFILES, *LAYOUTS])}")
        elif self.profile is not None:
            raise ValueError(f"WidthSpec.profile={self.profile!r} is only used with schedule='profile', "
                             f"not schedule={self.schedule!r}; set profile=None")
        if self.schedule in ("uniform", "profile", MEASURED):
            object.__setattr__(self, "start", 1.0)
            object.__setattr__(self, "end", 1.0)
        else:
            object.__setattr__(self, "start", check_ratio(self.start, "WidthSpec.start"))
            object.__setattr__(self, "end", check_ratio(self.end, "WidthSpec.end"))
            if self.schedule in SHAPES:
                try:
                    check_shape_ratios(self.schedule, self.start, self.end)
                except ValueError as err:
                    raise ValueError(f"WidthSpec: {err}") from None
        object.__setattr__(self, "multiple", check_int(self.multiple, "WidthSpec.multiple", 1))
        object.__setattr__(self, "k", float(self.k))

    def widths(self, n_layers: int, d_ff: int) -> list[int]:
        """Integer per-layer widths for this spec on a model with n_layers layers and baseline d_ff."""
        if self.schedule == "profile":
            return profile_widths(self.profile, n_layers, d_ff, self.multiple)
        if self.schedule == MEASURED:
            return measured_widths(self.measure, n_layers, d_ff, self.multiple, self.exponent, self.monotone,
                                   self.min_ratio, self.smooth)
        if self.schedule in SHAPES:
            return shape_widths(n_layers, d_ff, self.schedule, self.start, self.end, self.multiple)
        return taper_widths(n_layers, d_ff, self.schedule, self.start, self.end, self.multiple, self.k)

    @property
    def label(self) -> str:
        """Short name for legends and tables: "uniform", "cosine 1.5->0.5", "wider-early", and for a symmetric
        shape edge->centre->edge: "middle-heavy 0.5->1.5->0.5"."""
        if self.schedule == "profile":
            return str(self.profile)
        if self.schedule == MEASURED:
            knobs = ((f" a={self.exponent:g}" if self.exponent != 1 else "") + (" monotone" if self.monotone else "")
                     + (f" smooth={self.smooth}" if self.smooth > 1 else ""))
            return f"measured{knobs}" + (f" ({self.origin})" if self.origin else "")
        if self.schedule == "uniform":
            return "uniform"
        if self.schedule in SHAPES:
            return f"{self.schedule} {self.start:g}->{self.end:g}->{self.start:g}"
        k = f" k={self.k:g}" if self.schedule == "sigmoid" and self.k != 10.0 else ""
        return f"{self.schedule} {self.start:g}->{self.end:g}{k}"

    def to_dict(self) -> dict:
        d = asdict(self)
        if self.schedule != MEASURED:  # unchanged config.json (and run keys) for every other schedule
            for name in MEASURED_FIELDS:
                d.pop(name)
        else:
            d["measure"] = list(self.measure)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> WidthSpec:
        """Inverse of to_dict; unknown keys are an error (a typo must not silently mean 'uniform')."""
        unknown = set(d) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"WidthSpec.from_dict: unknown keys {sorted(unknown)}; "
                             f"valid keys: {[f.name for f in fields(cls)]}")
        return cls(**d)
