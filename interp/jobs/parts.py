"""The resumable parts of one table: OUT.parts/ beside OUT (results/batch.parquet -> results/batch.parts/).

Why a module of its own: `interp batch`, `interp eval` and `interp ablate` all turn many targets into one table
the same way. Each finished unit of work is one parquet part, written atomically under its content key
(interp.jobs.keys); a failed unit is one failed-<name hash>.parquet part holding a status="failed" row; the table
OUT is always rebuilt from every part (so a rerun adds to it and never loses rows). What the rows mean and how
they are ordered is the command's: it passes its own `order` to merge_table.

Inside OUT.parts/:
  <key>.parquet          rows of one finished unit
  failed-<hash>.parquet  the failure row(s) of one unit; removed when it later succeeds
  .kind                  which command's parts these are (interp._util.io.claim_parts): eval and batch never mix
  .rank<i>.lock          held by task i of an executor while it writes (a torchrun rank, a Slurm array task)
  .plan.json             the targets of the last plan, in order (interp jobs status)
  .journal/<i>.jsonl     task i's record of each target it started, finished or failed (interp jobs status)
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp._util.errors import InputError, one_line
from interp._util.io import atomic_write, check_output, read_json, safe_open, write_json_atomic

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PARTS_SUFFIX", "FAILED_PREFIX", "parts_dir", "write_part", "read_part", "failed_part", "part_files",
           "merge_table", "concat_parts", "write_table", "task_lock", "check_table_outputs", "write_plan", "read_plan", "journal",
           "read_journal"]

PARTS_SUFFIX = ".parts"
FAILED_PREFIX = "failed-"
PLAN_FILE = ".plan.json"
JOURNAL_DIR = ".journal"


def parts_dir(out: str | Path) -> Path:
    """results/batch.parquet -> results/batch.parts/"""
    out = Path(out)
    return out.with_name(out.stem + PARTS_SUFFIX)


def write_part(df: pd.DataFrame, path: Path) -> None:
    """One part (or a table), atomically: a kill leaves the old file or the new one, never half of one."""
    atomic_write(path.parent, {path.name: lambda p: df.to_parquet(p, index=False)})


def read_part(path: Path) -> pd.DataFrame:
    import pandas as pd

    try:
        return pd.read_parquet(path)
    except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
        raise InputError(f"unreadable part ({one_line(err)}); delete it and rerun the command, which recomputes "
                         "it", path=path) from err


def failed_part(parts: Path, name: str) -> Path:
    """Where the failure row(s) of the unit `name` (a resolved path, a pair key) go."""
    return parts / f"{FAILED_PREFIX}{hashlib.sha256(name.encode()).hexdigest()[:16]}.parquet"


def part_files(out: str | Path) -> list[Path]:
    parts = parts_dir(out)
    return sorted(parts.glob("*.parquet")) if parts.is_dir() else []


def _read_arrow(path: Path) -> Any:
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path)
    except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
        raise InputError(f"unreadable part ({one_line(err)}); delete it and rerun the command, which recomputes "
                         "it", path=path) from err


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
    write_part(df, out)
    if csv:
        atomic_write(out.parent, {out.with_suffix(".csv").name: lambda p: df.to_csv(p, index=False)})


def merge_table(out: str | Path, order: Callable[[pd.DataFrame], pd.DataFrame], csv: bool = False,
                empty: Callable[[], pd.DataFrame] | None = None) -> pd.DataFrame:
    """Rebuild OUT from every part under OUT.parts/ (ordered by the command's `order`) and write it atomically.
    No part: FileNotFoundError with the fix, unless `empty` builds the table a command writes from nothing."""
    out = Path(out)
    files = part_files(out)
    if not files and empty is None:
        raise FileNotFoundError(f"{parts_dir(out)}: no parts to merge; run the command that writes {out} first")
    df = order(concat_parts(files) if files else empty())
    write_table(df, out, csv)
    return df


def task_lock(out: str | Path, index: int) -> Path:
    """The lock task `index` of an executor holds while it writes parts of OUT (merging is task 0's). The name is
    the one torchrun's ranks always held, so a batch started before the jobs layer still excludes this one."""
    return parts_dir(out) / f".rank{index}.lock"


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

def write_plan(out: str | Path, kind: str, targets: list[str], tasks: int, executor: str,
               extra: dict[str, Any] | None = None) -> None:
    """OUT.parts/.plan.json: the command, the targets in order and how they are split (task i takes i, i + n, ...),
    so `interp jobs status OUT` can say which target is done, failed, running or still to come."""
    write_json_atomic(parts_dir(out) / PLAN_FILE, {"kind": kind, "targets": targets, "tasks": tasks,
                                                   "executor": executor, "written": time.time(), **(extra or {})})


def read_plan(out: str | Path) -> dict[str, Any] | None:
    plan = read_json(parts_dir(out) / PLAN_FILE, missing_ok=True, torn_ok=True)
    return plan if isinstance(plan, dict) and isinstance(plan.get("targets"), list) else None


def journal(out: str | Path, task: int, target: str, state: str, error: str = "") -> None:
    """Append one line to task `task`'s journal: target entered `state` (running, done, skipped, failed)."""
    folder = parts_dir(out) / JOURNAL_DIR
    folder.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"target": target, "state": state, "error": error, "time": time.time(), "pid": os.getpid()})
    with safe_open(folder / f"{task}.jsonl", "a") as f:
        f.write(line + "\n")


def read_journal(out: str | Path) -> dict[str, dict[str, Any]]:
    """The latest journal record of each target, over every task's journal (a torn last line is skipped)."""
    latest: dict[str, dict[str, Any]] = {}
    folder = parts_dir(out) / JOURNAL_DIR
    for file in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        for line in file.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("target"), str):
                record["task"] = file.stem
                if record["target"] not in latest or record.get("time", 0) >= latest[record["target"]].get("time", 0):
                    latest[record["target"]] = record
    return latest
