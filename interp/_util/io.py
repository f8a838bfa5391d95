"""Atomic file writes, JSON reading, safetensors headers, content fingerprints and locks: one copy each.

Why atomic: a process killed mid-write (pre-emption, Ctrl-C, full disk) must leave the previous file
readable. Every file is written inside a private temporary folder `.<name>.XXXXXXXX.tmp/` in the same
directory, fsynced, then moved over the old one with os.replace (atomic on POSIX). A folder rather than a
temporary file because some writers make their own temporary beside their target (safetensors writes
`.tmpXXXXXX` and renames it): a kill then leaves that inside our folder too, where remove_stale_temps finds it.

Test-only fault injection: INTERP_FAULT=GLOB kills the process with SIGKILL (exactly a `kill -9`, no cleanup)
when it reaches a point whose name matches. atomic_write names the moment just before it moves each file
into place "replace <folder>/<file>", e.g. INTERP_FAULT='replace */result.json' dies after a run's final
train_state.pt and before its result.json; 'replace step_000004/model.safetensors' dies inside the write of
a step checkpoint, leaving only its temporaries (tests/training/test_kill_resume.py).
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from interp._util.errors import InputError

try:  # advisory locks; Unix only
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

PathLike = str | os.PathLike
FINGERPRINT_HEAD_BYTES = 8 << 20  # a GGUF keeps its tokenizer and metadata in the header


def _fsync_dir(directory: Path) -> None:
    """Persist the directory entry itself (the rename), not only the file contents."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # some filesystems / platforms cannot open directories
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


TEMP_SUFFIX = ".tmp"
FAULT_ENV = "INTERP_FAULT"
FAULT_PAUSE_ENV = "INTERP_FAULT_PAUSE"
# `.<name>.XXXXXXXX.tmp`: tempfile's 8 random characters between the file name and the suffix.
_TEMP_NAME = re.compile(r"^\.(?P<name>.+)\.[a-z0-9_]{8}" + re.escape(TEMP_SUFFIX) + "$")


def fault_point(name: str) -> None:
    """Test-only: SIGKILL this process here when INTERP_FAULT (a glob) matches `name` (see the module doc). With
    INTERP_FAULT_PAUSE=FILE the first process there creates FILE (its pid and SLURM_JOB_ID) and waits until FILE is
    removed or it is killed, and the others pass: a task held at a known point for a test to signal (tests/jobs)."""
    pattern = os.environ.get(FAULT_ENV)
    if pattern and fnmatch.fnmatchcase(name, pattern):
        sys.stdout.flush()
        sys.stderr.flush()
        if os.environ.get(FAULT_PAUSE_ENV):
            with contextlib.suppress(FileExistsError), open(os.environ[FAULT_PAUSE_ENV], "x") as marker:
                marker.write(f"{os.getpid()} {os.environ.get('SLURM_JOB_ID', '')}\n")
                marker.close()
                while os.path.exists(os.environ[FAULT_PAUSE_ENV]):
                    time.sleep(0.05)
            return
        os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))


def _write_temp(directory: Path, name: str, write: Callable[[Path], object]) -> Path:
    """Write via `write(path)` to `path` = `.<name>.XXXXXXXX.tmp/<name>` beside `name` (created empty first)
    and fsync it; return its path."""
    try:
        folder = Path(tempfile.mkdtemp(prefix=f".{name}.", suffix=TEMP_SUFFIX, dir=directory))
    except OSError as err:
        raise_if_full(err, directory, name)
        raise
    path = folder / name
    try:
        path.touch()  # normal permissions (0666 & ~umask), which the writer may change
        inode = path.stat().st_ino
        write(path)
        if path.stat().st_ino != inode:  # the writer moved its own temporary here: 0600 (safetensors)
            os.chmod(path, 0o666 & ~_umask())
        with open(path, "rb+") as f:
            os.fsync(f.fileno())
    except BaseException as err:
        shutil.rmtree(folder, ignore_errors=True)
        raise_if_full(err, directory, name)
        raise
    return path


class OutputFull(OSError):
    """No room to write an output (disk full, quota, file size limit); the previous file is unchanged."""


