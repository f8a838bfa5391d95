"""Which text: a `--text` spec (a corpus, a hub dataset split or a file) read as one string, and the same text cut
into documents for the text_ppl evaluation task.

Why here, in the data layer: probes, ablations and the evaluation sets all read a text of the user's choice; one
resolver below all of them keeps the choices (and the labels their tables record) the same everywhere.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from interp._util.errors import InputError
from interp.data.corpora import heldout_text
from interp.data.documents import CORPORA, read_text_file
from interp.data.hub_text import hub_text, is_hub_text

# what a --text option accepts: every command that reads a text through load_text shows this one help
TEXT_HELP = (f"text file, a corpus name ({', '.join(CORPORA)}), or a hub dataset: hf:DATASET[:CONFIG[:SPLIT[:COLUMN]]] "
             "or wikitext-2 (the paper's: wikitext-2-raw-v1 test; streamed); default: held-out wiki split")
TEXT_DOC_CHARS = 4000   # a text_ppl document: whole paragraphs, at least this many characters (the last may be less)


def load_text(text: str | Path | None) -> tuple[str, str]:
    """(text, label): None -> held-out wiki split; a corpus name (interp.data.CORPORA) -> its held-out
    split; hf:DATASET[:CONFIG[:SPLIT[:COLUMN]]] or a named text (wikitext-2) -> that dataset split's text
    (interp.data.hub_text, streamed); otherwise a path to a UTF-8 text file, read as `interp train --source` reads one
    (interp.data.read_text_file: strict UTF-8, a clear error naming the file and the fix otherwise)."""
    if is_hub_text(text) and not Path(str(text)).exists():
        return hub_text(str(text))
    if text is None or str(text) in CORPORA:
        source = "wiki" if text is None else str(text)
        return heldout_text(source, "val"), f"{source}:val"
    path = Path(text).expanduser()
    if not path.is_file():
        problem = ("is a folder" if path.is_dir() else "is not a regular file" if path.exists() else "no such file")
        raise FileNotFoundError(f"text={str(text)!r}: {problem}; pass a UTF-8 text file, a corpus name "
                                f"{CORPORA}, a hub dataset (hf:DATASET[:CONFIG[:SPLIT[:COLUMN]]], wikitext-2) "
                                "or None (held-out wiki)")
    return read_text_file(path, what="text"), str(path)


@dataclass(frozen=True)
class TextSet:
    """The documents of `interp eval --text SPEC`, with what identifies them."""

    spec: str
    source: str
    sha256: str          # of the text as read (a hub text: at the dataset's commit)
    documents: tuple[str, ...]


@functools.cache
def text_set(spec: str) -> TextSet:
    """The --text of the text_ppl task as documents: paragraphs (split at blank lines) joined until each holds
    TEXT_DOC_CHARS characters, so perplexity is scored per document as lm-eval's wikitext task does."""
    text, source = load_text(spec)
    documents, current = [], ""
    for paragraph in (p for p in re.split(r"\n\s*\n", text) if p.strip()):
        current = f"{current}\n\n{paragraph}" if current else paragraph
        if len(current) >= TEXT_DOC_CHARS:
            documents.append(current)
            current = ""
    if current:
        documents.append(current)
    if not documents:
        raise InputError(f"{spec!r} ({source}) holds no text", field="--text")
    return TextSet(spec, source, hashlib.sha256(text.encode("utf-8")).hexdigest(), tuple(documents))
