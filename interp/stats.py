"""Streaming reductions (baukit runningstats style): per-channel moments and histograms whose
state does not grow with the number of values seen, so probes never keep whole activations.

Both reductions keep one value per *channel* (e.g. per layer), accept a batch of values
`[n, channels]` (or `[n]` with `channel=c` to feed one channel), skip non-finite values (counted
in `n_nonfinite` instead of poisoning the mean), and can be saved (`state_dict`) and merged
(`merge`) so shards of an analysis can be combined exactly later. RunningCovariance does the same for
the d x d co-moment matrix of row vectors (one per channel), for population statistics (effective rank,
CKA) that have no per-value form, and ClusteredMean the mean of values that come in clusters (the tokens of
one sequence) with a standard error that treats the clusters, not the values, as independent. The Student-t
intervals live in interp.stats_intervals and are re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from jaxtyping import Float
from numpy.typing import ArrayLike
from torch import Tensor

from interp.stats_intervals import mean_ci, t_cdf, t_quantile

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFAULT_QUANTILES",
    "Z_95",
    "ClusteredMean",
    "RunningCovariance",
    "RunningHistogram",
    "RunningMoments",
    "depth_correlations",
    "mean_ci",
    "pearson_r",
    "rankdata",
    "spearman_r",
    "t_cdf",
    "t_quantile",
    "with_variant",
]

DEFAULT_QUANTILES: tuple[float, ...] = (0.05, 0.25, 0.5, 0.75, 0.95)
DEFAULT_VARIANT = "default"  # the variant of probe rows without one (novelty tables)
Z_95 = 1.959963984540054  # two-sided 95% quantile of the standard normal


def _as_batch(values: Tensor, channels: int, channel: int | None) -> Float[Tensor, "n c"]:
    """Shape-check `values` and return them as float64 `[n, c]` (c = channels, or 1 for `channel=`)."""
    values = torch.as_tensor(values)
    if channel is not None:
        if not 0 <= channel < channels:
            raise ValueError(f"channel={channel} is out of range for {channels} channels")
        if values.dim() != 1:
            raise ValueError(f"with channel= the values must be 1-D [n], got shape {tuple(values.shape)}")
        return values.detach().to(torch.float64).reshape(-1, 1)
    if values.dim() == 1 and channels == 1:
        values = values.reshape(-1, 1)
    if values.dim() != 2 or values.shape[1] != channels:
        raise ValueError(f"values must have shape [n, {channels}] (or [n] with channel=), "
                         f"got {tuple(values.shape)}")
    return values.detach().to(torch.float64)


def _channel_slice(channel: int | None) -> slice:
    return slice(None) if channel is None else slice(channel, channel + 1)


class RunningMoments:
    """Per-channel count, mean and sum of squared deviations (M2), merged with Chan et al.'s
    parallel update in float64, so a mean over millions of tokens is exact to ~1e-12 and the
    result does not depend on how the values were split into batches.

    `var` and `std` are the sample (ddof=1) estimates; `sem = std / sqrt(n)`; `ci95()` is the
    normal approximation mean +- 1.96 * sem for independent values. Tokens of one sequence are not
    independent, so the probes' CIs come from ClusteredMean (sequences as the units) instead.
    """

    def __init__(self, channels: int = 1):
        if channels < 1:
            raise ValueError(f"channels must be >= 1, got {channels}")
        self.channels = channels
        self.count = torch.zeros(channels, dtype=torch.float64)
        self._mean = torch.zeros(channels, dtype=torch.float64)
        self.m2 = torch.zeros(channels, dtype=torch.float64)
        self.n_nonfinite = torch.zeros(channels, dtype=torch.float64)

    def _to(self, device: torch.device) -> None:
        if self.count.device != device:
            for name in ("count", "_mean", "m2", "n_nonfinite"):
                setattr(self, name, getattr(self, name).to(device))

    def update(self, values: Float[Tensor, "n channels"] | Float[Tensor, " n"], channel: int | None = None) -> None:
        """Add a batch; non-finite entries are counted per channel and left out of the moments."""
        x = _as_batch(values, self.channels, channel)
        self._to(x.device)
        finite = torch.isfinite(x)
        n_b = finite.sum(0).to(torch.float64)
        x0 = torch.where(finite, x, torch.zeros((), dtype=x.dtype, device=x.device))
        mean_b = x0.sum(0) / n_b.clamp_min(1)
        m2_b = (torch.where(finite, x - mean_b, torch.zeros((), dtype=x.dtype, device=x.device)) ** 2).sum(0)
        sl = _channel_slice(channel)
        self.n_nonfinite[sl] += (~finite).sum(0).to(torch.float64)
        self._combine(sl, n_b, mean_b, m2_b)

    def _combine(self, sl: slice, n_b: Tensor, mean_b: Tensor, m2_b: Tensor) -> None:
        """Chan et al. (1979): merge (n_b, mean_b, m2_b) into the channels selected by `sl`."""
        n_a, mean_a, m2_a = self.count[sl], self._mean[sl], self.m2[sl]
        n = n_a + n_b
        safe_n = n.clamp_min(1)
        delta = mean_b - mean_a
        self._mean[sl] = mean_a + delta * n_b / safe_n
        self.m2[sl] = m2_a + m2_b + delta ** 2 * n_a * n_b / safe_n
        self.count[sl] = n

    def merge(self, other: RunningMoments) -> RunningMoments:
        """Fold another accumulator (e.g. another shard) into this one, in place; returns self."""
        if other.channels != self.channels:
            raise ValueError(f"cannot merge RunningMoments with {other.channels} channels into {self.channels}")
        dev = self.count.device
        self.n_nonfinite += other.n_nonfinite.to(dev)
        self._combine(slice(None), other.count.to(dev), other._mean.to(dev), other.m2.to(dev))
        return self

    @property
    def n(self) -> Tensor:
        return self.count

    @property
    def mean(self) -> Float[Tensor, " channels"]:
        """NaN for channels that saw no finite value."""
        return torch.where(self.count > 0, self._mean, torch.full_like(self._mean, math.nan))

    @property
    def var(self) -> Float[Tensor, " channels"]:
        """Sample variance (ddof=1); NaN below two values."""
        return torch.where(self.count > 1, self.m2 / (self.count - 1).clamp_min(1), torch.full_like(self.m2, math.nan))

    @property
    def std(self) -> Float[Tensor, " channels"]:
        return self.var.sqrt()

    @property
    def sem(self) -> Float[Tensor, " channels"]:
        return self.std / self.count.sqrt()

    def ci95(self) -> tuple[Float[Tensor, " channels"], Float[Tensor, " channels"]]:
        """(low, high) = mean -+ 1.96 * sem: normal approximation, see the class docstring."""
        half = Z_95 * self.sem
        return self.mean - half, self.mean + half

    def state_dict(self) -> dict[str, Tensor | int]:
        return {"channels": self.channels, "count": self.count.cpu().clone(), "mean": self._mean.cpu().clone(),
                "m2": self.m2.cpu().clone(), "n_nonfinite": self.n_nonfinite.cpu().clone()}

    def load_state_dict(self, state: dict) -> RunningMoments:
        if int(state["channels"]) != self.channels:
            raise ValueError(f"state has {state['channels']} channels, this RunningMoments has {self.channels}")
        self.count = state["count"].to(torch.float64).clone()
        self._mean = state["mean"].to(torch.float64).clone()
        self.m2 = state["m2"].to(torch.float64).clone()
        self.n_nonfinite = state["n_nonfinite"].to(torch.float64).clone()
        return self

    @classmethod
    def from_state_dict(cls, state: dict) -> RunningMoments:
        return cls(int(state["channels"])).load_state_dict(state)


class RunningHistogram:
    """Per-channel counts over fixed bin edges, plus under/over-range counts, for approximate
    quantiles in constant memory. Quantiles interpolate linearly inside the bin that holds them,
    so their error is at most one bin width; a quantile that falls among the out-of-range values is
    clamped to the range edge (`lo` or `hi`) — widen the range if that matters.

    Default edges: 201 equal bins over [-1, 1] (cosines). Pass `edges=` for any increasing edges
    (e.g. geometric ones for norm ratios). A value equal to the last edge goes into the last bin.
    """

    def __init__(self, channels: int = 1, lo: float = -1.0, hi: float = 1.0, bins: int = 201,
                 edges: Sequence[float] | Tensor | None = None):
        if channels < 1:
            raise ValueError(f"channels must be >= 1, got {channels}")
        if edges is None:
            if not hi > lo or bins < 1:
                raise ValueError(f"need hi > lo and bins >= 1, got lo={lo}, hi={hi}, bins={bins}")
            edges = torch.linspace(lo, hi, bins + 1, dtype=torch.float64)
        edges = torch.as_tensor(edges, dtype=torch.float64).flatten()
        if edges.numel() < 2 or not bool((edges[1:] > edges[:-1]).all()):
            raise ValueError("edges must be strictly increasing with at least two entries")
        self.channels = channels
        self.edges = edges
        self.counts = torch.zeros(channels, edges.numel() - 1, dtype=torch.float64)
        self.under = torch.zeros(channels, dtype=torch.float64)
        self.over = torch.zeros(channels, dtype=torch.float64)
        self.n_nonfinite = torch.zeros(channels, dtype=torch.float64)

    @property
    def bins(self) -> int:
        return self.edges.numel() - 1

    @property
    def max_bin_width(self) -> float:
        return float((self.edges[1:] - self.edges[:-1]).max())

    def _to(self, device: torch.device) -> None:
        if self.counts.device != device:
            for name in ("edges", "counts", "under", "over", "n_nonfinite"):
                setattr(self, name, getattr(self, name).to(device))

    def update(self, values: Float[Tensor, "n channels"] | Float[Tensor, " n"], channel: int | None = None) -> None:
        """Add a batch; non-finite entries are counted per channel and not binned."""
        x = _as_batch(values, self.channels, channel)
        self._to(x.device)
        c = x.shape[1]
        finite = torch.isfinite(x)
        under = finite & (x < self.edges[0])
        over = finite & (x > self.edges[-1])
        inside = finite & ~under & ~over
        idx = (torch.bucketize(x, self.edges, right=True) - 1).clamp(0, self.bins - 1)
        flat = (idx + torch.arange(c, device=x.device) * self.bins)[inside]
        binned = torch.bincount(flat, minlength=c * self.bins).to(torch.float64).reshape(c, self.bins)
        sl = _channel_slice(channel)
        self.counts[sl] += binned
        self.under[sl] += under.sum(0).to(torch.float64)
        self.over[sl] += over.sum(0).to(torch.float64)
        self.n_nonfinite[sl] += (~finite).sum(0).to(torch.float64)

    def merge(self, other: RunningHistogram) -> RunningHistogram:
        """Add another histogram with the same edges, in place; returns self."""
        if other.channels != self.channels or not torch.equal(other.edges.cpu(), self.edges.cpu()):
            raise ValueError("can only merge RunningHistograms with the same channels and bin edges")
        dev = self.counts.device
        for name in ("counts", "under", "over", "n_nonfinite"):
            getattr(self, name).add_(getattr(other, name).to(dev))
        return self

    @property
    def total(self) -> Float[Tensor, " channels"]:
        """Finite values seen per channel (in range or not)."""
        return self.under + self.counts.sum(1) + self.over

    def quantiles(self, qs: Sequence[float] = DEFAULT_QUANTILES) -> Float[Tensor, "channels n_q"]:
        """Approximate quantiles per channel (NaN for an empty channel), see the class docstring."""
        q = torch.as_tensor(list(qs), dtype=torch.float64, device=self.counts.device)
        if bool(((q < 0) | (q > 1)).any()):
            raise ValueError(f"quantiles must lie in [0, 1], got {list(qs)}")
        total = self.total                                             # [c]
        # a tiny floor makes q=0 land on the first non-empty bin instead of the range edge
        target = (q[None, :] * total[:, None]).clamp_min(1e-9)         # [c, n_q]
        cum = self.under[:, None] + self.counts.cumsum(1)              # [c, bins] count up to each bin's right edge
        below = torch.cat([self.under[:, None], cum[:, :-1]], 1)       # count before each bin
        # first bin whose cumulative count reaches the target
        b = torch.searchsorted(cum.contiguous(), target.contiguous(), right=False).clamp(0, self.bins - 1)
        cnt = self.counts.gather(1, b)
        frac = ((target - below.gather(1, b)) / cnt.clamp_min(1e-300)).clamp(0, 1)
        left, width = self.edges[b], (self.edges[1:] - self.edges[:-1])[b]
        out = left + frac * width
        out = torch.where(target <= self.under[:, None], self.edges[0].expand_as(out), out)
        out = torch.where(target > cum[:, -1:], self.edges[-1].expand_as(out), out)
        return torch.where(total[:, None] > 0, out, torch.full_like(out, math.nan))

    def state_dict(self) -> dict[str, Tensor | int]:
        return {"channels": self.channels, "edges": self.edges.cpu().clone(), "counts": self.counts.cpu().clone(),
                "under": self.under.cpu().clone(), "over": self.over.cpu().clone(),
                "n_nonfinite": self.n_nonfinite.cpu().clone()}

    def load_state_dict(self, state: dict) -> RunningHistogram:
        if int(state["channels"]) != self.channels or state["counts"].shape != self.counts.shape:
            raise ValueError("state does not match this RunningHistogram's channels and bins")
        self.edges = state["edges"].to(torch.float64).clone()
        for name in ("counts", "under", "over", "n_nonfinite"):
            setattr(self, name, state[name].to(torch.float64).clone())
        return self

    @classmethod
    def from_state_dict(cls, state: dict) -> RunningHistogram:
        return cls(int(state["channels"]), edges=state["edges"]).load_state_dict(state)


class RunningCovariance:
    """Per-channel co-moment matrix of paired row vectors: count, means and C = sum (x - mean_x)(y - mean_y)^T
    in float64, merged with Chan et al.'s update (as RunningMoments), so a covariance over millions of
    tokens does not depend on how they were split into batches or shards. cross=False: y is x (an
    auto-covariance, one matmul per batch). The state is [channels, d, d], allocated by the first update
    (d from the data), never per value. Rows with a non-finite entry are counted in n_nonfinite and left out.
    """

    def __init__(self, channels: int = 1, cross: bool = False):
        if channels < 1:
            raise ValueError(f"channels must be >= 1, got {channels}")
        self.channels = channels
        self.cross = cross
        self.count = torch.zeros(channels, dtype=torch.float64)
        self.n_nonfinite = torch.zeros(channels, dtype=torch.float64)
        self.mean_x: Tensor | None = None    # [channels, d]
        self.mean_y: Tensor | None = None    # [channels, d] (cross only)
        self.comoment: Tensor | None = None  # [channels, d, d]

    def _allocate(self, d: int, device: torch.device) -> None:
        if self.comoment is None:
            self.count, self.n_nonfinite = self.count.to(device), self.n_nonfinite.to(device)
            self.mean_x = torch.zeros(self.channels, d, dtype=torch.float64, device=device)
            self.mean_y = self.mean_x.clone() if self.cross else None
            self.comoment = torch.zeros(self.channels, d, d, dtype=torch.float64, device=device)
        elif self.comoment.shape[-1] != d:
            raise ValueError(f"RunningCovariance holds d={self.comoment.shape[-1]}, got rows of d={d}")

    def update(self, x: Float[Tensor, "n d"], y: Float[Tensor, "n d"] | None = None, channel: int = 0) -> None:
        """Add rows of x (and, for cross=True, the paired rows of y) to one channel."""
        if not 0 <= channel < self.channels:
            raise ValueError(f"channel={channel} is out of range for {self.channels} channels")
        if (y is not None) != self.cross or x.dim() != 2 or (y is not None and y.shape != x.shape):
            raise ValueError(f"update takes x [n, d]{' and y of the same shape' if self.cross else ' only'}, "
                             f"got x {tuple(x.shape)}, y {None if y is None else tuple(y.shape)}")
        x = x.detach().to(torch.float64)
        y = y.detach().to(torch.float64) if y is not None else None
        finite = torch.isfinite(x).all(-1) & (torch.isfinite(y).all(-1) if y is not None else True)
        self._allocate(x.shape[-1], x.device)
        sl = slice(channel, channel + 1)
        self.n_nonfinite[sl] += (~finite).sum().to(torch.float64)
        if not bool(finite.all()):
            x, y = x[finite], (y[finite] if y is not None else None)
        if x.shape[0] == 0:
            return
        mx = x.mean(0)
        xc = x - mx
        my = y.mean(0) if y is not None else None
        c_b = xc.T @ ((y - my) if y is not None else xc)
        n_b = torch.tensor([float(x.shape[0])], dtype=torch.float64, device=x.device)
        self._combine(sl, n_b, mx[None], None if my is None else my[None], c_b[None])

    def _combine(self, sl: slice, n_b: Tensor, mx_b: Tensor, my_b: Tensor | None, c_b: Tensor) -> None:
        """Chan et al. (1979) for co-moments: C = C_a + C_b + (n_a n_b / n) dx dy^T."""
        n_a = self.count[sl]
        n = n_a + n_b
        weight = (n_b / n.clamp_min(1))[:, None]
        dx = mx_b - self.mean_x[sl]
        dy = dx if my_b is None else my_b - self.mean_y[sl]
        self.comoment[sl] += c_b + (n_a * n_b / n.clamp_min(1))[:, None, None] * dx[:, :, None] * dy[:, None, :]
        self.mean_x[sl] += dx * weight
        if my_b is not None:
            self.mean_y[sl] += dy * weight
        self.count[sl] = n

    def merge(self, other: RunningCovariance) -> RunningCovariance:
        """Fold another accumulator (another shard or group of rows) into this one, in place; returns self."""
        if other.channels != self.channels or other.cross != self.cross:
            raise ValueError("can only merge RunningCovariances with the same channels and cross setting")
        if other.comoment is None:
            self.n_nonfinite += other.n_nonfinite.to(self.n_nonfinite.device)
            return self
        self._allocate(other.comoment.shape[-1], other.comoment.device)
        dev = self.comoment.device
        self.n_nonfinite += other.n_nonfinite.to(dev)
        self._combine(slice(None), other.count.to(dev), other.mean_x.to(dev),
                      None if other.mean_y is None else other.mean_y.to(dev), other.comoment.to(dev))
        return self

    def copy(self) -> RunningCovariance:
        return RunningCovariance(self.channels, self.cross).load_state_dict(self.state_dict())

    def covariance(self, channel: int) -> Float[Tensor, "d d"]:
        """Sample covariance (ddof=1) of one channel; NaN below two rows or before any update."""
        if self.comoment is None or self.count[channel] < 2:
            d = 1 if self.comoment is None else self.comoment.shape[-1]
            return torch.full((d, d), math.nan, dtype=torch.float64)
        return self.comoment[channel] / (self.count[channel] - 1)

    def state_dict(self) -> dict[str, Any]:
        def cpu(t: Tensor | None) -> Tensor | None:
            return None if t is None else t.cpu().clone()
        return {"channels": self.channels, "cross": self.cross, "count": cpu(self.count),
                "n_nonfinite": cpu(self.n_nonfinite), "mean_x": cpu(self.mean_x), "mean_y": cpu(self.mean_y),
                "comoment": cpu(self.comoment)}

    def load_state_dict(self, state: dict) -> RunningCovariance:
        if int(state["channels"]) != self.channels or bool(state["cross"]) != self.cross:
            raise ValueError("state does not match this RunningCovariance's channels and cross setting")
        for name in ("count", "n_nonfinite", "mean_x", "mean_y", "comoment"):
            value = state[name]
            setattr(self, name, None if value is None else value.to(torch.float64).clone())
        return self

    @classmethod
    def from_state_dict(cls, state: dict) -> RunningCovariance:
        return cls(int(state["channels"]), bool(state["cross"])).load_state_dict(state)


class ClusteredMean:
    """Per-channel mean of values that come in clusters (the tokens of one sequence), with a cluster-robust
    standard error: tokens of one sequence are correlated, so RunningMoments' per-token sem is optimistic.

    Streams one (sum S_c, count n_c) pair per cluster and keeps, per channel, G (clusters with a value), the
    means of S and n and their centred co-moments (Chan et al.'s merge, float64): O(channels) state, merged
    exactly across shards. The mean is the token-weighted ratio sum S / sum n (the same number RunningMoments
    gives); its sem is the CR1 sandwich sqrt(G / (G - 1) * sum_c (S_c - mean * n_c)^2) / sum n (Cameron & Miller
    2015), with sum_c (S_c - mean * n_c)^2 = C_SS - 2 mean C_Sn + mean^2 C_nn exactly (mean = S-bar / n-bar); ci95
    is mean -+ t(0.975, G - 1) * sem. With one token per cluster it is the per-token sem.
    """

    def __init__(self, channels: int = 1):
        if channels < 1:
            raise ValueError(f"channels must be >= 1, got {channels}")
        self.channels = channels
        zeros = lambda: torch.zeros(channels, dtype=torch.float64)
        self.clusters, self.mean_s, self.mean_n, self.c_ss, self.c_sn, self.c_nn = (zeros() for _ in range(6))

    _FIELDS = ("clusters", "mean_s", "mean_n", "c_ss", "c_sn", "c_nn")

    def update(self, sums: Float[Tensor, " clusters"], counts: Float[Tensor, " clusters"], channel: int) -> None:
        """Add clusters to one channel: their value sums and value counts; clusters with count 0 are skipped."""
        sums, counts = sums.detach().to("cpu", torch.float64).reshape(-1), counts.detach().to("cpu", torch.float64).reshape(-1)
        keep = counts > 0
        sums, counts = sums[keep], counts[keep]
        g = float(sums.numel())
        if g == 0:
            return
        ms, mn = sums.mean(), counts.mean()
        ds, dn = sums - ms, counts - mn
        self._combine(slice(channel, channel + 1), torch.tensor([g], dtype=torch.float64), ms.reshape(1), mn.reshape(1),
                      (ds * ds).sum().reshape(1), (ds * dn).sum().reshape(1), (dn * dn).sum().reshape(1))

    def _combine(self, sl: slice, g_b: Tensor, ms_b: Tensor, mn_b: Tensor, css_b: Tensor, csn_b: Tensor,
                 cnn_b: Tensor) -> None:
        g_a = self.clusters[sl]
        g = g_a + g_b
        w = g_a * g_b / g.clamp_min(1)
        ds, dn = ms_b - self.mean_s[sl], mn_b - self.mean_n[sl]
        self.c_ss[sl] += css_b + ds * ds * w
        self.c_sn[sl] += csn_b + ds * dn * w
        self.c_nn[sl] += cnn_b + dn * dn * w
        self.mean_s[sl] += ds * g_b / g.clamp_min(1)
        self.mean_n[sl] += dn * g_b / g.clamp_min(1)
        self.clusters[sl] = g

    def merge(self, other: ClusteredMean) -> ClusteredMean:
        """Fold another accumulator (another shard of clusters) into this one, in place; returns self."""
        if other.channels != self.channels:
            raise ValueError(f"cannot merge ClusteredMean with {other.channels} channels into {self.channels}")
        self._combine(slice(None), *(getattr(other, f) for f in self._FIELDS))
        return self

    @property
    def mean(self) -> Float[Tensor, " channels"]:
        """sum S / sum n; NaN for a channel without values."""
        return torch.where(self.clusters > 0, self.mean_s / self.mean_n.clamp_min(1e-300),
                           torch.full_like(self.mean_s, math.nan))

    @property
    def sem(self) -> Float[Tensor, " channels"]:
        """CR1 cluster-robust standard error of the mean; NaN below two clusters."""
        m = self.mean
        resid = (self.c_ss - 2 * m * self.c_sn + m * m * self.c_nn).clamp_min(0)
        g = self.clusters
        sem = torch.sqrt(g / (g - 1).clamp_min(1) * resid) / (g * self.mean_n).clamp_min(1e-300)
        return torch.where(g > 1, sem, torch.full_like(sem, math.nan))

    def ci95(self) -> tuple[Float[Tensor, " channels"], Float[Tensor, " channels"]]:
        """(low, high) = mean -+ t(0.975, G - 1) * sem, per channel; NaN below two clusters."""
        t = torch.tensor([t_quantile(0.975, g - 1) if g > 1 else math.nan for g in self.clusters.tolist()],
                         dtype=torch.float64)
        half = t * self.sem
        return self.mean - half, self.mean + half

    def state_dict(self) -> dict[str, Any]:
        return {"channels": self.channels, **{f: getattr(self, f).clone() for f in self._FIELDS}}

    def load_state_dict(self, state: dict) -> ClusteredMean:
        if int(state["channels"]) != self.channels:
            raise ValueError(f"state has {state['channels']} channels, this ClusteredMean has {self.channels}")
        for f in self._FIELDS:
            setattr(self, f, state[f].to(torch.float64).clone())
        return self


# --------------------------------------------------------------------------------------------------
# Correlation of a per-layer curve with depth (numpy / pandas only)
# --------------------------------------------------------------------------------------------------

def pearson_r(x: ArrayLike, y: ArrayLike) -> float:
    """Pearson correlation; NaN for fewer than 2 points or a constant input (undefined, not 0)."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"pearson_r: x and y differ in length ({a.size} vs {b.size})")
    if a.size < 2:
        return float("nan")
    dx, dy = a - a.mean(), b - b.mean()
    denom = np.sqrt((dx * dx).sum() * (dy * dy).sum())
    return float((dx * dy).sum() / denom) if denom > 0 else float("nan")


def rankdata(x: ArrayLike) -> np.ndarray:
    """1-based ranks with ties given their average rank (scipy.stats.rankdata's default)."""
    v = np.asarray(x, dtype=float)
    order = np.argsort(v, kind="mergesort")
    ranks = np.empty(v.size)
    ranks[order] = np.arange(1, v.size + 1)
    for value in np.unique(v):  # average the ranks of tied values
        tied = v == value
        if tied.sum() > 1:
            ranks[tied] = ranks[tied].mean()
    return ranks


def spearman_r(x: ArrayLike, y: ArrayLike) -> float:
    """Spearman rank correlation: the Pearson r of the (tie-averaged) ranks."""
    return pearson_r(rankdata(x), rankdata(y))


def depth_correlations(df: pd.DataFrame, series: str = "model", metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per (series, variant, metric): Pearson and Spearman r of the per-layer mean with the layer
    index (the same r as with normalised depth), plus a few numbers that say what the curve does:
    the mean over the first and second half of the layers, and the layer of the minimum and maximum."""
    missing = [c for c in (series, "layer", "metric", "mean") if c not in df.columns]
    if missing:
        raise ValueError(f"depth_correlations: the table lacks columns {missing}")
    df = with_variant(df)
    if metrics is not None:
        df = df[df["metric"].isin(metrics)]
    import pandas as pd

    rows = []
    for (name, variant, metric), g in df.groupby([series, "variant", "metric"], sort=False):
        g = g.sort_values("layer")
        layer, mean = g["layer"].to_numpy(), g["mean"].to_numpy()
        half = len(g) // 2
        rows.append({series: name, "variant": variant, "metric": metric, "n_layers": len(g),
                     "pearson_r": pearson_r(layer, mean), "spearman_r": spearman_r(layer, mean),
                     "mean_first_half": float(mean[:half].mean()) if half else float("nan"),
                     "mean_second_half": float(mean[half:].mean()),
                     "min": float(mean.min()), "argmin_layer": int(layer[mean.argmin()]),
                     "max": float(mean.max()), "argmax_layer": int(layer[mean.argmax()])})
    return pd.DataFrame(rows)


def with_variant(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with a string column `variant` (DEFAULT_VARIANT where absent): e.g. "no_massive_dims" rows."""
    if "variant" in df.columns:
        return df.assign(variant=df["variant"].fillna(DEFAULT_VARIANT).astype(str))
    return df.assign(variant=DEFAULT_VARIANT)


def bootstrap_spearman(x: np.ndarray, y: np.ndarray, n_boot: int = 2000, confidence: float = 0.95,
                       seed: int = 0) -> tuple[float, float, float]:
    """(rho, ci_low, ci_high): Spearman correlation across points (layers) of two curves that are means over
    units (sequences), with a percentile bootstrap over the units.

    x, y: [n_units, n_points] per-unit values, paired (row i of both comes from the same unit). rho is the
    Spearman r of the column means; each of the n_boot draws resamples the units with replacement
    (np.random.default_rng(seed).integers(0, n_units, (n_boot, n_units)), the SAME rows for x and y), takes
    the column means again and their Spearman r. The CI is the (1 -+ confidence) / 2 percentiles (numpy's
    linear interpolation) of the finite draws (a draw whose curve is constant has no rank correlation);
    NaN bounds with fewer than 2 units or no finite draw.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.ndim != 2 or x.shape != y.shape:
        raise ValueError(f"bootstrap_spearman: x and y must be [n_units, n_points] of one shape, got "
                         f"{x.shape} and {y.shape}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"bootstrap_spearman: confidence must be in (0, 1), got {confidence}")
    rho = spearman_r(x.mean(0), y.mean(0))
    n_units = x.shape[0]
    if n_units < 2 or n_boot < 1:
        return rho, math.nan, math.nan
    idx = np.random.default_rng(seed).integers(0, n_units, (n_boot, n_units))
    draws = np.array([spearman_r(x[i].mean(0), y[i].mean(0)) for i in idx])
    draws = draws[np.isfinite(draws)]
    if draws.size == 0:
        return rho, math.nan, math.nan
    low, high = np.percentile(draws, [100 * (1 - confidence) / 2, 100 * (1 + confidence) / 2])
    return rho, float(low), float(high)
