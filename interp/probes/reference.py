"""An independent float64 computation of the per-layer measures, from plain forward hooks on a Hugging Face model:
what the probe backends (torch hooks, nnsight, TransformerLens's bridge) and interp.ablations' skip_block must
equal up to rounding. `analyses/engine_validation.py` tables the differences; run it on your own model with

    reference_measures(model, token_ids)   # {measure: [value per layer]}, each the mean over the tokens

Why it is independent of what it checks: it reads no residual site of the SiteMap (no resid_mid module, no
mlp_out module, no post-norm, no attention module) and no backend. Per layer l, with h = the decoder layer's input
and o = its output (a plain pre-hook and hook on the layer), the MLP's term is o - o(MLP zeroed): the same layer
called again on the same inputs with its MLP returning zeros, which holds for every block style (pre-norm, sandwich:
its post-norm of 0 is 0, post-norm, parallel); attention's is the rest, o - h - mlp. "Its MLP" is the SiteMap's MLP
module, except where that module's output is not the term (MLP_TERM, read off each family's HF forward()). The
block removal is the model rebuilt without the layer (removed from its layer list, with its entry of
config.layer_types), not a hook. From the adapter table it takes only the layer list, each layer's MLP module and,
for the logit lens, the final norm and unembedding (interp.hf.lens_modules); the lens' KL is the plain
full-vocabulary sum, not the streamed decomposition interp.probes.lens uses.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.hf import get_submodule, layer_modules, lens_modules, root_and_sites, unwrap
from interp.probes.names import DEFAULT_EPS, POSITIONS

# The measures, in the probe table's names (delta_loss_skip_block is interp.causal's row of the same name).
REFERENCE_MEASURES = ("rho_mlp", "rho_attn", "rho_block", "block_influence", "norm_ratio", "logit_lens_kl",
                      "delta_loss_skip_block")
_MLP_TERM = ("rho_mlp", "rho_attn", "norm_ratio")  # the measures that need the MLP-zeroed rerun of each layer

# What the MLP adds to the stream, read off each family's HF forward() (not off the SiteMap under test) where the MLP
# module's own output is not it: Bloom's and MPT's MLPs add the residual themselves, OPT's and XGLM's layers hold
# fc1 / fc2 with no MLP module. Likewise attention's term where the attention module adds the residual (Bloom).
MLP_TERM = {"BloomForCausalLM": "mlp.dense_4h_to_h", "MptForCausalLM": "ffn.down_proj", "OPTForCausalLM": "fc2",
            "XGLMForCausalLM": "fc2"}
ATTN_TERM = {"BloomForCausalLM": "self_attention.dense"}


def term_module(model: Any, layer: nn.Module, kind: str = "mlp") -> nn.Module:
    """The module of `layer` whose output is the MLP's (kind="mlp") or attention's ("attn") term in the stream: the
    SiteMap's MLP / attention module, or the one MLP_TERM / ATTN_TERM names for the family."""
    root, sites = root_and_sites(model)
    terms, default = (MLP_TERM, sites.mlp) if kind == "mlp" else (ATTN_TERM, sites.attn)
    return get_submodule(layer, terms.get(type(root).__name__, default))


