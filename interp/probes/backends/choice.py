"""Choosing a backend by name and planning it on a model object.

A HookedRootModule (TaperedLM) works with every backend: torch hooks go on its HookPoints,
transformer_lens/hookpoints use its run_with_hooks, nnsight wraps it with nnsight.NNsight. An HF model
(interp.hf.LoadedModel or a bare causal LM) works with torch and nnsight, and with transformer_lens
when it is a LoadedModel (the bridge needs its tokenizer).
"""

from __future__ import annotations

from typing import Any

from interp.probes.backends.base import Backend, Plan
from interp.probes.backends.hookpoints import Hookpoints
from interp.probes.backends.nnsight_trace import Nnsight
from interp.probes.backends.tl_bridge import TransformerLens
from interp.probes.backends.torch_hooks import TorchHooks
from interp.probes.names import BACKENDS

_BACKENDS: dict[str, Backend] = {b.name: b for b in (TorchHooks(), TransformerLens(), Nnsight(), Hookpoints())}


def get_backend(name: str) -> Backend:
    """The backend called `name` (one of interp.probes.BACKENDS)."""
    if name not in _BACKENDS:
        raise ValueError(f"backend={name!r}: choose one of {BACKENDS}")
    return _BACKENDS[name]


def make_plan(model: Any, backend: str, mlp_in: bool = False) -> Plan:
    """get_backend(backend).plan(model, mlp_in): what to hook on `model`, or an error naming the fix."""
    return get_backend(backend).plan(model, mlp_in)
