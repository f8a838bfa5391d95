"""Which attention implementation an architecture can run: sdpa where transformers has it, else eager.

Gemma-2's model class has no sdpa path in transformers (its attention scores are soft-capped, which
torch's scaled_dot_product_attention cannot do), so from_pretrained(..., attn_implementation="sdpa") raises a
ValueError. The ablations and evals ask for sdpa only for speed; eager is the same math, so they fall back
to it and say so on one stderr line. attention_within switches a loaded model for the length of a block (the causal
rows of `interp probe --causal` run so: the probe loads eager, its interventions run sdpa, ~25% faster).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from torch import nn


def causal_lm_class(config: Any) -> type | None:
    """The transformers causal-LM class a config loads as (its `architectures[0]`, else the auto mapping), or
    None when transformers has none (remote code, an unknown model_type)."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    names = [*(getattr(config, "architectures", None) or []),
             MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(getattr(config, "model_type", None))]
    return next((getattr(transformers, n) for n in names if isinstance(n, str) and hasattr(transformers, n)), None)


def attention_for(config: Any, requested: str | None, trust_remote_code: bool = False) -> str | None:
    """`requested`, or "eager" when it is "sdpa" and the architecture of `config` (a transformers config, or a
    local HF directory holding one) has no sdpa attention; the fallback is announced on stderr. A directory
    whose config cannot be read is left to from_pretrained to report."""
    if requested != "sdpa":
        return requested
    if isinstance(config, str | Path):
        from transformers import AutoConfig

        try:
            config = AutoConfig.from_pretrained(config, trust_remote_code=trust_remote_code, local_files_only=True)
        except (OSError, ValueError, KeyError, TypeError):
            return requested
    cls = causal_lm_class(config)
    if cls is None or getattr(cls, "_supports_sdpa", True):
        return requested
    print(f"[load] {cls.__name__} has no sdpa attention in transformers (e.g. soft-capped attention scores): "
          "loading it with eager attention instead (the same math, slower)", file=sys.stderr)
    return "eager"


def attention_of(root: nn.Module) -> str:
    """The attention implementation an HF model runs (its config's), or "native" for a model without one (our
    TaperedLM: torch's scaled_dot_product_attention, or GPT-2's own softmax)."""
    return str(getattr(getattr(root, "config", None), "_attn_implementation", None) or "native")


@contextmanager
def attention_within(root: nn.Module, requested: str = "sdpa") -> Iterator[str]:
    """Within the block the HF model `root` runs `requested` attention where its class can switch to it (transformers'
    set_attn_implementation; not Gemma-2, whose soft-capped scores have no sdpa path) and keeps its own otherwise;
    it is put back on exit, also on error. Yields the implementation in effect (attention_of)."""
    before = attention_of(root)
    switch = (before not in (requested, "native") and getattr(root, "_can_set_attn_implementation", lambda: False)()
              and getattr(type(root), f"_supports_{requested}", True))
    if switch:
        root.set_attn_implementation(requested)
    try:
        yield attention_of(root)
    finally:
        if switch:
            root.set_attn_implementation(before)
