"""Metric math: [batch, pos, d_model] operands -> [batch, pos] values, one Metric per name.

Per layer l and per token (TransformerLens names; h_l = blocks.l.hook_resid_pre):
  rho_mlp         = cos(hook_mlp_out, hook_resid_pre)                    the paper's rho_MLP
  rho_mlp_mid     = cos(hook_mlp_out, hook_resid_mid)                    vs the stream the MLP actually reads
  rho_block       = cos(hook_resid_post - hook_resid_pre, hook_resid_pre)  the paper's rho_block
  rho_attn        = cos(hook_attn_out, hook_resid_pre)
  norm_ratio      = |hook_mlp_out| / |hook_resid_pre|
  block_influence = 1 - cos(hook_resid_pre, hook_resid_post)             ShortGPT's Block Influence
Opt-in (not in METRIC_NAMES, so default tables are unchanged):
  rho_mlp_normed     = cos(hook_mlp_out, mlp.hook_in)   vs the NORMALISED input the MLP actually reads
                       (RMSNorm(resid_mid) with its gain; reference="normed" adds it)
  norm_ratio_attn    = |hook_attn_out| / |hook_resid_pre|
  norm_ratio_mlp_mid = |hook_mlp_out| / |hook_resid_mid|
  resid_growth       = |hook_resid_post| / |hook_resid_pre|
  angular_distance   = arccos(cos(hook_resid_pre, hook_resid_post)) / pi   (Gromov et al. 2024), in [0, 1]
  logit_lens_kl, logit_lens_top1: interp.probes.lens (LayerOperands.lens holds the batch's reference)
The population metrics (mlp_erank, mlp_participation, cka_resid) have no per-token value: interp.probes.population.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from jaxtyping import Float
from torch import Tensor

from interp._util.dtypes import torch_dtype
from interp.probes.names import DEFAULT_EPS, DTYPE_NAMES, PER_TOKEN_METRICS
from interp.stats import RunningHistogram

COMPUTE_DTYPES = {name: torch_dtype(name) for name in DTYPE_NAMES}  # "float32" -> torch.float32


def cosine(a: Float[Tensor, "*tok d"], b: Float[Tensor, "*tok d"], eps: float = DEFAULT_EPS) -> Float[Tensor, "*tok"]:
    """a.b / max(|a||b|, eps): a zero vector gives 0, not NaN (NaN/inf inputs still give NaN)."""
    return _dot(a, b) / (_norm(a) * _norm(b)).clamp_min(eps)


def _dot(a: Tensor, b: Tensor) -> Tensor:
    return torch.einsum("...d,...d->...", a, b)  # a batched matmul: ~2x faster than (a * b).sum(-1) on CPU


def _norm(a: Tensor) -> Tensor:
    return torch.linalg.vector_norm(a, dim=-1)


def derived_operands(derive_attn_out: bool = False, derive_resid_mid: bool = False) -> set[str]:
    """The operands a layer computes from others rather than reads from a hook (LayerOperands.DERIVED)."""
    return {"block_out"} | ({"attn_out"} if derive_attn_out else set()) | ({"resid_mid"} if derive_resid_mid else set())


class LayerOperands:
    """The activations of one layer seen so far, with each site's norm computed once and kept after the
    activation itself is dropped (a [batch, pos] tensor), since 4 of the 6 metrics share |resid_pre|.

    Derived operands: block_out = resid_post - resid_pre (the block's update, computed explicitly:
    via dot products it would cancel catastrophically where the update is small), and, with
    derive_attn_out, attn_out = resid_mid - resid_pre (sequential blocks hooked by module), or, with
    derive_resid_mid, resid_mid = resid_pre + attn_out (parallel blocks, where no module sees it).
    """

    # derived operand -> (a, b, sign): a + sign * b
    DERIVED: ClassVar[dict[str, tuple[str, str, int]]] = {"block_out": ("resid_post", "resid_pre", -1), "attn_out": ("resid_mid", "resid_pre", -1),
               "resid_mid": ("resid_pre", "attn_out", 1)}

    def __init__(self, eps: float, derive_attn_out: bool, lens: Any = None, derive_resid_mid: bool = False):
        if derive_attn_out and derive_resid_mid:
            raise ValueError("derive attn_out from resid_mid, or resid_mid from attn_out, not both")
        self.eps = eps
        self.tensors: dict[str, Tensor] = {}
        self.norms: dict[str, Tensor] = {}
        self.cosines: dict[tuple[str, str], Tensor] = {}
        self.derivable = derived_operands(derive_attn_out, derive_resid_mid)
        self.lens = lens  # an interp.probes.lens.LogitLens with this batch's reference, or None
        self._lens_values: tuple[Tensor, Tensor] | None = None

    @classmethod
    def sources(cls, site: str) -> tuple[str, str]:
        """The two sites a derived operand is computed from."""
        return cls.DERIVED[site][:2]

    def has(self, site: str) -> bool:
        if site in self.tensors:
            return True
        return site in self.derivable and all(s in self.tensors for s in self.sources(site))

    def __getitem__(self, site: str) -> Tensor:
        if site not in self.tensors:  # derived on first use, then kept like any site
            a, b, sign = self.DERIVED[site]
            self.tensors[site] = self.tensors[a] + self.tensors[b] if sign > 0 else self.tensors[a] - self.tensors[b]
        return self.tensors[site]

    def norm(self, site: str) -> Float[Tensor, "batch pos"]:
        if site not in self.norms:
            self.norms[site] = _norm(self[site])
        return self.norms[site]

    def cos(self, a: str, b: str) -> Float[Tensor, "batch pos"]:
        if (a, b) not in self.cosines:  # block_influence and angular_distance share cos(resid_pre, resid_post)
            self.cosines[(a, b)] = _dot(self[a], self[b]) / (self.norm(a) * self.norm(b)).clamp_min(self.eps)
        return self.cosines[(a, b)]

    def ratio(self, a: str, b: str) -> Float[Tensor, "batch pos"]:
        return self.norm(a) / self.norm(b).clamp_min(self.eps)

    def lens_values(self) -> tuple[Float[Tensor, "batch pos"], Float[Tensor, "batch pos"]]:
        """(logit_lens_kl, logit_lens_top1) of this layer's resid_post, computed once for both."""
        if self.lens is None:
            raise RuntimeError("a logit-lens metric without a LogitLens: build the accumulator with lens=")
        if self._lens_values is None:
            self._lens_values = self.lens.values(self["resid_post"])
        return self._lens_values

    def drop_except(self, keep: set[str]) -> None:
        """Free activations no pending metric needs (a derived operand keeps its sources alive)."""
        keep = keep | {src for d in keep if d in self.derivable and d not in self.tensors for src in self.sources(d)}
        for site in [s for s in self.tensors if s not in keep]:
            del self.tensors[site]