# How "no room" reads in OSError numbers and in the messages of writers that wrap them (torch's zip writer,
# safetensors' Rust IoError, transformers' save_pretrained).
_FULL_ERRNOS = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}
_FULL_TEXT = re.compile(r"No space left|Disk quota|File too large|StorageFull|FileTooLarge|QuotaExceeded|"
                        r"os error (?:27|28|122)|file write failed|inline_container.*unexpected pos", re.IGNORECASE)


def is_full(err: BaseException) -> bool:
    """True when an error (or one it wraps) says the device, quota or file size limit has no room left."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in _FULL_ERRNOS or _FULL_TEXT.search(str(err)):
            return True
        err = err.__cause__ or err.__context__
    return False


def raise_if_full(err: BaseException, directory: PathLike, name: str) -> None:
    """Re-raise a no-room error from writing `directory/name` as one OutputFull line naming the device's
    folder, the file and the fix (other errors: return, the caller re-raises them unchanged)."""
    if isinstance(err, OutputFull) or not is_full(err):
        return
    try:
        free = shutil.disk_usage(directory).free
        room = f"{free / 2**20:.1f} MiB free there"
    except OSError:
        room = "free space unknown"
    full = OutputFull(f"{Path(directory) / name}: no room left to write it ({room}; or a quota or file size "
                      "limit); nothing was replaced, the previous version is unchanged (free space on that device "
                      "or choose another output folder)")
    full.errno = errno.ENOSPC
    raise full from None


def atomic_write(directory: PathLike, writers: dict[str, Callable[[Path], object]]) -> None:
    """Write several files so each one is either the old or the complete new version.

    All temporary files are written and fsynced before the first os.replace, in dict order, so a
    crash while writing (the slow part) changes nothing; temporaries are removed on failure.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    temps: dict[str, Path] = {}
    try:
        for name, write in writers.items():
            temps[name] = _write_temp(directory, name, write)
        for name, tmp in list(temps.items()):
            fault_point(f"replace {directory.name}/{name}")
            os.replace(tmp, directory / name)
            tmp.parent.rmdir()
            del temps[name]
    finally:
        for tmp in temps.values():
            shutil.rmtree(tmp.parent, ignore_errors=True)
    _fsync_dir(directory)


def remove_stale_temps(directory: PathLike, names: Iterable[str] | Callable[[str], bool]) -> list[Path]:
    """Delete what killed atomic writes left in `directory`: entries named `.<name>.XXXXXXXX.tmp` (our
    temporary folders, or files from before they were folders) for one of `names` (or a name the predicate
    `names` accepts: a folder of parts named by their keys). Returns what was removed.
    Call it only while owning the directory (holding its lock): a live writer's temporary looks the same."""
    directory = Path(directory)
    ours = names if callable(names) else set(names).__contains__
    removed = []
    for entry in sorted(directory.iterdir()) if directory.is_dir() else ():
        match = _TEMP_NAME.match(entry.name)
        if not match or not ours(match["name"]) or entry.is_symlink():
            continue
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()
        removed.append(entry)
    return removed


def write_json_atomic(path: PathLike, obj: Any) -> None:
    """One JSON file, atomically (used for config.json, result.json and rewritten logs)."""
    path = Path(path)
    text = json.dumps(obj, indent=2, sort_keys=False) + "\n"
    atomic_write(path.parent, {path.name: lambda p: p.write_text(text)})


def write_text_atomic(path: PathLike, text: str) -> None:
    """One text file, atomically."""
    path = Path(path)
    atomic_write(path.parent, {path.name: lambda p: p.write_text(text, encoding="utf-8")})


