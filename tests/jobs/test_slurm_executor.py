"""`--executor slurm` on a real single-node Slurm cluster (tests/slurm.py): a batch over 6 checkpoints as a 3-task
array equals the local run row for row; a task cancelled with scancel is finished by the rerun without duplicate or
lost rows; a failing checkpoint is a failed row and exit status 1. Skipped, with the reason, only where Slurm cannot
be installed or started."""

from __future__ import annotations

import shutil
import time

import pandas as pd
import pytest

from interp.cli import main
from interp.jobs.parts import read_plan
from tests.jobs.zoo import PROBE_ARGS, make_zoo, values

pytestmark = pytest.mark.slow


def batch(folder, text, out, *extra) -> int:
    return main(["batch", str(folder), "--text", str(text), *PROBE_ARGS, "--out", str(out), *extra])


def slurm(cluster) -> tuple[str, ...]:
    return ("--executor", "slurm", "--jobs", "3", "--partition", cluster.partition, "--time-min", "20")


def test_a_three_task_array_equals_the_local_run_and_a_cancelled_task_resumes(slurm_cluster, tmp_path, module_cache,
                                                                             capfd):
    folder, text = make_zoo(tmp_path, 6)
    assert batch(folder, text, tmp_path / "local.parquet") == 0
    local = pd.read_parquet(tmp_path / "local.parquet")
    capfd.readouterr()
    start = time.perf_counter()
    assert batch(folder, text, tmp_path / "slurm.parquet", *slurm(slurm_cluster)) == 0
    seconds = time.perf_counter() - start
    pd.testing.assert_frame_equal(values(pd.read_parquet(tmp_path / "slurm.parquet")), values(local))
    plan = read_plan(tmp_path / "slurm.parquet")
    assert plan["executor"] == "slurm" and plan["tasks"] == 3 and len(plan["slurm_jobs"]) == 3
    base = plan["slurm_jobs"][0].split("_")[0]
    assert slurm_cluster.wait(base) == "COMPLETED"
    err = capfd.readouterr().err
    assert "submitted 3 Slurm array task(s)" in err and err.count("ETA") == 6, err
    print(f"[slurm] 6 checkpoints in 3 array tasks: {seconds:.1f} s from submission to the merged table")

    # --no-wait, then one array task cancelled: the rerun finishes it, and no row is lost or doubled
    out = tmp_path / "cancelled.parquet"
    assert batch(folder, text, out, *slurm(slurm_cluster), "--no-wait") == 0
    ids = read_plan(out)["slurm_jobs"]
    slurm_cluster.run("scancel", ids[1])
    slurm_cluster.wait(ids[0].split("_")[0], timeout=600)
    capfd.readouterr()
    assert main(["jobs", "status", str(out)]) == 0
    status = capfd.readouterr().out
    assert "slurm" in status and "6 target(s) in 3 task(s)" in status, status
    assert batch(folder, text, out, *slurm(slurm_cluster)) == 0
    table = pd.read_parquet(out)
    assert len(table) == len(local) and not table.duplicated(["path", "metric", "layer"]).any()
    pd.testing.assert_frame_equal(values(table), values(local))
    assert main(["jobs", "status", str(out)]) == 0
    assert "6 done" in capfd.readouterr().out


def test_a_failing_checkpoint_is_a_failed_row_and_exit_status_1(slurm_cluster, tmp_path, module_cache, capfd):
    folder, text = make_zoo(tmp_path, 3)
    shutil.rmtree(folder / "ck2")
    shutil.copytree(folder / "ck1", folder / "ck2")
    (folder / "ck2" / "model.safetensors").write_bytes(b"truncated")
    out = tmp_path / "t.parquet"
    assert batch(folder, text, out, *slurm(slurm_cluster)) == 1
    table = pd.read_parquet(out)
    failed = table[table["status"] == "failed"]
    assert failed["path"].tolist() == [str(folder / "ck2")] and "safetensors" in failed["error"].item().lower()
    assert set(table[table["status"] == "ok"]["path"]) == {str(folder / "ck0"), str(folder / "ck1")}
    assert "checkpoint(s) failed" in capfd.readouterr().err
