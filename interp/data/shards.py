"""The tokenized folder `interp data tokenize` writes: shards of token files plus manifest.json, and its reader.

Layout (DIR = --out)::

    DIR/manifest.json                      what is in the folder (below); written last by every run
    DIR/tokenizer.json, tokenizer_config.json   the tokenizer (so `--tokenizer DIR` loads it again)
    DIR/shards/<name>/train.bin, val.bin   token ids (uint16 when the vocabulary fits, else uint32), each
                                           document followed by the separator, as interp.data.tokens writes
    DIR/shards/<name>/train.json, val.json their metadata (dtype, counts, max id, content sha256 + stat)
    DIR/shards/<name>/shard.json           written last: the shard is complete. Its inputs (name, sha256, size,
                                           mtime), what was skipped and why, the settings, the counts
    DIR/logs/task-I-of-K/                  datatrove's logs and stats of the last run of that task

A shard's name comes from its inputs' names (not its position), so adding inputs never renames a finished shard.
A rerun skips a shard when its shard.json records the same settings and inputs, each input unchanged (same size
and mtime, or else the same sha256, hashed again) and its token files match their recorded sha256
(interp.data.integrity: hashed again only when their stat changed). Anything else rebuilds the shard.

Reading for training (``load_token_dir``, called by interp.data.tokens.prepare_tokens): the train (val) stream
is the concatenation of the shards' train.bin (val.bin) in manifest order, seen as one array (ConcatTokens), so
TokenData's sampling is unchanged: uniform window starts over all train tokens from the run's torch.Generator
(exact resume), fixed consecutive eval windows over the val stream. Windows may cross shard boundaries, exactly
as they cross document boundaries in a single token file.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from interp._util.errors import InputError
from interp._util.io import (
    atomic_write,
    file_lock,
    file_sha256,
    json_sha256,
    read_json,
    remove_stale_temps,
    safe_open,
    write_json_atomic,
)
from interp._util.paths import TOKENS_META_SUFFIX, TOKENS_SUFFIX, cache_dir
from interp.data.documents import SPLITS, is_validation
from interp.data.integrity import CONTENT_FIELD, content_record, created_with
from interp.data.manifest import (  # noqa: F401 (re-exported: the folder's public names)
    MANIFEST_FILE,
    MANIFEST_FORMAT,
    SHARDS_DIR,
    Manifest,
    ShardEntry,
    read_manifest,
)
from interp.data.sources import DOC_IDS, CorruptInput, Input, InputReport, read_input
from interp.data.tokenizers import TextTokenizer
from interp.data.tokens import (
    ENCODE_BATCH_DOCS,
    TOKENS_FORMAT,
    TokenData,
    check_tokens,
    token_dtype,
)

SHARD_FILE = "shard.json"
SHARD_FORMAT = 1                    # bump when a shard's layout or the document ids change
ENCODE_BATCH_CHARS = 1 << 20        # characters per encode_batch call (with ENCODE_BATCH_DOCS): bounded memory
OPEN_FILES = 64                     # memmaps ConcatTokens keeps open (each holds a file descriptor)
BIN_FILES = tuple(f"{s}{TOKENS_SUFFIX}" for s in SPLITS)
META_FILES = tuple(f"{s}{TOKENS_META_SUFFIX}" for s in SPLITS)


@dataclass(frozen=True)
class ShardSpec:
    """One shard of the plan: its folder name under shards/ and its inputs (consecutive files of one source)."""

    name: str
    inputs: tuple[Input, ...]

    def to_dict(self) -> dict:
        return {"name": self.name, "inputs": [i.to_dict() for i in self.inputs]}

    @classmethod
    def from_dict(cls, d: dict) -> ShardSpec:
        return cls(d["name"], tuple(Input.from_dict(i) for i in d["inputs"]))


def _identity(inp: Input | dict) -> tuple:
    """What makes an input the same input (its path may move with the corpus)."""
    d = inp.to_dict() if isinstance(inp, Input) else inp
    return d["name"], d["kind"], d["doc_prefix"], d["row_offset"]


# ------------------------------------------------------------------------------------------------ writing

class _SplitWriter:
    """One split's token file being written: counts, max id and sha256 as it goes; rolled back per input."""

    def __init__(self, f, vocab_size: int):
        self.f, self.vocab_size, self.dtype = f, vocab_size, token_dtype(vocab_size)
        self.digest, self.n_tokens, self.n_documents, self.max_id = hashlib.sha256(), 0, 0, -1

    def mark(self) -> tuple:
        return self.f.tell(), self.digest.copy(), self.n_tokens, self.n_documents, self.max_id

    def rollback(self, mark: tuple) -> None:
        position, self.digest, self.n_tokens, self.n_documents, self.max_id = mark
        self.f.seek(position)
        self.f.truncate()

    def add(self, ids: list[int], n_documents: int) -> None:
        if not ids:
            return
        array = np.asarray(ids, dtype=np.int64)
        low, high = int(array.min()), int(array.max())
        if low < 0 or high >= self.vocab_size:
            raise ValueError(f"the tokenizer produced id {high if high >= self.vocab_size else low} outside "
                             f"[0, vocab_size={self.vocab_size})")
        data = array.astype(self.dtype).tobytes()
        self.digest.update(data)
        self.f.write(data)
        self.n_tokens += array.size
        self.n_documents += n_documents
        self.max_id = max(self.max_id, high)


