"""The adapter table: where the residual stream, the MLP and its projections live in each architecture,
and `unwrap`, the one way to get the nn.Module behind any model object we accept; `context_length` /
`check_fits`, how many positions a model was built for (config field names differ per architecture).

Every hook-placing module (probes, ablations, tests) goes through a SiteMap, never through module names of
its own: norm names are not portable ("post_attention_layernorm" is the MLP's input norm on Llama but the
attention-output norm on Gemma3), and neither are projection names (GPT-2's down projection is `c_proj`,
a Conv1D whose weight is [in, out]). The table holds only what TransformerLens's own architecture adapters do
not describe (our TaperedLM, registered models); every other architecture's map is derived from TL's adapter
(interp.hf.tl_adapters) and checked against the model's modules.
"""

from __future__ import annotations

import inspect
import numbers
import re
from typing import Any

from torch import Tensor, nn

from interp._util.errors import InputError
from interp.hf.sitemap import CONTEXT_FIELDS, SiteMap

_TAPERED = SiteMap(
    layers="blocks", mlp="mlp", attn="attn", mlp_input_norm="ln2", post_mlp_norm=None, post_attn_norm=None,
    final_norm="ln_final", unembed="unembed",
    notes="interp.model.TaperedLM (ours): pre-RMSNorm SwiGLU, per-layer MLP widths; its HookPoints "
          "blocks.{l}.hook_* give the same sites by name")

# What TransformerLens's adapters do not know or get wrong for our purpose (interp.hf.tl_adapters derives the rest):
# our own models, and whatever register_site_map adds.
SITE_MAPS: dict[str, SiteMap] = {
    "TaperedLM": _TAPERED,
}
_DERIVED: dict[SiteMap, SiteMap] = {}             # interned: equal derived maps are one object
_BY_CONFIG: dict[int, tuple[Any, SiteMap]] = {}   # id(config) -> (config, its map): derived once per model


def register_site_map(arch_name: str, site_map: SiteMap) -> None:
    """Teach the loaders a new architecture (`arch_name` = the HF class name, e.g. "PhiForCausalLM")."""
    if not isinstance(site_map, SiteMap):
        raise TypeError(f"register_site_map({arch_name!r}, ...): expected a SiteMap, got {type(site_map).__name__}")
    SITE_MAPS[arch_name] = site_map


def site_map_for(model: Any) -> SiteMap:
    """The SiteMap for a model (any object `unwrap` accepts) or its class name: the table's entry, else the one
    TransformerLens's adapter for the architecture implies (from the model's own config: GPT-NeoX's
    use_parallel_residual decides its style), checked against the model's modules. ValueError with the reason
    and the fix for an architecture neither knows."""
    module = None if isinstance(model, str) else unwrap(model)
    arch = model if module is None else type(module).__name__
    if arch in SITE_MAPS:
        return SITE_MAPS[arch]
    config = getattr(module, "config", None)
    cached = _BY_CONFIG.get(id(config))
    if config is not None and cached is not None and cached[0] is config:
        return cached[1]
    from interp.hf.tl_adapters import default_config, site_map_from_tl

    try:
        sites = site_map_from_tl(arch, config if module is not None else default_config(arch))
        if module is not None:
            sites = _checked(module, sites)
    except ValueError as err:
        raise ValueError(f"no SiteMap for architecture {arch!r}: {err}. {suggested_site_map(arch, module)}") from None
    sites = _DERIVED.setdefault(sites, sites)
    if module is not None and config is not None:
        _BY_CONFIG[id(config)] = (config, sites)
    return sites


def site_map_or_none(model: Any) -> SiteMap | None:
    """site_map_for(model), or None for an architecture without one: loading, evaluation and generation need no
    residual map, so only what hooks the sites (probes, ablations) refuses such a model, with the reason."""
    try:
        return site_map_for(model)
    except ValueError:
        return None


