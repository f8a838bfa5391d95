"""The adapter table: where the residual stream, the MLP and its projections live in each architecture,
and `unwrap`, the one way to get the nn.Module behind any model object we accept; `context_length` /
`check_fits`, how many positions a model was built for (config field names differ per architecture).

Every hook-placing module (probes, ablations, tests) goes through a SiteMap, never through module names of
its own: norm names are not portable ("post_attention_layernorm" is the MLP's input norm on Llama but the
attention-output norm on Gemma3), and neither are projection names (GPT-2's down projection is `c_proj`,
a Conv1D whose weight is [in, out]).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

from torch import nn

from interp._util.errors import InputError


@dataclass(frozen=True)
class SiteMap:
    """Dotted module paths that locate the TransformerLens residual sites on one architecture.

    With h = the decoder layer's input (`hook_resid_pre`), every supported layer computes
        z = h + [post_attn_norm](attn(...))          -> hook_resid_mid = INPUT of `mlp_input_norm`
        out = z + [post_mlp_norm](mlp(norm(z)))      -> hook_mlp_out   = OUTPUT of `post_mlp_norm` if set, else of `mlp`
                                                     -> hook_resid_post = OUTPUT of the decoder layer
    Inside the MLP, `mlp_in` are the projections that read its (normalised) input, one row per neuron, and
    `mlp_down` is the projection whose INPUT is the neurons (its i-th input channel is neuron i).
    """

    layers: str                 # from the model root, e.g. "model.layers"
    mlp: str                    # relative to a layer
    attn: str                   # relative to a layer
    mlp_input_norm: str         # relative to a layer; its input is hook_resid_mid
    post_mlp_norm: str | None   # relative to a layer; its output is what the MLP adds to the stream
    post_attn_norm: str | None  # relative to a layer; its output is what attention adds to the stream
    final_norm: str             # from the model root
    notes: str = ""
    mlp_in: tuple[str, ...] = ("gate_proj", "up_proj")  # relative to the MLP; weights [d_mlp, d_model] (Linear)
    mlp_down: str = "down_proj"                         # relative to the MLP; its input = the neurons
    unembed: str = "lm_head"                            # from the model root; final_norm's output -> logits

    @property
    def mlp_out_module(self) -> str:
        """Layer-relative module whose OUTPUT equals `hook_mlp_out` (the term added to the stream)."""
        return self.post_mlp_norm or self.mlp

    @property
    def attn_out_module(self) -> str:
        """Layer-relative module whose OUTPUT[0] (or output) equals `hook_attn_out`."""
        return self.post_attn_norm or self.attn

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


_LLAMA_LIKE = SiteMap(
    layers="model.layers", mlp="mlp", attn="self_attn", mlp_input_norm="post_attention_layernorm",
    post_mlp_norm=None, post_attn_norm=None, final_norm="model.norm",
    notes="pre-norm; hook_resid_mid = input of post_attention_layernorm; hook_mlp_out = mlp output "
          "(added to the stream unchanged)")
_GEMMA_LIKE = SiteMap(
    layers="model.layers", mlp="mlp", attn="self_attn", mlp_input_norm="pre_feedforward_layernorm",
    post_mlp_norm="post_feedforward_layernorm", post_attn_norm="post_attention_layernorm",
    final_norm="model.norm",
    notes="sandwich norms; hook_resid_mid = input of pre_feedforward_layernorm; hook_mlp_out = output of "
          "post_feedforward_layernorm (what is added to the stream); mlp.hook_out = raw MLP output; "
          "post_attention_layernorm normalises the ATTENTION output here, unlike Llama")
_GPT2 = SiteMap(
    layers="transformer.h", mlp="mlp", attn="attn", mlp_input_norm="ln_2", post_mlp_norm=None,
    post_attn_norm=None, final_norm="transformer.ln_f", mlp_in=("c_fc",), mlp_down="c_proj",
    notes="pre-LayerNorm; hook_resid_mid = input of ln_2; hook_mlp_out = mlp output; MLP projections are "
          "transformers Conv1D (weight [in, out]): c_fc in, c_proj down")
_TAPERED = SiteMap(
    layers="blocks", mlp="mlp", attn="attn", mlp_input_norm="ln2", post_mlp_norm=None, post_attn_norm=None,
    final_norm="ln_final", unembed="unembed",
    notes="interp.model.TaperedLM (ours): pre-RMSNorm SwiGLU, per-layer MLP widths; its HookPoints "
          "blocks.{l}.hook_* give the same sites by name")

SITE_MAPS: dict[str, SiteMap] = {
    "LlamaForCausalLM": _LLAMA_LIKE,
    "MistralForCausalLM": _LLAMA_LIKE,
    "Qwen2ForCausalLM": _LLAMA_LIKE,
    "Qwen3ForCausalLM": _LLAMA_LIKE,
    "Gemma2ForCausalLM": _GEMMA_LIKE,
    "Gemma3ForCausalLM": _GEMMA_LIKE,
    "GPT2LMHeadModel": _GPT2,
    "TaperedLM": _TAPERED,
}


def register_site_map(arch_name: str, site_map: SiteMap) -> None:
    """Teach the loaders a new architecture (`arch_name` = the HF class name, e.g. "PhiForCausalLM")."""
    if not isinstance(site_map, SiteMap):
        raise TypeError(f"register_site_map({arch_name!r}, ...): expected a SiteMap, got {type(site_map).__name__}")
    SITE_MAPS[arch_name] = site_map


def site_map_for(model: Any) -> SiteMap:
    """The SiteMap for a model (any object `unwrap` accepts) or its class name; ValueError with the fix for
    an unknown one."""
    arch = model if isinstance(model, str) else type(unwrap(model)).__name__
    if arch not in SITE_MAPS:
        raise ValueError(
            f"no SiteMap for architecture {arch!r} (known: {', '.join(sorted(SITE_MAPS))}). Add one with "
            f"interp.hf.register_site_map({arch!r}, SiteMap(layers='model.layers', mlp='mlp', "
            f"attn='self_attn', mlp_input_norm=..., post_mlp_norm=None, post_attn_norm=None, "
            f"final_norm='model.norm', notes=..., mlp_in=('gate_proj', 'up_proj'), mlp_down='down_proj')), "
            f"reading the decoder layer's forward() to see which norm receives the residual stream before the MLP.")
    return SITE_MAPS[arch]


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
    """Each layer's MLP module (its output is the raw MLP output), in depth order."""
    _root, sites = root_and_sites(model)
    return [get_submodule(layer, sites.mlp) for layer in layer_modules(model)]


def mlp_down_modules(model: Any) -> list[nn.Module]:
    """Each layer's MLP down projection (its input is the layer's neurons), in depth order."""
    _root, sites = root_and_sites(model)
    return [get_submodule(mlp, sites.mlp_down) for mlp in mlp_modules(model)]


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
CONTEXT_FIELDS = ("max_position_embeddings", "n_positions", "n_ctx")


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