def _linear_bins(lo: float, hi: float, bins: int = 201) -> Callable[[int], RunningHistogram]:
    return lambda channels: RunningHistogram(channels, lo=lo, hi=hi, bins=bins)


def _indicator_bins(channels: int) -> RunningHistogram:
    """0/1 values: two bins of width 1e-9 at 0 and at 1, so every quantile reads 0 or 1."""
    return RunningHistogram(channels, edges=[0.0, 1e-9, 1.0, 1.0 + 1e-9])


def _angle(cos: Tensor) -> Tensor:
    return torch.arccos(cos.clamp(-1.0, 1.0)) / math.pi


def _geometric_bins(lo: float = 1e-3, hi: float = 1e3, bins: int = 600) -> Callable[[int], RunningHistogram]:
    edges = torch.logspace(torch.log10(torch.tensor(lo)).item(), torch.log10(torch.tensor(hi)).item(), bins + 1,
                           dtype=torch.float64)
    return lambda channels: RunningHistogram(channels, edges=edges)


@dataclass(frozen=True)
class Metric:
    """A per-token quantity of one layer; `operands` are the sites (or derived operands) it reads,
    `formula` names the exact hooks (with {l})."""

    name: str
    operands: tuple[str, ...]
    fn: Callable[[LayerOperands], Float[Tensor, "batch pos"]]
    formula: str
    histogram: Callable[[int], RunningHistogram]

    def reference(self, layer: int, lens: str = "p_l = softmax(W_U final_norm(h))") -> str:
        return self.formula.format(l=layer, lens=lens)


