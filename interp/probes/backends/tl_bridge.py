"""backend="transformer_lens": TransformerBridge.run_with_hooks on blocks.{l}.hook_* (no run_with_cache).
An interp.hf.LoadedModel is wrapped in a bridge first; a HookedRootModule is hooked as it is."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from interp.probes.backends.base import Backend, Plan
from interp.probes.backends.hookpoints import _run_hooked, hooked_plan
from interp.probes.model_kinds import _is_hooked_root, _require_hf_source


class TransformerLens(Backend):
    name = "transformer_lens"

    def plan(self, model: Any, mlp_in: bool = False) -> Plan:
        from interp import hf as pretrained

        if _is_hooked_root(model):
            return hooked_plan(self, model, mlp_in)
        source = _require_hf_source(model)
        if not isinstance(source, pretrained.LoadedModel):
            raise ValueError("backend='transformer_lens' needs a LoadedModel (the bridge needs the tokenizer): "
                             "use interp.hf.load_pretrained(...) or pass the model by name")
        return self.plan(pretrained.to_transformer_bridge(source), mlp_in)

    def run(self, target: Any, batches: Iterable, acc: Any, positions: str) -> None:
        _run_hooked(target, batches, acc, positions)
