"""SiteMaps derived from TransformerLens 4's architecture adapters, so knowledge of a model family lives in one
place (TL's `model_bridge/supported_architectures/`), not in a list we copy.

An adapter is built from the model's HF config alone (no weights: `build_bridge_config_from_hf` + the adapter
factory), and its `component_mapping` read: `blocks` (the decoder layers) with `ln1` / `ln2` (the norms feeding
attention / the MLP), `ln1_post` / `ln2_post` (norms on the sublayer outputs), `attn`, `mlp` (with `gate` / `in` /
`out` projections), `ln_final` and `unembed`, each a dotted HF module path. The block's class says its style:
ParallelBlockBridge = parallel residual; an `ln2_post` without `ln2` = post-norm (OLMo-2).

Refused, with the reason (the probes need every residual term to be one module's output): blocks TL wraps
specially (scaled residuals, recurrent / state-space / hybrid layers), an MLP that is not one module, and
encoder-decoder or multimodal mappings without one decoder stack.
"""

from __future__ import annotations

from typing import Any

from interp.hf.adapters import SiteMap

# TransformerLens block classes whose sublayers add module outputs to the stream unchanged
_PLAIN_BLOCKS = ("BlockBridge", "ParallelBlockBridge", "MLABlockBridge", "DelegatedAttentionBlockBridge")
# why the others cannot be described by module paths
_BLOCK_REASONS = {
    "ScaledResidualBlockBridge": "each sublayer's output is scaled inline before the residual add "
                                 "(residual_multiplier), so no module's output is what is added to the stream",
    "SSMBlockBridge": "state-space layers (no attention and MLP sublayers)",
    "OpaqueBlockBridge": "recurrent layers TransformerLens wraps as opaque blocks",
}
# sublayers that replace attention in some layers of a hybrid model
_OTHER_MIXERS = ("mixer", "mamba", "linear_attn", "time_mix", "conv", "short_conv")


def tl_architectures() -> tuple[str, ...]:
    """Every HF architecture name TransformerLens has an adapter for (its factory's table)."""
    from transformer_lens.factories.architecture_adapter_factory import SUPPORTED_ARCHITECTURES

    return tuple(sorted(SUPPORTED_ARCHITECTURES))


def default_config(arch: str) -> Any:
    """The transformers config of `arch` with its defaults (for a site map asked by class name only), or None
    when transformers has no causal LM of that name."""
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    model_type = next((t for t, name in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items() if name == arch), None)
    return CONFIG_MAPPING[model_type]() if model_type in CONFIG_MAPPING else None


def tl_adapter(arch: str, config: Any) -> Any:
    """TransformerLens's ArchitectureAdapter for `arch`, built from an HF config (no model is loaded)."""
    import torch
    from transformer_lens.factories.architecture_adapter_factory import ArchitectureAdapterFactory
    from transformer_lens.model_bridge.sources._bridge_builder import build_bridge_config_from_hf

    return ArchitectureAdapterFactory.select_architecture_adapter(
        build_bridge_config_from_hf(config, arch, "interp", torch.float32))


def site_map_from_tl(arch: str, config: Any) -> SiteMap:
    """The SiteMap TransformerLens's adapter implies for `arch` with this HF `config`; ValueError naming why
    when the architecture is not TL's or its blocks cannot be described by module paths."""
    if arch not in tl_architectures():
        raise ValueError(f"TransformerLens has no adapter for {arch!r} either")
    if config is None:
        raise ValueError(f"transformers has no causal LM {arch!r} to take a config from")
    adapter = tl_adapter(arch, config)
    where = f"TransformerLens {type(adapter).__name__}"
    mapping = adapter.component_mapping or {}
    blocks = mapping.get("blocks")
    if blocks is None or "ln_final" not in mapping or "unembed" not in mapping:
        raise ValueError(f"{where} has no single decoder stack with a final norm and unembedding "
                         f"(components {sorted(mapping)}: encoder-decoder, recurrent or multimodal)")
    kind = type(blocks).__name__
    if kind not in _PLAIN_BLOCKS:
        raise ValueError(f"{where} wraps its layers as {kind}: "
                         + _BLOCK_REASONS.get(kind, "a block whose residual terms are not module outputs"))
    subs = blocks.submodules
    mixers = [k for k in _OTHER_MIXERS if k in subs]
    if mixers:
        raise ValueError(f"{where}: a hybrid model, some layers mix with {subs[mixers[0]].name!r} instead of "
                         "attention, so attn_out has no module in those layers")
    attn, mlp = subs.get("attn"), subs.get("mlp")
    if attn is None or mlp is None or not isinstance(attn.name, str) or not isinstance(mlp.name, str):
        raise ValueError(f"{where}: the attention or the MLP is not one module of the layer (its projections sit "
                         "in the layer itself), so what it adds to the stream is no module's output")

    def name(key: str) -> str | None:
        return subs[key].name if key in subs else None

    parallel = kind == "ParallelBlockBridge"
    moe = "MoE" in type(mlp).__name__
    fused = getattr(mlp, "fused_attr", None) if type(mlp).__name__ == "JointGateUpMLPBridge" else None
    projections = mlp.submodules
    mlp_in = () if moe else (fused,) if fused else tuple(projections[k].name for k in ("gate", "in")
                                                         if k in projections)
    mlp_down = None if moe or "out" not in projections else projections["out"].name
    # parallel blocks: the norm the MLP reads through (its own ln2, or the shared ln1); its input is h, not z
    mlp_input_norm = name("ln2") or (name("ln1") if parallel else None)
    sites = SiteMap(layers=blocks.name, mlp=mlp.name, attn=attn.name, mlp_input_norm=mlp_input_norm,
                    post_mlp_norm=name("ln2_post"), post_attn_norm=name("ln1_post"),
                    final_norm=mapping["ln_final"].name, mlp_in=mlp_in, mlp_down=mlp_down,
                    unembed=mapping["unembed"].name, parallel=parallel, mlp_in_fused=fused is not None)
    return _with_notes(sites, where, name("ln1"), moe)


def _with_notes(sites: SiteMap, where: str, ln1: str | None, moe: bool) -> SiteMap:
    """`sites` with notes saying where each TransformerLens site is, for its block style."""
    mlp_out = (f"hook_mlp_out = output of {sites.post_mlp_norm} (what is added to the stream); mlp.hook_out = raw "
               "MLP output" if sites.post_mlp_norm else "hook_mlp_out = mlp output (added to the stream unchanged)")
    style = {
        "parallel": f"parallel residual: out = h + attn({ln1}(h)) + mlp({sites.mlp_input_norm}(h)); hook_resid_mid "
                    f":= h + attention output (derived; the MLP reads h)",
        "post_norm": f"post-norm: z = h + {sites.post_attn_norm}(attn(h)); hook_resid_mid = input of {sites.mlp} "
                     "(no pre-MLP norm)",
        "sandwich": f"sandwich norms: hook_resid_mid = input of {sites.mlp_input_norm}; {sites.post_attn_norm} "
                    "normalises the ATTENTION output",
        "pre_norm": f"pre-norm; hook_resid_mid = input of {sites.mlp_input_norm}",
    }[sites.style]
    fused = "; mlp_in is a fused [gate; up] projection (2 x d_mlp rows)" if sites.mlp_in_fused else ""
    experts = "; a mixture of experts: no single down projection, so no neuron ablation" if moe else ""
    return SiteMap(**{**sites.to_dict(), "notes": f"{style}; {mlp_out}{fused}{experts} (from {where})"})