def read_json(path: PathLike, missing_ok: bool = False, torn_ok: bool = False) -> Any:
    """The JSON document at `path`.

    missing_ok: a missing file gives None instead of FileNotFoundError.
    torn_ok: an unparsable file (a torn write from a killed process) gives None instead of a ValueError
        that names the file.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if missing_ok:
            return None
        raise
    except UnicodeDecodeError as err:   # a binary file: name it, as for bad JSON
        if torn_ok:
            return None
        raise ValueError(f"{path}: not a JSON text file (byte {err.object[err.start]:#04x} at offset {err.start} "
                         "is not UTF-8)") from None
    try:
        return json.loads(text)
    except ValueError as err:
        if torn_ok:
            return None
        raise ValueError(f"{path}: not valid JSON ({err}); repair or delete the file") from err


# bytes per element of each safetensors dtype (the format's own list)
SAFETENSORS_DTYPES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "I16": 2, "U16": 2,
                      "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8, "C64": 8}


def safetensors_header(path: Path, error: type[Exception] = ValueError) -> dict:
    """The tensor entries of a safetensors header, parsed by hand and checked against the format, so a truncated
    or lying file gets one clear message (raised as `error`, naming the file and the tensor), never a Rust error
    or a traceback. Layout: u64 header length, JSON header {name: {dtype, shape, data_offsets}}, data. Checked:
    the header is an object; each entry has a known dtype, a shape of non-negative ints and two integer offsets
    whose span is exactly shape x dtype bytes; the entries tile the data region in offset order (no overlap, no
    gap, nothing after the last), as the safetensors library itself requires."""
    size = path.stat().st_size
    fix = "re-save the checkpoint or restore it from a copy"
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            raise error(f"{path}: {size} bytes, too short to be a safetensors file (truncated); {fix}")
        (n_header,) = struct.unpack("<Q", raw)
        if 8 + n_header > size:
            raise error(f"{path}: header claims {n_header} bytes but the file has {size} (truncated); {fix}")
        try:
            header = json.loads(f.read(n_header).decode("utf-8"))  # the format's encoding (json.loads(bytes) guesses)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
            raise error(f"{path}: unreadable safetensors header ({err}); the file is corrupt") from err
    if not isinstance(header, dict):
        raise error(f"{path}: the safetensors header is a {type(header).__name__}, not an object; the file is "
                    f"corrupt ({fix})")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (isinstance(metadata, dict)
                                     and all(isinstance(v, str) for v in metadata.values())):
        raise error(f"{path}: __metadata__ is not an object of strings; the file is corrupt ({fix})")
    spans = []
    for name, entry in header.items():
        where = f"{path}: tensor {name!r}"
        if not isinstance(entry, dict):
            raise error(f"{where}: its header entry is a {type(entry).__name__}, not an object; the file is corrupt")
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if not isinstance(dtype, str) or dtype not in SAFETENSORS_DTYPES:
            raise error(f"{where}: dtype {dtype!r} is not a safetensors dtype; the file is corrupt ({fix})")
        if not isinstance(shape, list) or not all(type(d) is int and 0 <= d < 2 ** 63 for d in shape):
            raise error(f"{where}: shape {shape!r} is not a list of non-negative integers; the file is corrupt")
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets)
                or not 0 <= offsets[0] <= offsets[1] < 2 ** 63):
            raise error(f"{where}: data_offsets {offsets!r} are not two increasing integers; the file is corrupt")
        numel = 1
        for d in shape:
            numel *= d
        if offsets[1] - offsets[0] != numel * SAFETENSORS_DTYPES[dtype]:
            raise error(f"{where}: data_offsets span {offsets[1] - offsets[0]} bytes but shape {shape} of {dtype} "
                        f"needs {numel * SAFETENSORS_DTYPES[dtype]}; the header lies about the data ({fix})")
        spans.append((offsets[0], offsets[1], name))
    spans.sort()
    data_size = size - 8 - n_header
    position, previous = 0, None
    for begin, end, name in spans:  # the format: tensors tile the data region, in offset order, without gaps
        if begin < position:
            raise error(f"{path}: tensors {previous!r} and {name!r} overlap in the data; the file is corrupt ({fix})")
        if begin > position:
            raise error(f"{path}: tensor {name!r} starts at data byte {begin}, leaving a gap after byte {position} "
                        f"(the header lies about the data); the file is corrupt ({fix})")
        position, previous = end, name
    if 8 + n_header + position > size:
        raise error(f"{path}: tensor data ends at byte {8 + n_header + position} but the file has {size} "
                    f"(truncated); {fix}")
    if position != data_size:
        raise error(f"{path}: the file holds {data_size - position} bytes after the last tensor's data, which the "
                    f"header does not describe; the file is corrupt ({fix})")
    return header


def complete_safetensors(path: PathLike) -> bool:
    """True when the header parses, holds at least one tensor, and the file is exactly as long as it says (catches
    truncation); never raises for a damaged file."""
    try:
        return bool(safetensors_header(Path(path)))
    except (OSError, ValueError, struct.error):
        return False


def file_fingerprint(path: PathLike, head_bytes: int = FINGERPRINT_HEAD_BYTES) -> str:
    """Cheap content key: sha256 of a file's size and first `head_bytes` (16 hex). For keys of large
    weight files that would cost seconds to hash in full; use file_sha256 where the whole content matters."""
    path = Path(path)
    digest = hashlib.sha256(str(path.stat().st_size).encode())
    with path.open("rb") as f:
        digest.update(f.read(head_bytes))
    return digest.hexdigest()[:16]


def _stream_sha256(path: PathLike) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def file_sha256(path: PathLike, cache: PathLike | None = None) -> str:
    """sha256 (64 hex) of a file's bytes, streamed: the one content hash of inputs, shards and weights.

    cache: a folder where the digest is remembered (one small JSON per file) until the file's size or mtime
    changes (a rewrite through os.replace, as every checkpoint save does, changes the mtime), so that the keys of
    interp.jobs hash the same checkpoints once, not on every rerun."""
    if cache is None:
        return _stream_sha256(path)
    path = Path(path).resolve()
    stat = path.stat()  # FileNotFoundError names the file
    entry = Path(cache) / f"{hashlib.sha256(str(path).encode()).hexdigest()[:24]}.json"
    try:
        cached = read_json(entry, missing_ok=True, torn_ok=True)
    except (OSError, ValueError):  # an unreadable entry is recomputed and replaced
        cached = None
    if (isinstance(cached, dict) and cached.get("path") == str(path) and cached.get("size") == stat.st_size
            and cached.get("mtime_ns") == stat.st_mtime_ns):
        return cached["sha256"]
    digest = _stream_sha256(path)
    write_json_atomic(entry, {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
                              "sha256": digest})
    return digest


def text_sha256(text: str) -> str:
    """Full (64 hex) sha256 of a text: every result table names its text by this."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def json_sha256(obj: object) -> str:
    """sha256 (64 hex) of an object's canonical JSON (sorted keys): the cache keys of tokenizers, token files
    and probe settings."""
    return text_sha256(json.dumps(obj, sort_keys=True))


