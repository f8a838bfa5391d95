"""backend="nnsight": one trace per batch; the accumulator is fed inside the trace on the real tensors and
reduces them there, so only its statistics outlive a layer. Sites are the module-hook ones (targets.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from interp._util.devices import model_device
from interp.hf import unflatten_tokens
from interp.probes.backends.base import Backend, Plan, _batch_parts, _first, _reference, _Target
from interp.probes.backends.targets import module_plan
from interp.probes.backends.torch_hooks import _run_torch
from interp.probes.model_kinds import _is_hooked_root
from interp.probes.text import position_mask


class Nnsight(Backend):
    name = "nnsight"

    def plan(self, model: Any, mlp_in: bool = False) -> Plan:
        from interp import hf as pretrained

        plan = module_plan(self, model, mlp_in)
        if not _is_hooked_root(model) and isinstance(model, pretrained.LoadedModel):
            plan.target.wrapper = pretrained.to_nnsight(model)
        return plan

    def run(self, target: _Target, batches: Iterable, acc: Any, positions: str) -> None:
        _run_nnsight(target, batches, acc, positions)

    def scan(self, target: _Target, batches: Iterable, sink: Any, positions: str) -> None:
        """Plain torch hooks on the same modules: they read the same tensors (the backends agree to 1e-5,
        see tests), and a feed-only sink needs no trace."""
        _run_torch(target, batches, sink, positions)


def _run_nnsight(target: _Target, batches: Iterable, acc: Any, positions: str) -> None:
    """One trace per batch; the accumulator is fed inside the trace on the real tensors, as the hook
    backends feed it, so nothing the size of an activation is saved out of it. Sites are touched in
    forward order (nnsight 0.8 requires it). The logit lens' reference forward runs before the trace."""
    import nnsight

    lm = target.wrapper if target.wrapper is not None else nnsight.NNsight(target.root)
    device = model_device(target.root)
    for batch in batches:
        ids, attn = _batch_parts(batch)
        ids = ids.to(device)
        attn = attn.to(device) if attn is not None else None
        acc.begin_batch(position_mask(ids, positions, attn))
        _reference(acc, ids, attn)
        kwargs = {} if attn is None or _is_hooked_root(target.root) else {"attention_mask": attn}
        with torch.no_grad(), lm.trace(ids, **kwargs) as tracer:
            for layer, layer_sites in enumerate(target.sites):
                for s in layer_sites:
                    envoy = _envoy(lm, s.module)
                    x = envoy.input if s.kind == "input" else _first(envoy.output)
                    acc.feed(layer, s.site, unflatten_tokens(x, (ids.shape[0], ids.shape[1])))  # OPT: [b * p, d]
            tracer.stop()  # nothing after the last layer is needed
        acc.end_batch()


def _envoy(lm: Any, dotted: str) -> Any:
    """lm.a.b[3].c for dotted = "a.b.3.c" (nnsight envoys mirror the module tree)."""
    obj = lm
    for part in dotted.split("."):
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    return obj

