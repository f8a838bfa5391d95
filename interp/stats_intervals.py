"""Small-sample intervals (Student t): the t CDF and quantile and the mean's t interval. scipy is not a
dependency, so the t CDF is computed here from the regularised incomplete beta function (continued fraction,
Numerical Recipes 6.4). Re-exported by interp.stats, where callers import them from.

Also the one rule every claim of the report is judged by (analyses/report.py, and downstream_groups' `resolved`
column and figure star): `change_ci` (a change measured on paired seeds that all answered one sample of
documents: both noises), `family_level` (Bonferroni over the tests of one claim), `direction` (which side of 0 an
interval lies on) and `pearson_ci` (Fisher z, for a correlation across layers). Torch-free, so the report and the
analyses read it without loading torch."""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

__all__ = [
    "change_ci",
    "direction",
    "family_level",
    "mean_ci",
    "normal_quantile",
    "pearson_ci",
    "t_cdf",
    "t_quantile",
]


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta (modified Lentz; Numerical Recipes 6.4)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b) for 0 <= x <= 1."""
    if x <= 0.0 or x >= 1.0:
        return float(x >= 1.0)
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df degrees of freedom."""
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """Inverse of t_cdf (bisection to 1e-12): t_quantile(0.975, 2) = 4.3027."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"t_quantile: p must be in (0, 1), got {p}")
    if not df > 0:
        raise ValueError(f"t_quantile: df must be > 0, got {df} (a CI needs at least 2 values)")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def mean_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): Student-t interval mean +- t_{(1+level)/2, n-1} * s / sqrt(n); NaN bounds if n < 2."""
    x = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(x.mean())
    if x.size < 2:
        return mean, math.nan, math.nan
    half = t_quantile((1.0 + level) / 2.0, x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return mean, mean - half, mean + half


def normal_quantile(p: float) -> float:
    """Inverse of the standard normal CDF: normal_quantile(0.975) = 1.95996."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"normal_quantile: p must be in (0, 1), got {p}")
    return NormalDist().inv_cdf(p)


def change_ci(diffs: Sequence[float], doc_stderr: float | None = None, level: float = 0.95
              ) -> tuple[float, float, float]:
    """(mean, low, high) of a change measured on k paired seeds (diffs: one per seed), each pair scored on the
    same sample of documents, honest about both noises: half-width sqrt(h_seeds^2 + h_docs^2), where
    h_seeds = t_{(1+level)/2, k-1} * s / sqrt(k) (Student t over the seeds: which models training happened to
    give) and h_docs = z_{(1+level)/2} * doc_stderr (which documents the benchmark happened to hold: the
    documents' standard error of the mean change). The two add in variance; taking them in quadrature is at least
    as wide as either interval alone, so a change is called only when neither noise explains it.
    doc_stderr None or NaN: not known (lm-eval gives none for a word perplexity), h_docs = 0: seeds only, and
    the caller says so. NaN bounds with fewer than 2 seeds (one seed measures no seed noise)."""
    mean, low, high = mean_ci(diffs, level)
    if not (math.isfinite(low) and math.isfinite(high)):
        return mean, math.nan, math.nan
    h_seeds = high - mean
    h_docs = (normal_quantile((1.0 + level) / 2.0) * float(doc_stderr)
              if doc_stderr is not None and math.isfinite(doc_stderr) else 0.0)
    half = math.hypot(h_seeds, h_docs)
    return mean, mean - half, mean + half


def family_level(m: int, level: float = 0.95) -> float:
    """The level of each interval when one claim is tested m times (m tasks): 1 - (1 - level) / m (Bonferroni),
    so that all m intervals hold at once with probability >= level, whatever their dependence; m <= 1: level."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"family_level: level must be in (0, 1), got {level}")
    return 1.0 - (1.0 - level) / max(int(m), 1)


def direction(low: float, high: float) -> int:
    """+1: the interval [low, high] lies above 0; -1: below 0; 0: it contains 0 or is not finite."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return 0
    return 1 if low > 0 else -1 if high < 0 else 0


def pearson_ci(r: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """Fisher z interval of a Pearson r over n points: tanh(atanh(r) -+ z_{(1+level)/2} / sqrt(n - 3)); NaN with
    n <= 3 or r not finite. For an r across layers (a curve against depth) the layers are the units: the noise of
    each layer's mean is part of their scatter about the line."""
    if n <= 3 or not math.isfinite(r):
        return math.nan, math.nan
    z = math.atanh(max(min(r, 1.0 - 1e-15), -1.0 + 1e-15))
    half = normal_quantile((1.0 + level) / 2.0) / math.sqrt(n - 3)
    return math.tanh(z - half), math.tanh(z + half)
