"""backend="torch": plain forward (pre-)hooks on the modules a SiteMap names (HF models), or on the
HookPoints of a HookedRootModule (our TaperedLM). Nothing is cached; the last layer's hook stops the forward."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from torch import Tensor

from interp._util.devices import model_device
from interp.hf import unflatten_tokens
from interp.probes.backends.base import Backend, Plan, _drive, _first, _Gate, _StopForward, _Target
from interp.probes.backends.targets import module_plan
from interp.probes.model_kinds import _is_hooked_root


class TorchHooks(Backend):
    name = "torch"

    def plan(self, model: Any, mlp_in: bool = False) -> Plan:
        return module_plan(self, model, mlp_in)

    def run(self, target: _Target, batches: Iterable, acc: Any, positions: str) -> None:
        _run_torch(target, batches, acc, positions)


def _run_torch(target: _Target, batches: Iterable, acc: Any, positions: str) -> None:
    """Plain nn.Module hooks: pre-hooks read inputs, forward hooks read outputs; nothing is cached."""
    last = (target.n_layers - 1, "resid_post")
    handles = []
    gate = _Gate()
    batch_pos = [(0, 0)]  # the running batch's (batch, pos): OPT's MLP side hands its hooks [batch * pos, d]

    def reader(layer: int, site: str, kind: str) -> Callable:
        def read(x: Tensor) -> None:
            if not gate.open:
                return
            acc.feed(layer, site, unflatten_tokens(x, batch_pos[0]))
            if (layer, site) == last:
                raise _StopForward
        if kind == "input":  # pre-hook with kwargs: hidden state is the first positional argument
            return lambda module, args, kwargs: read(args[0] if args else kwargs.get("hidden_states",
                                                                                     next(iter(kwargs.values()))))
        return lambda module, args, output: read(_first(output))

    try:
        for layer, layer_sites in enumerate(target.sites):
            for s in layer_sites:
                module = target.root.get_submodule(s.module)
                fn = reader(layer, s.site, s.kind)
                handles.append(module.register_forward_pre_hook(fn, with_kwargs=True) if s.kind == "input"
                               else module.register_forward_hook(fn))
        pass_mask = not _is_hooked_root(target.root)

        def forward(ids: Tensor, attn: Tensor | None) -> Any:
            batch_pos[0] = (ids.shape[0], ids.shape[1])
            return target.root(ids, **({"attention_mask": attn} if pass_mask and attn is not None else {}))

        _drive(batches, acc, positions, model_device(target.root), forward, gate)
    finally:
        for h in handles:
            h.remove()

