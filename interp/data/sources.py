"""Streaming readers: SOURCE arguments -> input files -> documents (id, text), never a whole corpus in memory.

Input kinds and the document id of each (the id decides train/val by interp.data.documents.is_validation, so it
must depend only on what the document is and where it sits in its input, never on shards, workers or machines):

| input | kind | one document per | id |
|---|---|---|---|
| a ``.txt``/``.md`` file given as SOURCE | ``text`` | ~4,000-character chunk (chunk_text) | ``<file name>#<k>`` |
| a ``.txt``/``.md`` file inside a folder SOURCE | ``text_doc`` | file | ``<path relative to the folder>`` |
| ``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst`` | ``jsonl`` | line | ``<name>#<line index>`` |
| ``.parquet`` | ``parquet`` | row | ``<name>#<row index>`` |
| a saved HF dataset (``save_to_disk``) | ``arrow`` (one per .arrow file) | row | ``<dataset name>#<row index>`` |

``<name>`` is the file name for a file given as SOURCE and the path relative to the folder for a file found in a
folder SOURCE; a dataset's name is its folder's name (or relative path), plus ``/<split>`` for a DatasetDict. Line
and row indices count from 0 over every line/row of the input (blank, bad and empty ones too), so an id never
shifts when another line is repaired. ``--id-field F`` uses the record's own F instead (jsonl, parquet, arrow).
The two text kinds give exactly the ids ``interp train --source`` gives the same file or folder
(interp.data.documents), so both paths hold out the same documents.

A corrupt input (bad gzip/zstd stream, truncated file, unreadable parquet/arrow, text that is not UTF-8) raises
CorruptInput: the shard writer drops what it had read of that input, records why and goes on. A bad JSON line
only skips that line (counted in the input's record); a .jsonl with no valid line at all is corrupt.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from interp._util.errors import InputError
from interp._util.io import file_sha256
from interp.data.documents import (
    _GUTENBERG_END,
    _GUTENBERG_START,
    CHUNK_CHARS,
    TEXT_SUFFIXES,
    read_text_file,
    strip_gutenberg,
)

JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst")
PARQUET_SUFFIXES = (".parquet",)
KNOWN_SUFFIXES = (*TEXT_SUFFIXES, *JSONL_SUFFIXES, *PARQUET_SUFFIXES)
DATASET_MARKERS = ("state.json", "dataset_info.json")   # a Dataset.save_to_disk folder
DATASET_DICT_MARKER = "dataset_dict.json"                # a DatasetDict.save_to_disk folder
DOC_IDS = {  # the document id of each input kind (the table above), stored in every manifest
    "text": "<file name>#<chunk index> (a .txt/.md SOURCE, cut into ~4,000-character chunks)",
    "text_doc": "<path relative to the folder SOURCE> (one document per .txt/.md file)",
    "jsonl": "<name>#<line index>, or the --id-field value",
    "parquet": "<name>#<row index>, or the --id-field value",
    "arrow": "<dataset name>#<row index>, or the --id-field value",
}
BAD_LINE_EXAMPLES = 5       # bad JSON lines quoted per input (all are counted)
READ_BATCH_ROWS = 1_024     # parquet / arrow rows per record batch
HASH_CHUNK = 1 << 20
ZSTD_PIECE = 1 << 12        # compressed bytes per decompress call (zstd expands at most ~32,000x: <= 128 MiB)


class CorruptInput(Exception):
    """An input file that cannot be read to its end; its documents are dropped, the run goes on."""


@dataclass(frozen=True)
class Input:
    """One input file of the plan; ``name`` is its document-id prefix (see the module docstring)."""

    name: str
    path: str
    kind: str
    size: int
    source: int = 0          # index of the SOURCE argument it came from (shards never mix sources)
    doc_prefix: str = ""     # arrow: the dataset's name; other kinds: ``name``
    row_offset: int = 0      # arrow: dataset row index of this file's first row

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Input:
        return cls(**d)


@dataclass
class InputReport:
    """What reading one input found: kept documents, lines/rows left out and why."""

    documents: int = 0
    empty: int = 0              # records whose text is empty or whitespace
    missing_field: int = 0      # records without the text field (or with a non-string value)
    missing_id: int = 0         # records without the --id-field (or with a list/object value there)
    bad_lines: int = 0          # jsonl lines that are not a JSON object in UTF-8
    bad_line_examples: list[str] = field(default_factory=list)

    def bad_line(self, index: int, why: str) -> None:
        self.bad_lines += 1
        if len(self.bad_line_examples) < BAD_LINE_EXAMPLES:
            self.bad_line_examples.append(f"line {index + 1}: {why}")

    def to_dict(self) -> dict:
        return asdict(self)


def missing_fields(counts: dict, field: str, id_field: str | None) -> str:
    """How many records lacked the text field and, with --id-field, the id field, naming each field (an id field
    missing from every record must not read as a missing text field)."""
    text = f"{counts.get('missing_field', 0)} record(s) without a string field {field!r}"
    if id_field is not None:
        text = f"{counts.get('missing_id', 0)} record(s) without the id field {id_field!r} (--id-field), {text}"
    return text


# ----------------------------------------------------------------------------------------------- discovery

def suffix_kind(path: Path) -> str | None:
    name = path.name.lower()
    if name.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if name.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if path.suffix.lower() in TEXT_SUFFIXES:
        return "text"
    return None


def is_dataset_dir(path: Path) -> bool:
    return all((path / m).is_file() for m in DATASET_MARKERS) or (path / DATASET_DICT_MARKER).is_file()


def discover(sources: tuple[str, ...] | list[str], text_field: str, exclude: Path | None = None
             ) -> tuple[list[Input], list[str]]:
    """Every input of the SOURCE arguments, in argument order and sorted within a folder, plus notes on what was
    ignored; a folder ``exclude`` (the output) is never walked into. InputError / FileNotFoundError (nothing is
    written yet) for a missing source, a folder without inputs, an unknown file type, a dataset without the field,
    or two inputs with the same id prefix."""
    inputs: list[Input] = []
    notes: list[str] = []
    for index, source in enumerate(sources):
        path = Path(source).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"source {source!r}: no such file or folder")
        if path.is_dir() and is_dataset_dir(path):
            found = _dataset_inputs(path, path.name, index, text_field)
        elif path.is_dir():
            found, ignored = _folder_inputs(path, index, text_field, exclude)
            if ignored:
                notes.append(f"source {source!r}: ignored {len(ignored)} file(s) of unknown type, e.g. "
                             f"{ignored[0]!r} (inputs end in {', '.join(KNOWN_SUFFIXES)})")
            if not found:
                raise InputError(f"holds no inputs (files ending in {', '.join(KNOWN_SUFFIXES)}, or saved HF "
                                 "datasets)", path=source, fix="pass a folder of text, JSONL or parquet files")
        elif path.is_file():
            kind = suffix_kind(path)
            if kind is None:
                raise InputError(f"unknown input type {path.suffix or '(no suffix)'!r}", path=source,
                                 fix=f"pass files ending in {', '.join(KNOWN_SUFFIXES)}, a folder or a saved "
                                     "HF dataset")
            found = [_input(path, path.name, kind, index)]
        else:
            raise InputError("is neither a regular file nor a folder", path=source,
                             fix="pass a file, a folder or a saved HF dataset")
        inputs.extend(found)
    seen: dict[str, Input] = {}
    for inp in inputs:
        if inp.name in seen:
            raise InputError(f"two inputs share the document-id prefix {inp.name!r} ({seen[inp.name].path} and "
                             f"{inp.path}), so their documents would share ids", path=inp.path,
                             fix="pass their common parent folder instead, or rename one")
        seen[inp.name] = inp
    return inputs, notes


def _input(path: Path, name: str, kind: str, source: int, **extra) -> Input:
    return Input(name=name, path=str(path.resolve()), kind=kind, size=path.stat().st_size, source=source,
                 doc_prefix=extra.pop("doc_prefix", name), **extra)


def _folder_inputs(folder: Path, source: int, text_field: str, exclude: Path | None
                   ) -> tuple[list[Input], list[str]]:
    found, ignored = [], []
    skip = exclude.resolve() if exclude is not None else None
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and (here / d).resolve() != skip]
        datasets_here = sorted(d for d in dirnames if is_dataset_dir(here / d))
        dirnames[:] = sorted(d for d in dirnames if d not in datasets_here)
        for d in datasets_here:
            found.extend(_dataset_inputs(here / d, (here / d).relative_to(folder).as_posix(), source, text_field))
        for name in filenames:
            path = here / name
            if name.startswith(".") or not path.is_file():
                continue
            rel = path.relative_to(folder).as_posix()
            kind = suffix_kind(path)
            if kind is None:
                ignored.append(rel)
            else:
                found.append(_input(path, rel, "text_doc" if kind == "text" else kind, source))
    return sorted(found, key=lambda i: i.name), sorted(ignored)


def _dataset_inputs(folder: Path, name: str, source: int, text_field: str) -> list[Input]:
    """The .arrow files of a saved HF dataset (each split of a DatasetDict), via datasets.load_from_disk."""
    import datasets

    try:
        loaded = datasets.load_from_disk(str(folder))
    except Exception as err:  # datasets raises FileNotFoundError, ValueError, pyarrow errors, ... for a bad folder
        raise InputError(f"not a readable saved HF dataset ({' '.join(str(err).split())})", path=folder,
                         fix="pass a folder written by Dataset.save_to_disk") from err
    splits = loaded.items() if isinstance(loaded, datasets.DatasetDict) else [(None, loaded)]
    inputs = []
    for split, ds in sorted(splits, key=lambda s: s[0] or ""):
        prefix = f"{name}/{split}" if split else name
        if text_field not in ds.column_names:
            raise InputError(f"dataset {prefix!r} has no column {text_field!r} (columns: {ds.column_names})",
                             path=folder, field="--field", fix="pass --field with the text column's name")
        offset = 0
        for cache in ds.cache_files:
            path = Path(cache["filename"])
            rows = _arrow_rows(path)
            inputs.append(_input(path, f"{prefix}/{path.name}", "arrow", source, doc_prefix=prefix, row_offset=offset))
            offset += rows
    return inputs


def _arrow_rows(path: Path) -> int:
    import pyarrow as pa

    with pa.memory_map(str(path)) as source:  # zero-copy: counting rows reads only batch headers
        return sum(batch.num_rows for batch in pa.ipc.open_stream(source))


# ------------------------------------------------------------------------------------------------- hashing

class HashingReader(io.RawIOBase):
    """A binary file whose bytes are sha256-hashed as they are read, so an input is hashed at no extra read."""

    def __init__(self, raw: io.BufferedIOBase):
        self.raw, self.digest = raw, hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.raw.readinto(buffer)
        if n:
            self.digest.update(memoryview(buffer)[:n])
        return n

    def drain(self) -> str:
        """Hash what the reader left unread (a decompressor may stop before the end) and return the sha256."""
        while chunk := self.raw.read(HASH_CHUNK):
            self.digest.update(chunk)
        return self.digest.hexdigest()


class ZstdFrames(io.RawIOBase):
    """A .zst file decompressed frame after frame (concatenated frames read as `zstd -d` reads them), raising
    EOFError when the file ends inside a frame: a truncated .zst is corrupt, exactly as gzip says of a truncated
    .gz (zstandard's stream_reader returns a silent end of file there). Compressed bytes are fed in pieces of
    ZSTD_PIECE, so one call's output stays bounded even for a file built to expand enormously."""

    def __init__(self, raw: io.BufferedIOBase):
        import zstandard

        self.raw, self.decompressor = raw, zstandard.ZstdDecompressor()
        self.frame = None               # the frame being decompressed (a decompressobj); None between frames
        self.pending, self.offset = b"", 0   # compressed bytes read, and how many of them were fed
        self.out, self.position = b"", 0     # decompressed bytes not yet returned

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while self.position >= len(self.out):
            if self.offset >= len(self.pending):
                self.pending, self.offset = self.raw.read(HASH_CHUNK), 0
                if not self.pending:
                    if self.frame is not None:
                        raise EOFError("Compressed file ended before the end-of-stream marker was reached "
                                       "(a truncated zstd frame)")
                    return 0
            if self.frame is None:
                self.frame = self.decompressor.decompressobj()
            piece = self.pending[self.offset:self.offset + ZSTD_PIECE]
            self.offset += len(piece)
            self.out, self.position = self.frame.decompress(piece), 0
            if self.frame.eof:  # the frame is complete: what follows it starts the next one
                rest = self.frame.unused_data
                self.frame = None
                if rest:
                    self.pending, self.offset = rest + self.pending[self.offset:], 0
        n = min(len(buffer), len(self.out) - self.position)
        buffer[:n] = self.out[self.position:self.position + n]
        self.position += n
        return n


# ------------------------------------------------------------------------------------------------- reading

Documents = Iterator[tuple[str, str]]  # (document id, text)


def read_input(inp: Input, text_field: str, id_field: str | None, report: InputReport,
               hashed: Callable[[str], None]) -> Documents:
    """The documents of one input, streamed; calls ``hashed(sha256)`` once the file's bytes are all hashed.
    CorruptInput for an input that cannot be read to its end (see the module docstring)."""
    readers = {"text": _text_chunks, "text_doc": _text_file, "jsonl": _jsonl, "parquet": _parquet, "arrow": _arrow}
    try:
        yield from readers[inp.kind](inp, text_field, id_field, report, hashed)
    except CorruptInput:
        raise
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as err:
        raise CorruptInput(_why(err)) from err
    except Exception as err:
        if _is_decode_error(err):
            raise CorruptInput(_why(err)) from err
        raise


def _why(err: BaseException) -> str:
    return f"{type(err).__name__}: {' '.join(str(err).split()) or 'no message'}"


def _is_decode_error(err: Exception) -> bool:
    """zstandard and pyarrow errors, recognised without importing either."""
    return type(err).__module__.startswith(("zstandard", "pyarrow")) and type(err).__name__.endswith(
        ("Error", "Invalid", "Exception"))


def _keep(doc_id: str, text, report: InputReport) -> bool:
    if not isinstance(text, str):
        report.missing_field += 1
        return False
    if not text.strip():
        report.empty += 1
        return False
    report.documents += 1
    return True


def _text_file(inp: Input, text_field: str, id_field: str | None, report: InputReport, hashed) -> Documents:
    try:
        text = strip_gutenberg(read_text_file(inp.path, "input")).strip()
    except ValueError as err:  # not UTF-8, UTF-16, a NUL byte: read_text_file names the file and the fix
        raise CorruptInput(str(err)) from err
    hashed(file_sha256(inp.path))
    if _keep(inp.name, text, report):
        yield inp.name, text


def _open_lines(path: str, text: bool) -> tuple[HashingReader, io.IOBase]:
    raw = open(path, "rb")  # noqa: SIM115 - closed by the caller through the returned reader
    hashing = HashingReader(raw)
    lower = path.lower()
    if lower.endswith(".gz"):
        stream: io.IOBase = gzip.GzipFile(fileobj=io.BufferedReader(hashing, HASH_CHUNK))
    elif lower.endswith(".zst"):
        stream = io.BufferedReader(ZstdFrames(io.BufferedReader(hashing, HASH_CHUNK)), HASH_CHUNK)
    else:
        stream = io.BufferedReader(hashing, HASH_CHUNK)
    if text:
        stream = io.TextIOWrapper(stream, encoding="utf-8-sig", newline=None)  # newlines as read_text_file
    return hashing, stream


def _jsonl(inp: Input, text_field: str, id_field: str | None, report: InputReport, hashed) -> Documents:
    hashing, stream = _open_lines(inp.path, text=False)
    with hashing.raw, stream:
        for index, line in enumerate(stream):
            if not line.strip():
                continue
            try:
                record = json.loads(line.decode("utf-8"))
            except UnicodeDecodeError as err:
                report.bad_line(index, f"not UTF-8 ({err.reason} at byte {err.start})")
                continue
            except json.JSONDecodeError as err:
                report.bad_line(index, f"not JSON ({err.msg} at column {err.colno})")
                continue
            if not isinstance(record, dict):
                report.bad_line(index, f"a JSON {type(record).__name__}, not an object")
                continue
            doc_id = _doc_id(inp.doc_prefix, index, record, id_field, report)
            text = record.get(text_field)
            if doc_id is not None and _keep(doc_id, text, report):
                yield doc_id, text
        hashed(hashing.drain())
    if report.bad_lines and not (report.documents or report.empty or report.missing_field or report.missing_id):
        raise CorruptInput(f"no line is a JSON object ({report.bad_lines} bad lines; "
                           f"{report.bad_line_examples[0]})")


def _doc_id(prefix: str, index: int, record: dict, id_field: str | None, report: InputReport) -> str | None:
    if id_field is None:
        return f"{prefix}#{index}"
    value = record.get(id_field)
    if value is None or isinstance(value, (dict, list)):
        report.missing_id += 1
        return None
    return str(value)


def _record_batches(inp: Input, text_field: str, id_field: str | None, report: InputReport,
                    batches: Iterator, hashed) -> Documents:
    row = 0
    for batch in batches:
        texts = batch.column(text_field).to_pylist()
        ids = batch.column(id_field).to_pylist() if id_field else None
        for k, text in enumerate(texts):
            doc_id = (_doc_id(inp.doc_prefix, inp.row_offset + row + k, {id_field: ids[k]}, id_field, report)
                      if ids is not None else f"{inp.doc_prefix}#{inp.row_offset + row + k}")
            if doc_id is not None and _keep(doc_id, text, report):
                yield doc_id, text
        row += len(texts)
    hashed(file_sha256(inp.path))


def _check_columns(names: list[str], text_field: str, id_field: str | None) -> None:
    for column in (text_field, id_field):
        if column is not None and column not in names:
            raise CorruptInput(f"no column {column!r} (columns: {names}); pass --field / --id-field")


def _parquet(inp: Input, text_field: str, id_field: str | None, report: InputReport, hashed) -> Documents:
    import pyarrow.parquet as pq

    with pq.ParquetFile(inp.path) as pf:
        _check_columns(pf.schema_arrow.names, text_field, id_field)
        columns = [c for c in (text_field, id_field) if c]
        yield from _record_batches(inp, text_field, id_field, report,
                                   pf.iter_batches(batch_size=READ_BATCH_ROWS, columns=columns), hashed)


def _arrow(inp: Input, text_field: str, id_field: str | None, report: InputReport, hashed) -> Documents:
    import pyarrow as pa

    with pa.OSFile(inp.path) as f:  # read batch by batch into memory (a memory map would count the file in RSS)
        reader = pa.ipc.open_stream(f)
        _check_columns(reader.schema.names, text_field, id_field)
        yield from _record_batches(inp, text_field, id_field, report, iter(reader), hashed)


# ---------------------------------------------------------------------------- a text file, chunked, streamed

def _text_chunks(inp: Input, text_field: str, id_field: str | None, report: InputReport, hashed) -> Documents:
    """documents.file_documents without holding the file: pass 1 finds the Gutenberg markers (and hashes), pass 2
    cuts the lines between them into the chunks documents.chunk_text would cut, with the same ids."""
    with open(inp.path, "rb") as f:
        if f.read(2) in (b"\xff\xfe", b"\xfe\xff"):
            raise CorruptInput(f"input {inp.path!r} is UTF-16 text; convert it to UTF-8: iconv -f utf-16 -t utf-8")
    start, end = _markers(inp.path, hashed)
    k = 0
    for chunk in stream_chunks(_between(inp.path, start, end)):
        if chunk:  # chunk_text drops empty chunks before numbering them
            if _keep(f"{inp.name}#{k}", chunk, report):
                yield f"{inp.name}#{k}", chunk
            k += 1


def _lines(path: str, hashed: Callable[[str], None] | None = None) -> Iterator[str]:
    """The lines of a UTF-8 text file without their '\\n', as ``text.split('\\n')`` gives them (a final ''
    when the text ends with a newline or is empty); CorruptInput at a NUL byte. ``hashed(sha256)`` is called
    once the whole file was read."""
    hashing, stream = _open_lines(path, text=True)
    with hashing.raw, stream:
        last = "\n"
        for index, line in enumerate(stream):
            if "\x00" in line:
                raise CorruptInput(f"input {path!r} is not text: a NUL byte on line {index + 1} (a binary file?)")
            last = line
            yield line.removesuffix("\n")
        if last.endswith("\n"):
            yield ""
        if hashed is not None:
            hashed(hashing.drain())


def _markers(path: str, hashed: Callable[[str], None]) -> tuple[int | None, int | None]:
    """strip_gutenberg's cut points as line indices: the first START line anywhere, and the first END line after
    it (after the start of the text when there is no START line)."""
    start = end_anywhere = end_after_start = None
    for index, line in enumerate(_lines(path, hashed)):
        if start is None and _GUTENBERG_START.match(line):
            start = index
        elif _GUTENBERG_END.match(line):
            if end_anywhere is None:
                end_anywhere = index
            if start is not None and end_after_start is None:
                end_after_start = index
    return start, (end_after_start if start is not None else end_anywhere)


def _between(path: str, start: int | None, end: int | None) -> Iterator[str]:
    """strip_gutenberg's text as lines: after START (its line end kept as a leading ''), before END (the line end
    before it kept as a trailing '')."""
    if start is not None:
        yield ""
    for index, line in enumerate(_lines(path)):
        if end is not None and index >= end:
            yield ""
            return
        if start is None or index > start:
            yield line


def stream_chunks(lines: Iterable[str], chunk_chars: int = CHUNK_CHARS) -> Iterator[str]:
    """documents.chunk_text over lines as they come: the same chunks, empty ones included (callers drop them)."""
    group: list[str] = []
    size = 0
    for line in lines:
        group.append(line)
        size += len(line) + 1
        if (size >= chunk_chars and not line.strip()) or size >= 4 * chunk_chars:
            yield "\n".join(group).strip()
            group, size = [], 0
    yield "\n".join(group).strip()
