"""Output paths checked before any work (torch-free): a table that cannot be written must fail in
milliseconds, not after the whole computation (the results would be lost)."""

from __future__ import annotations

import os
from pathlib import Path

from interp._util.errors import InputError

TABLE_SUFFIXES = (".parquet", ".csv")


def check_output(path: str | Path, suffixes: tuple[str, ...] = TABLE_SUFFIXES, flag: str = "--out") -> Path:
    """InputError now, before anything is computed, when `path` cannot be written: a suffix other than
    `suffixes` (a .txt would get parquet bytes), an existing directory, or a parent folder that cannot be
    created or written (a file in the way, no permission). Creates nothing."""
    path = Path(path)
    if path.suffix not in suffixes:
        raise InputError(f"unknown table suffix {path.suffix or '(none)'!r}; the table is written as "
                         f"{' or '.join(suffixes)}: end the path in one of those", path=path, field=flag)
    if path.is_dir():
        raise InputError("is a directory; give a file path for the table", path=path, field=flag)
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent  # the first folder that exists: the rest is created when writing
    if not folder.is_dir():
        raise InputError(f"cannot create its folder: {folder} is a file", path=path, field=flag)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"cannot write there: {folder} is not writable; choose another {flag}", path=path,
                         field=flag)
    return path
