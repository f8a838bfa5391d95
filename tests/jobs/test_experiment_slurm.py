"""`interp experiment NAME --executor slurm` on the real single-node Slurm cluster (tests/slurm.py): a 4-run experiment
(2 variants x 2 seeds of `micro`, 8 steps) as one array task per run ends with weights bit-identical to the same
experiment run locally, and a task cancelled with scancel in the middle of its run, then requeued with `scontrol
requeue`, resumes from the run's checkpoint and ends bit-identical too; a run whose config cannot train is a failed
run in `interp jobs status`, with its error, and the others finish.

The cancellation is deterministic: INTERP_FAULT_PAUSE (interp._util.io.fault_point) makes the first task that reaches
the write of a step-4 checkpoint hang there (its train_state.pt at step 4 is written), and the test cancels it once
the marker file names its Slurm job. Skipped, with the reason, only where Slurm cannot be installed or started."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from analyses import group_ablation
from interp._util.io import FAULT_ENV, FAULT_PAUSE_ENV
from interp._util.paths import CONFIG_FILE, WEIGHTS_FILE
from interp.cli import main
from interp.jobs.parts import read_plan
from tests.factories import write_corpus

pytestmark = pytest.mark.slow

RUNS = [f"{v}/seed{s}" for s in (0, 1) for v in ("uniform", "wider-early")]   # the plan's order: seed-major
TIMEOUT = 300.0


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, module_cache) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus", n_docs=24, sentences=40, sentence_len=8)


def experiment(corpus: Path, root: Path, *extra: str, only: str = "uniform,wider-early", seeds: int = 2) -> int:
    sets = {"source": str(corpus), "val_fraction": 0.25, "n_layers": 3, "warmup_steps": 1, "eval_batches": 1,
            "threads": 1, "log_interval": 1, "progress": False, "ckpt_interval": 2, "keep_step_checkpoints": True}
    return main(["experiment", "groups", "--preset", "micro", "--seeds", str(seeds), "--steps", "8", "--only", only,
                 "--root", str(root), "--out", str(root / "figures"),
                 *(f"--set={k}={json.dumps(v)}" for k, v in sets.items()), *extra])


def slurm(cluster) -> tuple[str, ...]:
    return ("--executor", "slurm", "--partition", cluster.partition, "--time-min", "20")


def weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run / WEIGHTS_FILE))


def same_weights(a: Path, b: Path) -> bool:
    wa, wb = weights(a), weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def wait_until(check, what: str, timeout: float = TIMEOUT):
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} after {timeout} s")
        time.sleep(0.2)
    return found


def paused_task(cluster, marker: Path) -> str:
    """The array name ("<array>_<task>") of the task INTERP_FAULT_PAUSE holds (the marker names its Slurm job)."""
    paused = wait_until(lambda: marker.is_file() and marker.read_text().endswith("\n")
                        and (marker.read_text().split() + [""])[1], "paused task")   # its pid and Slurm job id
    (record,) = cluster.jobs(paused)
    if "ArrayJobId" not in record:   # an array of one task is submitted as a plain job
        return record["JobId"]
    return f"{record['ArrayJobId']}_{record['ArrayTaskId']}"   # by its array name: a task's own id may be the array's


def wait_requeued_and_finished(cluster, job: str) -> None:
    def done() -> bool:
        cluster.release_requeued()   # else Slurm holds a requeued job ~120 s (BeginTime)
        (record,) = cluster.jobs(job)
        assert record["JobState"] not in ("FAILED", "CANCELLED") or record["Restarts"] == "0", record
        return record["Restarts"] != "0" and record["JobState"] == "COMPLETED"

    wait_until(done, f"requeued task {job} finished")


def resumed_at(run: Path) -> list[int]:
    """The steps a run resumed from (its config.json's record of each resume)."""
    return [r["step"] for r in json.loads((run / CONFIG_FILE).read_text()).get("resumed", [])]


def test_an_array_equals_the_local_run_and_a_cancelled_requeued_task_resumes(slurm_cluster, corpus, tmp_path,
                                                                            monkeypatch, capfd):
    local, remote = tmp_path / "local", tmp_path / "slurm"
    assert experiment(corpus, local) == 0
    capfd.readouterr()

    marker = tmp_path / "paused"
    monkeypatch.setenv(FAULT_ENV, "replace step_000004/model.safetensors")   # inside the step-4 save: state at 4
    monkeypatch.setenv(FAULT_PAUSE_ENV, str(marker))
    start = time.perf_counter()
    assert experiment(corpus, remote, *slurm(slurm_cluster), "--no-wait") == 0
    monkeypatch.delenv(FAULT_ENV)
    monkeypatch.delenv(FAULT_PAUSE_ENV)
    out = capfd.readouterr()
    assert "4 submitted" in out.out and "4 run(s) submitted" in out.out, out
    assert "interp jobs merge" not in out.out + out.err, out   # an experiment collates on a rerun, not by a merge
    exp = remote / "groups-micro"
    plan = read_plan(exp / ".jobs")
    assert plan["kind"] == "training" and plan["targets"] == RUNS and plan["tasks"] == 4
    assert not (remote / "figures" / "group_ablation.csv").exists()   # --no-wait: the rerun collates

    job = paused_task(slurm_cluster, marker)
    slurm_cluster.run("scancel", job)
    assert slurm_cluster.wait(job, TIMEOUT) == "CANCELLED"
    assert main(["jobs", "status", str(exp)]) == 0
    status = capfd.readouterr().out
    assert [line.split()[0] for line in status.splitlines() if "step 4/8" in line].count("interrupted") == 1, status
    slurm_cluster.run("scontrol", "requeue", job)
    wait_requeued_and_finished(slurm_cluster, job)
    slurm_cluster.wait(plan["slurm_jobs"][0].split("_")[0], TIMEOUT)
    seconds = time.perf_counter() - start

    assert main(["jobs", "status", str(exp)]) == 0
    status = capfd.readouterr().out
    assert "4 done" in status and status.count("step 8/8  loss ") == 4, status
    assert sorted(resumed_at(exp / r) for r in RUNS) == [[], [], [], [4]]   # the cancelled one, from its step 4
    for run in RUNS:
        assert same_weights(exp / run, local / "groups-micro" / run), run
        assert same_weights(exp / run / "checkpoints" / "step_000004", local / "groups-micro" / run / "checkpoints"
                            / "step_000004"), run

    # the rerun submits nothing (every run finished) and collates the tables the local run has
    assert experiment(corpus, remote, *slurm(slurm_cluster)) == 0
    assert "4 skipped" in capfd.readouterr().out
    tables = [pd.read_csv(root / "figures" / group_ablation.TABLE) for root in (remote, local)]
    pd.testing.assert_frame_equal(*(t[["variant", "n_seeds", "val_loss_mean", "val_ppl_mean"]] for t in tables))
    print(f"[slurm] 4 runs in 4 array tasks, one cancelled and requeued: {seconds:.1f} s")


def test_a_run_that_cannot_train_is_failed_in_jobs_status_and_the_other_finishes(slurm_cluster, corpus, tmp_path,
                                                                                capfd):
    exp = tmp_path / "groups-micro"
    bad = exp / "uniform" / "seed1"
    bad.mkdir(parents=True)
    (bad / CONFIG_FILE).write_text("{not json")   # the task's Trainer refuses it; the plan does not read it
    assert experiment(corpus, tmp_path, *slurm(slurm_cluster), only="uniform") == 1
    out = capfd.readouterr()
    assert "1 done" in out.out and "1 failed" in out.out, out
    assert main(["jobs", "status", str(exp)]) == 1
    status = capfd.readouterr().out
    lines = {line.split()[3]: line for line in status.splitlines()[1:]}
    assert lines["uniform/seed0"].split()[0] == "done" and "step 8/8" in lines["uniform/seed0"], status
    assert lines["uniform/seed1"].split()[0] == "failed" and str(bad / CONFIG_FILE) in lines["uniform/seed1"], status


def test_the_time_limit_warning_saves_the_step_and_the_task_requeues_itself(slurm_cluster, corpus, tmp_path,
                                                                           monkeypatch):
    """submitit's SIGUSR2 (sent 60 s before a task's time limit) during training: the Trainer finishes the step it is
    at and saves it, the task requeues itself, and the run resumes there and ends as an uninterrupted run."""
    local, remote = tmp_path / "local", tmp_path / "slurm"
    assert experiment(corpus, local, only="uniform", seeds=1) == 0
    marker = tmp_path / "paused"
    monkeypatch.setenv(FAULT_ENV, "replace step_000004/model.safetensors")   # held inside the step-4 save
    monkeypatch.setenv(FAULT_PAUSE_ENV, str(marker))
    assert experiment(corpus, remote, *slurm(slurm_cluster), "--no-wait", only="uniform", seeds=1) == 0
    monkeypatch.delenv(FAULT_ENV)
    monkeypatch.delenv(FAULT_PAUSE_ENV)
    job = paused_task(slurm_cluster, marker)
    slurm_cluster.run("scancel", "--signal", "USR2", job)
    logs = remote / "groups-micro" / ".jobs.parts" / ".slurm"
    wait_until(lambda: any("the time limit is near" in p.read_text() for p in logs.glob("*/*_log.err")),
               "the task's note of SIGUSR2")
    marker.unlink()   # the save goes on; the next step ends the session
    wait_requeued_and_finished(slurm_cluster, job)
    run = remote / "groups-micro" / "uniform" / "seed0"
    assert resumed_at(run) == [5]
    assert same_weights(run, local / "groups-micro" / "uniform" / "seed0")