@contextmanager
def float64_default() -> Iterator[None]:
    """New tensors default to float64 within the block: XGLM's eager attention clamps with
    torch.full((), finfo(float64).min), made in the default dtype."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def float64_copy(model: Any) -> nn.Module:
    """A float64 copy of the HF model behind `model` (any object interp.hf.unwrap accepts), in eval mode, with
    eager attention and eager experts where the model can switch (sdpa's and grouped_mm's kernels are others)."""
    m = copy.deepcopy(unwrap(model)).to(torch.float64).eval()
    if getattr(m, "_can_set_attn_implementation", lambda: False)():
        m.set_attn_implementation("eager")
    if getattr(m, "_can_set_experts_implementation", lambda: False)():
        m.set_experts_implementation("eager")  # grouped_mm has no float64
    return m


def _first(x: Any) -> Tensor:
    return x[0] if isinstance(x, tuple | list) else x


def zeroed(_module: nn.Module, _args: tuple, out: Any) -> Any:
    """A forward hook: the module returns zeros (an MoE's (hidden, router scores): zero hidden)."""
    return (torch.zeros_like(out[0]), *out[1:]) if isinstance(out, tuple) else torch.zeros_like(out)


def _hidden_in(args: tuple, kwargs: dict) -> Tensor:
    return args[0] if args else kwargs["hidden_states"]


@contextmanager
def layer_dropped(model: Any, layer: int) -> Iterator[None]:
    """Within the block, the model behind `model` has no decoder layer `layer`: it is removed from the layer list,
    and its entry from config.layer_types (a model that picks each layer's attention kind and RoPE by its position
    in config.layer_types, Gemma-2/3 or Cohere-2, would otherwise shift them onto the later layers); config.use_cache
    is off (each remaining layer keeps its own layer_idx, which a cache sized by the config would not have).
    Everything is restored on exit, also on error."""
    root, sites = root_and_sites(model)
    stack = get_submodule(root, sites.layers)
    config = getattr(root, "config", None)
    config = config.get_text_config() if hasattr(config, "get_text_config") else config
    kept = list(stack._modules.items())
    if not 0 <= layer < len(kept):
        raise ValueError(f"layer={layer}: the model has {len(kept)} layers (0..{len(kept) - 1})")
    saved = {name: getattr(config, name) for name in ("layer_types", "use_cache") if hasattr(config, name)}
    try:
        stack._modules.clear()
        for i, (_, block) in enumerate(b for j, b in enumerate(kept) if j != layer):
            stack._modules[str(i)] = block
        types = saved.get("layer_types")
        if isinstance(types, list | tuple) and len(types) == len(kept):
            config.layer_types = [t for j, t in enumerate(types) if j != layer]
        if "use_cache" in saved:
            config.use_cache = False
        yield
    finally:
        stack._modules.clear()
        stack._modules.update(kept)
        for name, value in saved.items():
            setattr(config, name, value)


def _logits(root: nn.Module, ids: Tensor) -> Tensor:
    out = root(input_ids=ids, use_cache=False)
    return out.logits if hasattr(out, "logits") else _first(out)


def plain_sequence_losses(root: nn.Module, ids: Int[Tensor, "n_seq pos"]) -> Float[Tensor, " n_seq"]:
    """Per sequence, the mean next-token cross-entropy (nats) over its pos - 1 predictions, in the model's own dtype
    (a plain forward, no cache: what the layer-dropped reference compares)."""
    logits = _logits(root, ids)
    ce = F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten(), reduction="none")
    return ce.view(ids.shape[0], -1).mean(1)


def _cos(a: Tensor, b: Tensor, eps: float = DEFAULT_EPS) -> Tensor:
    """a.b / max(|a||b|, eps): the probes' convention (a zero vector gives 0, not NaN)."""
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(eps)


def _clean_pass(m: nn.Module, layers: list[nn.Module], ids: Tensor
                ) -> tuple[Tensor, list[tuple[Tensor, tuple, dict]], list[Tensor]]:
    """One plain forward: (logits, per layer (its input h, cloned; its args; its kwargs), per layer its output)."""
    inputs: dict[int, tuple[Tensor, tuple, dict]] = {}
    outputs: dict[int, Tensor] = {}

    def keep_input(l: int):
        def hook(_m: nn.Module, args: tuple, kwargs: dict) -> None:
            inputs[l] = (_hidden_in(args, kwargs).clone(), args, kwargs)
        return hook

    def keep_output(l: int):
        def hook(_m: nn.Module, _args: tuple, out: Any) -> None:
            outputs[l] = _first(out).clone()
        return hook

    handles = [h for l, layer in enumerate(layers) for h in (
        layer.register_forward_pre_hook(keep_input(l), with_kwargs=True), layer.register_forward_hook(keep_output(l)))]
    try:
        logits = _logits(m, ids)
    finally:
        for h in handles:
            h.remove()
    return logits, [inputs[l] for l in range(len(layers))], [outputs[l] for l in range(len(layers))]