def _refuse_link(path: Path, err: OSError, what: str) -> None:
    """Turn the ELOOP of O_NOFOLLOW into one line naming the link and the fix (other errors pass through)."""
    if err.errno == errno.ELOOP:
        raise UnsafePath(f"{path}: {what} is a symbolic link (to {os.readlink(path) if path.is_symlink() else '?'}); "
                         "interp never writes through a link, so nothing outside the folder changes (remove the "
                         "link, or choose another output)") from None
    raise err


class UnsafePath(OSError):
    """An output, lock or temporary that is a symbolic link, a hard link or not a regular file: refused unwritten."""


def safe_folder(folder: PathLike, root: PathLike) -> Path:
    """`folder`, made where missing and checked component by component below `root` (the folder the user named,
    made as it is): none may be a symbolic link or anything but a folder, so nothing written into a folder of
    ours (a table's parts, its journals) lands elsewhere. safe_open refuses a link at the file; this, above it."""
    folder, current = Path(folder), Path(root)
    current.mkdir(parents=True, exist_ok=True)
    for name in folder.relative_to(current).parts:
        current = current / name
        try:
            os.mkdir(current)
            continue
        except FileExistsError:
            st = os.lstat(current)
        if stat.S_ISLNK(st.st_mode):
            raise UnsafePath(f"{current}: a symbolic link (to {os.readlink(current)}) where interp keeps its own "
                             "folder; interp never writes through a link, so nothing outside changes (remove the "
                             "link)")
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafePath(f"{current}: not a folder, where interp keeps its own folder (remove it)")
    return folder


