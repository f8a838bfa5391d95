"""Content hashes of cache entries (token files, cached tokenizer.json): recorded once, verified on every load.

Why: a file that still has the right size and only in-range ids (a block of zeros from a disk fault, another
entry's tokenizer.json copied over this one's) passes every shape check and silently trains another model.

How: the entry's metadata json holds ``"content": {"file", "sha256", "stat"}``; ``stat`` is the file's (size,
mtime_ns, ctime_ns, inode) when its sha256 was last checked. A load whose stat still matches skips the hash (any
write to the file changes its ctime, which no user tool can set back); otherwise the whole file is hashed once,
compared, and the new stat recorded. So a cache is hashed once after it is written (token files: while they are
written, at no extra read), copied or touched, not on every run. Measured (sha256 at 0.5-1 GB/s on 2 CPU cores):
the micro preset's cache (train.bin 5.2 MB + val.bin 0.27 MB) 9-12 ms, the tiny preset's (2.3 + 0.12 MB) 2-4 ms;
a warm `prepare_tokens` whose files are unchanged costs a stat and a comparison (160 ms before and after, within
noise); a 100 GB token file would cost 2-3 min once after each copy.

A mismatch is an error naming the file and the folder to delete, never a silent rebuild: something outside this
package wrote into the cache (a disk fault, another program, a copy), which the user should hear about, and
rebuilding a large token cache takes hours that a training run should not spend unasked. Entries written before
hashes were stored get theirs on first use (their content is trusted once; the other checks still apply).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path

from interp._util.errors import InputError
from interp._util.io import file_sha256, write_text_atomic
from interp._util.provenance import package_versions

CONTENT_FIELD = "content"


class CacheEntryError(InputError):
    """A cache entry's file differs from what was recorded when it was written; the message names the fix."""


def created_with() -> dict[str, str]:
    """Package versions stored beside every tokenizer, token file and corpus this package writes."""
    return {**package_versions(), "tokenizers": importlib.metadata.version("tokenizers")}


def delete_fix(folder: Path) -> str:
    """The fix for any damaged cache entry: its folder, deleted, is rebuilt from the source."""
    return f"delete the cache folder {str(folder)!r} (it is rebuilt on the next call)"


def read_meta(path: Path, fix: str, missing_ok: bool = False) -> dict | None:
    """A metadata JSON object (None when missing and ``missing_ok``); InputError naming the file and ``fix``."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if missing_ok:
            return None
        raise
    except ValueError as err:  # bad JSON or bad UTF-8
        raise InputError(f"{path}: not valid JSON ({err}); {fix}") from err
    if not isinstance(obj, dict):
        raise InputError(f"{path}: holds a JSON {type(obj).__name__}, not an object; {fix}")
    return obj


def stat_stamp(path: Path) -> dict[str, int]:
    """What changes whenever the file's bytes do (ctime included: no tool can set it back)."""
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "inode": st.st_ino}


def content_record(path: Path, sha256: str) -> dict:
    """The ``content`` field of a file just written, whose sha256 its writer computed while streaming it."""
    return {"file": path.name, "sha256": sha256, "stat": stat_stamp(path)}


def verify_content(path: Path, meta: dict, meta_path: Path, fix: str) -> None:
    """Check ``path`` against ``meta[CONTENT_FIELD]`` (hashing only when its stat changed) and record the check
    in ``meta_path``; an entry without a record gets one. CacheEntryError naming the file and ``fix``."""
    stored = meta.get(CONTENT_FIELD)
    stamp = stat_stamp(path)
    if isinstance(stored, dict) and stored.get("stat") == stamp and stored.get("sha256"):
        return
    digest = file_sha256(path)
    if isinstance(stored, dict) and stored.get("sha256") not in (None, digest):
        raise CacheEntryError(f"{path}: its sha256 is {digest[:16]}... but {meta_path.name} recorded "
                              f"{str(stored['sha256'])[:16]}... when it was written, so the file changed since "
                              f"(a disk fault, another program or a copy over it); {fix}")
    meta[CONTENT_FIELD] = content_record(path, digest)
    try:
        write_text_atomic(meta_path, json.dumps(meta, indent=2))
    except OSError:  # a read-only cache: nothing recorded, so the next load hashes again
        pass
