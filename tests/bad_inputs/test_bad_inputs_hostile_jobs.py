"""Issue #47, the jobs layer: nothing in OUT.parts/ is trusted, nothing waits forever. Through the real CLI
(tests/badinput.py), each case one line naming the file or flag and the fix:
  5   a folder of ours inside OUT.parts/ (.journal, .slurm) that is a link: refused, nothing written through it;
  7   --executor slurm without Slurm (no sbatch on PATH) or with its controller down (a stand-in sbatch that fails
      as a broken Slurm's does; submitit really calls it): one line, and no plan that claims a job;
  8   every model failing: the table of the failed rows, exit status 1 (ablate, and `interp jobs merge`);
  9   a malformed .plan.json or journal line, a task count past the bound, a part's marker that is not JSON;
  13  a stray *.parquet in OUT.parts/: skipped with a note naming it, none of its rows merged;
  15  temporaries a killed task or merge left: swept by the next command.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tests.badinput import Case, cases_of, check_case
from tests.bad_inputs.test_bad_inputs_models import BATCH, CACHE, TABLE, _checkpoint

BATCH_ONE = ["batch", "good1", "--out", "w.parquet", *BATCH]
STATUS = ["jobs", "status", "w.parquet"]
MERGE = ["jobs", "merge", "w.parquet"]
ABLATE = ["--text", "text.txt", "--seq-len", "16", "--score-sequences", "2", "--eval-sequences", "3",
          "--batch-size", "2", "--fractions", "0.5", "--seeds", "0", "--skip-layers", "1", "--out", "fig"]
USER_FILE = "a user's file, which no journal line may reach\n"


def _batched(tmp: Path) -> None:
    """good1 analysed into w.parquet (its parts in w.parts/)."""
    from interp.cli import main

    _checkpoint(tmp)
    assert main(BATCH_ONE) == 0


# ------------------------------------------------------------------------------------------ 5: links inside OUT.parts

def _linked(name: str, base=_checkpoint):
    """`base`, then w.parts/<name> a link to elsewhere/, which holds a user's 0.jsonl."""
    def setup(tmp: Path) -> None:
        base(tmp)
        (tmp / "elsewhere").mkdir()
        (tmp / "elsewhere" / "0.jsonl").write_text(USER_FILE)
        (tmp / "w.parts").mkdir(exist_ok=True)
        shutil.rmtree(tmp / "w.parts" / name, ignore_errors=True)
        os.symlink(tmp / "elsewhere", tmp / "w.parts" / name)
    return setup


LINKED = r"w.parts/{}: a symbolic link \(to .*elsewhere\) where interp keeps its own folder.*\(remove the link\)"
Case("jobs-hostile-journal-is-a-link", item="47", setup=_linked(".journal"), argv=BATCH_ONE, may_change=CACHE,
     message=r"interp batch: " + LINKED.format(r"\.journal"))
Case("jobs-hostile-journal-is-a-link-on-a-rerun", item="47", setup=_linked(".journal", _batched), argv=BATCH_ONE,
     may_change=(*CACHE, "w.parts/*.lock"), message=r"interp batch: " + LINKED.format(r"\.journal"))


# ------------------------------------------------------------------------------------------ 7: Slurm absent or down

def _slurm_down(tmp: Path) -> None:
    """good1, and bin/ holding a stand-in for a Slurm whose controller is down: its sbatch fails as the real one
    does then (exit 1, the error on stderr); srun is there because submitit looks for it."""
    _checkpoint(tmp)
    (tmp / "bin").mkdir()
    (tmp / "bin" / "sbatch").write_text("#!/bin/sh\necho 'sbatch: error: Batch job submission failed: Unable to "
                                        "contact slurm controller (connect failure)' >&2\nexit 1\n")
    (tmp / "bin" / "srun").write_text("#!/bin/sh\nexit 1\n")
    for name in ("sbatch", "srun"):
        (tmp / "bin" / name).chmod(0o755)


