"""Taper schedules and budget-exact integer widths (interp.widths).

Unrounded curves are recomputed here from the paper's formulas with `math`, independently of
`interp.widths.ratios`; feasibility is predicted here from the rules, and every infeasible
draw must raise ValueError rather than be skipped.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from interp.widths import (
    PROFILES,
    SCHEDULES,
    WidthSpec,
    group_sizes,
    group_widths,
    profile_widths,
    ratios,
    taper_widths,
)

D_FFS = (256, 512, 1024, 1536, 2048, 2752, 4096)
MULTIPLES = (16, 64, 128)
PAPER_PAIRS = ((1.25, 0.75), (1.375, 0.625), (1.5, 0.5), (1.625, 0.375), (1.75, 0.25))
TAPERS = ("linear", "cosine", "sigmoid")
FAST = settings(max_examples=200, deadline=None)


def paper_curve(schedule: str, n: int, start: float, end: float, k: float = 10.0) -> list[float]:
    """The paper's d(l) as multiples of d_ff, written out with `math` (independent of ratios())."""
    out = []
    for l in range(n):
        t = l / (n - 1)
        if schedule == "linear":
            out.append(start - (start - end) * t)
        elif schedule == "cosine":
            out.append(end + (start - end) / 2 * (1 + math.cos(math.pi * t)))
        else:
            out.append(end + (start - end) / (1 + math.exp(k * (t - 0.5))))
    return out


def is_monotone(w: list[int], increasing: bool) -> bool:
    pairs = list(zip(w, w[1:]))
    return all(a <= b for a, b in pairs) if increasing else all(a >= b for a, b in pairs)


def check_common(w: list[int], n: int, d_ff: int, multiple: int) -> None:
    assert len(w) == n
    assert all(isinstance(v, int) for v in w)
    assert sum(w) == n * d_ff
    assert all(v > 0 and v % multiple == 0 for v in w)


# --------------------------------------------------------------------------- taper properties

@FAST
@given(n=st.integers(2, 64), d_ff=st.sampled_from(D_FFS), schedule=st.sampled_from(TAPERS),
       pair=st.sampled_from(PAPER_PAIRS), reverse=st.booleans(), multiple=st.sampled_from(MULTIPLES))
def test_taper_properties(n, d_ff, schedule, pair, reverse, multiple):
    start, end = pair[::-1] if reverse else pair
    first, last = round(start * d_ff / multiple), round(end * d_ff / multiple)
    feasible = (n * d_ff) % multiple == 0 and first >= 1 and last >= 1
    if not feasible:
        with pytest.raises(ValueError):
            taper_widths(n, d_ff, schedule, start, end, multiple)
        return
    w = taper_widths(n, d_ff, schedule, start, end, multiple)
    check_common(w, n, d_ff, multiple)
    assert w[0] == first * multiple and w[-1] == last * multiple
    assert is_monotone(w, increasing=start < end)
    ideal = [r * d_ff for r in paper_curve(schedule, n, start, end)]
    if schedule in ("linear", "cosine"):
        assert max(abs(a - b) for a, b in zip(w, ideal)) <= multiple
    if d_ff % multiple == 0:              # point symmetry of the curves survives the rounding
        assert all(w[l] + w[n - 1 - l] == 2 * d_ff for l in range(n))


@FAST
@given(n=st.integers(2, 64), d_ff=st.sampled_from(D_FFS), schedule=st.sampled_from(TAPERS),
       start=st.floats(1.05, 1.8), slack=st.floats(-0.99, 0.99), reverse=st.booleans(),
       multiple=st.sampled_from((16, 64)))
