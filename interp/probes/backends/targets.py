"""Where the sites of a model live, for the backends that hook modules (torch, nnsight): the HookPoints
of a HookedRootModule (our TaperedLM), or an HF model's modules as its SiteMap (interp.hf) names them."""

from __future__ import annotations

from typing import Any

from torch import nn

from interp.hf import get_submodule, layer_modules, root_and_sites, unwrap
from interp.probes.backends.base import Backend, Plan, _Site, _Target
from interp.probes.model_kinds import _is_bridge, _is_hooked_root, _require_hf_source
from interp.probes.names import SITES

_MLP_IN_MODULE = "mlp_in=blocks.{l}.mlp input"
_MLP_IN_HOOK = "blocks.{l}.mlp.hook_in"  # TransformerBridge's name for the MLP's input


def _hooked_n_layers(model: Any) -> int:
    n = 0
    while f"blocks.{n}.hook_resid_pre" in model.hook_dict:
        n += 1
    if n == 0:
        raise ValueError(f"{type(model).__name__} has no HookPoint 'blocks.0.hook_resid_pre': the probes need "
                         f"TransformerLens names blocks.{{l}}.hook_resid_pre/_mid/_post, hook_mlp_out, hook_attn_out")
    return n


def _hookpoint_target(model: nn.Module, mlp_in: bool = False) -> _Target:
    """Sites of a HookedRootModule (TaperedLM): the outputs of its HookPoints; with mlp_in, also the
    input of the module blocks.{l}.mlp (what its ln2 hands the MLP, gain included)."""
    n = _hooked_n_layers(model)
    missing = [f"blocks.{l}.hook_{s}" for l in range(n) for s in SITES if f"blocks.{l}.hook_{s}" not in model.hook_dict]
    if missing:
        raise ValueError(f"{type(model).__name__} lacks HookPoints {missing[:3]}...: it needs all of "
                         f"{[f'hook_{s}' for s in SITES]} in every block")
    if mlp_in:
        _hooked_mlp_modules(model, n)  # error naming blocks.{l}.mlp if absent
    sites = [[_Site(s, f"blocks.{l}.hook_{s}", "output") for s in SITES] for l in range(n)]
    hook_sites = "; ".join(f"{s}=blocks.{{l}}.hook_{s}" for s in SITES)
    if mlp_in:
        for l, layer_sites in enumerate(sites):
            layer_sites.insert(SITES.index("resid_mid") + 1, _Site("mlp_in", f"blocks.{l}.mlp", "input"))
        hook_sites += "; " + _MLP_IN_MODULE
    return _Target(model, n, sites, derive_attn_out=False, mlp_out_site="blocks.{l}.hook_mlp_out",
                   hook_sites=hook_sites)


def _hooked_mlp_modules(model: nn.Module, n_layers: int) -> list[nn.Module]:
    try:
        return [model.get_submodule(f"blocks.{l}.mlp") for l in range(n_layers)]
    except AttributeError:
        raise ValueError(f"{type(model).__name__} has no module blocks.{{l}}.mlp, so the MLP's normalised input "
                         "(site mlp_in, metric rho_mlp_normed) cannot be read; use reference='raw'") from None


def _hf_target(loaded: Any, mlp_in: bool = False) -> _Target:
    """Sites of an HF model from its SiteMap (interp.hf). Accepts a LoadedModel or a bare HF model."""
    try:
        model, sm = root_and_sites(loaded)
    except ValueError as err:
        raise ValueError(f"cannot probe {type(unwrap(loaded)).__name__}: its MLP and residual sites are unknown. "
                         f"{err}") from None
    layers = layer_modules(loaded)
    for rel in (sm.resid_mid_module or sm.attn_out_module, sm.mlp_out_module, sm.mlp_read_module):
        get_submodule(layers[0], rel)  # AttributeError naming the SiteMap entry if it is wrong
    sites = [_hf_layer_sites(sm, l, mlp_in) for l in range(len(layers))]
    mlp_site = f"{sm.mlp_out_module} output" + (" (post-MLP norm, what is added to the stream)" if sm.post_mlp_norm else "")
    derived = "resid_mid=resid_pre+attn_out (parallel block)" if sm.parallel else "attn_out=resid_mid-resid_pre"
    hook_sites = "; ".join(f"{s.site}={s.describe()}" for s in _hf_layer_sites(sm, "{l}", mlp_in)) + "; " + derived
    return _Target(model, len(layers), sites, derive_attn_out=not sm.parallel, mlp_out_site=mlp_site,
                   hook_sites=hook_sites, derive_resid_mid=sm.parallel)


def _hf_layer_sites(sm: Any, layer: int | str, mlp_in: bool = False) -> list[_Site]:
    """Layer input = resid_pre; input of the MLP's input norm (of the MLP itself, post-norm) = resid_mid, or, in a
    parallel block, output of attention = attn_out (resid_mid is derived); [input of the MLP = mlp_in, the
    normalised stream it reads]; output of the MLP (or of the post-MLP norm, Gemma, OLMo-2) = mlp_out; layer
    output = resid_post (see interp.hf.SiteMap). Forward order."""
    where = f"{sm.layers}.{layer}"
    middle = (_Site("attn_out", f"{where}.{sm.attn_out_module}", "output") if sm.parallel
              else _Site("resid_mid", f"{where}.{sm.resid_mid_module}", "input"))
    return [_Site("resid_pre", where, "input"), middle,
            *([_Site("mlp_in", f"{where}.{sm.mlp_read_module}", "input")] if mlp_in else []),
            _Site("mlp_out", f"{where}.{sm.mlp_out_module}", "output"),
            _Site("resid_post", where, "output")]


def module_plan(backend: Backend, model: Any, mlp_in: bool = False) -> Plan:
    """The Plan of a module-hook backend: a HookedRootModule's HookPoints (not a bridge's: its modules are
    the HF model's), else the SiteMap sites of an HF model (attn_out derived)."""
    if _is_hooked_root(model):
        if _is_bridge(model):
            raise ValueError(f"backend={backend.name!r} cannot hook a TransformerBridge: use "
                             "backend='transformer_lens', or pass the LoadedModel / HF model itself")
        target = _hookpoint_target(model, mlp_in)
    else:
        target = _hf_target(_require_hf_source(model), mlp_in)
    return Plan(backend, target, target.derive_attn_out, target.mlp_out_site, target.hook_sites, target.n_layers,
                target.derive_resid_mid)