def _without_mlp(layer: nn.Module, mlp: nn.Module, h: Tensor, args: tuple, kwargs: dict) -> Tensor:
    """The layer's output on the same inputs (its hidden states `h` passed afresh) with its MLP term zeroed."""
    given = _hidden_in(args, kwargs)
    zero = mlp.register_forward_hook(zeroed)
    try:
        return _first(layer(*(h.clone() if a is given else a for a in args),
                            **{k: h.clone() if v is given else v for k, v in kwargs.items()}))
    finally:
        zero.remove()


@torch.no_grad()
def reference_measures(model: Any, ids: Int[Tensor, "n_seq pos"], measures: Sequence[str] = REFERENCE_MEASURES,
                       positions: str = "skip_first") -> dict[str, list[float]]:
    """{measure: per layer, the mean over the tokens} of the model behind `model`, computed in float64 on a copy
    (float64_copy; `model` itself is left as it is) over the sequences `ids`, all in one forward.

    positions: "skip_first" leaves position 0 of each sequence out of the means (the probe's default), "all"
    counts it. delta_loss_skip_block is the mean over sequences of (loss without the layer - clean loss), each
    loss over every prediction of the sequence, as interp.causal's row of that name (independent of positions).
    """
    unknown = [m for m in measures if m not in REFERENCE_MEASURES]
    if unknown or not measures:
        raise ValueError(f"measures={list(measures)}: choose a non-empty subset of {list(REFERENCE_MEASURES)}")
    if positions not in POSITIONS:
        raise ValueError(f"positions={positions!r}: choose one of {POSITIONS}")
    if ids.dim() != 2 or ids.shape[1] < 2:
        raise ValueError(f"ids of shape {tuple(ids.shape)}: expected [n_sequences, positions >= 2] token ids")
    first = 1 if positions == "skip_first" else 0
    m = float64_copy(model)
    layers = layer_modules(m)
    out: dict[str, list[float]] = {name: [] for name in measures}
    with float64_default():
        logits, inputs, outputs = _clean_pass(m, layers, ids)
        log_p = torch.log_softmax(logits, -1) if "logit_lens_kl" in measures else None
        del logits
        norm, unembed = lens_modules(m)
        for l, layer in enumerate(layers):
            (h, args, kwargs), o = inputs[l], outputs[l]
            mlp = (o - _without_mlp(layer, term_module(m, layer), h, args, kwargs)
                   if set(measures) & set(_MLP_TERM) else None)
            values: dict[str, Callable[[], Tensor]] = {   # [n_seq, pos] per measure, computed when asked for
                "rho_mlp": lambda: _cos(mlp, h), "rho_attn": lambda: _cos(o - h - mlp, h),
                "rho_block": lambda: _cos(o - h, h), "block_influence": lambda: 1 - _cos(h, o),
                "norm_ratio": lambda: mlp.norm(dim=-1) / h.norm(dim=-1).clamp_min(DEFAULT_EPS),
                "logit_lens_kl": lambda: torch.stack([  # KL(p_L || p_l), one sequence's [pos, vocab] at a time
                    F.kl_div(torch.log_softmax(unembed(norm(o_s)), -1), lp_s, log_target=True, reduction="none").sum(-1)
                    for o_s, lp_s in zip(o, log_p)]),
            }
            for name in measures:
                if name in values:
                    out[name].append(float(values[name]()[:, first:].mean()))
        if "delta_loss_skip_block" in measures:
            clean = plain_sequence_losses(m, ids)
            for l in range(len(layers)):
                with layer_dropped(m, l):
                    out["delta_loss_skip_block"].append(float((plain_sequence_losses(m, ids) - clean).mean()))
    return out
