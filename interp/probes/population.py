"""Population measures: statistics of ALL counted tokens of a layer at once, which have no per-token value,
streamed through d_model x d_model covariances (interp.stats.RunningCovariance: float64, mergeable).

Per layer l (h_l = blocks.l.hook_resid_pre, m_l = blocks.l.hook_mlp_out, h_{l+1} = blocks.l.hook_resid_post):
  mlp_erank          exp(H(s / sum s)), s = the singular values of m_l centred over tokens (Roy & Vetterli 2007),
                     read from cov(m_l): s_i is proportional to sqrt(lambda_i), its eigenvalues
  mlp_participation  (sum lambda)^2 / sum lambda^2 of the same eigenvalues (the participation ratio)
  cka_resid          linear CKA(h_l, h_{l+1}) = |C_xy|_F^2 / (|C_xx|_F |C_yy|_F), C = co-moments of the
                     token-centred streams (Kornblith et al. 2019)
Eigenvalues below lambda_max * d * 2.2e-16 are taken as 0 (below float64 resolution; a rank-deficient
covariance, e.g. fewer tokens than d_model, would otherwise add rounding noise to the entropy).

CI: a delete-a-group jackknife. Sequence s (in the order fed) belongs to group s mod G (G = JACKKNIFE_GROUPS
unless given); a row's mean is the full-data value, its sem sqrt((G'-1)/G' * sum_g (theta_-g - mean)^2) over
the G' non-empty groups, its CI mean -+ t(0.975, G'-1) * sem; std and quantiles are NaN (no per-token
values), and so are sem and the CI with fewer than two non-empty groups.

Memory: G x (L for the MLP spectrum + 2L + 1 for CKA) float64 d x d matrices, whatever the number of
tokens. CKA reads cov(h_{l+1}) from the next layer's resid_pre (the last layer's from its resid_post): the
same tensor as layer l's resid_post on every supported architecture, so it is stored once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from interp.probes.names import JACKKNIFE_GROUPS, POPULATION_METRICS
from interp.stats import RunningCovariance, t_quantile

OPERANDS = {"mlp_erank": ("mlp_out",), "mlp_participation": ("mlp_out",), "cka_resid": ("resid_pre", "resid_post")}
FORMULAS = {
    "mlp_erank": "exp(entropy of the normalised singular values of blocks.{l}.hook_mlp_out, centred over tokens)",
    "mlp_participation": "(sum lambda)^2 / sum lambda^2, lambda = eigenvalues of cov(blocks.{l}.hook_mlp_out) "
                         "over tokens",
    "cka_resid": "linear CKA(blocks.{l}.hook_resid_pre, blocks.{l}.hook_resid_post) over tokens",
}
_RELATIVE_EIG_FLOOR = 2.220446049250313e-16  # float64 machine epsilon


def _spectrum(cov: Float[Tensor, "d d"]) -> Float[Tensor, " d"]:
    """Eigenvalues of a symmetric covariance, those below float64 resolution set to 0."""
    lam = torch.linalg.eigvalsh((cov + cov.T) / 2).clamp_min(0)
    return torch.where(lam > lam.max() * cov.shape[0] * _RELATIVE_EIG_FLOOR, lam, torch.zeros_like(lam))


def effective_rank(lam: Float[Tensor, " d"]) -> float:
    """exp of the entropy of sqrt(lam) / sum sqrt(lam) (singular values from covariance eigenvalues)."""
    s = lam.sqrt()
    if not bool(s.sum() > 0):
        return math.nan
    p = s[s > 0] / s.sum()
    return math.exp(-(p * p.log()).sum().item())


def participation_ratio(lam: Float[Tensor, " d"]) -> float:
    denominator = (lam ** 2).sum()
    return ((lam.sum() ** 2) / denominator).item() if bool(denominator > 0) else math.nan


def linear_cka(c_xy: Tensor, c_xx: Tensor, c_yy: Tensor) -> float:
    """|C_xy|_F^2 / (|C_xx|_F |C_yy|_F) from co-moments (or covariances: the scale cancels)."""
    denominator = torch.linalg.matrix_norm(c_xx) * torch.linalg.matrix_norm(c_yy)
    return (torch.linalg.matrix_norm(c_xy) ** 2 / denominator).item() if bool(denominator > 0) else math.nan


class PopulationStats:
    """The covariance banks behind the population metrics, one set per jackknife group, fed by the
    NoveltyAccumulator layer by layer (duck-typed LayerOperands: has(site), ops[site])."""

    def __init__(self, n_layers: int, metrics: Sequence[str], groups: int = JACKKNIFE_GROUPS):
        unknown = [m for m in metrics if m not in POPULATION_METRICS]
        if unknown or not metrics:
            raise ValueError(f"population metrics={list(metrics)}: choose from {POPULATION_METRICS}")
        if groups < 1:
            raise ValueError(f"jackknife groups={groups}: need >= 1 (1 = no CI)")
        self.n_layers, self.metrics, self.groups = n_layers, tuple(metrics), groups
        self.spectral = bool({"mlp_erank", "mlp_participation"} & set(self.metrics))
        self.cka = "cka_resid" in self.metrics
        self.banks = [self._new_bank() for _ in range(groups)]
        self.n_sequences = 0
        self._mask: Tensor | None = None
        self._done: set[tuple[int, str]] = set()

    def _new_bank(self) -> dict[str, RunningCovariance]:
        bank = {}
        if self.spectral:
            bank["mlp"] = RunningCovariance(self.n_layers)
        if self.cka:
            bank["stream"] = RunningCovariance(self.n_layers + 1)      # h_0 .. h_L
            bank["cross"] = RunningCovariance(self.n_layers, cross=True)  # (h_l, h_{l+1})
        return bank

    def _items(self, layer: int) -> list[tuple[str, tuple[str, ...]]]:
        """(what to update, the sites it reads) for one layer."""
        items = [("mlp", ("mlp_out",))] if self.spectral else []
        if self.cka:
            items += [("stream", ("resid_pre",)), ("cross", ("resid_pre", "resid_post"))]
            if layer == self.n_layers - 1:
                items.append(("stream_end", ("resid_post",)))
        return items

    @property
    def sites(self) -> set[str]:
        return {s for m in self.metrics for s in OPERANDS[m]}

    # -- per batch ------------------------------------------------------------------------------
    def begin_batch(self, mask: Bool[Tensor, "batch pos"] | None) -> None:
        self._mask = mask
        self._done.clear()

    def feed(self, layer: int, ops: Any) -> None:
        """Update every item of `layer` whose sites have all arrived and that is not done this batch."""
        for item, sites in self._items(layer):
            if (layer, item) in self._done or not all(ops.has(s) for s in sites):
                continue
            xs = [ops[s] for s in sites]
            for group, rows in self._row_groups(xs[0]):
                bank = self.banks[group]
                if item == "cross":
                    bank["cross"].update(rows(xs[0]), rows(xs[1]), channel=layer)
                else:
                    key, channel = ("stream", self.n_layers) if item == "stream_end" else (item, layer)
                    bank[key].update(rows(xs[0]), channel=channel)
            self._done.add((layer, item))

    def _row_groups(self, x: Float[Tensor, "batch pos d"]) -> list[tuple[int, Any]]:
        """(group, selector) per group present in this batch: selector(x) = its counted tokens, [n, d]."""
        b = x.shape[0]
        out = []
        for group in range(self.groups):
            rows = [r for r in range(b) if (self.n_sequences + r) % self.groups == group]
            if rows:
                idx = torch.tensor(rows, device=x.device)
                mask = None if self._mask is None else self._mask[idx]
                out.append((group, lambda t, idx=idx, mask=mask: (t[idx][mask] if mask is not None
                                                                  else t[idx].reshape(-1, t.shape[-1]))))
        return out

    def pending(self, layer: int) -> set[str]:
        """Sites of `layer` that some item still waits for this batch."""
        return {s for item, sites in self._items(layer) if (layer, item) not in self._done for s in sites}

    def missing(self) -> list[tuple[int, str]]:
        return [(l, item) for l in range(self.n_layers) for item, _ in self._items(l) if (l, item) not in self._done]

    def end_batch(self, rows: int) -> None:
        self.n_sequences += rows
        self._mask = None
        self._done.clear()

    # -- estimates ------------------------------------------------------------------------------
    def _merged(self, groups: Sequence[int]) -> dict[str, RunningCovariance]:
        merged = self._new_bank()
        for g in groups:
            for key, cov in self.banks[g].items():
                merged[key].merge(cov)
        return merged

    def _estimates(self, bank: dict[str, RunningCovariance]) -> dict[str, list[float]]:
        """metric -> one value per layer, from one (merged) bank."""
        out: dict[str, list[float]] = {m: [] for m in self.metrics}
        for layer in range(self.n_layers):
            if self.spectral:
                mlp = bank["mlp"]
                lam = _spectrum(mlp.covariance(layer)) if mlp.count[layer] >= 2 else None
                for metric, fn in (("mlp_erank", effective_rank), ("mlp_participation", participation_ratio)):
                    if metric in out:
                        out[metric].append(fn(lam) if lam is not None else math.nan)
            if self.cka:
                stream, cross = bank["stream"], bank["cross"]
                ok = cross.count[layer] >= 2 and stream.comoment is not None
                out["cka_resid"].append(linear_cka(cross.comoment[layer], stream.comoment[layer],
                                                   stream.comoment[layer + 1]) if ok else math.nan)
        return out

    def _counts(self, metric: str) -> tuple[Tensor, Tensor]:
        """(tokens counted, rows left out as non-finite) per layer, summed over groups."""
        key = "mlp" if metric != "cka_resid" else "cross"
        covs = [bank[key] for bank in self.banks]
        return sum(c.count.cpu() for c in covs), sum(c.n_nonfinite.cpu() for c in covs)

    def summary(self) -> dict[str, list[dict[str, float]]]:
        """metric -> per layer {mean, sem, ci_low, ci_high, n_tokens, n_sequences, n_nonfinite, ci_method}."""
        full = self._estimates(self._merged(range(self.groups)))
        filled = [g for g, bank in enumerate(self.banks) if any(bool(c.count.sum() > 0) for c in bank.values())]
        leave_out = [self._estimates(self._merged([h for h in filled if h != g])) for g in filled] if len(filled) > 1 else []
        k = len(filled)
        method = (f"jackknife: {k} groups of whole sequences, t({k - 1})" if k > 1
                  else "none: fewer than 2 jackknife groups of sequences (NaN CI)")
        half_t = t_quantile(0.975, k - 1) if k > 1 else math.nan
        out: dict[str, list[dict[str, float]]] = {}
        for metric in self.metrics:
            counts, nonfinite = self._counts(metric)
            rows = []
            for layer in range(self.n_layers):
                value = full[metric][layer]
                sem = math.nan
                if leave_out:
                    th = torch.tensor([lo[metric][layer] for lo in leave_out], dtype=torch.float64)
                    sem = math.sqrt((k - 1) / k * ((th - th.mean()) ** 2).sum().item())
                rows.append({"mean": value, "sem": sem, "ci_low": value - half_t * sem, "ci_high": value + half_t * sem,
                             "n_tokens": int(counts[layer].item()), "n_sequences": int(self.n_sequences),
                             "n_nonfinite": int(nonfinite[layer].item()), "ci_method": method})
            out[metric] = rows
        return out

    # -- persistence ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"metrics": list(self.metrics), "groups": self.groups, "n_sequences": self.n_sequences,
                "banks": [{k: c.state_dict() for k, c in bank.items()} for bank in self.banks]}

    def load_state_dict(self, state: dict[str, Any]) -> PopulationStats:
        if tuple(state["metrics"]) != self.metrics or int(state["groups"]) != self.groups:
            raise ValueError("population state does not match these metrics and jackknife groups")
        self.n_sequences = int(state["n_sequences"])
        for bank, saved in zip(self.banks, state["banks"], strict=True):
            for key, cov in bank.items():
                cov.load_state_dict(saved[key])
        return self

    def merge(self, other: PopulationStats) -> PopulationStats:
        """Fold another shard in, group by group (any assignment of whole sequences to groups is a valid
        jackknife)."""
        if other.metrics != self.metrics or other.groups != self.groups or other.n_layers != self.n_layers:
            raise ValueError("can only merge PopulationStats with the same layers, metrics and jackknife groups")
        for bank, theirs in zip(self.banks, other.banks, strict=True):
            for key, cov in bank.items():
                cov.merge(theirs[key])
        self.n_sequences += other.n_sequences
        return self
