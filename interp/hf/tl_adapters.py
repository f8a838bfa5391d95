"""SiteMaps derived from TransformerLens 4's architecture adapters, so knowledge of a model family lives in one
place (TL's `model_bridge/supported_architectures/`), not in a list we copy.

An adapter is built from the model's HF config alone (no weights: `build_bridge_config_from_hf` + the adapter
factory), and its `component_mapping` read: `blocks` (the decoder layers) with `ln1` / `ln2` (the norms feeding
attention / the MLP), `ln1_post` / `ln2_post` (norms on the sublayer outputs), `attn`, `mlp` (with `gate` / `in` /
`out` projections), `ln_final` and `unembed`, each a dotted HF module path. The block's class says its style:
ParallelBlockBridge = parallel residual; an `ln2_post` without `ln2` = post-norm (OLMo-2). Where TL reads
`hook_mlp_out` / `hook_attn_out` at a projection inside the sublayer ("mlp.out.hook_out": Bloom's and MPT's MLPs
add the residual themselves, OPT's and XGLM's layers have no MLP module), that projection is SiteMap.mlp_out /
attn_out.

Refused, with the reason (the probes need every residual term to be one module's output): blocks TL wraps
specially (scaled residuals, recurrent / state-space / hybrid layers), an MLP that is no module and whose term TL
names no module for, configurations that renormalise the stream inside the block (_CONFIG_REFUSALS: post-LN), and
encoder-decoder or multimodal mappings without one decoder stack.
"""

from __future__ import annotations

from typing import Any

from interp.hf.sitemap import SiteMap

# TransformerLens block classes whose sublayers add module outputs to the stream unchanged
_PLAIN_BLOCKS = ("BlockBridge", "ParallelBlockBridge", "MLABlockBridge", "DelegatedAttentionBlockBridge",
                 "BloomBlockBridge",  # builds the ALiBi bias a Bloom layer takes, nothing else
                 "_OptBlockBridge")   # records (batch, pos) so TL's hooks can view OPT's flattened MLP side
# Configurations of an adapted family whose blocks no module path describes; TL adapts them, with its own
# conversions, so the reason is ours: (family, does the config have it, why)
_NORM_AFTER_ADD = ("the norm follows the residual add (post-LN: out = LN(z + mlp(z))), so the block renormalises the "
                   "stream and no sum of module outputs is its output")
_CONFIG_REFUSALS = (
    ("OPTForCausalLM", lambda c: not getattr(c, "do_layer_norm_before", True),
     f"do_layer_norm_before=False (OPT-350m): {_NORM_AFTER_ADD}"),
    ("BertLMHeadModel", lambda c: True, _NORM_AFTER_ADD),
    ("BloomForCausalLM", lambda c: getattr(c, "apply_residual_connection_post_layernorm", False),
     ("apply_residual_connection_post_layernorm=True: the residual it adds back is the normalised stream, not the "
     "layer's input")),
    ("BloomForCausalLM", lambda c: getattr(c, "pretraining_tp", 1) > 1 and getattr(c, "slow_but_exact", False),
     ("pretraining_tp > 1 with slow_but_exact=True: the output projections run as slices, never as the modules "
     "that produce the residual terms")),
)
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
    """Every HF architecture name TransformerLens has an adapter for (its factory's table), less the `interp export`
    architectures interp.hf.tl_export adds to that table once imported."""
    from transformer_lens.factories.architecture_adapter_factory import SUPPORTED_ARCHITECTURES

    from interp.hf.export_styles import STYLES

    ours = {style.model_class for style in STYLES.values()}
    return tuple(sorted(name for name in SUPPORTED_ARCHITECTURES if name not in ours))


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
    for family, applies, why in _CONFIG_REFUSALS:
        if arch == family and applies(config):
            raise ValueError(f"{arch}: {why}")
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
    attn_out, mlp_out = _term_module(blocks, "hook_attn_out"), _term_module(blocks, "hook_mlp_out")
    if (attn is None or mlp is None or not isinstance(attn.name, str)
            or not (isinstance(mlp.name, str) or mlp_out and mlp.name is None)):
        raise ValueError(f"{where}: the attention or the MLP is not one module of the layer (its projections sit "
                         "in the layer itself) and TransformerLens names no module whose output is its term")

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
    sites = SiteMap(layers=blocks.name, mlp=mlp.name or "", attn=attn.name, mlp_input_norm=mlp_input_norm,
                    post_mlp_norm=name("ln2_post"), post_attn_norm=name("ln1_post"),
                    final_norm=mapping["ln_final"].name, mlp_in=mlp_in, mlp_down=mlp_down,
                    unembed=mapping["unembed"].name, parallel=parallel, mlp_in_fused=fused is not None,
                    mlp_out=mlp_out, attn_out=attn_out)
    return _with_notes(sites, where, name("ln1"), moe, flat=kind == "_OptBlockBridge")


def _term_module(blocks: Any, alias: str) -> str | None:
    """The layer-relative HF module whose output TransformerLens reads as `alias` (hook_mlp_out / hook_attn_out)
    when that is a projection inside the sublayer ("mlp.out.hook_out": Bloom's and MPT's MLPs add the residual
    themselves; OPT's and XGLM's have no module of their own), else None (the sublayer's or its post-norm's
    output, which the SiteMap's mlp / post_mlp_norm already name)."""
    target = (getattr(blocks, "hook_aliases", None) or {}).get(alias)
    if not isinstance(target, str) or not target.endswith(".hook_out") or target.count(".") != 2:
        return None
    sub, proj = target.split(".")[:2]
    component = blocks.submodules.get(sub)
    inner = getattr(component, "submodules", {}).get(proj) if component is not None else None
    if inner is None or not isinstance(inner.name, str):
        return None
    return f"{component.name}.{inner.name}" if component.name else inner.name


def _with_notes(sites: SiteMap, where: str, ln1: str | None, moe: bool, flat: bool = False) -> SiteMap:
    """`sites` with notes saying where each TransformerLens site is, for its block style."""
    mlp_out = (f"hook_mlp_out = output of {sites.post_mlp_norm} (what is added to the stream); mlp.hook_out = raw "
               "MLP output" if sites.post_mlp_norm else
               f"hook_mlp_out = output of {sites.mlp_out} (" + (f"{sites.mlp} adds the residual itself)" if sites.mlp
                                                                else "the layer holds the MLP's projections)")
               if sites.mlp_out else "hook_mlp_out = mlp output (added to the stream unchanged)")
    if sites.attn_out:
        mlp_out += f"; hook_attn_out = output of {sites.attn_out} ({sites.attn} adds the residual itself)"
    if flat:
        mlp_out += "; the layer runs its MLP side on [batch * pos, d] (viewed as [batch, pos, d] where read)"
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
