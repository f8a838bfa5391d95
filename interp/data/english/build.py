"""The ``english`` corpus: every clean offline English source, chunked, deduplicated and decontaminated, cached.

Recipe (docs/corpus.md has the numbers; a change of any step changes the cache key and the corpus hash):
1. each source of SOURCE_ORDER (interp.data.english.text_assets) read. Wiki articles keep their id and text exactly, so
   the hash split puts each one on the same side as in the ``wiki`` corpus: the wiki_heldout evaluation (the
   wiki val split) stays unseen by a model trained on ``english``'s train split. Other ids become
   ``<source>/<id>``, and a document longer than MAX_DOC_CHARS is cut by interp.data.documents.chunk_text into
   ``<source>/<id>#<k>`` (paragraph groups of ~4,000 characters: the hash split then spreads every book over
   train and val, and a contaminated passage costs one chunk, not a whole novel);
2. exact and near duplicates dropped (interp.data.english.dedup), earlier sources first: wiki wins over the rest;
3. every document sharing a 13-gram with an evaluation set dropped (interp.data.contamination);
4. the rest sorted by id; the usual hash split by document id applies (interp.data.documents.split_documents).

The result is cached in cache_dir("corpora", "english-<key>") as documents.jsonl + manifest.json; the key covers
the installed packages of every source (their PACKAGES records), the evaluation files' sha256, the settings and
the source code of the modules that make the corpus, so an edit to a reader rebuilds it. The manifest (corpus
hash, per-source counts, licences, every removed document and why) is what training provenance can cite.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path

from interp._util.io import file_lock, json_sha256, read_json, text_sha256, write_text_atomic
from interp._util.paths import cache_dir
from interp.data import contamination
from interp.data.documents import CHUNK_CHARS, Document, chunk_text, documents_hash
from interp.data.english import dedup
from interp.data.english.text_assets import SETUP_FIX, SOURCES, text_dir
from interp.data.integrity import CacheEntryError, created_with, delete_fix

NAME = "english"
SOURCE_ORDER = ("wiki", "shakespeare", "austen", "kjv", "web", "pydoc")
MAX_DOC_CHARS = 2 * CHUNK_CHARS
DOCUMENTS_FILE = "documents.jsonl"
MANIFEST_FILE = "manifest.json"
# the source files (under interp/data) whose code makes the corpus: part of its cache key
_RECIPE_FILES = ("corpora.py", "documents.py", "sources.py", "english/rlazy.py", "ngrams.py", "english/dedup.py",
                 "contamination.py", "english/build.py")


def source_of(doc_id: str) -> str:
    """The source of a document id of this corpus: the part before the first '/' when that names a source,
    else wiki (whose ids are article titles, kept as they are)."""
    head = doc_id.split("/", 1)[0]
    return head if head in SOURCES and head != "wiki" and "/" in doc_id else "wiki"


def source_documents(name: str) -> list[Document]:
    """One source's documents with corpus ids (prefixed, long ones chunked), sorted by id."""
    source = SOURCES[name]
    source.check()
    if name == "wiki":  # verbatim: same ids, so the same split as the wiki corpus
        docs = source.read()
        clash = [d.id for d in docs if source_of(d.id) != "wiki"]
        if clash:
            raise ValueError(f"wiki article {clash[0]!r} looks like an id of another source; rename the prefix")
        return sorted(docs, key=lambda d: d.id)
    out = []
    for doc in source.read():
        if len(doc.text) <= MAX_DOC_CHARS:
            out.append(Document(f"{name}/{doc.id}", doc.text))
        else:
            out += [Document(f"{name}/{doc.id}#{k}", chunk) for k, chunk in enumerate(chunk_text(doc.text))]
    return sorted(out, key=lambda d: d.id)


def missing_sources(names: Sequence[str] = SOURCE_ORDER) -> list[str]:
    """Sources whose files are not installed (the tests skip on these; the build refuses)."""
    return [n for n in names if SOURCES[n].missing()]


def cache_key(names: Sequence[str] = SOURCE_ORDER) -> str:
    here = Path(__file__).parents[1]
    record = {
        "name": NAME, "sources": list(names),
        "packages": {n: (text_dir() / n / "PACKAGES").read_text() if SOURCES[n].files else SOURCES[n].origin
                     for n in names},
        "code": {f.removesuffix(".py"): text_sha256((here / f).read_text()) for f in _RECIPE_FILES},
        "settings": settings(),
        "eval_data": contamination.eval_fingerprint(),
        "dedup": [dedup.SHINGLE, dedup.NEAR_THRESHOLD, dedup.BANDS, dedup.ROWS],
    }
    return json_sha256(record)


