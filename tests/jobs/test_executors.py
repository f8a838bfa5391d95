"""interp.jobs executors through the CLI: `--executor local --jobs 2` gives the table of `--jobs 1`, with one progress
line per target; `interp jobs status` and `interp jobs merge` read and rebuild it; a broken checkpoint is a failed
row, a failed target in the status, and exit status 1, under every executor."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from interp.cli import main
from interp.jobs.parts import parts_dir, read_plan
from tests.jobs.zoo import PROBE_ARGS, make_zoo, values


@pytest.fixture(scope="module")
def zoo(tmp_path_factory, module_cache):
    return make_zoo(tmp_path_factory.mktemp("zoo"), 4)


def batch(folder, text, out, *extra) -> int:
    return main(["batch", str(folder), "--text", str(text), *PROBE_ARGS, "--out", str(out), *extra])


def test_two_local_processes_give_the_table_of_one(zoo, tmp_path, capfd):
    folder, text = zoo
    assert batch(folder, text, tmp_path / "one.parquet") == 0
    capfd.readouterr()
    assert batch(folder, text, tmp_path / "two.parquet", "--jobs", "2") == 0
    err = capfd.readouterr().err
    one, two = pd.read_parquet(tmp_path / "one.parquet"), pd.read_parquet(tmp_path / "two.parquet")
    pd.testing.assert_frame_equal(values(one), values(two))
    assert len(one) == len(two) and set(one["status"]) == {"ok"}
    # one line per finished target, from each of the two tasks, with an ETA
    lines = [line for line in err.splitlines() if line.startswith("[batch] task ")]
    assert len(lines) == 4 and all("ETA" in line and ": done;" in line for line in lines), err
    assert {line.split()[2] for line in lines} == {"1/2", "2/2"}
    plan = read_plan(tmp_path / "two.parquet")
    assert plan["tasks"] == 2 and plan["executor"] == "local" and len(plan["targets"]) == 4


def test_status_and_merge(zoo, tmp_path, capfd):
    folder, text = zoo
    work = tmp_path / "zoo"
    shutil.copytree(folder, work)
    (work / "ck3" / "model.safetensors").write_bytes(b"not a safetensors file")
    out = tmp_path / "t.parquet"
    assert batch(work, text, out, "--jobs", "2") == 1    # a failed checkpoint: exit status 1
    table = pd.read_parquet(out)
    assert table[table["status"] == "failed"]["path"].tolist() == [str(work / "ck3")]
    capfd.readouterr()
    assert main(["jobs", "status", str(out)]) == 1
    report = capfd.readouterr().out
    assert "3 done, 1 failed" in report and f"failed      task 1  {work / 'ck3'}" in report, report
    # the table removed: `interp jobs merge` (and its older name) rebuild it from the parts, row for row
    out.unlink()
    assert main(["jobs", "merge", str(out)]) == 1
    pd.testing.assert_frame_equal(pd.read_parquet(out), table)
    out.unlink()
    assert main(["batch", "--merge-only", "--out", str(out)]) == 1
    pd.testing.assert_frame_equal(pd.read_parquet(out), table)
    # the broken checkpoint repaired: the rerun analyses only it, and the status is all done
    shutil.copy(folder / "ck3" / "model.safetensors", work / "ck3" / "model.safetensors")
    assert batch(work, text, out, "--jobs", "2") == 0
    assert "[batch] local, 2 task(s): 1 analysed, 3 skipped" in capfd.readouterr().out
    assert main(["jobs", "status", str(out)]) == 0
    assert "4 done" in capfd.readouterr().out


def test_status_without_a_plan_names_the_fix(tmp_path, capfd):
    assert main(["jobs", "status", str(tmp_path / "none.parquet")]) == 2
    assert "no plan of a job" in capfd.readouterr().err
    assert not parts_dir(tmp_path / "none.parquet").exists()


def test_bad_executor_options_are_refused_before_any_work(zoo, tmp_path, capfd):
    folder, text = zoo
    assert batch(folder, text, tmp_path / "x.parquet", "--executor", "pbs") == 2
    assert "--executor" in capfd.readouterr().err
    assert batch(folder, text, tmp_path / "x.parquet", "--jobs", "0") == 2
    assert "--jobs" in capfd.readouterr().err
    assert not parts_dir(tmp_path / "x.parquet").exists()


def test_eval_in_two_processes_equals_one(zoo, tmp_path, capfd):
    """`interp eval MODEL... --jobs 2`: the same table (value, stderr, n of each model/task pair) as one process."""
    folder, text = zoo
    models = [str(folder / f"ck{i}") for i in range(3)]
    flags = ["--tasks", "text_ppl", "--text", str(text), "--limit", "2"]
    assert main(["eval", *models, *flags, "--out", str(tmp_path / "one.parquet")]) == 0
    assert main(["eval", *models, *flags, "--out", str(tmp_path / "two.parquet"), "--jobs", "2"]) == 0
    columns = ["model", "checkpoint", "task", "metric", "value", "stderr", "n", "status"]
    one, two = (pd.read_parquet(tmp_path / f"{n}.parquet")[columns] for n in ("one", "two"))
    pd.testing.assert_frame_equal(one, two)
    assert len(one) >= 3 and set(one["status"]) == {"ok"}
    assert read_plan(tmp_path / "two.parquet")["kind"] == "eval"