def _no_plan_claims_a_job(tmp: Path) -> None:
    """No .plan.json (nothing was submitted) and nothing submitit wrote for the array that never was."""
    assert not (tmp / "w.parts" / ".plan.json").exists()
    slurm = tmp / "w.parts" / ".slurm"
    assert not slurm.exists() or not list(slurm.iterdir())


SLURM = [*BATCH_ONE, "--executor", "slurm"]
Case("jobs-hostile-slurm-without-sbatch", item="47", setup=_checkpoint, env={"PATH": "no-slurm-here"}, argv=SLURM,
     message=r"interp batch: --executor slurm: Slurm's sbatch is not on PATH.*use --executor local",
     check=_no_plan_claims_a_job, may_change=CACHE)
Case("jobs-hostile-slurm-controller-down", item="47", setup=_slurm_down, env={"PATH": "bin"}, argv=SLURM,
     message=r"interp batch: --executor slurm: submitting the array of 1 task\(s\) failed: .*Unable to contact slurm "
             r"controller.*\(check that Slurm answers here \(`sinfo`", check=_no_plan_claims_a_job,
     may_change=(*CACHE, "w.parts", "w.parts/*"))

def _slurm_folder_linked(tmp: Path) -> None:
    _linked(".slurm", _slurm_down)(tmp)


Case("jobs-hostile-slurm-folder-is-a-link", item="47", setup=_slurm_folder_linked, env={"PATH": "bin"}, argv=SLURM,
     message=r"interp batch: " + LINKED.format(r"\.slurm"), may_change=(*CACHE, "w.parts", "w.parts/*"))


# ------------------------------------------------------------------------------------------ 8: every model failed

def _broken(tmp: Path) -> None:
    """good1's text and tokenizer, and bad1, bad2: copies of it whose weights are not safetensors (each its own
    bytes, so that they are two models, not one under two paths)."""
    good = _checkpoint(tmp)
    for i, name in enumerate(("bad1", "bad2")):
        shutil.copytree(good, tmp / name)
        (tmp / name / "model.safetensors").write_bytes(b"x" * (i + 1))


def _failed_rows(table: str, column: str):
    """A check: `table` holds one failed row per broken model, each with its error."""
    def check(tmp: Path) -> None:
        df = pd.read_parquet(tmp / table)
        assert sorted(df[column]) == ["bad1", "bad2"] and set(df["status"]) == {"failed"}, df
        assert df["error"].str.contains("safetensors").all()
    return check


def _ablated(tmp: Path) -> None:
    """bad1 and bad2 ablated into a.parquet (both failed), then the table removed: its parts remain."""
    from interp.cli import main

    _broken(tmp)
    assert main(["ablate", "bad1", "bad2", *ABLATE, "--table", "a.parquet"]) == 1
    (tmp / "a.parquet").unlink()


ALL_FAILED = (*CACHE, "fig", "fig/*", "a.parquet", "a.parts", "a.parts/*")
Case("jobs-hostile-ablate-every-model-fails", item="47", rc=1, setup=_broken, check=_failed_rows("a.parquet", "model"),
     argv=["ablate", "bad1", "bad2", *ABLATE, "--table", "a.parquet"], may_change=ALL_FAILED,
     message=r"^interp ablate: bad2 failed: CheckpointError: bad2/model.safetensors")
Case("jobs-hostile-merge-of-every-model-failed", item="47", rc=1, setup=_ablated, argv=["jobs", "merge", "a.parquet"],
     check=_failed_rows("a.parquet", "model"), may_change=ALL_FAILED,
     message=r"^interp jobs merge: 2 of 2 row\(s\) in a.parquet are failed rows")
Case("jobs-hostile-batch-every-model-fails", item="47", rc=1, setup=_broken, check=_failed_rows("w.parquet", "path"),
     argv=["batch", "bad1", "bad2", "--out", "w.parquet", *BATCH], may_change=(*CACHE, *TABLE),
     message=r"^interp batch: 2 checkpoint\(s\) failed")