def _checked(root: nn.Module, sites: SiteMap) -> SiteMap:
    """`sites` as found on `root`: every layer has each module it names (ValueError naming the first layer that
    does not: layers of different kinds); an unembedding TL names differently (GPT-NeoX's embed_out) is found
    as the model's output embeddings."""
    try:
        root.get_submodule(sites.unembed)
    except AttributeError:
        head = root.get_output_embeddings() if hasattr(root, "get_output_embeddings") else None
        found = next((n for n, m in root.named_modules() if m is head), None) if head is not None else None
        if found is None:
            raise ValueError(f"the model has no unembedding {sites.unembed!r}") from None
        sites = SiteMap(**{**sites.to_dict(), "unembed": found})
    try:
        root.get_submodule(sites.final_norm)
        layers = root.get_submodule(sites.layers)
    except AttributeError as err:
        raise ValueError(f"the model lacks a module TransformerLens names ({err})") from None
    paths = [p for p in (sites.mlp, sites.attn, sites.mlp_input_norm, sites.post_mlp_norm, sites.post_attn_norm,
                         sites.mlp_out, sites.attn_out, sites.mlp_read_module) if p is not None]
    for l, layer in enumerate(layers):
        for path in paths:
            try:
                layer.get_submodule(path)
            except AttributeError:
                raise ValueError(f"layer {l} has no {path!r} (its layers are not all alike: a hybrid model?)") from None
    for what, path in (("MLP", sites.mlp_term_module), ("attention", sites.attn_out_module)):
        forward = type(layers[0].get_submodule(path)).forward
        if "residual" in inspect.signature(forward).parameters:  # MPT's, Bloom's: mlp(x, residual) = residual + ...
            raise ValueError(f"its {what} {path!r} adds the residual stream itself (forward(..., residual)), so its "
                             f"output is not what the {what} adds to the stream, and TransformerLens names no "
                             "projection that produces the term")
    return sites


_NORM_NAME = re.compile(r"norm|^ln|_ln|ln_", re.IGNORECASE)
_ATTN_NAME = re.compile(r"attn|attention", re.IGNORECASE)
_MLP_NAME = re.compile(r"mlp|ffn|feed_forward|feedforward", re.IGNORECASE)


def suggested_site_map(arch: str, root: nn.Module | None = None) -> str:
    """The register_site_map call to start from, with the module paths of the model at hand (of `arch` built on
    the meta device from its default config when no model is given), guessed from their names and kinds, and
    layer 0's children listed to check the guesses against its forward()."""
    if root is None:
        root = _meta_model(arch)
    g = _guess(root) if root is not None else None
    if g is None:
        fields = ("layers=..., mlp=..., attn=..., mlp_input_norm=..., post_mlp_norm=None, post_attn_norm=None, "
                  "final_norm=..., unembed=..., mlp_in=(...), mlp_down=...")
        seen = ""
    else:
        fields = ", ".join(f"{k}={v!r}" for k, v in g.items() if not k.startswith("_"))
        seen = f" (guessed from the module names; layer 0 of {g['_layers']} holds: {g['_children']})"
    return (f"Add one with interp.hf.register_site_map({arch!r}, interp.hf.SiteMap({fields}, notes=...)){seen}, "
            "reading the decoder layer's forward() to see which norm receives the residual stream before the MLP and "
            "whether a sublayer adds the residual itself (then name the projection that produces its term as mlp_out "
            "/ attn_out; docs/probes.md, 'Block styles')")


def _meta_model(arch: str) -> nn.Module | None:
    """`arch` built from its default config on the meta device (no memory), or None when transformers cannot."""
    import torch

    from interp.hf.tl_adapters import default_config

    try:
        config = default_config(arch)
        if config is None:
            return None
        from transformers import AutoModelForCausalLM

        with torch.device("meta"):
            return AutoModelForCausalLM.from_config(config)
    except Exception:  # noqa: BLE001 - only a suggestion: any failure leaves the template generic
        return None


