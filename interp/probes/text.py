"""Text and tokens: which text, how it is tokenized, and how it is cut into model inputs.

Contract (interp.probes.probe): the text is tokenized as ONE string without special tokens and cut
into consecutive sequences; `tokens` is the number of model positions, rounded DOWN to a multiple of
seq_len (n_seqs = tokens // seq_len); with prepend_bos each sequence is BOS + (seq_len - 1) text
tokens, so seq_len is always the model's input length. The remainder of the text is unused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from jaxtyping import Bool, Int
from torch import Tensor

from interp._util.io import text_sha256  # noqa: F401 (re-exported: result rows name their text by it)
from interp.data.text import load_text  # noqa: F401 (re-exported: the probes read their text through it)
from interp.hf import unwrap
from interp.probes.config import sequence_plan, too_little_text
from interp.probes.names import POSITIONS


def position_mask(tokens: Int[Tensor, "batch pos"], positions: str = "skip_first",
                  attention_mask: Int[Tensor, "batch pos"] | None = None) -> Bool[Tensor, "batch pos"]:
    """Which tokens count: by default not position 0 of a sequence (attention sinks, huge norms)."""
    if positions not in POSITIONS:
        raise ValueError(f"positions={positions!r}: choose one of {POSITIONS}")
    mask = torch.ones(tokens.shape, dtype=torch.bool, device=tokens.device)
    if positions == "skip_first":
        mask[:, 0] = False
    if attention_mask is not None:
        mask &= attention_mask.to(device=tokens.device, dtype=torch.bool)
    return mask


def token_batches(ids: Sequence[int] | Tensor, tokens: int, seq_len: int, batch_size: int,
                  bos_id: int | None = None) -> list[Int[Tensor, "batch seq_len"]]:
    """Consecutive sequences of seq_len positions from the start of `ids` (see the module docstring).

    ValueError if `ids` holds fewer text tokens than n_seqs * (seq_len - [bos]) needs.
    """
    n_seqs, per_seq = sequence_plan(tokens, seq_len, batch_size, bos_id is not None)
    ids = torch.as_tensor(ids, dtype=torch.long)
    need = n_seqs * per_seq
    if ids.numel() < need:
        raise ValueError(too_little_text(ids.numel(), need, tokens, seq_len, bos_id is not None))
    seqs = ids[:need].reshape(n_seqs, per_seq)
    if bos_id is not None:
        seqs = torch.cat([torch.full((n_seqs, 1), bos_id, dtype=torch.long), seqs], 1)
    return list(seqs.split(batch_size))


def encode_text(tokenizer: Any, text: str) -> list[int]:
    """Token ids of `text` WITHOUT special tokens, for interp.data.TextTokenizer or an HF tokenizer."""
    from interp import data

    if isinstance(tokenizer, data.TextTokenizer):
        return tokenizer.encode(text)
    # verbose=False: the text is cut into sequences afterwards, so "longer than the maximum sequence length" is moot
    quiet = {"verbose": False} if hasattr(tokenizer, "model_max_length") else {}   # a transformers tokenizer
    ids = tokenizer.encode(text, add_special_tokens=False, **quiet)
    return list(getattr(ids, "ids", ids))


def _bos_id(tokenizer: Any, model: Any) -> int:
    """BOS for prepend_bos: the tokenizer's bos_token_id, else the model config's, else (our BPE
    models) the document separator eos_id, which is what marks a document start in training."""
    try:
        config = getattr(unwrap(model), "config", None)
    except TypeError:  # not a model object: the backend names what it accepts
        config = None
    for candidate in (getattr(tokenizer, "bos_token_id", None), getattr(config, "bos_token_id", None),
                      getattr(tokenizer, "eos_id", None)):
        if isinstance(candidate, int):
            return candidate
    raise ValueError("prepend_bos=True but neither the tokenizer nor the model config defines a BOS token; "
                     "use prepend_bos=False")
