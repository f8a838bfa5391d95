"""The resumable parts of one table: OUT.parts/ beside OUT (results/batch.parquet -> results/batch.parts/).

Why a module of its own: `interp batch`, `interp eval` and `interp ablate` all turn many targets into one table
the same way. Each finished unit of work is one parquet part, written atomically under its content key
(interp.jobs.keys); a failed unit is one failed-<name hash>.parquet part holding a status="failed" row; the table
OUT is always rebuilt from every part (so a rerun adds to it and never loses rows). What the rows mean and how
they are ordered is the command's: it passes its own `order` to merge_table.

Inside OUT.parts/:
  <key>.parquet          rows of one finished unit, marked as a part in its parquet metadata (PART_MARKER)
  failed-<hash>.parquet  the failure row(s) of one unit; removed when it later succeeds
  .kind                  which command's parts these are (interp._util.io.claim_parts): eval and batch never mix
  .rank<i>.lock          held by task i of an executor while it writes (a torchrun rank, a Slurm array task)
  .tasks.lock            held shared by every live task, exclusively by the sweep of stale temporaries
  .plan.json             the targets of the last plan, in order (interp jobs status)
  .journal/<i>.jsonl     task i's record of each target it started, finished or failed (interp jobs status)

Nothing there is trusted when read back: the plan, the journal lines and each part's marker are checked against
their Schema (one InputError naming the file, the field and the fix), a *.parquet file is merged only when it is a
part (its marker, or a name of the shape our keys had before the marker: LEGACY_PART), and no folder of ours is
written through a link (own_folder). What killed writes leave (`.<name>.XXXXXXXX.tmp/`) is swept by the next
command or merge, under the locks that tell no live task can still be writing it (sweep_temps).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp._util.errors import InputError, one_line
from interp._util.io import (
    LockHeld,
    atomic_write,
    check_output,
    exclusive_lock,
    file_lock,
    remove_stale_temps,
    safe_folder,
    safe_open,
    write_json_atomic,
    write_text_atomic,
)
from interp._util.schema import Field, Schema, finite, list_of, parse_json

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "EXPERIMENT_OUT",
    "FAILED_PREFIX",
    "MAX_TASKS",
    "PARTS_KIND_FILE",
    "PARTS_SUFFIX",
    "check_table_outputs",
    "claim_parts",
    "concat_parts",
    "failed_part",
    "journal",
    "lock_task",
    "merge_table",
    "own_folder",
    "part_files",
    "part_marker",
    "parts_dir",
    "parts_kind",
    "read_journal",
    "read_part",
    "read_plan",
    "running_task",
    "scan_parts",
    "sort_rows",
    "sweep_temps",
    "task_lock",
    "write_part",
    "write_plan",
    "write_table",
]

PARTS_KIND_FILE = ".kind"   # in an OUT.parts folder: which command's rows its parts are ("eval", "probe batch")
_KIND_COLUMNS = {"eval": "task", "probe batch": "layer"}   # how parts from before the marker tell their kind


def parts_kind(parts: str | Path, *, guess: bool = True) -> str | None:
    """Which command's rows the parts folder holds: its marker, else (a folder from before the marker; only with
    `guess`) what the columns of its first readable part say; None when nothing tells."""
    parts = Path(parts)
    marker = parts / PARTS_KIND_FILE
    if marker.is_file():
        return marker.read_text(encoding="utf-8").strip()
    if not guess:
        return None
    import pyarrow.parquet as pq

    for part in sorted(parts.glob("*.parquet"))[:1]:
        try:
            names = set(pq.read_schema(part).names)
        except (OSError, ValueError):
            continue
        return next((k for k, column in _KIND_COLUMNS.items() if column in names and
                     not any(c in names for o, c in _KIND_COLUMNS.items() if o != k)), None)
    return None


def claim_parts(parts: str | Path, kind: str, out: str | Path, *, mark: bool = True) -> None:
    """Mark the resumable parts folder of `out` as holding `kind` rows, or refuse it (InputError) when another
    command's table owns it: `interp eval --out X` and `interp batch --out X` both keep X.parts/, and a merge
    takes every part there, so sharing it would replace one table by a mix of both. Call it under the command's
    lock. A folder from before the marker is recognised by its parts' columns."""
    parts = Path(parts)
    marker = parts / PARTS_KIND_FILE
    found = parts_kind(parts)
    if found is not None and found != kind:
        raise InputError(f"{parts} holds the parts of an `interp {found}` table, not of `interp {kind}`; both "
                         "commands keep their resumable parts in OUT.parts/, and merging one into the other would "
                         "mix two tables", field="--out", path=out, fix="give this command another --out")
    if mark and not marker.is_file():
        write_text_atomic(marker, kind + "\n")


