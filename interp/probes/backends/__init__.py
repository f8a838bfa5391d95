"""Probe backends: one module per way of reading activations, all behind interp.probes.backends.base.Backend.

  torch             torch_hooks.py    plain forward (pre-)hooks on modules (HF SiteMap) or HookPoints
  transformer_lens  tl_bridge.py      TransformerBridge.run_with_hooks on blocks.{l}.hook_*
  nnsight           nnsight_trace.py  one trace per batch; metrics computed inside the trace
  hookpoints        hookpoints.py     run_with_hooks on any HookedRootModule (TaperedLM)
targets.py says where each site lives for the module-hook backends; choice.py picks a backend by name."""

from interp._util.lazy import lazy_exports

_EXPORTS = {
    "Backend": "base",
    "Plan": "base",
    "TorchHooks": "torch_hooks",
    "TransformerLens": "tl_bridge",
    "Nnsight": "nnsight_trace",
    "Hookpoints": "hookpoints",
    "get_backend": "choice",
    "make_plan": "choice",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