def _encode_input(inp: Input, settings: dict, tok: TextTokenizer, writers: dict[bool, _SplitWriter],
                  report: InputReport, record: dict) -> None:
    """Tokenize one input into the two writers (validation = True), in batches of documents."""
    texts: list[str] = []
    held_out: list[bool] = []
    chars = 0

    def flush() -> None:
        flat: dict[bool, list[int]] = {False: [], True: []}
        for ids, val in zip(tok.encode_batch(texts), held_out, strict=True):
            flat[val].extend(ids)
            flat[val].append(tok.eos_id)
        for val, writer in writers.items():
            writer.add(flat[val], held_out.count(val))
        texts.clear()
        held_out.clear()

    def hashed(sha256: str) -> None:
        record["sha256"] = sha256

    for doc_id, text in read_input(inp, settings["field"], settings["id_field"], report, hashed):
        texts.append(text)
        held_out.append(is_validation(doc_id, settings["val_fraction"]))
        chars += len(text)
        if len(texts) >= ENCODE_BATCH_DOCS or chars >= ENCODE_BATCH_CHARS:
            flush()
            chars = 0
    if texts:
        flush()


def _input_record(inp: Input) -> dict:
    return {"name": inp.name, "path": inp.path, "kind": inp.kind, "doc_prefix": inp.doc_prefix,
            "row_offset": inp.row_offset, "bytes": None, "mtime_ns": None, "sha256": None, "status": "ok",
            "error": None}


def _stamp(inp: Input, record: dict) -> None:
    """The input's size and mtime as it is read (a rerun compares them first); CorruptInput when it is gone."""
    try:
        st = os.stat(inp.path)
    except OSError as err:
        raise CorruptInput(f"cannot be read ({err.strerror})") from err
    record.update(bytes=st.st_size, mtime_ns=st.st_mtime_ns)