def settings() -> dict:
    return {"max_doc_chars": MAX_DOC_CHARS, "chunk_chars": CHUNK_CHARS,
            "dedup": {"exact": "normalized words equal", "near": f"word {dedup.SHINGLE}-gram Jaccard >= "
                      f"{dedup.NEAR_THRESHOLD} (MinHash {dedup.BANDS}x{dedup.ROWS} candidates, exact check)"},
            "contamination": {"n": contamination.N, "fields": contamination.EVAL_FIELDS,
                              "normalization": "NFKC, lowercase, words = runs of letters/digits"}}


def build(names: Sequence[str] = SOURCE_ORDER) -> tuple[list[Document], dict]:
    """(documents sorted by id, manifest): the recipe of the module docstring, uncached."""
    missing = missing_sources(names)
    if missing:
        raise FileNotFoundError(f"corpus {NAME!r} needs the text sources {', '.join(missing)}, which are not "
                                f"installed under {text_dir()}; {SETUP_FIX}")
    raw = {n: source_documents(n) for n in names}
    ordered = [d for n in names for d in raw[n]]
    kept, removed = dedup.deduplicate(ordered)
    index = contamination.build_index(contamination.eval_texts())
    hits = contamination.scan(kept, index)
    by_doc: dict[str, list] = {}
    for hit in hits:
        by_doc.setdefault(hit.doc_id, []).append(hit)
    for doc_id, doc_hits in by_doc.items():
        removed.append(dedup.Removal(doc_id, "contamination", ",".join(h.eval_set for h in doc_hits),
                                     float(sum(h.n_ngrams for h in doc_hits)),
                                     "; ".join(f"{h.eval_set} doc {h.eval_docs[0]}: {h.example!r}" for h in doc_hits)))
    final = sorted((d for d in kept if d.id not in by_doc), key=lambda d: d.id)
    after_dedup = {d.id for d in kept}
    final_ids = {d.id for d in final}
    manifest = {
        "corpus": NAME, "corpus_hash": documents_hash(final), "n_documents": len(final),
        "n_chars": sum(len(d.text) for d in final), "settings": settings(), "created_with": created_with(),
        "sources": [{"source": n, "title": SOURCES[n].title, "origin": SOURCES[n].origin,
                     "licence": SOURCES[n].licence,
                     "raw_documents": len(raw[n]), "raw_chars": sum(len(d.text) for d in raw[n]),
                     "after_dedup": sum(d.id in after_dedup for d in raw[n]),
                     "documents": sum(d.id in final_ids for d in raw[n]),
                     "chars": sum(len(d.text) for d in raw[n] if d.id in final_ids)} for n in names],
        "eval_sets": index.describe(),
        "contamination": contamination.summarize(hits, kept, source_of, index),
        "removed": [r.to_dict() for r in removed],
    }
    return final, manifest


def _entry(names: Sequence[str] = SOURCE_ORDER) -> Path:
    missing = missing_sources(names)
    if missing:
        raise FileNotFoundError(f"corpus {NAME!r} needs the text sources {', '.join(missing)}, which are not "
                                f"installed under {text_dir()}; {SETUP_FIX}")
    return cache_dir("corpora", f"{NAME}-{cache_key(names)[:16]}")


def load(names: Sequence[str] = SOURCE_ORDER) -> tuple[tuple[Document, ...], dict]:
    """(documents, manifest), built once into the cache and checked against the manifest's hash on load."""
    return _load(tuple(names))


@functools.cache
def _load(names: tuple[str, ...]) -> tuple[tuple[Document, ...], dict]:
    folder = _entry(names)
    docs_path, manifest_path = folder / DOCUMENTS_FILE, folder / MANIFEST_FILE
    with file_lock(folder / ".lock"):
        if not manifest_path.exists():
            docs, manifest = build(names)
            write_text_atomic(docs_path, "".join(json.dumps({"id": d.id, "text": d.text}, ensure_ascii=False) + "\n"
                                                 for d in docs))
            write_text_atomic(manifest_path, json.dumps(manifest, indent=1, ensure_ascii=False))  # last: complete
    manifest = read_json(manifest_path)
    with open(docs_path, encoding="utf-8") as f:
        docs = tuple(Document(r["id"], r["text"]) for r in map(json.loads, f))
    if documents_hash(docs) != manifest["corpus_hash"]:
        raise CacheEntryError(f"{docs_path}: its documents do not hash to the manifest's corpus_hash "
                              f"{manifest['corpus_hash'][:16]} (a torn or edited cache file); {delete_fix(folder)}")
    return docs, manifest


def english_documents() -> tuple[Document, ...]:
    return load()[0]


def manifest() -> dict:
    return load()[1]
