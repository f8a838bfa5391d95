"""What interp.jobs.parts takes back from OUT.parts/ (issue #47): a part is known by the marker write_part puts in its
parquet metadata, or, written before the marker, by a name of the shape our keys have; a stray table, a copy of a
part under another name and another command's part are skipped with a note. No folder of ours is written through a
link. Temporaries that kills left are swept, but never while a live task could still be writing them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pandas as pd
import pyarrow.parquet as pq
import pytest

from interp._util.errors import InputError
from interp._util.io import UnsafePath, file_lock
from interp.cli import main
from interp.jobs.parts import (JOURNAL_DIR, PART_MARKER, TASKS_LOCK, journal, merge_table, part_marker, parts_dir,
                               read_journal, read_plan, scan_parts, sweep_temps, write_part, write_plan)
from tests.badinput import REPO
from tests.bad_inputs.test_bad_inputs_models import BATCH, _checkpoint

KEY = "0123456789abcdef-0123456789abcdef"   # the shape of a batch part's key


def _rows(name: str) -> pd.DataFrame:
    return pd.DataFrame({"path": [name], "status": ["ok"], "error": [""], "key": [name]})


def test_only_parts_are_merged(tmp_path, capfd):
    out = tmp_path / "t.parquet"
    parts = parts_dir(out)
    parts.mkdir()
    (parts / ".kind").write_text("probe batch\n")
    write_part(_rows("marked"), parts / f"{KEY}-aaaaaaaaaaaaaaaa.parquet")
    assert part_marker(parts / f"{KEY}-aaaaaaaaaaaaaaaa.parquet") == {"kind": "probe batch",
                                                                      "key": f"{KEY}-aaaaaaaaaaaaaaaa"}
    _rows("legacy").to_parquet(parts / f"{KEY}.parquet", index=False)          # before the marker: by its name
    _rows("legacy failure").to_parquet(parts / "failed-0123456789abcdef.parquet", index=False)
    pd.DataFrame({"a": [1]}).to_parquet(parts / "notes.parquet")                # a user's table
    shutil.copy(parts / f"{KEY}-aaaaaaaaaaaaaaaa.parquet", parts / f"{KEY}-bbbbbbbbbbbbbbbb.parquet")   # a copy
    elsewhere = tmp_path / "e.parts"
    elsewhere.mkdir()
    (elsewhere / ".kind").write_text("eval\n")
    write_part(_rows("eval row"), elsewhere / "0123456789abcdef0123.parquet")
    shutil.copy(elsewhere / "0123456789abcdef0123.parquet", parts)              # another command's part
    found, strays = scan_parts(out)
    assert [p.name for p in found] == [f"{KEY}-aaaaaaaaaaaaaaaa.parquet", f"{KEY}.parquet",
                                       "failed-0123456789abcdef.parquet"]
    df = merge_table(out, lambda d: d.sort_values("path").reset_index(drop=True))
    assert df["path"].tolist() == ["legacy", "legacy failure", "marked"] and "a" not in df.columns
    err = capfd.readouterr().err
    for name, why in (("notes", "it has no part marker and no part's name"),
                      (f"{KEY}-bbbbbbbbbbbbbbbb", f"its marker names the part '{KEY}-aaaaaaaaaaaaaaaa'"),
                      ("0123456789abcdef0123", "a part of an `interp eval` table, not of `interp probe batch`")):
        assert f"skipped {parts / name}.parquet, not a part of {out}: {why}" in err, err
    assert pd.read_parquet(out).equals(df)
    assert PART_MARKER.encode() not in pq.read_schema(out).metadata   # the table is no part


def test_no_folder_of_ours_is_written_through_a_link(tmp_path):
    """OUT.parts/ a link (made after the command's checks), or .journal/ inside it: every writer refuses it."""
    out, elsewhere = tmp_path / "t.parquet", tmp_path / "elsewhere"
    elsewhere.mkdir()
    parts = parts_dir(out)
    os.symlink(elsewhere, parts)
    for write in (lambda: write_part(_rows("x"), parts / f"{KEY}.parquet"), lambda: journal(out, 0, "x", "done"),
                  lambda: write_plan(out, "probe batch", ["x"], 1, "local")):
        with pytest.raises(UnsafePath, match=r"t.parts: a symbolic link .*\(remove the link\)"):
            write()
    parts.unlink()
    parts.mkdir()
    os.symlink(elsewhere, parts / JOURNAL_DIR)
    with pytest.raises(UnsafePath, match=r"t.parts/.journal: a symbolic link"):
        journal(out, 0, "x", "done")
    assert not list(elsewhere.iterdir())


def _batch(tmp_path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "interp.cli", "batch", "good1", "--out", "w.parquet", *BATCH],
                          cwd=tmp_path, capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "PYTHONPATH": str(REPO), "INTERP_CACHE_DIR": str(tmp_path / "cache"),
                               **(env or {})})


