"""Builders shared by the tests/evals/test_evals*.py modules (no tests here): a small English BPE and tiny checkpoints.

The BPE (1,024 tokens) is trained on 300 offline Wikipedia articles in a second or so, so task text (PIQA,
the needle prompts) costs few tokens and a tiny model with n_ctx 256 can take it.
"""

from __future__ import annotations

from pathlib import Path

from tests.factories import tiny_checkpoint, tiny_lm

BPE_VOCAB = 1024
TINY = dict(d_model=32, n_heads=4, d_mlp=[64, 32], n_ctx=256)


def english_bpe(path: Path) -> Path:
    """tokenizer.json of a byte-level BPE (interp.data.train_bpe) trained on 300 wiki articles."""
    from interp.data import load_documents, train_bpe

    if not path.is_file():
        docs = sorted(load_documents("wiki"), key=lambda d: d.id)[:300]
        path.parent.mkdir(parents=True, exist_ok=True)
        train_bpe([d.text for d in docs], BPE_VOCAB).save(str(path))
    return path


def english_checkpoint(path: Path, tokenizer: Path, seed: int = 0, config: dict | None = None, **shape) -> Path:
    """One of our checkpoint dirs: a tiny TaperedLM over the english_bpe vocabulary."""
    return tiny_checkpoint(path, tiny_lm(seed, vocab_size=BPE_VOCAB, **{**TINY, **shape}), config,
                           tokenizer=tokenizer)
