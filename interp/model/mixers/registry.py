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
Output projections that write into the residual stream set `linear.residual_out = True`, so the
model's init scales them by 1/sqrt(2 * n_layers) (see interp.model.TaperedLM).

FLOP convention (shared with interp.model.flops_per_token): 2 FLOPs per multiply-add, matmuls
only (norms, softmax, RoPE, activations and gating products are elementwise and left out).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from torch import nn

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