def _temps(tmp_path) -> list[str]:
    return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.tmp"))


@pytest.mark.parametrize("fault", ["replace w.parts/*.parquet", "replace */w.parquet"], ids=["task", "merge"])
def test_what_a_kill_leaves_is_swept_by_the_next_run(tmp_path, fault, capfd):
    """A batch killed (SIGKILL) inside the write of its part, or of the merged table, leaves its temporary folder;
    the rerun removes it, says so, and writes the table."""
    _checkpoint(tmp_path)
    killed = _batch(tmp_path, {"INTERP_FAULT": fault})
    assert killed.returncode == -9, killed.stderr
    left = _temps(tmp_path)
    assert len(left) == 1 and left[0].startswith("w.parts/." if fault.endswith("*.parquet") else ".w.parquet."), left
    rerun = _batch(tmp_path)
    assert rerun.returncode == 0, rerun.stderr
    assert f"[jobs] removed 1 temporary file(s) that killed writes of w.parquet left: {left[0]}" in rerun.stderr
    assert _temps(tmp_path) == [] and len(pd.read_parquet(tmp_path / "w.parquet")) == 6


def test_a_live_task_keeps_its_temporaries(tmp_path):
    """While a task holds the tasks lock (shared), its temporaries in OUT.parts/ look like a killed one's and are
    left; OUT's own (only merges write those, under task 0's lock, held by the sweeper) are swept."""
    out = tmp_path / "t.parquet"
    parts = parts_dir(out)
    for folder in (parts / f".{KEY}.parquet.abcd1234.tmp", tmp_path / ".t.parquet.abcd1234.tmp"):
        folder.mkdir(parents=True)
        (folder / "half").write_bytes(b"x")
    with file_lock(parts / TASKS_LOCK, shared=True):
        assert sweep_temps(out) == [tmp_path / ".t.parquet.abcd1234.tmp"]
        assert (parts / f".{KEY}.parquet.abcd1234.tmp").is_dir()
    assert sweep_temps(out) == [parts / f".{KEY}.parquet.abcd1234.tmp"]


def test_status_of_a_plan_of_many_tasks_looks_at_the_tasks_with_targets(tmp_path, capfd):
    """tasks at the bound and two targets: two locks are looked at, not a hundred thousand."""
    out = tmp_path / "t.parquet"
    write_plan(out, "probe batch", ["a", "b"], 100_000, "slurm")
    assert main(["jobs", "status", str(out)]) == 0
    assert "2 target(s) in 100000 task(s)" in capfd.readouterr().out
    assert not list(parts_dir(out).glob(".rank*.lock"))


def test_a_torn_journal_line_is_skipped(tmp_path):
    """What a task killed in the middle of an append leaves (a torn line, the next append glued to it) is no record;
    the lines around it are read."""
    out = tmp_path / "t.parquet"
    journal(out, 0, "a", "running")
    with open(parts_dir(out) / JOURNAL_DIR / "0.jsonl", "a") as f:
        f.write('{"target": "a", "sta{"target": "a", "state": "done", "time": 2}\n')
    journal(out, 0, "b", "done")
    assert {t: r["state"] for t, r in read_journal(out).items()} == {"a": "running", "b": "done"}


def test_a_fifo_is_never_read(tmp_path):
    """A FIFO where the plan or a journal goes would make a read wait for a writer forever: the plan is refused
    in one line, a journal skipped."""
    out = tmp_path / "t.parquet"
    (parts_dir(out) / JOURNAL_DIR).mkdir(parents=True)
    os.mkfifo(parts_dir(out) / JOURNAL_DIR / "0.jsonl")
    assert read_journal(out) == {}
    os.mkfifo(parts_dir(out) / ".plan.json")
    with pytest.raises(InputError, match=r"t.parts/.plan.json: .plan.json is not a regular file \(delete it"):
        read_plan(out)
