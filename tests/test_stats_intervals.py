"""interp.stats_intervals' verdict helpers against scipy: the normal quantile, the seeds-and-documents interval,
the Bonferroni level, the side of zero, and the Fisher z interval of a correlation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from interp.stats_intervals import change_ci, direction, family_level, normal_quantile, pearson_ci


@pytest.mark.parametrize("p", [0.5, 0.975, 0.9972, 1e-4])
def test_normal_quantile(p):
    assert normal_quantile(p) == pytest.approx(stats.norm.ppf(p), rel=1e-9, abs=1e-12)
    with pytest.raises(ValueError, match="p must be in"):
        normal_quantile(1.0)


@pytest.mark.parametrize("level", [0.95, 1 - 0.05 / 7])
def test_change_ci_adds_the_seeds_and_the_documents_in_quadrature(level):
    d = np.array([0.006, 0.012, 0.007])
    h_seeds = stats.t.ppf((1 + level) / 2, 2) * d.std(ddof=1) / math.sqrt(3)
    h_docs = stats.norm.ppf((1 + level) / 2) * 0.0256
    mean, low, high = change_ci(d, 0.0256, level)
    assert mean == pytest.approx(d.mean())
    half = math.hypot(h_seeds, h_docs)
    assert (low, high) == pytest.approx((d.mean() - half, d.mean() + half))
    assert high - mean > max(h_seeds, h_docs)                 # wider than either interval alone
    assert change_ci(d, None, level)[1] == pytest.approx(d.mean() - h_seeds)       # unknown documents' error
    assert change_ci(d, math.nan, level)[1] == pytest.approx(d.mean() - h_seeds)
    assert all(math.isnan(x) for x in change_ci([0.01], 0.02)[1:])                # one seed: no interval


def test_family_level_and_direction():
    assert family_level(1) == 0.95 and family_level(0) == 0.95
    assert family_level(9) == pytest.approx(1 - 0.05 / 9)
    with pytest.raises(ValueError, match="level"):
        family_level(3, 1.0)
    assert [direction(*ci) for ci in ((0.1, 0.2), (-0.2, -0.1), (-0.1, 0.1), (0.0, 0.1), (math.nan, 1.0))] == \
        [1, -1, 0, 0, 0]


def test_pearson_ci_is_the_fisher_interval():
    rng = np.random.default_rng(0)
    x = np.arange(18.0)
    y = 0.05 * x + rng.normal(size=18)
    result = stats.pearsonr(x, y)
    ci = result.confidence_interval(0.95)
    assert pearson_ci(result.statistic, 18) == pytest.approx((ci.low, ci.high), rel=1e-9)
    assert all(math.isnan(v) for v in pearson_ci(0.5, 3)) and all(math.isnan(v) for v in pearson_ci(math.nan, 10))
    assert pearson_ci(1.0, 10)[1] == pytest.approx(1.0)
