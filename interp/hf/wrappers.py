"""The other hooking backends over a LoadedModel: a TransformerLens TransformerBridge and an nnsight model."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from interp.hf.load import LoadedModel


def to_transformer_bridge(loaded: LoadedModel, inplace: bool = False, device: str = "cpu"):
    """TransformerLens 4.x TransformerBridge over the loaded model (hook names blocks.{l}.hook_resid_pre, ...).

    Booting mutates the HF model (eager attention, wrapped modules), so by default the bridge gets a deep
    copy and `loaded` stays usable; inplace=True saves the memory and CONSUMES `loaded.model`.
    """
    from transformer_lens.model_bridge import TransformerBridge

    model = loaded.model if inplace else copy.deepcopy(loaded.model)
    model.config.architectures = [type(model).__name__]
    return TransformerBridge.boot_transformers(
        loaded.name, hf_model=model, tokenizer=copy.deepcopy(loaded.tokenizer), device=device,
        dtype=next(model.parameters()).dtype)


def to_nnsight(loaded: LoadedModel):
    """nnsight 0.8 TransformersModel over the SAME HF modules (no copy: nnsight only wraps them).

    The tokenizer is copied because nnsight sets pad_token and left padding on the one it gets.
    Access sites as `lm.<sites.layers>[l].<module>.input/.output` in forward order inside `lm.trace(...)`.
    """
    from nnsight.modeling.transformers import TransformersModel

    return TransformersModel(loaded.model, tokenizer=copy.deepcopy(loaded.tokenizer), task="text-generation")
