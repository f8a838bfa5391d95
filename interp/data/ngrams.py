"""Normalized words and hashed word n-grams: the one definition that deduplication and the contamination check share.

Normalization (what "the same words" means everywhere here): Unicode NFKC, lowercase, curly apostrophes made
straight, then words are the maximal runs of letters and digits (``[^\\W_]+``): punctuation, quotes, markup
characters and whitespace only separate words, so "Don't!" is ``don t`` and "state-of-the-art" four words.

Hashes are deterministic across processes and machines (blake2b per distinct word, never Python's ``hash``);
an n-gram's hash is a polynomial of its words' hashes modulo 2**64, computed for all n-grams of a document at
once with numpy. Two different n-grams share a hash with probability ~2**-64 per pair; the contamination check
confirms each reported overlap on the words themselves.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata

import numpy as np
from jaxtyping import UInt64

_WORD = re.compile(r"[^\W_]+")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)   # odd: the polynomial's base


def words(text: str) -> list[str]:
    """The normalized words of a text (see the module docstring)."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).lower().translate(_APOSTROPHES))


def normalized(text: str) -> str:
    """The normalized words joined by single spaces: equal for texts that differ only in case, punctuation,
    quotes or whitespace."""
    return " ".join(words(text))


@functools.lru_cache(maxsize=1 << 20)
def _word_hash(word: str) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")


def word_hashes(tokens: list[str]) -> UInt64[np.ndarray, " n_words"]:
    return np.fromiter((_word_hash(w) for w in tokens), dtype=np.uint64, count=len(tokens))


def ngram_hashes(hashes: UInt64[np.ndarray, " n_words"], n: int) -> UInt64[np.ndarray, " n_ngrams"]:
    """The hash of every run of ``n`` consecutive words (empty when there are fewer than ``n`` words)."""
    count = len(hashes) - n + 1
    if count <= 0:
        return np.zeros(0, dtype=np.uint64)
    out = hashes[:count].copy()
    with np.errstate(over="ignore"):
        for j in range(1, n):
            out = out * _MULTIPLIER + hashes[j:j + count]
    return out


def text_ngrams(text: str, n: int) -> UInt64[np.ndarray, " n_ngrams"]:
    return ngram_hashes(word_hashes(words(text)), n)