def write_shard(folder: Path, spec: ShardSpec, settings: dict, tok: TextTokenizer) -> dict:
    """Tokenize the shard's inputs into folder/{train,val}.bin (+ .json) and write shard.json last, atomically.

    An input raising CorruptInput is rolled back out of both files and recorded as skipped; anything else
    (a full disk, a bug) propagates and leaves the previous shard files as they were."""
    folder.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(folder, (*BIN_FILES, *META_FILES, SHARD_FILE))
    inputs: list[dict] = []
    writers: dict[bool, _SplitWriter] = {}
    val_temp: list[Path] = []

    def write_bins(train_path: Path) -> None:
        # val.bin is written beside train.bin inside atomic_write's private temporary folder (one pass over the
        # inputs fills both), then moved into val.bin's own temporary by the second writer; a kill leaves both
        # inside `.train.bin.*.tmp/`, which the next run's remove_stale_temps sweeps
        val_temp.append(train_path.parent / BIN_FILES[1])
        with safe_open(train_path, "wb") as ft, safe_open(val_temp[0], "wb") as fv:
            writers.update({False: _SplitWriter(ft, tok.vocab_size), True: _SplitWriter(fv, tok.vocab_size)})
            for inp in spec.inputs:
                record, report = _input_record(inp), InputReport()
                marks = {val: w.mark() for val, w in writers.items()}
                try:
                    _stamp(inp, record)
                    _encode_input(inp, settings, tok, writers, report, record)
                except CorruptInput as err:
                    for val, w in writers.items():
                        w.rollback(marks[val])
                    report = InputReport()
                    record.update(status="skipped", error=str(err))
                    with contextlib.suppress(OSError):
                        record["sha256"] = file_sha256(inp.path)  # a rerun retries it once the file changes
                inputs.append({**record, **report.to_dict()})

    atomic_write(folder, {BIN_FILES[0]: write_bins, BIN_FILES[1]: lambda p: os.replace(val_temp[0], p)})
    counts = {split: writers[split == "val"] for split in SPLITS}
    record = {"format": SHARD_FORMAT, "name": spec.name, "settings": settings, "inputs": inputs,
              "n_tokens": {s: w.n_tokens for s, w in counts.items()},
              "n_documents": {s: w.n_documents for s, w in counts.items()},
              "sha256": {s: w.digest.hexdigest() for s, w in counts.items()}, "created_with": created_with()}
    metas = {split: {"format": TOKENS_FORMAT, "shard": spec.name, "split": split, "tokenizer": settings["tokenizer"],
                     "tokenizer_hash": settings["tokenizer_hash"], "vocab_size": tok.vocab_size,
                     "dtype": w.dtype.name, "itemsize": w.dtype.itemsize, "eos_id": tok.eos_id,
                     "val_fraction": settings["val_fraction"], "n_tokens": w.n_tokens, "n_documents": w.n_documents,
                     "max_token_id": w.max_id, "separator": "eos_id after every document",
                     "created_with": record["created_with"],
                     CONTENT_FIELD: content_record(folder / f"{split}{TOKENS_SUFFIX}", w.digest.hexdigest())}
             for split, w in counts.items()}
    writers_json = {f"{s}{TOKENS_META_SUFFIX}": _json_writer(m) for s, m in metas.items()}
    atomic_write(folder, {**writers_json, SHARD_FILE: _json_writer(record)})  # shard.json last: complete
    return record


def _json_writer(obj: dict):
    text = json.dumps(obj, indent=2) + "\n"
    return lambda p: p.write_text(text, encoding="utf-8")


# ------------------------------------------------------------------------------------------------ checking