Case("jobs-hostile-eval-every-model-fails", item="47", rc=1, setup=_broken, check=_failed_rows("e.parquet", "model"),
     argv=["eval", "bad1", "bad2", "--tasks", "text_ppl", "--text", "text.txt", "--out", "e.parquet"],
     may_change=(*CACHE, "e.parquet", "e.parts", "e.parts/*"), message=r"^interp eval: 2 model/task pair\(s\) failed")


# ------------------------------------------------------------------------------------------ 9: bookkeeping files

PLAN = {"kind": "probe batch", "targets": ["good1"], "tasks": 1, "executor": "local", "written": 1.0}


def _plan(text: str, journal: str | None = None):
    """good1 analysed, then its .plan.json replaced by `text` (and task 0's journal by `journal`)."""
    def setup(tmp: Path) -> None:
        _batched(tmp)
        (tmp / "w.parts" / ".plan.json").write_text(text)
        if journal is not None:
            (tmp / "w.parts" / ".journal" / "0.jsonl").write_text(journal)
    return setup


def _with(**changes) -> str:
    return json.dumps({**PLAN, **changes})


PLAN_FILE = r"interp jobs: w.parts/.plan.json: "
for case_id, text, message in (
        ("plan-null", "null", r".plan.json is a null, not an object \(delete it; the next run"),
        ("plan-not-json", '{"kind": "probe batch", "targ', r".plan.json is not valid JSON"),
        ("plan-tasks-null", _with(tasks=None), r"tasks: is a null \(None\), expected int"),
        ("plan-tasks-a-float", '{"kind": "probe batch", "targets": ["good1"], "tasks": 1e12, "executor": "local", '
                               '"written": 1}', r"tasks: is a float \(1000000000000.0\), expected int"),
        ("plan-tasks-past-the-bound", _with(tasks=10 ** 12), r"tasks: is 1000000000000, expected a task count from 1 "
                                                             r"to 100,000"),
        ("plan-targets-not-names", _with(targets=[["good1"]]), r"targets: is \[\['good1'\]\], expected a list of "
                                                               r"target names"),
        ("plan-no-targets", json.dumps({k: v for k, v in PLAN.items() if k != "targets"}),
         r"targets: .plan.json has no field 'targets'")):
    Case(f"jobs-hostile-status-{case_id}", item="47", setup=_plan(text), argv=STATUS, message=PLAN_FILE + message)

JOURNAL = r"interp jobs: w.parts/.journal/0.jsonl:{}: "
for case_id, lines, message in (
        ("journal-time-a-string", ['{"target": "good1", "state": "running", "time": 1}',
                                   '{"target": "good1", "state": "done", "time": "late"}'],
         JOURNAL.format(2) + r"time: is a str \('late'\), expected int or float"),
        ("journal-unknown-state", ['{"target": "good1", "state": "won", "time": 1}'],
         JOURNAL.format(1) + r"state: is 'won', expected one of running, done"),
        ("journal-line-not-an-object", ["[1, 2]"], JOURNAL.format(1) + r"a journal line is a list, not an object")):
    Case(f"jobs-hostile-status-{case_id}", item="47", setup=_plan(json.dumps(PLAN), "\n".join(lines) + "\n"),
         argv=STATUS, message=message + r".*\(delete the journal file")


def _marker(value: bytes):
    """good1 analysed, then its part rewritten with `value` as its interp.part metadata."""
    def setup(tmp: Path) -> None:
        import pyarrow.parquet as pq

        _batched(tmp)
        (part,) = (tmp / "w.parts").glob("*.parquet")
        table = pq.read_table(part)
        pq.write_table(table.replace_schema_metadata({**table.schema.metadata, b"interp.part": value}), part)
    return setup


Case("jobs-hostile-merge-part-marker-not-json", item="47", setup=_marker(b'{"kind": "probe'), argv=MERGE,
     message=r"interp jobs: w.parts/[0-9a-f-]+.parquet: the interp.part metadata is not valid JSON .*delete it",
     may_change=("w.parts/.rank0.lock",))
