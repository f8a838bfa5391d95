"""TransformerLens 4.x adapters for `interp export` folders (tapered Llama / GPT-2: one MLP width per layer).

    import interp.hf.tl_export                      # registers the classes and adapters below (see "Why the import")
    from transformer_lens.model_bridge import TransformerBridge
    bridge = TransformerBridge.boot_transformers(EXPORT_DIR)
    logits, cache = bridge.run_with_cache(tokens)   # cache["blocks.1.hook_mlp_out"], blocks.{l}.hook_resid_pre, ...

The adapters are declared where TransformerLens looks for outside architectures, the entry point group
"transformer_lens.architectures" (pyproject.toml; read by ArchitectureAdapterFactory.discover_entry_points), under
the names config.json's `architectures` gives: TaperedLlamaForCausalLM, TaperedGPT2LMHeadModel. Each is TL's own
adapter of the stock family (LlamaArchitectureAdapter, GPT2ArchitectureAdapter): the bridge wraps the HF modules
and runs their forward, so an MLP of any width, layer by layer, is hooked and computed exactly as Hugging Face
computes it. What the adapters add: cfg.d_mlp_per_layer (the widths) and cfg.d_mlp = their maximum (TL's own
collapse of a per-layer list, sources/_hf_format.py), set once the model is loaded (prepare_model).

Why the import (TransformerLens 4.3 limits, so the entry point alone is not enough for boot_transformers):
  * transformer_lens/model_bridge/sources/_hf_format.py, determine_architecture_from_hf_config, accepts only the
    names of the static table architecture_adapter_factory.SUPPORTED_ARCHITECTURES, never an adapter registered
    by entry point or ArchitectureAdapterFactory.register_adapter; and the entry points are read only later,
    inside ArchitectureAdapterFactory.select_architecture_adapter. install() adds our two names to that table.
  * sources/transformers/source.py, boot, reads config.json with AutoConfig before any entry point is read, so
    model_type "tapered_llama" / "tapered_gpt2" must already be registered (install() does it, as our loaders
    do: no remote code) or trust_remote_code=True given.
  Inside the toolkit (interp.hf.to_transformer_bridge, `--backend transformer_lens`) install() runs by itself.

Not per-layer in TL 4.3 (each assumes one d_mlp): the stacked weights TransformerBridge.W_in / W_gate / W_out /
b_in (transformer_bridge.py, TransformerBridge._stack_block_params: torch.stack of unequal widths raises; read
bridge.blocks[l].mlp.W_in per layer instead) and ActivationCache.stack_neuron_results (labels from cfg.d_mlp).

Never imported by `import interp` (it imports transformer_lens); imported by TransformerLens through the entry
point, by interp.hf.wrappers, or by the user.
"""

from __future__ import annotations

import contextlib
from importlib.metadata import entry_points
from typing import Any

from transformer_lens.factories import architecture_adapter_factory as _factory
from transformer_lens.model_bridge.supported_architectures.gpt2 import GPT2ArchitectureAdapter
from transformer_lens.model_bridge.supported_architectures.llama import LlamaArchitectureAdapter

ENTRY_POINT_GROUP = "transformer_lens.architectures"


class _PerLayerWidths:
    """Mixin: after loading, cfg.d_mlp_per_layer = config.intermediate_sizes and cfg.d_mlp = their max."""

    cfg: Any

    def prepare_model(self, hf_model: Any) -> None:
        super().prepare_model(hf_model)  # type: ignore[misc]
        widths = [int(w) for w in getattr(hf_model.config, "intermediate_sizes", None) or []]
        if widths:
            self.cfg.d_mlp_per_layer = widths
            self.cfg.d_mlp = max(widths)


class TaperedLlamaArchitectureAdapter(_PerLayerWidths, LlamaArchitectureAdapter):
    """TL's Llama adapter for TaperedLlamaForCausalLM (interp.hf.tapered_llama): SwiGLU of width
    intermediate_sizes[l] in layer l; hooks blocks.{l}.hook_resid_pre ... mlp.hook_pre / hook_post."""


class TaperedGPT2ArchitectureAdapter(_PerLayerWidths, GPT2ArchitectureAdapter):
    """TL's GPT-2 adapter for TaperedGPT2LMHeadModel (interp.hf.tapered_gpt2): c_fc -> GELU -> c_proj of width
    intermediate_sizes[l] in layer l (a width-0 layer adds its c_proj bias only)."""


ADAPTERS: dict[str, type] = {"TaperedLlamaForCausalLM": TaperedLlamaArchitectureAdapter,
                             "TaperedGPT2LMHeadModel": TaperedGPT2ArchitectureAdapter}


def _declared() -> set[str]:
    """Our architecture names this environment's package metadata declares as entry points (pip install -e)."""
    try:
        return {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)
                if ep.value.startswith(f"{__name__}:")}
    except Exception:  # noqa: BLE001 - unreadable metadata: register by hand below
        return set()


def _register_auto_classes() -> None:
    """model_types "tapered_llama" / "tapered_gpt2" known to AutoConfig and AutoModelForCausalLM (the installed
    classes, no remote code). Not interp.hf.export.register_tapered_llama: its site maps ask TL's factory for
    Llama's adapter, which would start TL's entry point discovery again while that discovery imports this module."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from interp.hf.export_styles import STYLES

    for style in STYLES.values():
        config_class, model_class = style.classes()
        with contextlib.suppress(ValueError):   # already registered (by interp.hf.export, say)
            AutoConfig.register(config_class.model_type, config_class)
        with contextlib.suppress(ValueError):
            AutoModelForCausalLM.register(config_class, model_class)


def install() -> None:
    """Make TransformerBridge.boot_transformers(EXPORT_DIR) work for both tapered styles (idempotent): the
    tapered config / model classes registered with transformers' Auto classes, our names in TL's architecture
    table (see the module docstring for why), and the adapters in TL's factory unless its entry point discovery
    will add them (registering them first would make it warn of an override)."""
    _register_auto_classes()
    for name, adapter in ADAPTERS.items():
        _factory.SUPPORTED_ARCHITECTURES.setdefault(name, adapter)
    factory = _factory.ArchitectureAdapterFactory
    pending = not getattr(factory, "_entry_points_discovered", True)
    declared = _declared() if pending else set()
    for name, adapter in ADAPTERS.items():
        if name not in declared and name not in factory._adapters:
            factory.register_adapter(name, adapter)


install()
