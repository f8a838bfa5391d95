"""What kind of model object the probes were handed: a HookedRootModule (our TaperedLM), a TransformerBridge,
an interp.hf.LoadedModel, or a bare HF model. The backends ask these questions (unwrapping is interp.hf.unwrap)."""

from __future__ import annotations

from typing import Any

from torch import nn


def _is_hooked_root(model: Any) -> bool:
    """A HookedRootModule or a TransformerBridge: run_with_hooks + TransformerLens hook names."""
    return hasattr(model, "run_with_hooks") and hasattr(model, "hook_dict")


def _hooked_root_class() -> type:
    from transformer_lens import HookedRootModule

    return HookedRootModule


def _is_bridge(model: Any) -> bool:
    return _is_hooked_root(model) and not isinstance(model, _hooked_root_class())


def _hf_source(model: Any) -> Any:
    """A LoadedModel or a bare nn.Module that is neither a HookedRootModule nor a bridge, else None."""
    from interp import hf as pretrained

    if isinstance(model, pretrained.LoadedModel):
        return model
    if isinstance(model, nn.Module) and not _is_hooked_root(model):
        return model
    return None


def _require_hf_source(model: Any) -> Any:
    """_hf_source(model), or TypeError listing what the probes accept."""
    source = _hf_source(model)
    if source is None:
        raise TypeError(f"cannot probe a {type(model).__name__}: pass a registry name / path, an "
                        "interp.hf.LoadedModel, an HF causal LM, a TaperedLM or a TransformerBridge")
    return source


def _model_label(model: Any) -> str:
    return getattr(model, "name", None) or type(model).__name__


def _vocab_size(model: Any) -> int | None:
    """Rows of the model's token embedding (LoadedModel, HF model, TaperedLM, bridge), None when unknown."""
    inner = getattr(model, "model", model) if _hf_source(model) is not None else model
    get = getattr(inner, "get_input_embeddings", None)
    embedding = get() if callable(get) else getattr(inner, "embed", None)
    if isinstance(embedding, nn.Embedding):
        return embedding.num_embeddings
    d_vocab = getattr(getattr(model, "cfg", None), "d_vocab", None)
    return d_vocab if isinstance(d_vocab, int) else None


def absent_mlp_layers(model: Any) -> set[int]:
    """Layers whose MLP has width 0 (a TaperedLM's ModelConfig.d_mlp[l] = 0, or its export's
    intermediate_sizes[l] = 0): no MLP computes there, and hook_mlp_out is zeros. Empty for any other model."""
    from interp.hf.adapters import unwrap

    try:
        inner = unwrap(model)
    except TypeError:
        return set()
    widths = getattr(getattr(inner, "cfg", None), "d_mlp", None)
    if widths is None:
        widths = getattr(getattr(inner, "config", None), "intermediate_sizes", None)
    return {layer for layer, width in enumerate(widths or []) if width == 0}