def test_taper_off_two_within_slack(n, d_ff, schedule, start, slack, reverse, multiple):
    """start + end may miss 2 by up to half a multiple per layer (e.g. ratios typed to 3 digits):
    the budget is still exact and the widths still monotone; beyond the slack it is an error."""
    assume((n * d_ff) % multiple == 0)
    too_far = 2 - start + 2.02 * multiple / d_ff        # mean off 1 by 1.01 x the tolerance
    with pytest.raises(ValueError, match="average"):
        taper_widths(n, d_ff, schedule, *((too_far, start) if reverse else (start, too_far)), multiple)
    end = 2 - start + slack * multiple / d_ff          # |mean - 1| <= multiple / (2 d_ff)
    if reverse:
        start, end = end, start
    first, last = round(start * d_ff / multiple), round(end * d_ff / multiple)
    assume(min(first, last) >= 1)
    interior = n * d_ff // multiple - first - last      # what the pinned ends leave for the rest
    if not (n - 2) * min(first, last) <= interior <= (n - 2) * max(first, last):
        with pytest.raises(ValueError, match="n_layers=2" if n == 2 else "monotone"):
            taper_widths(n, d_ff, schedule, start, end, multiple)
        return
    w = taper_widths(n, d_ff, schedule, start, end, multiple)
    check_common(w, n, d_ff, multiple)
    assert is_monotone(w, increasing=start < end)
    assert w[0] == first * multiple and w[-1] == last * multiple


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 64), d_ff=st.sampled_from(D_FFS), multiple=st.sampled_from(MULTIPLES))
def test_uniform_is_baseline(n, d_ff, multiple):
    if d_ff % multiple:
        with pytest.raises(ValueError, match="multiple"):
            taper_widths(n, d_ff, "uniform", multiple=multiple)
        return
    assert taper_widths(n, d_ff, "uniform", multiple=multiple) == [d_ff] * n
    assert profile_widths("uniform", n, d_ff, multiple) == [d_ff] * n
    assert WidthSpec().widths(n, d_ff) == [d_ff] * n


