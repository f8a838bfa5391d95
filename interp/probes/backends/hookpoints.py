"""backend="hookpoints": run_with_hooks on any HookedRootModule with TransformerLens names (our TaperedLM);
the transformer_lens backend runs the same loop on a TransformerBridge."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from interp._util.devices import model_device
from interp.probes.backends.base import Backend, Plan, _drive, _Gate, _StopForward
from interp.probes.backends.targets import _MLP_IN_HOOK, _MLP_IN_MODULE, _hooked_mlp_modules, _hooked_n_layers
from interp.probes.model_kinds import _is_bridge, _is_hooked_root, _require_hf_source
from interp.probes.names import SITES


class Hookpoints(Backend):
    name = "hookpoints"

    def plan(self, model: Any, mlp_in: bool = False) -> Plan:
        if not _is_hooked_root(model):
            _require_hf_source(model)
            raise ValueError("backend='hookpoints' needs a HookedRootModule (e.g. our TaperedLM); for an HF model "
                             "use backend='transformer_lens' (it builds a TransformerBridge) or 'torch'")
        return hooked_plan(self, model, mlp_in)

    def run(self, target: Any, batches: Iterable, acc: Any, positions: str) -> None:
        _run_hooked(target, batches, acc, positions)


def hooked_plan(backend: Backend, model: Any, mlp_in: bool = False) -> Plan:
    """The Plan of a run_with_hooks backend: the model itself, hooked by TransformerLens names."""
    tl_sites = "; ".join(f"{s}=blocks.{{l}}.hook_{s}" for s in SITES)
    if mlp_in:
        tl_sites += "; mlp_in=" + _MLP_IN_HOOK if _MLP_IN_HOOK.format(l=0) in model.hook_dict else "; " + _MLP_IN_MODULE
    return Plan(backend, model, False, "blocks.{l}.hook_mlp_out", tl_sites, _hooked_n_layers(model))


def _run_hooked(model: Any, batches: Iterable, acc: Any, positions: str) -> None:
    """run_with_hooks on TransformerLens names (TransformerBridge or any HookedRootModule)."""
    n = acc.n_layers

    def reader(layer: int, site: str):
        def hook(x, hook):
            acc.feed(layer, site, x)
            if layer == n - 1 and site == "resid_post":
                raise _StopForward
        return hook

    hooks = [(f"blocks.{l}.hook_{s}", reader(l, s)) for l in range(n) for s in SITES if s in acc.needed_sites]
    handles = []
    gate = _Gate()  # run_with_hooks hooks exist only inside its call; the pre-hooks below outlive it
    if "mlp_in" in acc.needed_sites:
        if _MLP_IN_HOOK.format(l=0) in model.hook_dict:  # TransformerBridge
            hooks += [(_MLP_IN_HOOK.format(l=l), reader(l, "mlp_in")) for l in range(n)]
        else:  # TaperedLM: no HookPoint after ln2's gain; a pre-hook on the MLP module reads its input
            handles = [m.register_forward_pre_hook(lambda mod, args, l=l: acc.feed(l, "mlp_in", args[0])
                                                   if gate.open else None)
                       for l, m in enumerate(_hooked_mlp_modules(model, n))]
    # a bridge forwards attention_mask to the HF model; our TaperedLM has none (right padding only)
    pass_mask = _is_bridge(model)
    try:
        _drive(batches, acc, positions, model_device(model),
               lambda ids, attn: model.run_with_hooks(
                   ids, fwd_hooks=hooks, **({"attention_mask": attn} if pass_mask and attn is not None else {})),
               gate)
    finally:
        for h in handles:
            h.remove()

