"""A zoo of small checkpoints for the executor tests: N of our tiny checkpoints (different seeds) with a word-level
tokenizer, a text to probe them on, and the table columns that must agree between executors."""

from __future__ import annotations

import random
from pathlib import Path

from tests.factories import WORDS, tiny_checkpoint, tiny_lm, word_tokenizer_json

# the probe settings: tiny (n_ctx 32) and quick
PROBE_ARGS = ("--tokens", "64", "--seq-len", "16", "--batch-size", "2", "--metrics", "rho_mlp,rho_block")
# columns that depend on nothing but the model, the text and the settings
VALUE_COLUMNS = ["path", "kind", "status", "key", "layer", "metric", "mean", "std", "q50", "n_tokens"]


def make_zoo(root: Path, n: int) -> tuple[Path, Path]:
    """(folder of n checkpoints ck0..ck{n-1}, text file)."""
    rng = random.Random(0)
    text = root / "text.txt"
    text.write_text(" ".join(rng.choice(WORDS) for _ in range(2000)))
    tok = root / "tok" / "tokenizer.json"
    word_tokenizer_json(tok, WORDS)
    for i in range(n):
        tiny_checkpoint(root / "zoo" / f"ck{i}", tiny_lm(seed=i), tokenizer=tok)
    return root / "zoo", text


def values(df):
    """The rows that must agree between executors, in a fixed order."""
    return df[VALUE_COLUMNS].sort_values(["path", "metric", "layer"], kind="stable").reset_index(drop=True)
