"""The backend interface: what a backend hooks (a Plan) and how it streams batches into an accumulator.

    plan = backend.plan(model, mlp_in)          # where each site lives, and the table's metadata
    plan.run(batches, acc, positions)           # eval mode, no_grad; hooks feed acc layer by layer

Every backend feeds the same NoveltyAccumulator, so they agree to float rounding. An accumulator here is
anything with needed_sites / begin_batch / feed / end_batch (the massive-dimension scan passes its own);
the nnsight backend reduces inside its trace through acc.values / acc.add_values instead.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from interp.probes.text import position_mask


class _StopForward(Exception):
    """Raised from the last layer's resid_post hook: nothing after it (final norm, unembedding) is needed."""


@dataclass(frozen=True)
class _Site:
    """Where a site lives: `module` (dotted path from the hooked root) and whether it is its input or output."""

    site: str
    module: str
    kind: str  # "input" | "output"

    def describe(self) -> str:
        return f"{self.module} {self.kind}"


@dataclass
class _Target:
    """What a module-hook backend hooks: the root module, the per-layer sites in forward order, and metadata
    for the table."""

    root: nn.Module
    n_layers: int
    sites: list[list[_Site]]
    derive_attn_out: bool
    mlp_out_site: str
    hook_sites: str                          # one line: site -> where it came from
    wrapper: Any = None                      # an nnsight wrapper built from the source object, if any
    derive_resid_mid: bool = False           # a parallel block: resid_mid = resid_pre + attn_out


class Backend(ABC):
    """One way to read a model's activations (torch hooks, TransformerLens, nnsight, HookPoints)."""

    name: ClassVar[str]

    @abstractmethod
    def plan(self, model: Any, mlp_in: bool = False) -> Plan:
        """What to hook on `model`; mlp_in: also the MLP's input (for rho_mlp_normed). ValueError/TypeError
        naming the fix when this backend cannot hook this kind of model."""

    @abstractmethod
    def run(self, target: Any, batches: Iterable, acc: Any, positions: str) -> None:
        """Stream `batches` through `target` (a Plan's target), feeding `acc`; the caller sets eval/no_grad."""

    def scan(self, target: Any, batches: Iterable, sink: Any, positions: str) -> None:
        """Like run, for a sink that only takes feed() (the massive-dimension scan)."""
        self.run(target, batches, sink, positions)


@dataclass
class Plan:
    """A backend bound to one model: the target it hooks and the columns it gives the table."""

    backend: Backend
    target: Any            # a _Target (module hooks) or the hooked model itself (run_with_hooks)
    derive_attn_out: bool  # attn_out = resid_mid - resid_pre (no attention-output site)
    mlp_out_site: str
    hook_sites: str
    n_layers: int
    derive_resid_mid: bool = False  # resid_mid = resid_pre + attn_out (a parallel block has no resid_mid site)

    @property
    def root(self) -> nn.Module:
        return self.target.root if isinstance(self.target, _Target) else self.target

    def run(self, batches: Iterable, acc: Any, positions: str) -> None:
        """backend.run in eval mode under no_grad, restoring the model's training flag."""
        self._eval(self.backend.run, batches, acc, positions)

    def scan(self, batches: Iterable, sink: Any, positions: str) -> None:
        self._eval(self.backend.scan, batches, sink, positions)

    def _eval(self, runner: Callable[..., None], batches: Iterable, acc: Any, positions: str) -> None:
        root = self.root
        was_training = root.training
        root.eval()
        try:
            with torch.no_grad():
                runner(self.target, batches, acc, positions)
        finally:
            root.train(was_training)


def _first(x: Any) -> Tensor:
    """A module's output may be a tensor or a tuple whose first element is the hidden state."""
    return x[0] if isinstance(x, tuple | list) else x


def _batch_parts(batch: Tensor | dict) -> tuple[Tensor, Tensor | None]:
    if isinstance(batch, dict):
        return batch["input_ids"], batch.get("attention_mask")
    return batch, None


class _Gate:
    """Whether a backend's hooks feed the accumulator: shut while the logit lens' reference forward runs
    through the same (hooked) modules, so it neither feeds twice nor stops at the last layer."""

    def __init__(self) -> None:
        self.open = True


def _reference(acc: Any, ids: Tensor, attn: Tensor | None, gate: _Gate | None = None) -> None:
    """acc.prepare(ids, attn) (a plain forward for the logit lens) when the accumulator asks for it."""
    if not getattr(acc, "needs_reference", False):
        return
    if gate is not None:
        gate.open = False
    try:
        acc.prepare(ids, attn)
    finally:
        if gate is not None:
            gate.open = True


def _drive(batches: Iterable, acc: Any, positions: str, device: torch.device,
           forward: Callable[[Tensor, Tensor | None], Any], gate: _Gate | None = None) -> None:
    """The batch loop every hook backend shares: mask positions, [the lens' reference forward, hooks shut
    by `gate`], run the forward (whose hooks feed `acc` and stop it after the last layer), close the batch."""
    for batch in batches:
        ids, attn = _batch_parts(batch)
        ids = ids.to(device)
        attn = attn.to(device) if attn is not None else None
        acc.begin_batch(position_mask(ids, positions, attn))
        _reference(acc, ids, attn, gate)
        try:
            forward(ids, attn)
        except _StopForward:
            pass
        acc.end_batch()

