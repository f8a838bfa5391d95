"""manifest.json of a tokenized folder (`interp data tokenize`): its declared schema and its one reader.

read_manifest checks the document against MANIFEST_SCHEMA and against itself (shard counts, totals and the
content hash must agree with its entries, so a deleted entry is found) and keeps every path it names inside the
folder (interp._util.schema.inside); anything else is one InputError naming manifest.json and the field.
tests/bad_inputs/test_formats_fuzz_manifest.py mutates a valid manifest and asserts exactly that.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp._util.errors import InputError
from interp._util.io import json_sha256, read_json
from interp._util.schema import Check, Field, Schema, inside, list_of
from interp.data.documents import SPLITS
from interp.data.tokens import token_dtype

MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = "interp.tokens-manifest/1"
SHARDS_DIR = "shards"

MAX_COUNT = 1 << 62                 # tokens, documents, shards: anything larger is not a count we wrote
MAX_VOCAB = 1 << 32                 # uint32 ids
SHARD_NAME = re.compile(r"[A-Za-z0-9._+-]+")   # _shard_name's characters: one folder name under shards/


def _count(value: Any) -> bool | str:
    return (type(value) is int and 0 <= value <= MAX_COUNT) or f"a whole number from 0 to {MAX_COUNT:,}"


def _per_split(check: Check, what: str) -> Check:
    """A check: an object with exactly the splits train and val, each passing `check`."""
    def per_split(value: dict) -> bool | str:
        ok = set(value) == set(SPLITS) and all(check(value[s]) is True for s in SPLITS)
        return ok or f"{{'train': ..., 'val': ...}} of {what}"
    return per_split


def _sha256(value: Any) -> bool | str:
    return (isinstance(value, str) and re.fullmatch(r"[0-9a-f]{64}", value) is not None) or "a sha256 (64 hex)"


def _fraction(value: Any) -> bool | str:
    return (isinstance(value, (int, float)) and math.isfinite(value) and 0 <= value < 1) or "a number in [0, 1)"


_COUNTS = _per_split(_count, "counts")
MANIFEST_SCHEMA = Schema(MANIFEST_FILE, {
    "format": Field(str, check=lambda v: v == MANIFEST_FORMAT or repr(MANIFEST_FORMAT)),
    "complete": Field(bool),
    "missing_shards": Field(list, check=list_of(str, "shard names")),
    "tokenizer": Field(dict),
    "settings": Field(dict),
    "n_tokens": Field(dict, check=_COUNTS),
    "n_documents": Field(dict, check=_COUNTS),
    "n_shards": Field(int, check=_count),
    "content_hash": Field(str, check=_sha256),
    "shards": Field(list, check=list_of(dict, "objects (one per shard)")),
    "skipped_inputs": Field(list, required=False),
})
TOKENIZER_SCHEMA = Schema(MANIFEST_FILE, {
    "name": Field(str),
    "hash": Field(str, check=lambda v: bool(v) or "a non-empty hash"),
    "vocab_size": Field(int, check=lambda v: 1 <= v <= MAX_VOCAB or f"a vocabulary size from 1 to {MAX_VOCAB:,}"),
    "eos_id": Field(int, check=_count),
    "file": Field(str),
})
SETTINGS_SCHEMA = Schema(MANIFEST_FILE, {
    "val_fraction": Field((int, float), check=_fraction),
    "dtype": Field(str, check=lambda v: v in ("uint16", "uint32") or "'uint16' or 'uint32'"),
    "tokenizer_hash": Field(str),
    "vocab_size": Field(int),
})
SHARD_SCHEMA = Schema(MANIFEST_FILE, {
    "name": Field(str),
    "n_tokens": Field(dict, check=_COUNTS),
    "n_documents": Field(dict, check=_COUNTS),
    "sha256": Field(dict, check=_per_split(_sha256, "sha256s")),
    "inputs": Field(list, required=False),
})


@dataclass(frozen=True)
class ShardEntry:
    """One finished shard as manifest.json records it; ``folder`` is checked to lie inside DIR/shards."""

    name: str
    folder: Path
    n_tokens: dict[str, int]
    n_documents: dict[str, int]
    sha256: dict[str, str]


@dataclass(frozen=True)
class Manifest:
    """manifest.json of a tokenized folder, checked (read_manifest): what the loader and the next run use."""

    path: Path
    doc: dict                        # the whole document (unknown keys kept)
    complete: bool
    missing_shards: tuple[str, ...]
    n_shards: int
    tokenizer: dict                  # name, hash, vocab_size, eos_id, file (+ spec, eos_token)
    tokenizer_path: Path             # DIR/<tokenizer.file>, inside DIR
    settings: dict
    n_tokens: dict[str, int]
    n_documents: dict[str, int]
    content_hash: str
    shards: tuple[ShardEntry, ...]


def read_manifest(folder: str | Path) -> Manifest:
    """manifest.json of a tokenized folder, checked against MANIFEST_SCHEMA and against itself, or one InputError
    naming the file and the field: a missing key or a wrong type; a shard or tokenizer path that leaves the folder
    (``../``, absolute, a link out); a shard entry removed or edited (its count, the totals, n_shards and the
    content hash must all agree, so a deleted entry can never train silently on less data)."""
    folder = Path(folder).expanduser()
    path = folder / MANIFEST_FILE
    fix = f"rerun `interp data tokenize ... --out {folder}` with the same sources (finished shards are kept)"
    try:
        doc = read_json(path)
    except ValueError as err:
        raise InputError(f"is not valid JSON ({err.__cause__ or err})", path=path, fix=fix) from err
    except RecursionError as err:
        raise InputError("is nested too deeply to be a manifest", path=path, fix=fix) from err
    if isinstance(doc, dict) and isinstance(doc.get("format"), str) and doc["format"] != MANIFEST_FORMAT:
        raise InputError(f"format is {doc['format']!r}, not {MANIFEST_FORMAT!r}", path=path, field="format", fix=fix)
    schema = dataclasses.replace(MANIFEST_SCHEMA, fix=fix)
    schema.validate(doc, path)
    tok = dataclasses.replace(TOKENIZER_SCHEMA, fix=fix).validate(doc["tokenizer"], path, prefix="tokenizer.")
    settings = dataclasses.replace(SETTINGS_SCHEMA, fix=fix).validate(doc["settings"], path, prefix="settings.")

    def refuse(field: str, message: str) -> InputError:
        return InputError(message, path=path, field=field, fix=fix)

    if tok["eos_id"] >= tok["vocab_size"]:
        raise refuse("tokenizer.eos_id", f"is {tok['eos_id']}, not below vocab_size {tok['vocab_size']}")
    for key in ("tokenizer_hash", "vocab_size"):
        if settings[key] != tok[key.removeprefix("tokenizer_")]:
            raise refuse(f"settings.{key}", f"is {settings[key]!r} but tokenizer.{key.removeprefix('tokenizer_')} "
                                            f"is {tok[key.removeprefix('tokenizer_')]!r}")
    if settings["dtype"] != token_dtype(tok["vocab_size"]).name:
        raise refuse("settings.dtype", f"is {settings['dtype']!r} but a vocabulary of {tok['vocab_size']:,} is "
                                       f"stored as {token_dtype(tok['vocab_size']).name!r}")
    tokenizer_path = inside(folder, tok["file"], path=path, key="tokenizer.file", fix=fix)
    if not Path(tok["file"]).parts or tokenizer_path.resolve() == folder.resolve():
        raise refuse("tokenizer.file", f"is {tok['file']!r}, not a file in the folder")
    shards: list[ShardEntry] = []
    for i, entry in enumerate(doc["shards"]):
        entry = dataclasses.replace(SHARD_SCHEMA, fix=fix).validate(entry, path, prefix=f"shards[{i}].")
        name = entry["name"]
        shard_folder = inside(folder / SHARDS_DIR, name, path=path, key=f"shards[{i}].name", fix=fix)
        if not SHARD_NAME.fullmatch(name) or name in (".", ".."):
            raise refuse(f"shards[{i}].name", f"is {name!r}, not the name of a folder in {SHARDS_DIR}/")
        shards.append(ShardEntry(name, shard_folder, dict(entry["n_tokens"]), dict(entry["n_documents"]),
                                 dict(entry["sha256"])))
    names = [s.name for s in shards]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise refuse("shards", f"lists shard {twice!r} twice")
    missing = doc["missing_shards"]
    if doc["complete"] != (not missing):
        raise refuse("complete", f"is {doc['complete']} but missing_shards lists {len(missing)} shard(s)")
    if len(shards) + len(missing) != doc["n_shards"]:
        raise refuse("shards", f"lists {len(shards)} finished and {len(missing)} missing shard(s), but n_shards is "
                               f"{doc['n_shards']} (a shard entry was removed or added by hand)")
    for key in ("n_tokens", "n_documents"):
        for split in SPLITS:
            total = sum(s.n_tokens[split] if key == "n_tokens" else s.n_documents[split] for s in shards)
            if total != doc[key][split]:
                raise refuse(f"{key}.{split}", f"is {doc[key][split]:,} but the {len(shards)} shard entries hold "
                                               f"{total:,} (a shard entry was removed or edited by hand)")
    if json_sha256([[s.name, s.sha256] for s in shards]) != doc["content_hash"]:
        raise refuse("content_hash", "does not match the shard entries (one was removed, added or edited by hand)")
    return Manifest(path=path, doc=doc, complete=doc["complete"], missing_shards=tuple(missing),
                    n_shards=doc["n_shards"], tokenizer=tok, tokenizer_path=tokenizer_path, settings=settings,
                    n_tokens=dict(doc["n_tokens"]), n_documents=dict(doc["n_documents"]),
                    content_hash=doc["content_hash"], shards=tuple(shards))