def _guess(root: nn.Module) -> dict[str, Any] | None:
    """SiteMap fields guessed from `root`'s module names: the longest list of alike modules is the layer stack;
    in layer 0, attention / MLP / norms by name (norms in registration order: the second feeds the MLP), the
    MLP's linear children (the last reads the neurons); the last norm outside the stack is the final norm."""
    stacks = [(n, m) for n, m in root.named_modules() if isinstance(m, nn.ModuleList) and len(m)
              and len({type(x) for x in m}) == 1]
    if not stacks:
        return None
    layers_path, stack = max(stacks, key=lambda nm: len(nm[1]))
    children = list(stack[0].named_children())
    attn, mlp = (next((n for n, _ in children if pattern.search(n)), None) for pattern in (_ATTN_NAME, _MLP_NAME))
    mlp = mlp or ""
    norms = [n for n, m in children if _NORM_NAME.search(n) or "Norm" in type(m).__name__]
    holder = stack[0].get_submodule(mlp)
    linear = [n for n, m in holder.named_children() if n != attn and type(m).__name__ in ("Linear", "Conv1D")]
    final = [n for n, m in root.named_modules() if n and not n.startswith(layers_path)
             and (_NORM_NAME.search(n.rsplit(".", 1)[-1]) or "Norm" in type(m).__name__)]
    head = root.get_output_embeddings() if hasattr(root, "get_output_embeddings") else None
    unembed = next((n for n, m in root.named_modules() if head is not None and m is head), None)
    return {"layers": layers_path, "mlp": mlp, "attn": attn or "...",
            "mlp_input_norm": norms[1] if len(norms) > 1 else None, "post_mlp_norm": None, "post_attn_norm": None,
            "final_norm": final[-1] if final else "...", "unembed": unembed or "...",
            "mlp_in": tuple(linear[:-1]), "mlp_down": linear[-1] if linear else None,
            **({"mlp_out": linear[-1] if linear else "..."} if not mlp else {}),
            "_layers": layers_path, "_children": ", ".join(f"{n} ({type(m).__name__})" for n, m in children)}


def get_submodule(root: nn.Module, dotted: str) -> nn.Module:
    """`root.a.b.0.c` for dotted = "a.b.0.c", with an error that names the missing part."""
    try:
        return root.get_submodule(dotted)
    except AttributeError as err:
        raise AttributeError(f"{type(root).__name__} has no submodule {dotted!r}: the SiteMap does not "
                             f"match this model ({err})") from err


# --------------------------------------------------------------------------------------------------
# From any model object to the module and its sites
# --------------------------------------------------------------------------------------------------

def unwrap(model: Any) -> nn.Module:
    """The nn.Module that computes: an interp.hf.LoadedModel's `.model`, a TransformerBridge's original HF
    model, an nnsight wrapper's module, a DistributedDataParallel's / torch.compile's inner module, else
    the module itself (HF causal LM, TaperedLM). TypeError for anything else."""
    if isinstance(model, nn.Module):
        inner = model.__dict__.get("original_model")                 # TransformerBridge (TransformerLens 4)
        if isinstance(inner, nn.Module):
            return unwrap(inner)
        if isinstance(model, nn.parallel.DistributedDataParallel):
            return unwrap(model.module)
        if type(model).__name__ == "OptimizedModule":                # torch.compile
            return unwrap(model._orig_mod)
        return model
    state = getattr(model, "__dict__", {})
    for attr in ("_module", "model"):                               # nnsight Envoy, LoadedModel
        inner = state.get(attr)
        if isinstance(inner, nn.Module):
            return unwrap(inner)
    raise TypeError(f"expected an interp.hf.LoadedModel, an HF causal LM, a TaperedLM, a TransformerBridge or an "
                    f"nnsight wrapper, got {type(model).__name__}")


def root_and_sites(model: Any) -> tuple[nn.Module, SiteMap]:
    """(the module to hook, its SiteMap): a LoadedModel's own `.sites`, else the table's entry."""
    sites = getattr(model, "sites", None)
    return unwrap(model), sites if isinstance(sites, SiteMap) else site_map_for(model)


def layer_modules(model: Any) -> list[nn.Module]:
    """The decoder layers, in order (any object `unwrap` accepts)."""
    root, sites = root_and_sites(model)
    return list(get_submodule(root, sites.layers))


def mlp_modules(model: Any) -> list[nn.Module]:
    """Each layer's module whose output is the raw MLP term (SiteMap.mlp_term_module: the MLP itself, or the
    projection that produces the term where the MLP adds the residual itself or is no module), in depth order."""
    _root, sites = root_and_sites(model)
    return [get_submodule(layer, sites.mlp_term_module) for layer in layer_modules(model)]


def mlp_down_modules(model: Any) -> list[nn.Module]:
    """Each layer's MLP down projection (its input is the layer's neurons), in depth order; ValueError for a
    mixture of experts, which has one per expert."""
    _root, sites = root_and_sites(model)
    if sites.mlp_down is None:
        raise ValueError(f"{type(unwrap(model)).__name__}'s MLP is a mixture of experts (no single down "
                         "projection), so its neurons cannot be scored or removed; whole-MLP rows (skip_mlp, "
                         "mean_mlp) and the other layer ablations work")
    return [get_submodule(layer, sites.within_mlp(sites.mlp_down)) for layer in layer_modules(model)]