def remove_entry(path: PathLike) -> None:
    """Remove the directory entry `path` (a file or a link, never what a link points to); missing is fine."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


_WRITE_FLAGS = {"w": os.O_WRONLY | os.O_CREAT | os.O_EXCL, "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND}


def safe_open(path: PathLike, mode: str = "w", *, encoding: str | None = "utf-8"):
    """Open `path` for writing without ever writing through a link: the one way interp opens a file to write
    outside atomic_write's private temporaries (tests/test_structure.py enforces it).

    mode "w": an overwrite removes the old entry and creates a new file (O_CREAT|O_EXCL), so a symlink or a hard
    link planted at `path` is replaced, never written into; "x": the file must be new (FileExistsError);
    "a": append to a regular file with one link (O_NOFOLLOW; a link or a special file is UnsafePath).
    Add "b" for bytes (encoding is then ignored)."""
    path = Path(path)
    base = mode.replace("b", "")
    if base not in _WRITE_FLAGS:
        raise ValueError(f"safe_open: mode {mode!r} is not one of w, x, a (+b)")
    if base == "w":
        remove_entry(path)
    try:
        fd = os.open(path, _WRITE_FLAGS[base] | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as err:
        _refuse_link(path, err, "the file to write")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            kind = "a hard link" if st.st_nlink > 1 else "not a regular file"
            raise UnsafePath(f"{path}: the file to write is {kind}; interp does not write into it (remove it, or "
                             "choose another output)")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": encoding}))


def _open_lock(path: Path, what: str) -> int:
    """fd of the lock file `path` (created), refused when it is a link or not a plain file of its own: a lock
    file gets our pid written into it, which must never land in another file."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0),
                     0o666)
    except OSError as err:
        _refuse_link(path, err, f"the lock of {what}")
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
        os.close(fd)
        raise UnsafePath(f"{path}: the lock of {what} is {'a hard link' if st.st_nlink > 1 else 'not a regular file'}"
                         "; interp does not write into it (remove it)")
    os.set_blocking(fd, True)
    return fd


@contextlib.contextmanager
def file_lock(path: PathLike, *, shared: bool = False) -> Iterator[None]:
    """Exclusive advisory lock on `path` (created) while the block runs: DDP ranks and parallel jobs that
    build the same cache entry wait for each other. A lock file that is a link is refused (UnsafePath).
    shared: many holders at once, none while an exclusive_lock holds it (the tasks of a job, and its sweep)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if fcntl is None:  # pragma: no cover
        yield
        return
    fd = _open_lock(path, f"folder {path.parent}")
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def lock_holder(path: PathLike) -> str | None:
    """The pid written in an exclusive_lock file that a live process holds now, else None (no file, or nobody
    holds it): `interp jobs status` tells a running task from an interrupted one. Never creates the file."""
    path = Path(path)
    if fcntl is None or not path.is_file() or path.is_symlink():
        return None
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
        return None
    finally:
        os.close(fd)


class LockHeld(OSError):
    """Another live process holds an exclusive lock; the message names the lock, the holder and the fix."""


@contextlib.contextmanager
def exclusive_lock(path: PathLike, what: str) -> Iterator[None]:
    """Hold a non-blocking exclusive lock on `path` (created, with our pid in it) while the block runs.

    For output directories and tables that one process must own: a second process fails at once with
    LockHeld ("<what> is in use by pid N ...") instead of interleaving its writes with the first one's.
    The OS drops the lock when its holder dies (kill -9 included), so a stale lock file never blocks.
    A lock file that is a symlink, a hard link or not a regular file is refused (UnsafePath) unwritten.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if fcntl is None:  # pragma: no cover
        yield
        return
    fd = _open_lock(path, what)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            raise LockHeld(f"{what} is in use by another process (pid {holder}, lock {path}); wait for it to "
                           "finish or stop it, or choose another output") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def check_output(path: PathLike, flag: str, *, folder: bool) -> None:
    """Refuse an output that cannot be written before any work: a file where a folder is wanted (or a folder
    where a file is), a link at the output, a path under a file, no write permission. Creates nothing.

    Raises InputError naming the flag, the path and the fix; every command calls it (through the CLI's
    check_output_dir / check_output_file) before it loads a model or reads data."""
    path = Path(path)
    field = f"{flag} {path}"
    if path.is_symlink():
        raise InputError(f"{path} is a symbolic link", field=field, fix="interp never writes through a link; "
                         "remove it or choose another output")
    if path.exists():
        if folder and not path.is_dir():
            raise InputError(f"{path} is a file, not a folder", field=field, fix="choose another folder")
        if not folder and path.is_dir():
            raise InputError(f"{path} is a folder, not a file", field=field, fix="give a file name inside it")
    start = path if folder else path.parent
    existing = next(p for p in (start, *start.parents) if p.exists())  # "/" always exists
    if not existing.is_dir():
        raise InputError(f"{existing} is a file, not a folder", field=field, fix="choose another path")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"{existing} is not writable", field=field, fix="choose a folder you can write")
    if path.exists() and not path.is_dir() and not os.access(path, os.W_OK):
        raise InputError(f"{path} is read-only", field=field, fix="choose another file or make it writable")
