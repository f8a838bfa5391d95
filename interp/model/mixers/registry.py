"""Token mixers (the sequence-mixing half of a block) and the registry that builds them.

A block is `x -> x + mixer(ln1(x)) -> + mlp(ln2(x))`; the block asks `MIXERS[cfg.mixer](cfg, layer)`
for its mixer and knows nothing else about it. So a recurrent or memory mixer (Titans,
Hope-attention) plugs in by registering a class here, without touching the MLP or block code.

What a registered factory must provide (checked by `register_mixer`, so a bad mixer fails at import):
  factory(cfg, layer) -> nn.Module mapping x: Float[Tensor, "batch pos d_model"] (already normed)
                         to the same shape. It may hold its own HookPoints (e.g. attn.hook_z).
                         Stateful mixers keep their state inside forward.
  factory.n_params(cfg, layer) -> int             parameters, analytically (tested against numel)
  factory.forward_flops(cfg, layer, seq_len, causal=True) -> MixerFlops   forward matmul FLOPs/token
  factory.options (optional)  the dataclass of its settings: its fields are the keys ModelConfig.mixer_options
                         may hold (each of the field's type; the dataclass's `validate(cfg)` checks values).
                         Absent or None: the mixer takes no options, and any mixer_options key is refused
                         (ModelConfig.validate calls parse_mixer_options, so a typo never trains a default).
Output projections that write into the residual stream set `linear.residual_out = True`, so the
model's init scales them by 1/sqrt(2 * n_layers) (see interp.model.TaperedLM).

FLOP convention (shared with interp.model.flops_per_token): 2 FLOPs per multiply-add, matmuls
only (norms, softmax, RoPE, activations and gating products are elementwise and left out).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from torch import nn

from interp._util.config import coerce_to_type

if TYPE_CHECKING:
    from interp.model.config import ModelConfig

MixerFactory = Callable[["ModelConfig", int], nn.Module]
MIXERS: dict[str, MixerFactory] = {}
_REQUIRED_METHODS = ("n_params", "forward_flops")


class MixerFlops(NamedTuple):
    """Forward FLOPs per token of one mixer: position-wise projections and sequence mixing."""

    dense: int  # projections (q, k, v, o, gate): independent of sequence length
    attention_scores: int  # QK^T and pattern @ V: grows with sequence length; 0 for non-attention mixers


def register_mixer(name: str) -> Callable[[MixerFactory], MixerFactory]:
    """Decorator: register `factory(cfg, layer) -> nn.Module` under `name` (the value of ModelConfig.mixer)."""

    def decorator(factory: MixerFactory) -> MixerFactory:
        if name in MIXERS:
            raise ValueError(f"register_mixer: a mixer named {name!r} is already registered "
                             f"({MIXERS[name]!r}); pick another name")
        missing = [m for m in _REQUIRED_METHODS if not callable(getattr(factory, m, None))]
        if missing:
            raise TypeError(f"register_mixer({name!r}): {factory!r} lacks {missing}; a mixer must "
                            "provide n_params(cfg, layer) and forward_flops(cfg, layer, seq_len, causal) "
                            "so param_counts / flops_per_token stay analytic (see interp/mixers.py)")
        MIXERS[name] = factory
        return factory

    return decorator


def options_of(mixer: str) -> type | None:
    """The options dataclass a registered mixer declares (`factory.options`), None when it takes none."""
    return getattr(MIXERS[mixer], "options", None)


def _with_options() -> str:
    """'titans: chunk_size, depth, ...; hope_attention: ...': the mixers that take options, for messages."""
    return "; ".join(f"{name}: {', '.join(f.name for f in dataclasses.fields(cls))}"
                     for name in sorted(MIXERS) if (cls := options_of(name)) is not None)


def parse_mixer_options(cfg: ModelConfig, options_cls: type | None = None) -> Any:
    """`cfg.mixer_options` read into the mixer's options dataclass (`options_cls`, default the one cfg.mixer
    declares), after checking it: a dict whose keys are fields of that dataclass, each value of its field's
    type, and the dataclass's own `validate(cfg)` passing. None for a mixer without options (and no keys).

    ValueError naming the key, the mixer and the valid keys: an unknown key would otherwise be stored and
    ignored, and a wrong type would surface as a TypeError deep inside the model build.
    """
    mixer = cfg.mixer
    options_cls = options_cls if options_cls is not None else options_of(mixer)
    raw = getattr(cfg, "mixer_options", None)
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ValueError(f"ModelConfig.mixer_options must be a dict (a JSON object) of mixer {mixer!r}'s "
                         f"settings, got {type(raw).__name__} {raw!r}")
    if options_cls is None:
        if raw:
            raise ValueError(f"ModelConfig.mixer_options has keys {sorted(raw)}, but mixer {mixer!r} takes no "
                             f"options; remove mixer_options (mixers with options: {_with_options() or 'none'})")
        return None
    known = [f.name for f in dataclasses.fields(options_cls)]
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise ValueError(f"ModelConfig.mixer_options has unknown keys {unknown} for mixer {mixer!r}; "
                         f"valid keys are {sorted(known)}")
    hints = typing.get_type_hints(options_cls)
    for key, value in raw.items():
        coerce_to_type(value, hints[key], f"mixer {mixer!r}: ModelConfig.mixer_options[{key!r}]")
    options = options_cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})  # JSON: lists
    if callable(getattr(options, "validate", None)):
        try:
            options.validate(cfg)
        except ValueError as err:
            raise ValueError(f"{err} (mixer {mixer!r})") from err
    return options