PARTS_SUFFIX = ".parts"
FAILED_PREFIX = "failed-"
PLAN_FILE = ".plan.json"
JOURNAL_DIR = ".journal"
TASKS_LOCK = ".tasks.lock"
EXPERIMENT_OUT = ".jobs"   # a training experiment's OUT inside its folder: <root>/<name>/.jobs.parts/ (jobs.training)
PART_MARKER = "interp.part"   # the key of a part's parquet schema metadata: {"kind": <.kind>, "key": <file stem>}
MAX_TASKS = 100_000           # tasks of one plan (a Slurm array of one task per target: MaxArraySize is far below)
# Part names before the marker (still merged): failed-<16 hex> (batch, ablate) or failed-<eval pair key>; an eval
# pair key (20 hex); a batch key <weights>-<settings>[-<definition>|-hub]; an ablation key <model[:32]>-<settings>.
LEGACY_PART = re.compile(r"failed-[0-9a-f]{16}(?:[0-9a-f]{4})?|[0-9a-f]{20}"
                         r"|[0-9a-f]{16}-[0-9a-f]{16}(?:-(?:[0-9a-f]{16}|hub))?"
                         r"|(?:[0-9a-f]{32}|(?:registry|spec):.{1,27})-[0-9a-f]{16}")


def parts_dir(out: str | Path) -> Path:
    """results/batch.parquet -> results/batch.parts/"""
    out = Path(out)
    return out.with_name(out.stem + PARTS_SUFFIX)


def own_folder(parts: Path, *inside: str) -> Path:
    """The parts folder (or a folder inside it: .journal, .slurm), made and checked: no component below the table's
    folder is a link (interp._util.io.safe_folder). Every writer of the jobs layer goes through it."""
    return safe_folder(parts.joinpath(*inside), parts.parent)


def write_part(df: pd.DataFrame, path: Path) -> None:
    """One part, atomically (a kill leaves the old file or the new one, never half of one), marked as a part of
    its folder's kind under its key (PART_MARKER), so that a merge knows it from any other *.parquet there."""
    parts = own_folder(path.parent)
    marker = {PART_MARKER: json.dumps({"kind": parts_kind(parts, guess=False) or "", "key": path.stem})}
    atomic_write(parts, {path.name: lambda p: _to_parquet(df, p, marker)})


