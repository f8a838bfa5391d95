"""The other hooking backends over a LoadedModel: a TransformerLens TransformerBridge and an nnsight model."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING

from interp._util.errors import InputError

if TYPE_CHECKING:
    from interp.hf.load import LoadedModel

# TransformerLens picks an adapter from config.architectures / model_type and names every one it has when none fits
_TL_NO_ADAPTER = "Could not determine supported architecture"


def to_transformer_bridge(loaded: LoadedModel, inplace: bool = False, device: str = "cpu"):
    """TransformerLens 4.x TransformerBridge over the loaded model (hook names blocks.{l}.hook_resid_pre, ...).

    Booting mutates the HF model (eager attention, wrapped modules), so by default the bridge gets a deep
    copy and `loaded` stays usable; inplace=True saves the memory and CONSUMES `loaded.model`.
    An `interp export` of one of our runs (MLPs of different widths per layer) boots through the adapters of
    interp.hf.tl_export; an architecture TransformerLens has no adapter for is an InputError saying what works
    instead.
    """
    from transformer_lens.model_bridge import TransformerBridge

    from interp.hf.tl_export import install

    install()   # the tapered architectures in TL's table (idempotent)
    model = loaded.model if inplace else copy.deepcopy(loaded.model)
    model.config.architectures = [type(model).__name__]
    try:
        return TransformerBridge.boot_transformers(
            loaded.name, hf_model=model, tokenizer=copy.deepcopy(loaded.tokenizer), device=device,
            dtype=next(model.parameters()).dtype)
    except ValueError as err:
        if not str(err).startswith(_TL_NO_ADAPTER):
            raise
        # an `interp export` names its run: TransformerLens takes that checkpoint (our own hook names)
        source = (getattr(model.config, "interp", None) or {}).get("exported_from")
        also = (f", or transformer_lens on the checkpoint it was exported from, {source}"
                if isinstance(source, str) and Path(source).is_dir() else "")
        raise InputError(f"TransformerLens has no adapter for {type(model).__name__}", path=loaded.source,
                         fix=f"use --backend torch or nnsight for this model{also}") from err


def to_nnsight(loaded: LoadedModel):
    """nnsight 0.8 TransformersModel over the SAME HF modules (no copy: nnsight only wraps them).

    The tokenizer is copied because nnsight sets pad_token and left padding on the one it gets.
    Access sites as `lm.<sites.layers>[l].<module>.input/.output` in forward order inside `lm.trace(...)`.
    """
    from nnsight.modeling.transformers import TransformersModel

    return TransformersModel(loaded.model, tokenizer=copy.deepcopy(loaded.tokenizer), task="text-generation")
