"""Which attention implementation an architecture can run: sdpa where transformers has it, else eager.

Gemma-2's model class has no sdpa path in transformers (its attention scores are soft-capped, which
torch's scaled_dot_product_attention cannot do), so from_pretrained(..., attn_implementation="sdpa") raises a
ValueError. The ablations and evals ask for sdpa only for speed; eager is the same math, so they fall back
to it and say so on one stderr line.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


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
