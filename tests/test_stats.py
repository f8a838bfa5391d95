"""interp.stats against numpy on the concatenated values: moments to 1e-10, quantiles to one bin."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from interp.stats import ClusteredMean, RunningHistogram, RunningMoments, t_quantile

CHUNKS = (1, 7, 0, 300, 2, 1000, 45)  # uneven, including an empty chunk


def _data(seed: int = 0, channels: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    loc = np.array([0.1, -0.4, 0.7])[:channels]
    return np.clip(rng.normal(loc, 0.2, size=(sum(CHUNKS), channels)), -0.999, 0.999)  # [n, c]


def _chunks(x: np.ndarray):
    start = 0
    for size in CHUNKS:
        yield torch.from_numpy(x[start:start + size])
        start += size


def test_moments_match_numpy_over_uneven_chunks():
    x = _data() + 1e4  # a large offset: naive sum-of-squares would lose precision here
    m = RunningMoments(3)
    for chunk in _chunks(x):
        m.update(chunk)
    np.testing.assert_allclose(m.n.numpy(), len(x))
    np.testing.assert_allclose(m.mean.numpy(), x.mean(0), rtol=0, atol=1e-10)
    np.testing.assert_allclose(m.var.numpy(), x.var(0, ddof=1), rtol=1e-10)
    np.testing.assert_allclose(m.sem.numpy(), x.std(0, ddof=1) / np.sqrt(len(x)), rtol=1e-10)
    low, high = m.ci95()
    np.testing.assert_allclose((high - low).numpy(), 2 * 1.959963984540054 * m.sem.numpy(), atol=1e-10)


def test_merge_of_shards_equals_one_pass_and_survives_state_dict():
    x = _data(1)
    whole = RunningMoments(3)
    whole.update(torch.from_numpy(x))
    shards = []
    for chunk in _chunks(x):
        s = RunningMoments(3)
        s.update(chunk)
        shards.append(RunningMoments.from_state_dict(s.state_dict()))
    merged = shards[0]
    for s in shards[1:]:
        merged.merge(s)
    np.testing.assert_allclose(merged.mean.numpy(), whole.mean.numpy(), atol=1e-12)
    np.testing.assert_allclose(merged.var.numpy(), whole.var.numpy(), rtol=1e-10)
    assert merged.n.tolist() == whole.n.tolist()


def test_single_channel_updates_and_nonfinite_are_counted_not_averaged():
    m = RunningMoments(2)
    m.update(torch.tensor([1.0, float("nan"), 3.0, float("inf")]), channel=1)
    m.update(torch.tensor([[5.0, 5.0]]))
    assert m.n.tolist() == [1, 3]
    assert m.n_nonfinite.tolist() == [0, 2]
    assert m.mean.tolist() == [5.0, 3.0]
    assert np.isnan(m.var[0].item())  # one value: no sample variance
    with pytest.raises(ValueError, match="shape"):
        m.update(torch.zeros(4, 3))
    with pytest.raises(ValueError, match="channel"):
        m.update(torch.zeros(4), channel=2)


def test_empty_channel_has_nan_mean():
    m = RunningMoments(2)
    m.update(torch.tensor([0.5]), channel=0)
    assert np.isnan(m.mean[1].item())


def test_histogram_quantiles_within_one_bin_of_numpy():
    x = _data(2)
    h = RunningHistogram(3)  # 201 bins over [-1, 1]
    for chunk in _chunks(x):
        h.update(chunk)
    qs = (0.05, 0.25, 0.5, 0.75, 0.95)
    got = h.quantiles(qs).numpy()
    want = np.quantile(x, qs, axis=0).T
    assert np.abs(got - want).max() <= h.max_bin_width
    assert h.total.tolist() == [len(x)] * 3


def test_histogram_geometric_edges_and_out_of_range():
    rng = np.random.default_rng(3)
    x = np.exp(rng.normal(0, 1, size=(5000, 1)))
    edges = np.geomspace(1e-2, 1e2, 401)
    h = RunningHistogram(1, edges=edges)
    h.update(torch.from_numpy(x))
    got = h.quantiles((0.1, 0.5, 0.9)).numpy()[0]
    want = np.quantile(x[:, 0], (0.1, 0.5, 0.9))
    np.testing.assert_allclose(got, want, rtol=np.diff(np.log(edges)).max())  # one bin, relative

    h2 = RunningHistogram(1, lo=0.0, hi=1.0, bins=10)
    h2.update(torch.tensor([-5.0, -4.0, -3.0, 0.55, 7.0, float("nan")]))
    assert (h2.under.item(), h2.over.item(), h2.n_nonfinite.item()) == (3, 1, 1)
    q = h2.quantiles((0.1, 0.7, 0.99))[0].tolist()
    assert q[0] == 0.0 and q[2] == 1.0  # clamped to the range edges
    assert 0.5 <= q[1] <= 0.6


def test_histogram_merge_and_state_dict():
    x = _data(4)
    whole = RunningHistogram(3)
    whole.update(torch.from_numpy(x))
    merged = RunningHistogram(3)
    for chunk in _chunks(x):
        part = RunningHistogram(3)
        part.update(chunk)
        merged.merge(RunningHistogram.from_state_dict(part.state_dict()))
    assert torch.equal(merged.counts, whole.counts)
    with pytest.raises(ValueError, match="edges"):
        merged.merge(RunningHistogram(3, bins=10))


def test_state_size_does_not_grow_with_values():
    def nbytes(obj):
        return sum(v.numel() * v.element_size() for v in obj.state_dict().values() if torch.is_tensor(v))

    m, h = RunningMoments(4), RunningHistogram(4)
    before = nbytes(m), nbytes(h)
    for _ in range(3):
        m.update(torch.rand(10_000, 4))
        h.update(torch.rand(10_000, 4))
    assert (nbytes(m), nbytes(h)) == before


# ------------------------------------------------------------------------------ ClusteredMean

def _cr1(sums: np.ndarray, counts: np.ndarray) -> tuple[float, float]:
    """Two-pass CR1 cluster-robust (mean, sem) of a ratio mean, written out independently."""
    keep = counts > 0
    sums, counts = sums[keep], counts[keep]
    g, mean = sums.size, sums.sum() / counts.sum()
    return mean, math.sqrt(g / (g - 1) * ((sums - mean * counts) ** 2).sum()) / counts.sum()


def test_clustered_mean_matches_a_two_pass_cr1_over_uneven_chunks():
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 40, 57).astype(float)          # some empty clusters (skipped)
    sums = np.array([rng.normal(rng.normal(0.2, 0.3), 1.0, int(n)).sum() for n in counts])
    acc = ClusteredMean(3)
    for chunk in np.array_split(np.arange(57), 7):
        acc.update(torch.tensor(sums[chunk]), torch.tensor(counts[chunk]), channel=2)
    mean, sem = _cr1(sums, counts)
    assert acc.mean[2].item() == pytest.approx(mean, rel=1e-12) and acc.sem[2].item() == pytest.approx(sem, rel=1e-10)
    assert acc.clusters[2].item() == (counts > 0).sum() and math.isnan(acc.mean[0].item())
    low, high = acc.ci95()
    assert high[2].item() - acc.mean[2].item() == pytest.approx(t_quantile(0.975, (counts > 0).sum() - 1) * sem,
                                                                 rel=1e-9)


def test_clustered_mean_merge_state_dict_and_one_token_clusters():
    rng = np.random.default_rng(4)
    x = rng.normal(size=200)
    one = ClusteredMean(1)
    one.update(torch.tensor(x), torch.ones(200), channel=0)   # every token its own cluster: the per-token sem
    assert one.sem.item() == pytest.approx(x.std(ddof=1) / math.sqrt(200), rel=1e-10)
    a, b = ClusteredMean(1), ClusteredMean(1)
    a.update(torch.tensor(x[:70]), torch.ones(70), channel=0)
    b.update(torch.tensor(x[70:]), torch.ones(130), channel=0)
    merged = ClusteredMean(1).load_state_dict(a.state_dict()).merge(b)
    assert merged.mean.item() == pytest.approx(one.mean.item(), rel=1e-12)
    assert merged.sem.item() == pytest.approx(one.sem.item(), rel=1e-10)
    single = ClusteredMean(1)
    single.update(torch.tensor([3.0]), torch.tensor([5.0]), channel=0)
    assert single.mean.item() == pytest.approx(0.6) and math.isnan(single.sem.item())  # one cluster: no CI