def shard_done(folder: Path, spec: ShardSpec, settings: dict, restamp: bool = True) -> tuple[dict | None, str]:
    """(shard.json record, "") when the shard is complete and current (see the module docstring), else
    (None, why it must be built). Inputs found unchanged by their hash get their new stat recorded (unless
    ``restamp`` is False: a shard another --task-index owns, and may be writing, is only read)."""
    try:
        record = read_json(folder / SHARD_FILE, missing_ok=True)
    except ValueError:
        return None, f"its {SHARD_FILE} is unreadable"
    if not isinstance(record, dict):
        return None, "not built yet"
    if record.get("format") != SHARD_FORMAT or record.get("settings") != settings:
        return None, "it was built with other settings"
    recorded = record.get("inputs") or []
    if [_identity(r) for r in recorded] != [_identity(i) for i in spec.inputs]:
        return None, "its inputs changed"
    restamped = False
    for inp, rec in zip(spec.inputs, recorded, strict=True):
        try:
            st = os.stat(inp.path)
            if (st.st_size, st.st_mtime_ns) != (rec.get("bytes"), rec.get("mtime_ns")):
                if file_sha256(inp.path) != rec.get("sha256"):
                    return None, f"input {inp.name} changed"
                rec.update(path=inp.path, bytes=st.st_size, mtime_ns=st.st_mtime_ns)
                restamped = True
        except OSError as err:
            return None, f"input {inp.name} cannot be read ({err.strerror})"
    for split in SPLITS:
        try:
            meta, _ = check_tokens(folder / f"{split}{TOKENS_SUFFIX}", _expected(settings, split))
        except (ValueError, OSError) as err:
            return None, f"its {split} file does not match its record ({' '.join(str(err).split())[:200]})"
        if meta.get(CONTENT_FIELD, {}).get("sha256") != record.get("sha256", {}).get(split):
            return None, f"its {split} file is not the one {SHARD_FILE} records"
    if restamped and restamp:
        write_json_atomic(folder / SHARD_FILE, record)
    return record, ""


def _expected(settings: dict, split: str) -> dict:
    return {"tokenizer_hash": settings["tokenizer_hash"], "vocab_size": settings["vocab_size"],
            "dtype": settings["dtype"], "split": split}


# ------------------------------------------------------------------------------------------------ manifest

def build_manifest(settings: dict, tokenizer: dict, sources: Sequence[str], specs: Sequence[ShardSpec],
                   records: Sequence[dict | None]) -> dict:
    """manifest.json: everything about the folder that does not depend on how it was computed (no worker
    count, no timings), so 1 and N workers, or K machines, write the same manifest."""
    from interp._util.provenance import git_commit

    done = [r for r in records if r is not None]
    missing = [s.name for s, r in zip(specs, records, strict=True) if r is None]
    shards = [{"name": r["name"], "n_tokens": r["n_tokens"], "n_documents": r["n_documents"],
               "sha256": r["sha256"], "inputs": r["inputs"]} for r in done]
    skipped = [{"shard": r["name"], "input": i["name"], "path": i["path"], "error": i["error"]}
               for r in done for i in r["inputs"] if i["status"] != "ok"]
    return {
        "format": MANIFEST_FORMAT, "complete": not missing, "missing_shards": missing,
        "tokenizer": tokenizer, "settings": settings,
        "document_ids": DOC_IDS, "name_is": "the file name for a file SOURCE, else the path relative to its folder",
        "sources": [str(Path(s).expanduser().resolve()) for s in sources],
        "n_tokens": {s: sum(r["n_tokens"][s] for r in done) for s in SPLITS},
        "n_documents": {s: sum(r["n_documents"][s] for r in done) for s in SPLITS},
        "n_shards": len(specs), "content_hash": json_sha256([[r["name"], r["sha256"]] for r in done]),
        "skipped_inputs": skipped, "shards": shards,
        "engine": {"datatrove": _version("datatrove")}, "written_with": created_with(), "git_commit": git_commit(),
    }


def _version(package: str) -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


# ------------------------------------------------------------------------------------------------ reading