def _to_parquet(df: pd.DataFrame, path: Path, metadata: dict[str, str]) -> None:
    """df.to_parquet(path, index=False) with `metadata` added to the file's schema metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    extra = {k.encode(): v.encode() for k, v in metadata.items()}
    pq.write_table(table.replace_schema_metadata({**(table.schema.metadata or {}), **extra}), path)


def _unreadable(path: Path, err: Exception) -> InputError:
    return InputError(f"unreadable part ({one_line(err)}); delete it and rerun the command, which recomputes it",
                      path=path)


def read_part(path: Path) -> pd.DataFrame:
    import pandas as pd

    try:
        return pd.read_parquet(path)
    except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
        raise _unreadable(path, err) from err


MARKER_SCHEMA = Schema(f"the {PART_MARKER} metadata", {"kind": Field(str), "key": Field(str)},
                       fix="not a part interp wrote; delete it (a rerun of the command recomputes a part)")


def part_marker(path: Path) -> dict[str, str] | None:
    """The marker write_part put in a part's parquet metadata, checked; None for a file without one (a part from
    before the marker, or a table that is no part). An unreadable file is an InputError naming it."""
    import pyarrow.parquet as pq

    try:
        raw = (pq.read_schema(path).metadata or {}).get(PART_MARKER.encode())
    except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
        raise _unreadable(path, err) from err
    if raw is None:
        return None
    return MARKER_SCHEMA.validate(parse_json(raw, path, what=MARKER_SCHEMA.what, fix=MARKER_SCHEMA.fix), path)


def failed_part(parts: Path, name: str) -> Path:
    """Where the failure row(s) of the unit `name` (a resolved path, a pair key) go."""
    return parts / f"{FAILED_PREFIX}{hashlib.sha256(name.encode()).hexdigest()[:16]}.parquet"


def scan_parts(out: str | Path) -> tuple[list[Path], list[tuple[Path, str]]]:
    """(the parts of OUT, by name; every other *.parquet in OUT.parts/ with why it is none). A part is known by its
    marker (its key the file's name, its kind the folder's) or, written before the marker, by a name of the shape
    of our keys (LEGACY_PART): never by its suffix alone, so a stray table adds no rows to a merge."""
    parts = parts_dir(out)
    if not parts.is_dir():
        return [], []
    kind = parts_kind(parts, guess=False)
    found: list[Path] = []
    strays: list[tuple[Path, str]] = []
    for path in sorted(parts.glob("*.parquet")):
        why = _not_a_part(path, kind)
        if why:
            strays.append((path, why))
        else:
            found.append(path)
    return found, strays


def _not_a_part(path: Path, kind: str | None) -> str:
    """Why `path` is not a part of a folder of `kind` ("" when it is one)."""
    if path.is_symlink() or not path.is_file():
        return "not a file of its own (a link or a folder)"
    marker = part_marker(path)
    if marker is None:
        return "" if LEGACY_PART.fullmatch(path.stem) else "it has no part marker and no part's name"
    if marker["key"] != path.stem:
        return f"its marker names the part {marker['key']!r} (a copy under another name?)"
    if kind and marker["kind"] and marker["kind"] != kind:
        return f"a part of an `interp {marker['kind']}` table, not of `interp {kind}`"
    return ""


def part_files(out: str | Path) -> list[Path]:
    """The parts of OUT (scan_parts), by name."""
    return scan_parts(out)[0]


def _read_arrow(path: Path) -> Any:
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path)
    except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
        raise _unreadable(path, err) from err


def concat_parts(files: list[Path]) -> pd.DataFrame:
    """Every part's rows in one frame: read and joined as Arrow tables (a column missing from some parts, such as
    a failed row's, is null there), converted to pandas once; 1,000 parts in about a second (bench_executors).
    Parts whose column types disagree are joined by pandas instead, as before."""
    import pandas as pd
    import pyarrow as pa

    tables = [t for t in (_read_arrow(p) for p in files) if t.num_rows]
    if not tables:
        return read_part(files[0]).iloc[:0]
    try:
        return pa.concat_tables(tables, promote_options="default").to_pandas()
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pd.concat([t.to_pandas() for t in tables], ignore_index=True)


def write_table(df: pd.DataFrame, out: str | Path, csv: bool = False) -> None:
    """OUT (parquet) and, with csv, OUT.csv beside it: each atomically."""
    out = Path(out)
    writers = {out.name: lambda p: df.to_parquet(p, index=False)}
    if csv:
        writers[out.with_suffix(".csv").name] = lambda p: df.to_csv(p, index=False)
    atomic_write(out.parent, writers)


def sort_rows(df: pd.DataFrame, columns: list[str] | tuple[str, ...], na_position: str = "last") -> pd.DataFrame:
    """df in the order of those of `columns` it has (stable): a table of failed rows alone has none of the result
    columns (kind, layer, metric, ...), and must still merge."""
    by = [c for c in columns if c in df.columns]
    return (df.sort_values(by, na_position=na_position, kind="stable") if by else df).reset_index(drop=True)


def merge_table(out: str | Path, order: Callable[[pd.DataFrame], pd.DataFrame], csv: bool = False,
                empty: Callable[[], pd.DataFrame] | None = None) -> pd.DataFrame:
    """Rebuild OUT from every part under OUT.parts/ (ordered by the command's `order`) and write it atomically;
    another *.parquet there is skipped with a note naming it (scan_parts). Call it under task 0's lock, as every
    merge does: it first sweeps what killed writes left (sweep_temps).
    No part: FileNotFoundError with the fix, unless `empty` builds the table a command writes from nothing."""
    out = Path(out)
    sweep_temps(out)
    files, strays = scan_parts(out)
    for path, why in strays:
        print(f"[jobs] note: skipped {path}, not a part of {out}: {why}; move it out of {parts_dir(out)}",
              file=sys.stderr, flush=True)
    if not files and empty is None:
        raise FileNotFoundError(f"{parts_dir(out)}: no parts to merge; run the command that writes {out} first")
    df = order(concat_parts(files) if files else empty())
    write_table(df, out, csv)
    return df


def task_lock(out: str | Path, index: int) -> Path:
    """The lock task `index` of an executor holds while it writes parts of OUT (merging is task 0's). The name is
    the one torchrun's ranks always held, so a batch started before the jobs layer still excludes this one."""
    return parts_dir(out) / f".rank{index}.lock"


def lock_task(out: str | Path, index: int, what: str) -> contextlib.AbstractContextManager[None]:
    """Hold task `index`'s lock (exclusive_lock: LockHeld naming the holder) in the checked parts folder."""
    own_folder(parts_dir(out))
    return exclusive_lock(task_lock(out, index), what)


@contextlib.contextmanager
def running_task(out: str | Path, index: int, what: str) -> Iterator[None]:
    """What a task holds while it runs: its own lock, and the tasks lock shared with the other live tasks, which
    keeps sweep_temps off the temporaries they are writing."""
    with lock_task(out, index, what), file_lock(parts_dir(out) / TASKS_LOCK, shared=True):
        yield


def _temporary_of_ours(name: str) -> bool:
    return name.endswith(".parquet") or name in (PLAN_FILE, PARTS_KIND_FILE)


def sweep_temps(out: str | Path) -> list[Path]:
    """Remove the temporaries killed writes of OUT left (interp._util.io.remove_stale_temps), only where no live
    writer can still be at them: OUT's and OUT.csv's beside it (merges write them, under task 0's lock, which the
    caller holds), and the parts', the plan's and the kind marker's in OUT.parts/ when no task is live (the tasks
    lock is free; held, they are left to the next sweep). Says what it removed."""
    out = Path(out)
    removed = remove_stale_temps(out.parent, {out.name, out.with_suffix(".csv").name})
    parts = parts_dir(out)
    if parts.is_dir() and not parts.is_symlink():
        with contextlib.suppress(LockHeld), exclusive_lock(parts / TASKS_LOCK, f"the tasks of {out}"):
            removed += remove_stale_temps(parts, _temporary_of_ours)
    if removed:
        print(f"[jobs] removed {len(removed)} temporary file(s) that killed writes of {out} left: "
              + ", ".join(str(p) for p in removed[:3]) + (" ..." if len(removed) > 3 else ""), file=sys.stderr,
              flush=True)
    return removed


def check_table_outputs(out: str | Path, csv: bool = False, flag: str = "--out") -> None:
    """InputError before any work when the table OUT, its parts folder OUT.parts/ or OUT.csv cannot be written: a
    folder where the table goes (or a file where the parts folder goes), a link, a path under a file, no write
    permission. Each names the flag."""
    out = Path(out)
    check_output(out, flag, folder=False)
    check_output(parts_dir(out), flag, folder=True)   # the parts folder a link: its parts would land elsewhere
    if csv:
        check_output(out.with_suffix(".csv"), "--csv", folder=False)


# ------------------------------------------------------------------------------------------ plan and journal

PLAN_SCHEMA = Schema(PLAN_FILE, {
    "kind": Field(str),
    "targets": Field(list, check=list_of(str, "target names")),
    "tasks": Field(int, check=lambda v: 1 <= v <= MAX_TASKS or f"a task count from 1 to {MAX_TASKS:,}"),
    "executor": Field(str),
    "written": Field((int, float), check=finite),
    "slurm_jobs": Field(list, required=False, check=list_of(str, "Slurm job ids")),
}, fix="delete it; the next run of the command writes it again")
JOURNAL_STATES = ("running", "done", "skipped", "failed", "interrupted")
JOURNAL_SCHEMA = Schema("a journal line", {
    "target": Field(str),
    "state": Field(str, check=lambda v: v in JOURNAL_STATES or f"one of {', '.join(JOURNAL_STATES)}"),
    "error": Field(str, required=False),
    "time": Field((int, float), check=finite),
    "pid": Field(int, required=False),
}, fix="delete the journal file: it only tells `interp jobs status` what its task did")


def write_plan(out: str | Path, kind: str, targets: list[str], tasks: int, executor: str,
               extra: dict[str, Any] | None = None) -> None:
    """OUT.parts/.plan.json: the command, the targets in order and how they are split (task i takes i, i + n, ...),
    so `interp jobs status OUT` can say which target is done, failed, running or still to come."""
    write_json_atomic(own_folder(parts_dir(out)) / PLAN_FILE, {
        "kind": kind, "targets": targets, "tasks": tasks, "executor": executor, "written": time.time(),
        **(extra or {})})


def read_plan(out: str | Path) -> dict[str, Any] | None:
    """OUT.parts/.plan.json checked against PLAN_SCHEMA (bounded task count included); None when there is none."""
    return PLAN_SCHEMA.read(parts_dir(out) / PLAN_FILE, missing_ok=True)


def journal(out: str | Path, task: int, target: str, state: str, error: str = "") -> None:
    """Append one line to task `task`'s journal: target entered `state` (running, done, skipped, failed)."""
    folder = own_folder(parts_dir(out), JOURNAL_DIR)
    line = json.dumps({"target": target, "state": state, "error": error, "time": time.time(), "pid": os.getpid()})
    with safe_open(folder / f"{task}.jsonl", "a") as f:
        f.write(line + "\n")


def read_journal(out: str | Path) -> dict[str, dict[str, Any]]:
    """The latest journal record of each target, over every task's journal. A line that is no JSON is one a killed
    task tore (appends are not atomic) and is skipped; a JSON line off JOURNAL_SCHEMA is an InputError naming the
    file and line."""
    latest: dict[str, dict[str, Any]] = {}
    folder = parts_dir(out) / JOURNAL_DIR
    for file in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        if not file.is_file():   # a FIFO would make the read wait for a writer forever
            continue
        with open(file, encoding="utf-8", errors="replace") as lines:
            for n, line in enumerate(lines, 1):
                try:
                    record = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                JOURNAL_SCHEMA.validate(record, f"{file}:{n}")
                record["task"] = file.stem
                if record["target"] not in latest or record["time"] >= latest[record["target"]]["time"]:
                    latest[record["target"]] = record
    return latest