_DEFINITIONS = {m.name: m for m in (
    Metric("rho_mlp", ("mlp_out", "resid_pre"), lambda o: o.cos("mlp_out", "resid_pre"),
           "cos(blocks.{l}.hook_mlp_out, blocks.{l}.hook_resid_pre)", _linear_bins(-1, 1)),
    Metric("rho_mlp_mid", ("mlp_out", "resid_mid"), lambda o: o.cos("mlp_out", "resid_mid"),
           "cos(blocks.{l}.hook_mlp_out, blocks.{l}.hook_resid_mid)", _linear_bins(-1, 1)),
    Metric("rho_block", ("block_out", "resid_pre"), lambda o: o.cos("block_out", "resid_pre"),
           "cos(blocks.{l}.hook_resid_post - blocks.{l}.hook_resid_pre, blocks.{l}.hook_resid_pre)",
           _linear_bins(-1, 1)),
    Metric("rho_attn", ("attn_out", "resid_pre"), lambda o: o.cos("attn_out", "resid_pre"),
           "cos(blocks.{l}.hook_attn_out, blocks.{l}.hook_resid_pre)", _linear_bins(-1, 1)),
    Metric("norm_ratio", ("mlp_out", "resid_pre"), lambda o: o.norm("mlp_out") / o.norm("resid_pre").clamp_min(o.eps),
           "|blocks.{l}.hook_mlp_out| / |blocks.{l}.hook_resid_pre|", _geometric_bins()),
    Metric("block_influence", ("resid_pre", "resid_post"), lambda o: 1.0 - o.cos("resid_pre", "resid_post"),
           "1 - cos(blocks.{l}.hook_resid_pre, blocks.{l}.hook_resid_post)", _linear_bins(0, 2)),
    Metric("rho_mlp_normed", ("mlp_out", "mlp_in"), lambda o: o.cos("mlp_out", "mlp_in"),
           "cos(blocks.{l}.hook_mlp_out, blocks.{l}.mlp.hook_in)", _linear_bins(-1, 1)),
    Metric("norm_ratio_attn", ("attn_out", "resid_pre"), lambda o: o.ratio("attn_out", "resid_pre"),
           "|blocks.{l}.hook_attn_out| / |blocks.{l}.hook_resid_pre|", _geometric_bins()),
    Metric("norm_ratio_mlp_mid", ("mlp_out", "resid_mid"), lambda o: o.ratio("mlp_out", "resid_mid"),
           "|blocks.{l}.hook_mlp_out| / |blocks.{l}.hook_resid_mid|", _geometric_bins()),
    Metric("resid_growth", ("resid_post", "resid_pre"), lambda o: o.ratio("resid_post", "resid_pre"),
           "|blocks.{l}.hook_resid_post| / |blocks.{l}.hook_resid_pre|", _geometric_bins()),
    Metric("angular_distance", ("resid_pre", "resid_post"), lambda o: _angle(o.cos("resid_pre", "resid_post")),
           "arccos(cos(blocks.{l}.hook_resid_pre, blocks.{l}.hook_resid_post)) / pi", _linear_bins(0, 1)),
    Metric("logit_lens_kl", ("resid_post",), lambda o: o.lens_values()[0],
           "KL(p_L || p_l) nats, {lens} of h = blocks.{l}.hook_resid_post, p_L = the model's output",
           _geometric_bins(1e-6, 1e2, 800)),
    Metric("logit_lens_top1", ("resid_post",), lambda o: o.lens_values()[1],
           "[argmax p_l == argmax p_L], {lens} of h = blocks.{l}.hook_resid_post, p_L = the model's output",
           _indicator_bins),
)}
# In the order interp.probes.names declares (a name without a definition fails here, at import)
METRICS: dict[str, Metric] = {name: _DEFINITIONS[name] for name in PER_TOKEN_METRICS}
