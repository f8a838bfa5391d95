"""Corpora by name -> documents -> one split (and the held-out text): every corpus, the built ``english`` one included.

wiki, shakespeare, text files and folders are read by interp.data.documents (the documents, their ids and the hash
split live there); ``english`` is built from those and more by interp.data.english (cached; docs/corpus.md). This
module sits above both, so the english build reads documents without importing the corpora that include it.
"""

from __future__ import annotations

from interp.data.documents import SPLITS, Document, read_documents, split_documents


def load_documents(source: str) -> list[Document]:
    """Documents of a named corpus (see ``interp.data.documents.CORPORA``), a text file, or a folder of .txt/.md
    files (interp.data.documents.read_documents), sorted by id."""
    if source == "english":  # all sources, deduplicated and decontaminated (interp.data.english; cached)
        from interp.data.english.build import english_documents

        return list(english_documents())
    return read_documents(source)


def load_split(source: str, split: str, val_fraction: float = 0.05) -> list[Document]:
    """The documents of one split of `source`, sorted by id."""
    if split not in SPLITS:
        raise ValueError(f"split={split!r}: choose one of {SPLITS}")
    train, val = split_documents(load_documents(source), val_fraction)
    return sorted(train if split == "train" else val, key=lambda d: d.id)


def heldout_text(source: str = "wiki", split: str = "val", val_fraction: float = 0.05) -> str:
    """The documents of one split, sorted by id, joined by a blank line: the default evaluation text."""
    return "\n\n".join(doc.text for doc in load_split(source, split, val_fraction))