def unflatten_tokens(x: Tensor, batch_pos: tuple[int, int]) -> Tensor:
    """A site tensor as [batch, pos, ...]: OPT's layer runs its MLP side on the tokens flattened to
    [batch * pos, d], so its norm, fc1 and fc2 see 2-D tensors; a [batch, pos, ...] tensor is returned as is."""
    batch, pos = batch_pos
    if x.dim() == 2 and x.shape[0] == batch * pos:
        return x.view(batch, pos, x.shape[-1])
    return x


def lens_modules(model: Any) -> tuple[nn.Module, nn.Module]:
    """(final norm, unembedding) of a model (any object `unwrap` accepts), as plain modules: a
    TransformerBridge's wrapped components are unwrapped to the HF modules they hold."""
    root, sites = root_and_sites(model)
    found = [get_submodule(root, path) for path in (sites.final_norm, sites.unembed)]
    return tuple(getattr(m, "original_component", m) for m in found)  # type: ignore[return-value]


# --------------------------------------------------------------------------------------------------
# Context length: how many positions a model was built (and trained) for
# --------------------------------------------------------------------------------------------------

# config fields that hold the context, per architecture: Llama / Qwen / Gemma (and our tapered Llama export) use
# max_position_embeddings, GPT-2 (and our tapered GPT-2 export) n_positions, older GPT-style configs n_ctx


def _is_config(obj: Any) -> bool:
    """A transformers PretrainedConfig (duck-typed: importing transformers is not needed to ask)."""
    return not isinstance(obj, nn.Module) and hasattr(obj, "to_json_string") and hasattr(obj, "model_type")


def _context(model: Any) -> tuple[int | None, str]:
    """(context length, the field it was read from) of any object `unwrap` accepts, or of a transformers config."""
    if _is_config(model):
        config = model
    else:
        module = unwrap(model)
        config = getattr(module, "config", None)
        ours = getattr(module, "cfg", None)  # interp.model.TaperedLM: ModelConfig.n_ctx
        if config is None and ours is not None:
            n_ctx = getattr(ours, "n_ctx", None)
            return (n_ctx if _positive_int(n_ctx) else None), "ModelConfig.n_ctx"
    if config is None:
        return None, ""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config  # multimodal: the LM's
    aliases = getattr(text, "attribute_map", None) or {}  # GPT-2: max_position_embeddings -> n_positions
    for name in CONTEXT_FIELDS:
        value = getattr(text, name, None)
        if _positive_int(value):
            return value, f"config {aliases.get(name, name)}"
    return None, ""


def _positive_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value > 0


def context_length(model: Any) -> int | None:
    """The number of positions `model` was built for: a Hugging Face model's config.json max_position_embeddings
    (Llama, Qwen, Gemma), n_positions (GPT-2) or n_ctx; our TaperedLM's ModelConfig.n_ctx. None when unknown.

    Takes anything `unwrap` accepts (an interp.hf.LoadedModel, an HF causal LM, a TaperedLM, a TransformerBridge,
    an nnsight wrapper) or a transformers config."""
    return _context(model)[0]


def check_fits(model: Any, n_tokens: int, field: str = "seq_len") -> None:
    """InputError (a ValueError) naming `field`, the model's context and the fix when sequences of `n_tokens`
    tokens (as the model sees them, a prepended BOS included) do not fit `model`'s context (context_length).

    Beyond it a model with learned positions (GPT-2) fails inside its embedding with an IndexError, and a RoPE model
    (Llama, Gemma) runs silently on positions it was never trained on; a model whose context is unknown passes."""
    if not _positive_int(n_tokens):
        raise InputError(f"{n_tokens!r} is not a positive number of tokens", field=field,
                         fix="give a whole number >= 1")
    context, where = _context(model)
    if context is None or n_tokens <= context:
        return
    name = getattr(model, "name", None)  # a LoadedModel's spec as given
    if not isinstance(name, str) or not name:
        name = type(model if _is_config(model) else unwrap(model)).__name__
    raise InputError(f"{n_tokens} tokens per sequence exceed the context of model {name!r}: {context} positions "
                     f"({where})", field=field, fix=f"use {field} <= {context}")
