"""A tiny synthetic corpus and a private cache dir, shared by the tests that train micro models."""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator, Sequence
from pathlib import Path

WORDS = ("the cat dog bird sat ran flew on over under a an big small red green old house tree river "
         "and with then because she he they saw found").split()


def write_corpus(folder: Path, n_docs: int, sentences: int, words: Sequence[str] = WORDS,
                 sentence_len: int | tuple[int, int] = (4, 10), seed: int = 0) -> Path:
    """`n_docs` text files of `sentences` random sentences each (deterministic for a seed)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    lo, hi = (sentence_len, sentence_len) if isinstance(sentence_len, int) else sentence_len
    for i in range(n_docs):
        text = " ".join(" ".join(rng.choice(words) for _ in range(rng.randint(lo, hi) if lo != hi else lo))
                        .capitalize() + "." for _ in range(sentences))
        (folder / f"doc{i:02d}.txt").write_text(text)
    return folder


@contextlib.contextmanager
def private_cache(path: Path) -> Iterator[Path]:
    """Point INTERP_CACHE_DIR at `path` for the duration (tokenizers and token files go there)."""
    old = os.environ.get("INTERP_CACHE_DIR")
    os.environ["INTERP_CACHE_DIR"] = str(path)
    try:
        yield path
    finally:
        if old is None:
            os.environ.pop("INTERP_CACHE_DIR", None)
        else:
            os.environ["INTERP_CACHE_DIR"] = old
