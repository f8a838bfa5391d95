"""Declared schemas for the files interp reads: one `Schema` per format, one InputError per bad field.

Every file format we accept from disk (config.json blocks, manifest.json, train_state.pt, a safetensors header,
a GGUF tensor table, parquet tables) is read by one reader that checks it against a Schema before anything
uses it. A reader returns the checked dict or raises one InputError naming the file, the field and the fix,
never a KeyError or TypeError from deep inside the code that trusted it (tests/bad_inputs/test_formats_fuzz.py mutates a
valid file of each format and asserts exactly that).

    MANIFEST = Schema("manifest.json", {
        "format": Field(str),
        "shards": Field(list, check=lambda v: all(isinstance(s, dict) for s in v) or "a list of objects"),
        "n_tokens": Field(int, check=non_negative),
        "note": Field(str, required=False),
    }, fix="rerun `interp data tokenize` into a new --out")
    doc = MANIFEST.validate(read_json(path), path)
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from interp._util.errors import InputError, one_line

# check(value) -> True/None when fine, or a string saying what the value should be
Check = Callable[[Any], "bool | str | None"]


@dataclass(frozen=True)
class Field:
    """One key of a JSON-like document: its type(s), whether it must be there, and an optional value check."""

    types: type | tuple[type, ...]
    required: bool = True
    check: Check | None = None
    nullable: bool = False


@dataclass(frozen=True)
class Schema:
    """The keys a document of one format must (or may) hold. Unknown keys are kept: newer writers may add some."""

    what: str                                   # "manifest.json", "train_state.pt", ...
    fields: dict[str, Field]
    fix: str = ""                               # how to repair a file that fails, for every message

    def validate(self, doc: Any, path: str | os.PathLike | None, *, prefix: str = "") -> dict:
        """doc, checked: a dict whose every declared field has its type and passes its check."""
        if not isinstance(doc, dict):
            raise InputError(f"{self.what}{' ' + prefix if prefix else ''} is a {type_name(doc)}, not an object",
                             path=path, fix=self.fix or None)
        for name, spec in self.fields.items():
            key = f"{prefix}{name}"
            if name not in doc:
                if spec.required:
                    raise InputError(f"{self.what} has no field {key!r}", path=path, field=key, fix=self.fix or None)
                continue
            check_value(doc[name], spec, path=path, key=key, fix=self.fix)
        return doc

    def read(self, path: str | os.PathLike, *, missing_ok: bool = False) -> dict | None:
        """The JSON file at `path`, parsed (parse_json) and validated; None for a missing file when missing_ok."""
        if Path(path).exists() and not Path(path).is_file():   # a folder; a FIFO, whose read would wait forever
            raise InputError(f"{self.what} is not a regular file", path=path, fix=self.fix or None)
        try:
            raw = Path(path).read_bytes()
        except FileNotFoundError:
            if missing_ok:
                return None
            raise
        return self.validate(parse_json(raw, path, what=self.what, fix=self.fix), path)


def parse_json(text: str | bytes, path: str | os.PathLike | None, *, what: str, fix: str = "") -> Any:
    """JSON text (bytes: UTF-8) as a document, or one InputError naming the file: not UTF-8, not JSON, a number
    too long to convert, nested too deeply. What it holds is the caller's Schema's to check."""
    try:
        return json.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
    except (ValueError, RecursionError) as err:   # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise InputError(f"{what} is not valid JSON ({one_line(err)[:200]})", path=path, fix=fix or None) from None


def type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def check_value(value: Any, spec: Field, *, path: str | os.PathLike | None, key: str, fix: str = "") -> Any:
    """value, or an InputError naming the field: wrong type (bool is not an int), or the check's complaint."""
    if value is None and spec.nullable:
        return value
    types = spec.types if isinstance(spec.types, tuple) else (spec.types,)
    bad_bool = isinstance(value, bool) and bool not in types
    if bad_bool or not isinstance(value, types):
        wanted = " or ".join(t.__name__ for t in types)
        raise InputError(f"is a {type_name(value)} ({_short(value)}), expected {wanted}", path=path, field=key,
                         fix=fix or None)
    if spec.check is not None:
        verdict = spec.check(value)
        if verdict is not None and verdict is not True:
            what = verdict if isinstance(verdict, str) else "an allowed value"
            raise InputError(f"is {_short(value)}, expected {what}", path=path, field=key, fix=fix or None)
    return value


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---- checks used by several schemas ----

def non_negative(value: Any) -> bool | str:
    return (isinstance(value, int | float) and math.isfinite(value) and value >= 0) or "a finite number >= 0"


def positive(value: Any) -> bool | str:
    return (isinstance(value, int | float) and math.isfinite(value) and value > 0) or "a finite number > 0"


def finite(value: Any) -> bool | str:
    return (isinstance(value, int | float) and math.isfinite(value)) or "a finite number"


def list_of(kind: type | tuple[type, ...], what: str) -> Check:
    """A check: every element of a list is of `kind` (bool is not an int)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)

    def check(value: list) -> bool | str:
        ok = all(isinstance(v, kinds) and not (isinstance(v, bool) and bool not in kinds) for v in value)
        return ok or f"a list of {what}"

    return check


def inside(folder: str | os.PathLike, relative: str, *, path: str | os.PathLike, key: str, fix: str = "") -> Path:
    """folder/relative, refused (InputError) unless `relative` is a plain relative path that stays inside
    `folder`: no absolute path, no `..`, no link leading out. Files named by a file (manifest shards, tokenizer
    files) are read only from the folder that names them."""
    parts = PurePosixPath(relative).parts
    if not relative or PurePosixPath(relative).is_absolute() or ".." in parts or "\\" in relative:
        raise InputError(f"is {relative!r}, which leaves the folder", path=path, field=key,
                         fix=fix or "a file named by the folder's own manifest must be a relative path inside it")
    folder = Path(folder)
    target = folder / relative
    root = folder.resolve()
    if target.exists() and root not in (target.resolve(), *target.resolve().parents):
        raise InputError(f"is {relative!r}, a link leading out of the folder to {target.resolve()}", path=path,
                         field=key, fix=fix or "replace the link by the file itself")
    return target