@pytest.mark.parametrize("schedule", TAPERS)
@pytest.mark.parametrize("start,end", [(1.5, 0.5), (1.75, 0.25), (0.5, 1.5)])
@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_taper_is_closest_monotone_rounding(schedule, start, end, n):
    """Brute force over every monotone, budget-exact sequence with the pinned endpoints: none is
    closer (sum of squared errors) to the unrounded curve than what taper_widths returns."""
    d_ff, multiple = 64, 16                         # 4 units per layer on average: small search
    x = [r * d_ff / multiple for r in paper_curve(schedule, n, start, end)]
    got = [v // multiple for v in taper_widths(n, d_ff, schedule, start, end, multiple)]
    first, last = round(start * 4), round(end * 4)
    lo, hi = min(first, last), max(first, last)
    best = math.inf
    for interior in itertools.product(range(lo, hi + 1), repeat=n - 2):
        cand = [first, *interior, last]
        if sum(cand) == 4 * n and is_monotone(cand, increasing=start < end):
            best = min(best, sum((c - xi) ** 2 for c, xi in zip(cand[1:-1], x[1:-1])))
    assert sum((g - xi) ** 2 for g, xi in zip(got[1:-1], x[1:-1])) == pytest.approx(best)


def test_paper_cosine_30_layers():
    """The paper's frozen choice, cosine 1.5->0.5, at SmolLM2-like depth 30 with d_ff 1536.
    Pinned integers: saved configs and parameter counts depend on them staying put."""
    w = taper_widths(30, 1536, "cosine", 1.5, 0.5, 16)
    assert w == [2304, 2304, 2288, 2256, 2240, 2192, 2144, 2096, 2032, 1968, 1888, 1824, 1744, 1664, 1584,
                 1488, 1408, 1328, 1248, 1184, 1104, 1040, 976, 928, 880, 832, 816, 784, 768, 768]
    check_common(w, 30, 1536, 16)
    ideal = [r * 1536 for r in paper_curve("cosine", 30, 1.5, 0.5)]
    assert max(abs(a - b) for a, b in zip(w, ideal)) < 16
    assert taper_widths(30, 1536, "cosine", 0.5, 1.5, 16) == w[::-1]


def test_half_to_even_endpoints_keep_the_budget():
    """2752/64 = 43 units: 1.5*43 = 64.5 and 0.5*43 = 21.5 both sit on .5; half-to-even gives
    64 + 22 = 86 = 2*43 (half-up would give 87 and push the interior off its curve)."""
    w = taper_widths(5, 2752, "linear", 1.5, 0.5, 64)
    assert (w[0], w[-1]) == (64 * 64, 22 * 64)
    check_common(w, 5, 2752, 64)


def test_sigmoid_endpoints_pinned_though_curve_stops_short():
    r = ratios(12, "sigmoid", 1.5, 0.5)
    assert r[0] < 1.5 and r[-1] > 0.5            # by (start-end)/(1+e^5) ~ 0.0067
    assert r[0] == pytest.approx(0.5 + 1 / (1 + math.exp(-5)))
    w = taper_widths(12, 4096, "sigmoid", 1.5, 0.5, 16)
    assert (w[0], w[-1]) == (6144, 2048)
    check_common(w, 12, 4096, 16)
    # a steeper sigmoid is flatter at the ends and steeper in the middle
    assert ratios(12, "sigmoid", 1.5, 0.5, k=20)[1] > r[1]


@pytest.mark.parametrize("schedule", TAPERS)
def test_ratios_match_paper_and_keep_mean(schedule):
    for n in (2, 3, 30, 31):
        r = ratios(n, schedule, 1.625, 0.375)
        assert r.shape == (n,)
        np.testing.assert_allclose(r, paper_curve(schedule, n, 1.625, 0.375), rtol=1e-12)
        assert r.mean() == pytest.approx(1.0, abs=1e-12)
        assert (np.diff(r) < 0).all()
    np.testing.assert_array_equal(ratios(7, "uniform"), np.ones(7))


def test_start_equal_end_is_uniform():
    assert taper_widths(8, 1024, "cosine", 1.0, 1.0, 16) == [1024] * 8


def test_many_layers_stay_exact():
    w = taper_widths(200, 2752, "cosine", 1.75, 0.25, 16)
    check_common(w, 200, 2752, 16)
    assert is_monotone(w, increasing=False)


# --------------------------------------------------------------------------- groups

@FAST
@given(n=st.integers(1, 64), d_ff=st.sampled_from(D_FFS), multiple=st.sampled_from(MULTIPLES),
       profile=st.sampled_from(sorted(PROFILES)))
def test_profile_properties(n, d_ff, multiple, profile):
    r = PROFILES[profile]
    g = len(r)
    sizes = group_sizes(n, g) if n >= g else None
    feasible = n >= g and (n * d_ff) % multiple == 0
    if feasible and len(set(r)) == 1:
        feasible = d_ff % multiple == 0
    if feasible:
        scale = n / sum(s * ri for s, ri in zip(sizes, r))
        feasible = all(round(ri * scale * d_ff / multiple) >= 1 for ri in r)
    if not feasible:
        with pytest.raises(ValueError):
            profile_widths(profile, n, d_ff, multiple)
        return
    w = profile_widths(profile, n, d_ff, multiple)
    check_common(w, n, d_ff, multiple)
    if profile == "uniform":
        assert w == [d_ff] * n
    if profile == "wider-early":
        assert is_monotone(w, increasing=False)
        assert profile_widths("wider-late", n, d_ff, multiple) == w[::-1]
    if profile == "wider-late":
        assert is_monotone(w, increasing=True)
    # within a group widths differ by at most one multiple and stay within one of the ideal
    scale = n / sum(s * ri for s, ri in zip(sizes, r))
    pos = 0
    for size, ri in zip(sizes, r):
        block = w[pos:pos + size]
        pos += size
        assert max(block) - min(block) <= multiple
        assert all(abs(v - ri * scale * d_ff) <= multiple for v in block)
    # equal groups and widths on the grid: exactly constant, exactly the ratios
    if n % g == 0 and all((ri * d_ff) % multiple == 0 for ri in r):
        assert w == [int(ri * d_ff) for ri in r for _ in range(n // g)]


@FAST
@given(n=st.integers(2, 64), d_ff=st.sampled_from(D_FFS), multiple=st.sampled_from((16, 64)),
       raw=st.lists(st.floats(0.3, 2.0), min_size=2, max_size=5), sort=st.sampled_from(("none", "dec", "inc")))
def test_group_widths_arbitrary_ratios(n, d_ff, multiple, raw, sort):
    r = np.asarray(raw) / np.mean(raw)             # any budget-neutral profile
    if sort != "none":
        r = np.sort(r)[::-1] if sort == "dec" else np.sort(r)
    assume(n >= len(r) and (n * d_ff) % multiple == 0 and len(set(r.tolist())) > 1)
    sizes = group_sizes(n, len(r))
    scale = n / float(np.dot(sizes, r))
    assume(all(round(ri * scale * d_ff / multiple) >= 1 for ri in r))
    w = group_widths(n, d_ff, tuple(r), multiple)
    check_common(w, n, d_ff, multiple)
    if sort != "none":
        assert is_monotone(w, increasing=sort == "inc")
    pos = 0
    for size, ri in zip(sizes, r):
        block = w[pos:pos + size]
        pos += size
        assert max(block) - min(block) <= multiple
        assert all(abs(v - ri * scale * d_ff) <= 1.5 * multiple for v in block)


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 200), g=st.integers(1, 7))
def test_group_sizes(n, g):
    assume(n >= g)
    sizes = group_sizes(n, g)
    assert len(sizes) == g and sum(sizes) == n and max(sizes) - min(sizes) <= 1
    if g % 2 == 1:
        assert sizes == sizes[::-1]
    # membership rule: layer l sits in the group covering its mid-depth position (l + 1/2) / n
    owner = np.repeat(np.arange(g), sizes)
    for l in range(n):
        assert owner[l] <= g * (l + 0.5) / n < owner[l] + 1


def test_group_examples():
    assert group_sizes(31, 3) == [10, 11, 10]
    assert group_sizes(32, 3) == [11, 10, 11]
    assert group_sizes(4, 3) == [1, 2, 1]
    # unequal groups, symmetric profile: extras land on the ratio-1 group (31) or balance (32)
    assert profile_widths("wider-early", 31, 1536) == [2304] * 10 + [1536] * 11 + [768] * 10
    assert profile_widths("wider-early", 32, 1536) == [2304] * 11 + [1536] * 10 + [768] * 11
    # wider-middle over 31 layers weighs 1.5 by 11/31: ratios scale by 31/31.5 to keep the budget,
    # 0.738*1536 = 1133.7 -> 1136, 1.476*1536 = 2267.2 -> 2272, and 6 layers step down to 2256
    w = profile_widths("wider-middle", 31, 1536)
    assert w == [1136] * 10 + [2272] * 5 + [2256] * 6 + [1136] * 10
    assert profile_widths("wider-middle", 4, 1536) == [1024, 2048, 2048, 1024]
    assert group_widths(6, 1024, (1.25, 0.75), 16) == [1280] * 3 + [768] * 3


# --------------------------------------------------------------------------- errors

@pytest.mark.parametrize("call,match", [
    (lambda: taper_widths(3, 2752, multiple=128), r"multiple=128.*d_ff=2688 or d_ff=2816.*multiple=64"),
    (lambda: taper_widths(30, 1536, "cosine", 1.5, 0.0), r"\bend\b"),
    (lambda: taper_widths(30, 256, "cosine", 1.75, 0.25, 128), r"minimum end ratio.*0\.5"),
    (lambda: taper_widths(30, 256, "cosine", 0.25, 1.75, 128), r"minimum start ratio"),
    (lambda: taper_widths(30, 1536, "cosine", 1.5, 0.75), r"start=1.5 and end=0.75.*end = 2 - start = 0.5.*average 1.125"),
    (lambda: taper_widths(30, 1536, "cubic"), r"schedule='cubic'.*linear, cosine, sigmoid"),
    (lambda: taper_widths(1, 1536, "cosine"), r"n_layers must be >= 2.*uniform"),
    (lambda: taper_widths(30, 1536, multiple=0), r"multiple must be >= 1"),
    (lambda: taper_widths(30, 0), r"d_ff must be >= 1"),
    (lambda: taper_widths(30.5, 1536), r"n_layers must be an integer"),
    (lambda: taper_widths(30, 1536, "sigmoid", k=-1), r"\bk must be"),
    (lambda: taper_widths(4, 1000, "cosine", 1.0, 1.0, 16), r"monotone.*multiple"),
    (lambda: taper_widths(4, 1000, "uniform", multiple=16), r"d_ff=1000 is not a multiple of multiple=16.*multiple=8"),
    (lambda: group_widths(30, 1536, (1.5, 1.0, 1.0)), r"ratios \(1.5, 1.0, 1.0\).*average 1.16667"),
    (lambda: group_widths(30, 1536, ()), r"ratios must hold"),
    (lambda: group_widths(30, 1536, (1.5, -0.5, 1.0)), r"ratios\[1\]"),
    (lambda: group_widths(2, 1536, (1.5, 1.0, 0.5)), r"n_layers=2.*3 groups"),
    (lambda: group_widths(30, 256, (1.95, 1.0, 0.05), 64), r"ratios\[2\].*minimum ratio"),
    (lambda: profile_widths("wider-ish", 30, 1536), r"profile='wider-ish'.*wider-early, wider-middle"),
    (lambda: group_sizes(2, 3), r"n_layers must be >= 3"),
    (lambda: WidthSpec(schedule="cubic"), r"WidthSpec.schedule"),
    (lambda: WidthSpec(schedule="profile"), r"WidthSpec.profile=None"),
    (lambda: WidthSpec(schedule="cosine", profile="wider-early"), r"profile=None"),
    (lambda: WidthSpec.from_dict({"schedule": "cosine", "stat": 1.5}), r"unknown keys \['stat'\]"),
])
def test_errors_name_the_argument_and_the_fix(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --------------------------------------------------------------------------- WidthSpec

def test_widthspec_resolves_and_labels():
    cos = WidthSpec("cosine", 1.5, 0.5)
    assert cos.label == "cosine 1.5->0.5"
    assert cos.widths(30, 1536) == taper_widths(30, 1536, "cosine", 1.5, 0.5, 16)
    assert WidthSpec().label == "uniform"
    early = WidthSpec("profile", profile="wider-early", multiple=64)
    assert early.label == "wider-early"
    assert early.widths(30, 1536) == profile_widths("wider-early", 30, 1536, 64)
    assert WidthSpec("sigmoid", 1.375, 0.625, k=5).label == "sigmoid 1.375->0.625 k=5"
    assert WidthSpec("linear", 0.5, 1.5).widths(8, 512) == taper_widths(8, 512, "linear", 0.5, 1.5)


def test_widthspec_roundtrip_and_normalisation():
    for spec in (WidthSpec(), WidthSpec("cosine", 1.5, 0.5, multiple=128),
                 WidthSpec("sigmoid", 1.25, 0.75, k=7.5), WidthSpec("profile", profile="wider-late")):
        d = json.loads(json.dumps(spec.to_dict()))
        assert WidthSpec.from_dict(d) == spec
    assert WidthSpec.from_dict({"schedule": "cosine", "start": 1.5, "end": 0.5}) == WidthSpec("cosine", 1.5, 0.5)
    # start/end mean nothing for uniform/profile: stored as 1.0 so equal specs compare equal
    assert WidthSpec("uniform", 1.5, 0.5) == WidthSpec()
    assert WidthSpec("profile", 1.5, 0.5, profile="wider-early").to_dict()["start"] == 1.0


@pytest.mark.integration                             # spawns a fresh interpreter
def test_import_is_light():
    import subprocess
    import sys
    code = "import sys, interp.widths.schedules, interp.widths.derived; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_constants_match_contract():
    assert SCHEDULES == ("uniform", "linear", "cosine", "sigmoid")
    assert PROFILES["wider-middle"] == (0.75, 1.5, 0.75)
    for r in PROFILES.values():
        assert sum(r) / len(r) == 1.0