class ConcatTokens:
    """The token files of one split, in order, as one read-only 1-D array: ``len()``, ints and contiguous
    slices (what TokenData reads). Files are memory-mapped on first use; at most OPEN_FILES stay open."""

    def __init__(self, paths: Sequence[Path], lengths: Sequence[int], dtype: np.dtype):
        kept = [(Path(p), int(n)) for p, n in zip(paths, lengths, strict=True) if n > 0]
        self.paths = [p for p, _ in kept]
        self.starts = np.concatenate([[0], np.cumsum([n for _, n in kept], dtype=np.int64)]).astype(np.int64)
        self.dtype = np.dtype(dtype)
        self._open: collections.OrderedDict[int, np.memmap] = collections.OrderedDict()

    def __len__(self) -> int:
        return int(self.starts[-1])

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)

    def _file(self, i: int) -> np.memmap:
        if i in self._open:
            self._open.move_to_end(i)
        else:
            if len(self._open) >= OPEN_FILES:
                self._open.popitem(last=False)
            self._open[i] = np.memmap(self.paths[i], dtype=self.dtype, mode="r")
        return self._open[i]

    def __getitem__(self, key: int | slice) -> np.ndarray:
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if step != 1:
                raise IndexError("ConcatTokens: only contiguous slices (step 1)")
            return self._read(start, max(start, stop))
        index = int(key) + (len(self) if int(key) < 0 else 0)
        if not 0 <= index < len(self):
            raise IndexError(f"index {key} out of range for {len(self)} tokens")
        return self._read(index, index + 1)[0]

    def _read(self, start: int, stop: int) -> np.ndarray:
        out = np.empty(stop - start, dtype=self.dtype)
        i, pos = int(np.searchsorted(self.starts, start, side="right")) - 1, start
        while pos < stop:
            end = min(stop, int(self.starts[i + 1]))
            out[pos - start:end - start] = self._file(i)[pos - self.starts[i]:end - self.starts[i]]
            pos, i = end, i + 1
        return out


def is_token_dir(source: object) -> bool:
    """A folder written by `interp data tokenize` (manifest.json beside shards/)."""
    if not isinstance(source, (str, os.PathLike)):
        return False
    path = Path(source).expanduser()
    return (path / MANIFEST_FILE).is_file() and (path / SHARDS_DIR).is_dir()


# ---- manifest.json, declared: the one reader (read_manifest) checks every field the loader uses