Case("jobs-hostile-merge-part-marker-wrong-type", item="47", setup=_marker(b'{"kind": "probe batch", "key": 7}'),
     argv=MERGE, message=r"interp jobs: w.parts/[0-9a-f-]+.parquet: key: is a int \(7\), expected str",
     may_change=("w.parts/.rank0.lock",))


# ------------------------------------------------------------------------------------------ 13: a stray table

def _stray(tmp: Path) -> None:
    """good1 analysed into w.parquet, and a user's own table dropped into w.parts/."""
    _batched(tmp)
    pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}).to_parquet(tmp / "w.parts" / "notes.parquet")


def _only_the_parts(tmp: Path) -> None:
    df = pd.read_parquet(tmp / "w.parquet")
    assert "a" not in df.columns and set(df["status"]) == {"ok"} and set(df["path"]) == {"good1"}, df


Case("jobs-hostile-merge-skips-a-stray-table", item="47", rc=0, setup=_stray, argv=MERGE, check=_only_the_parts,
     may_change=("w.parquet", "w.parts/.rank0.lock", "w.parts/.tasks.lock"),
     message=r"^\[jobs\] note: skipped w.parts/notes.parquet, not a part of w.parquet: it has no part marker")
Case("jobs-hostile-batch-skips-a-stray-table", item="47", rc=0, setup=_stray, argv=BATCH_ONE, check=_only_the_parts,
     may_change=(*CACHE, "w.parquet", "w.parts/.*"), message=r"^\[jobs\] note: skipped w.parts/notes.parquet")


# ------------------------------------------------------------------------------------------ 15: stale temporaries

TEMPS = (".w.parquet.k1ll3d00.tmp/w.parquet", ".w.csv.k1ll3d00.tmp/w.csv", "w.parts/..plan.json.k1ll3d00.tmp/.plan.json",
         "w.parts/.{key}.parquet.k1ll3d00.tmp/{key}.parquet")


def _killed(tmp: Path) -> None:
    """good1 analysed, then what kills leave: a merge's table and CSV, a task's part and a plan, each half written
    in its temporary folder. And a user's own dot-folder that merely looks like one (another name): kept."""
    _batched(tmp)
    (part,) = (tmp / "w.parts").glob("*.parquet")
    for temp in TEMPS:
        path = tmp / temp.format(key=part.stem)
        path.parent.mkdir(parents=True)
        path.write_bytes(b"half")
    (tmp / ".notes.txt.k1ll3d00.tmp").mkdir()


def _swept(tmp: Path) -> None:
    assert not [p for p in tmp.rglob("*.k1ll3d00.tmp") if p.name != ".notes.txt.k1ll3d00.tmp"]
    assert (tmp / ".notes.txt.k1ll3d00.tmp").is_dir()


SWEPT = r"^\[jobs\] removed 4 temporary file\(s\) that killed writes of w.parquet left"
Case("jobs-hostile-rerun-sweeps-stale-temporaries", item="47", rc=0, setup=_killed, argv=BATCH_ONE, check=_swept,
     may_change=(*CACHE, "w.parquet", "w.parts/.*", ".w.*.k1ll3d00.tmp"), message=SWEPT)
Case("jobs-hostile-merge-sweeps-stale-temporaries", item="47", rc=0, setup=_killed, argv=MERGE, check=_swept,
     may_change=("w.parquet", "w.parts/.*", ".w.*.k1ll3d00.tmp"), message=SWEPT)


@pytest.mark.parametrize("case", cases_of("jobs-hostile-"), ids=lambda c: c.id)
def test_case(case, tmp_path):
    check_case(case, tmp_path)
    if (tmp_path / "elsewhere" / "0.jsonl").exists():
        assert (tmp_path / "elsewhere" / "0.jsonl").read_text() == USER_FILE
