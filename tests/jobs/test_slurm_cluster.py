"""The real single-node Slurm cluster of tests/slurm.py (fixture `slurm_cluster`): sbatch, submitit job arrays,
preemption + requeue of a checkpointable submitit task, and sacct through slurmdbd. Skipped (with the reason) where
Slurm cannot be installed (not root, no package registry). Cluster start ~2-5 s once per session; a one-task
submitit job ~1.1 s from submit to result."""

import time
from pathlib import Path

import pytest

from tests.slurm import CountStarts, square

pytestmark = pytest.mark.slow

TIMEOUT = 180  # hang guards only: a task takes ~2-4 s here


def _executor(cluster, folder: Path, **params):
    """submitit's Slurm executor on the test cluster. timeout_min=60: submitit takes a USR2 that comes before
    min(80 %, timeout - 10 min) of the time limit for a preemption, later for a timeout (10 min: always a timeout)."""
    import submitit

    executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    executor.update_parameters(slurm_partition=cluster.partition, timeout_min=60, cpus_per_task=1,
                               slurm_setup=cluster.job_setup(), **params)
    return executor


def _wait_done(job, timeout: float = TIMEOUT) -> None:
    """job.done() (result pickle, else sacct) within `timeout`, instead of job.result()'s unbounded wait."""
    deadline = time.monotonic() + timeout
    while not job.done(force_check=True):
        assert time.monotonic() < deadline, f"{job} not done after {timeout} s; stderr: {job.stderr()}"
        time.sleep(0.5)


def _wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"no {what} after {timeout} s"
        time.sleep(0.2)


def test_cluster_is_up(slurm_cluster):
    cluster = slurm_cluster
    assert cluster.conf.is_file() and cluster.node_state() in ("idle", "mixed", "allocated", "completing")
    info = cluster.run("scontrol", "show", "node", cluster.node).stdout
    assert f"CPUTot={cluster.cpus}" in info and f"RealMemory={cluster.memory_mb}" in info
    assert cluster.run("sinfo", "-h", "-o", "%P").stdout.split() == [f"{cluster.partition}*"]  # the default one


def test_sbatch_wrap_hostname(slurm_cluster, tmp_path):
    out = tmp_path / "hostname_%j.txt"
    job_id = slurm_cluster.sbatch("--wrap", "hostname", "--output", str(out), "--job-name", "hostname")
    assert slurm_cluster.wait(job_id, TIMEOUT) == "COMPLETED"
    text = Path(str(out).replace("%j", job_id)).read_text().strip()
    assert text.split(".")[0] == slurm_cluster.node
    (job,) = slurm_cluster.jobs(job_id)
    assert (job["JobState"], job["ExitCode"], job["NodeList"]) == ("COMPLETED", "0:0", slurm_cluster.node)
    if slurm_cluster.accounting:  # the record reaches slurmdbd a moment after the job ends
        _wait_until(lambda: [r["State"] for r in slurm_cluster.sacct(job_id)] == ["COMPLETED"], 30, "sacct record")


def test_submitit_map_array(slurm_cluster, tmp_path):
    executor = _executor(slurm_cluster, tmp_path / "submitit", slurm_array_parallelism=2)
    jobs = executor.map_array(square, [1, 2, 3])
    assert len({j.job_id.split("_")[0] for j in jobs}) == 1  # one array job, three tasks
    for job in jobs:
        _wait_done(job)
    assert [j.result() for j in jobs] == [1, 4, 9]
    array_id = jobs[0].job_id.split("_")[0]
    assert slurm_cluster.wait(array_id, TIMEOUT) == "COMPLETED"  # a task may still be exiting after its result
    records = slurm_cluster.jobs(array_id)
    assert sorted(r["ArrayTaskId"] for r in records) == ["0", "1", "2"]
    assert {r["JobState"] for r in records} == {"COMPLETED"}
    assert {r["ArrayTaskThrottle"] for r in records} == {"2"}  # %2: slurm_array_parallelism
    if slurm_cluster.accounting:  # submitit's own state (sacct)
        _wait_until(lambda: all(j.watcher.get_state(j.job_id, mode="force") == "COMPLETED" for j in jobs), 30,
                    "COMPLETED from sacct")


def test_submitit_checkpointable_requeued(slurm_cluster, tmp_path):
    """A preempted checkpointable task calls its checkpoint method, requeues itself (submitit runs `scontrol
    requeue` from inside the job) and runs again from the checkpointed object: the marker file shows two starts,
    the second with SLURM_RESTART_COUNT=1 and checkpoints=1.

    Preemption as Slurm does it, in order: SIGTERM (submitit ignores it), then submitit's USR2. Not
    job._interrupt(): it sends both at once, slurmd may deliver USR2 first, and the SIGTERM then kills the
    `scontrol requeue` that the USR2 handler just started (no requeue, the job FAILED: about every other run here)."""
    from submitit.slurm.slurm import SlurmJobEnvironment

    marker = tmp_path / "starts.txt"
    executor = _executor(slurm_cluster, tmp_path / "submitit")
    job = executor.submit(CountStarts(str(marker)))
    _wait_until(lambda: marker.exists() and marker.read_text().count("\n") == 1, TIMEOUT, "first start")
    slurm_cluster.run("scancel", "--signal", "TERM", job.job_id)
    _wait_until(lambda: "Bypassing signal SIGTERM" in (job.stdout() or ""), 60, "SIGTERM seen by the task")
    slurm_cluster.run("scancel", "--signal", SlurmJobEnvironment.USR_SIG, job.job_id)

    def second_start() -> bool:
        slurm_cluster.release_requeued()  # else Slurm holds a requeued job ~120 s (BeginTime)
        return marker.read_text().count("\n") >= 2 or slurm_cluster.state(job.job_id) == "FAILED"

    _wait_until(second_start, TIMEOUT, "second start")
    assert slurm_cluster.wait(job.job_id, TIMEOUT) == "COMPLETED", job.stdout()
    _wait_done(job)
    assert job.result() == 2
    assert [line.split() for line in marker.read_text().splitlines()] == [[job.job_id, "0", "0"],
                                                                          [job.job_id, "1", "1"]]
    (record,) = slurm_cluster.jobs(job.job_id)
    assert record["Restarts"] == "1"
    log = job.stdout()  # submitit logs to stdout (Slurm's own messages go to stderr)
    assert "this job is preempted" in log and "Calling checkpoint method" in log and "Requeued job" in log


def test_scancel_seen_by_submitit(slurm_cluster, tmp_path):
    """With accounting, a task cancelled before it writes a result is done for submitit (sacct: CANCELLED):
    an executor can tell it from a running one."""
    if not slurm_cluster.accounting:
        pytest.skip("needs accounting (sacct)")
    marker = tmp_path / "starts.txt"
    job = _executor(slurm_cluster, tmp_path / "submitit").submit(CountStarts(str(marker)))
    _wait_until(lambda: marker.exists(), TIMEOUT, "start")
    job.cancel()
    _wait_done(job, 60)  # no result pickle: done because sacct says so
    assert job.state.startswith("CANCELLED") and not job.paths.result_pickle.exists()
    assert [r["State"] for r in slurm_cluster.sacct(job.job_id)][0].startswith("CANCELLED")
    # (job.result() would raise UncompletedJobError, after submitit's 15 s wait for a late result pickle)
