"""Document deduplication: exact (same normalized words) and near (word 5-gram Jaccard >= 0.8), first one kept.

What counts as a duplicate, and why (docs/corpus.md has the measured numbers):
- exact: two documents whose normalized words (interp.data.ngrams: case, punctuation and whitespace ignored)
  are identical. The later one (in the corpus's source order, then id order) is dropped.
- near: the Jaccard similarity of their sets of word 5-grams is >= NEAR_THRESHOLD (0.8). Candidates come from
  MinHash (NUM_PERM = BANDS x ROWS = 20 x 6 permutations; locality-sensitive banding finds a pair at J = 0.8
  with probability 0.998, at J = 0.5 with 0.27) and every candidate is confirmed with the EXACT Jaccard of the
  two shingle sets, so the threshold is exact and the only approximation is a missed pair (< 0.2 % at J = 0.8).
- not duplicates: different translations of one text (KJV vs WEB Bible chapters: same verses, different words;
  their 5-gram Jaccard is far below 0.8, see docs/corpus.md) and documents sharing a few passages (quotations).
  Both stay: the first is a paraphrase, not a copy, and removing passages would cut documents mid-text.
Documents with fewer than SHINGLE words are compared by the exact rule only.

In-house rather than datatrove: ~150 lines with a brute-force cross-check in the tests, no new dependency in a
venv shared by every stage, and the corpus is small (~30k documents, seconds).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from jaxtyping import UInt64

from interp.data.documents import Document
from interp.data.ngrams import ngram_hashes, normalized, word_hashes, words

SHINGLE = 5
NEAR_THRESHOLD = 0.8
BANDS, ROWS = 20, 6
NUM_PERM = BANDS * ROWS
_SEED = 20261201


@dataclass(frozen=True)
class Removal:
    """A document dropped from a corpus, and why (kept_id: the document it duplicates, or the eval set it shares
    text with; similarity: the exact Jaccard, 1.0 for an exact duplicate, or the number of shared n-grams)."""

    id: str
    reason: str          # "exact_duplicate" | "near_duplicate" | "contamination"
    kept_id: str
    similarity: float
    detail: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _permutations() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(_SEED)
    a = rng.integers(1, 2**63, size=NUM_PERM, dtype=np.uint64) * np.uint64(2) + np.uint64(1)   # odd
    b = rng.integers(0, 2**63, size=NUM_PERM, dtype=np.uint64)
    return a, b


def shingles(text: str) -> UInt64[np.ndarray, " n"]:
    """The distinct hashed word 5-grams of a text (sorted)."""
    return np.unique(ngram_hashes(word_hashes(words(text)), SHINGLE))


def minhash(shingle_set: UInt64[np.ndarray, " n"], a: np.ndarray, b: np.ndarray) -> UInt64[np.ndarray, " perm"]:
    """MinHash signature: per permutation, the least (a * x + b) mod 2**64 over the shingles (top bits decide)."""
    with np.errstate(over="ignore"):
        return (shingle_set[:, None] * a[None, :] + b[None, :]).min(axis=0)


def jaccard(x: np.ndarray, y: np.ndarray) -> float:
    """Exact Jaccard similarity of two sorted sets of distinct hashes."""
    if len(x) == 0 and len(y) == 0:
        return 1.0
    inter = len(np.intersect1d(x, y, assume_unique=True))
    return inter / (len(x) + len(y) - inter)


def deduplicate(docs: Sequence[Document], threshold: float = NEAR_THRESHOLD
                ) -> tuple[list[Document], list[Removal]]:
    """(kept documents in their given order, removals): exact duplicates first, then near duplicates; of two
    duplicates the EARLIER document in ``docs`` is kept, so the caller's order is the priority."""
    kept: list[Document] = []
    removed: list[Removal] = []
    first_by_text: dict[bytes, str] = {}
    for doc in docs:
        digest = hashlib.blake2b(normalized(doc.text).encode("utf-8"), digest_size=16).digest()
        if digest in first_by_text:
            removed.append(Removal(doc.id, "exact_duplicate", first_by_text[digest], 1.0))
        else:
            first_by_text[digest] = doc.id
            kept.append(doc)
    near = near_duplicates(kept, threshold)
    removed += near
    dropped = {r.id for r in near}
    return [d for d in kept if d.id not in dropped], removed


def near_duplicates(docs: Sequence[Document], threshold: float = NEAR_THRESHOLD) -> list[Removal]:
    """Documents with a word 5-gram Jaccard >= threshold to an EARLIER document of ``docs`` that is itself kept."""
    a, b = _permutations()
    sets = [shingles(d.text) for d in docs]
    buckets: dict[tuple[int, bytes], list[int]] = defaultdict(list)
    removed: list[Removal] = []
    gone: set[int] = set()
    for i, s in enumerate(sets):
        if len(s) == 0:
            continue
        bands = minhash(s, a, b).reshape(BANDS, ROWS)
        keys = [(band, bands[band].tobytes()) for band in range(BANDS)]
        candidates = {j for key in keys for j in buckets.get(key, ()) if j not in gone}
        best = max(((jaccard(s, sets[j]), -j) for j in candidates), default=None)
        if best is not None and best[0] >= threshold:
            j = -best[1]
            removed.append(Removal(docs[i].id, "near_duplicate", docs[j].id, round(best[0], 4)))
            gone.add(i)
            continue
        for key in keys:
            buckets[key].append(i)
    return removed