def load_token_dir(source: str | Path, tokenizer: str | TextTokenizer = "bpe", val_fraction: float | None = None
                   ) -> TokenData:
    """The tokenized folder as TokenData: every shard's files checked (sizes, dtype, content hash via the stat
    record) against its manifest entry, then viewed as one train and one val stream (ConcatTokens).

    ``tokenizer`` "bpe" (TrainConfig's default) means the folder's own; any other spec or TextTokenizer must
    hash to it. ``val_fraction`` must be the folder's (its split is fixed). A folder with no validation (or no
    training) tokens is refused: training evaluates on the val stream, so it would fail at its first evaluation,
    and again on every resume. InputError naming the fix."""
    folder = Path(source).expanduser()
    manifest = read_manifest(folder)
    path = manifest.path
    fix = f"rerun `interp data tokenize ... --out {folder}` with the same sources (it rebuilds what changed)"
    if not manifest.complete:
        missing = list(manifest.missing_shards)
        raise InputError(f"is incomplete: {len(missing)} of {manifest.n_shards} shards are missing "
                         f"(e.g. {missing[:3]}): another --task-index is still running, or a run was stopped",
                         path=path, field="complete", fix=fix)
    tok_info, settings = manifest.tokenizer, manifest.settings
    if not manifest.tokenizer_path.is_file():
        raise InputError(f"names tokenizer file {tok_info['file']!r}, which is not in the folder", path=path,
                         field="tokenizer.file", fix=fix)
    check_splits(folder, manifest)
    if val_fraction is not None and val_fraction != settings["val_fraction"]:
        raise InputError(f"was split at val_fraction={settings['val_fraction']}, but val_fraction={val_fraction} "
                         "was asked for", path=path, field="val_fraction",
                         fix=f"pass --val-fraction {settings['val_fraction']}, or tokenize again into another --out")
    _check_tokenizer(folder, tokenizer, tok_info)
    dtype = np.dtype(settings["dtype"])
    paths: dict[str, list[Path]] = {s: [] for s in SPLITS}
    lengths: dict[str, list[int]] = {s: [] for s in SPLITS}
    start = time.perf_counter()
    lock = cache_dir("locks") / f"tokens-{json_sha256(str(folder.resolve()))[:16]}.lock"  # not in DIR: read-only ok
    with file_lock(lock):  # ranks loading one folder check (and maybe hash) its shards one at a time
        for shard in manifest.shards:
            for split in SPLITS:
                bin_path = shard.folder / f"{split}{TOKENS_SUFFIX}"
                meta, _ = check_tokens(bin_path, {**_expected(settings, split), "n_tokens": shard.n_tokens[split]},
                                       tok_info["name"], fix=fix)
                if meta.get(CONTENT_FIELD, {}).get("sha256") != shard.sha256[split]:
                    raise InputError(f"holds other tokens than {MANIFEST_FILE} records (rebuilt after the manifest "
                                     "was written)", path=bin_path, fix=fix)
                paths[split].append(bin_path)
                lengths[split].append(shard.n_tokens[split])
    if time.perf_counter() - start > 10:
        print(f"[data] checked {len(manifest.shards)} shards of {folder} in {time.perf_counter() - start:.0f} s",
              file=sys.stderr, flush=True)
    streams = {s: ConcatTokens(paths[s], lengths[s], dtype) for s in SPLITS}
    meta = {"format": MANIFEST_FORMAT, "source": str(source), "source_hash": manifest.content_hash,
            "tokenizer": tok_info["name"], "tokenizer_hash": tok_info["hash"], "vocab_size": tok_info["vocab_size"],
            "dtype": dtype.name, "eos_id": tok_info["eos_id"], "val_fraction": settings["val_fraction"],
            "n_tokens": dict(manifest.n_tokens), "n_documents": dict(manifest.n_documents),
            "n_shards": len(manifest.shards), "path": str(folder.resolve()),
            "tokenizer_path": str(manifest.tokenizer_path.resolve())}
    return TokenData(streams["train"], streams["val"], meta, tok_info["vocab_size"])


def check_splits(folder: str | Path, manifest: Manifest | None = None) -> None:
    """InputError unless the tokenized folder holds tokens in both splits: `interp train --source DIR` samples
    the train stream and evaluates on the val stream, so an empty one fails only at the first step (train) or
    the first evaluation (val), after hours, and again on every resume."""
    folder = Path(folder).expanduser()
    manifest = manifest or read_manifest(folder)
    fraction, docs = manifest.settings["val_fraction"], sum(manifest.n_documents.values())
    for split in SPLITS:
        if manifest.n_tokens[split]:
            continue
        if split == "val":
            why = (f"its validation split is empty: val_fraction={fraction} held out none of its {docs:,} "
                   "documents, and training evaluates on it")
            fix = (f"tokenize again into a new --out with a larger --val-fraction (e.g. 0.05) or more documents; "
                   f"{folder} cannot be trained from")
        else:
            why = f"its training split is empty ({docs:,} documents, all held out at val_fraction={fraction})"
            fix = "tokenize again into a new --out with more documents or a smaller --val-fraction"
        raise InputError(why, path=folder, field=f"n_tokens.{split}", fix=fix)


def _check_tokenizer(folder: Path, tokenizer: str | TextTokenizer, tok_info: dict) -> None:
    if isinstance(tokenizer, str) and tokenizer == "bpe":
        return
    from interp.data.tokenizers import get_tokenizer

    tok = get_tokenizer(tokenizer)
    if tok.hash != tok_info["hash"]:
        raise InputError(f"was tokenized with {tok_info['name']!r} (hash {tok_info['hash']}), but tokenizer "
                         f"{tok.name!r} (hash {tok.hash}) was asked for", path=folder / MANIFEST_FILE,
                         field="tokenizer", fix=f"pass --tokenizer {folder} (its own), or leave --tokenizer out")
