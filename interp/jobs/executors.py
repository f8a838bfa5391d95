"""Where the tasks of a job run: `--executor local|torchrun|slurm`, one choice shared by `interp batch`, `interp eval`,
`interp experiment eval` and `interp ablate`.

    local     --jobs N processes on this machine (N = 1: in this process, as before), each with cores // N threads
    torchrun  today's RANK / WORLD_SIZE sharding: every rank is a task; with a process group rank 0 merges after a
              barrier, without one `interp jobs merge OUT` does once every rank has ended
    slurm     one Slurm array task per slice of the plan, through submitit: --partition, --time-min, --gpus-per-task,
              --cpus-per-task, --array-parallelism; a task preempted or timed out is requeued and resumes from the
              parts already written. The command waits and merges, or with --no-wait returns at once
              (`interp jobs status OUT`, then `interp jobs merge OUT`).

The plan (the expanded targets) is made once, by the command, and pickled to every task, so a bad PATH fails before
anything is submitted and every task sees the same list. Whatever the executor, the table is the same: every
part is keyed by content, and OUT is rebuilt from the parts in the command's order.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interp._util.children import raise_if_stopped
from interp._util.dist import Distributed, check_env, env_world_size, shard
from interp._util.errors import InputError, one_line
from interp.jobs.parts import (
    JOURNAL_DIR,
    MAX_TASKS,
    claim_parts,
    lock_task,
    own_folder,
    part_files,
    parts_dir,
    read_journal,
    sweep_temps,
    write_plan,
)
from interp.jobs.runner import Job, TaskResult, format_eta, run_task

__all__ = ["EXECUTORS", "ExecutorConfig", "JobsResult", "execute"]

EXECUTORS = ("local", "torchrun", "slurm")
SLURM_DIR = ".slurm"   # inside OUT.parts/: submitit's pickles and each task's log
POLL_S = 2.0


@dataclass
class ExecutorConfig:
    """Where a job's tasks run (interp.jobs.executors). Not part of any content key: the table is the same."""

    executor: str = field(default="local", metadata={"help": "where the tasks run: local (--jobs processes here), "
                                                             "torchrun (RANK/WORLD_SIZE ranks) or slurm (an array job)"})
    jobs: int = field(default=1, metadata={"help": "local: processes at once; slurm: array tasks (0: one per target); "
                                                   "each takes every jobs-th target"})
    partition: str | None = field(default=None, metadata={"help": "slurm: the partition (default: the cluster's)"})
    time_min: int = field(default=60, metadata={"help": "slurm: each task's time limit in minutes (a task that "
                                                        "times out is requeued and resumes)"})
    gpus_per_task: int = field(default=0, metadata={"help": "slurm: GPUs per task"})
    cpus_per_task: int = field(default=0, metadata={"help": "slurm: CPUs per task (0: 1); local: threads per process "
                                                            "(0: the cores shared out)"})
    array_parallelism: int = field(default=0, metadata={"help": "slurm: array tasks running at once (0: no limit)"})
    ranks_per_task: int = field(default=0, metadata={"help": "slurm, training experiments: processes (torch.distributed "
                                                             "ranks) per task, each run one DDP/FSDP run over them (0: "
                                                             "--gpus-per-task, at least 1)"})
    wait: bool = field(default=True, metadata={"help": "slurm: wait for the tasks and merge (--no-wait: return at "
                                                       "once; then `interp jobs merge OUT`)"})

    def validate(self) -> None:
        if self.executor not in EXECUTORS:
            raise InputError(f"{self.executor!r} is not an executor", field="--executor",
                             fix=f"choose one of {', '.join(EXECUTORS)}")
        for name, low in (("jobs", 0 if self.executor == "slurm" else 1), ("time_min", 1), ("gpus_per_task", 0),
                          ("cpus_per_task", 0), ("array_parallelism", 0), ("ranks_per_task", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InputError(f"must be an integer >= {low}, got {value!r}", field=f"--{name.replace('_', '-')}")
        if self.jobs > MAX_TASKS:
            raise InputError(f"{self.jobs:,} tasks: at most {MAX_TASKS:,}", field="--jobs")
        if self.executor == "torchrun":
            check_env()
        if self.executor == "slurm":
            try:
                import submitit  # noqa: F401
            except ModuleNotFoundError:
                raise InputError("the slurm executor needs submitit", field="--executor",
                                 fix="pip install submitit==1.5.4") from None


@dataclass
class JobsResult:
    """What the tasks of one command did, together; `table` is the merged table when this process merged."""

    tasks: list[TaskResult] = field(default_factory=list)
    failed_tasks: list[tuple[int, str]] = field(default_factory=list)   # (task index, error): a task that died
    targets: list[Any] = field(default_factory=list)
    out: Path | None = None
    table: Any = None
    job_ids: list[str] = field(default_factory=list)
    executor: str = "local"
    rank: int = 0
    world_size: int = 1

    def _all(self, name: str) -> list:
        return [x for t in self.tasks for x in getattr(t, name)]

    @property
    def done(self) -> list[str]:
        return self._all("done")

    @property
    def skipped(self) -> list[str]:
        return self._all("skipped")

    @property
    def failed(self) -> list[tuple[str, str]]:
        return self._all("failed")

    def stat(self, name: str) -> float:
        return sum(t.stats.get(name, 0.0) for t in self.tasks)

    @property
    def elapsed_s(self) -> float:
        return max((t.elapsed_s for t in self.tasks), default=0.0)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.failed_tasks


Factory = Callable[[Any], Job]   # a module-level class or function: config -> Job (pickled by reference)


def _threads(ex: ExecutorConfig, tasks: int) -> int:
    return ex.cpus_per_task or max(1, (os.cpu_count() or 1) // tasks)


def _task(factory: Factory, cfg: Any, index: int, count: int, targets: list[Any], threads: int = 0) -> TaskResult:
    """One task in a child process or a Slurm job: build the job from its config, run its share. A Slurm task of
    several ranks (ranks_per_task) runs a job whose targets span them: rank 0 runs the share, the others follow."""
    if threads:
        import torch

        torch.set_num_threads(threads)
    job = factory(cfg)
    if getattr(job, "spans_ranks", False) and not Distributed.from_env(join=False).primary:
        return _follow_share(job, shard(targets, index, count))
    return run_task(job, index, count, targets)


def task_ranks(job: Job, ex: ExecutorConfig) -> int:
    """The processes of one Slurm task: ex.ranks_per_task, else --gpus-per-task for a job whose targets use every
    rank (a training run), else one. InputError where they cannot be: several ranks for a job of one-rank targets,
    GPUs that do not divide among the ranks."""
    spans = getattr(job, "spans_ranks", False)
    ranks = ex.ranks_per_task or (ex.gpus_per_task if spans else 0) or 1
    if ranks > 1 and not spans:
        raise InputError(f"a {job.kind} target is one process: it does not span ranks", field="--ranks-per-task",
                         fix="drop --ranks-per-task; use --jobs N for N tasks")
    if ranks > 1 and ex.gpus_per_task and ex.gpus_per_task % ranks:
        raise InputError(f"{ex.gpus_per_task} GPUs do not divide among {ranks} ranks", field="--gpus-per-task",
                         fix="give each rank the same number of GPUs (usually --gpus-per-task = --ranks-per-task)")
    return ranks


def _merge(job: Job, result: JobsResult) -> None:
    """Rebuild OUT under task 0's lock (a task still writing makes this fail at once instead of racing it)."""
    if not part_files(job.out):
        return
    with lock_task(job.out, 0, f"{job.what} {job.out}"):
        result.table, result.out = job.merge(), job.out


def check_task_locks(job: Job, tasks: int) -> None:
    """Take and release every task's lock before anything is written: a lock that is a link is refused, and a
    command still running on OUT fails here naming its pid (LockHeld), not after the plan is replaced. Under task
    0's lock, what killed tasks and merges left is swept (sweep_temps)."""
    for i in range(tasks):
        with lock_task(job.out, i, f"{job.what} {job.out}"):
            if i == 0:
                sweep_temps(job.out)


def check_slurm() -> None:
    """InputError before anything is written when this machine has no Slurm client (submitit needs sbatch and
    srun): the command would otherwise fail deep inside submitit, with a traceback."""
    missing = [name for name in ("sbatch", "srun") if shutil.which(name) is None]
    if missing:
        raise InputError(f"Slurm's {missing[0]} is not on PATH, so no array job can be submitted from here",
                         field="--executor slurm", fix="run the command on a Slurm login node (where `sinfo` "
                                                       "answers), or use --executor local (--jobs N processes here)")


def execute(factory: Factory, cfg: Any, ex: ExecutorConfig | None = None, *, job: Job | None = None,
            dist: Distributed | None = None) -> JobsResult:
    """Plan the job, run its tasks where `ex` says, merge: the one way batch, eval and ablate run many targets.

    factory(cfg) builds the job (in this process unless `job` is given, and in every spawned task); `dist`: this
    process is one task given by hand (a rank and a world size, no process group)."""
    ex = ex or ExecutorConfig()
    ex.validate()
    if ex.executor == "slurm":
        check_slurm()
    job = job if job is not None else factory(cfg)
    if ex.ranks_per_task > 1 and ex.executor != "slurm":
        raise InputError("ranks per task are Slurm's: locally, launch the command under torchrun", field="--ranks-per-task",
                         fix="drop --ranks-per-task (or use --executor slurm)")
    if ex.executor == "slurm":
        task_ranks(job, ex)   # refused before anything is written
    targets = job.plan()   # a bad PATH fails here, before any task starts
    executor = ex.executor
    spans = getattr(job, "spans_ranks", False)   # a target uses every rank (a training run): ranks are not tasks
    if spans and executor == "local" and env_world_size() > 1:
        if not Distributed.from_env(join=False).primary:
            return _follow(job, targets)   # rank 0 alone plans, locks, journals and merges
    elif executor == "local" and (dist is not None or env_world_size() > 1):   # ranks given, or under torchrun
        executor = "torchrun"
    if executor == "torchrun":
        return _torchrun(job, targets, dist)
    tasks = max(1, min(ex.jobs or len(targets), len(targets), MAX_TASKS))
    claim_parts(parts_dir(job.out), job.kind, job.out, mark=False)   # another command's parts: refused first
    own_folder(parts_dir(job.out), JOURNAL_DIR)   # a link there: refused before any work
    check_task_locks(job, tasks)
    result = JobsResult(targets=targets, executor=executor)
    if executor == "slurm":
        return _slurm(job, factory, targets, tasks, ex, result)   # the plan is written once the array is submitted
    write_plan(job.out, job.kind, [job.name(t) for t in targets], tasks, executor)
    if tasks == 1:
        try:
            result.tasks.append(run_task(job, 0, 1, targets))
        except KeyboardInterrupt:
            _merge(job, result)   # what is finished is in the table
            raise
    else:
        from interp._util.processes import run_in_processes

        threads = _threads(ex, tasks)
        calls = [(_task, (factory, getattr(job, "cfg", cfg), i, tasks, targets, threads)) for i in range(tasks)]
        for i, outcome in enumerate(run_in_processes(calls, tasks, name=f"interp-{job.kind.replace(' ', '-')}")):
            if outcome is None or outcome.result is None:
                result.failed_tasks.append((i, "not started (stopped)" if outcome is None else str(outcome.error)))
            else:
                result.tasks.append(outcome.result)
    _merge(job, result)   # also after a task died: the table holds what finished, the CLI names the task
    raise_if_stopped()    # a SIGINT/SIGTERM stopped the tasks: the table has what finished; exit 130/143
    return result


def _follow(job: Job, targets: list[Any]) -> JobsResult:
    """A rank other than rank 0 of a job whose targets span every rank (a training run under torchrun)."""
    dist = Distributed.from_env(join=False)
    result = JobsResult(targets=targets, executor="local", rank=dist.rank, world_size=dist.world_size)
    result.tasks.append(_follow_share(job, targets))
    return result


def _follow_share(job: Job, targets: list[Any]) -> TaskResult:
    """Rank k > 0 of a task whose targets span its ranks: it does each target beside rank 0, in the same order, and
    writes nothing of the jobs layer's (no lock, no journal, no plan: rank 0's)."""
    task = TaskResult()
    job.prepare()
    for target in targets:
        raise_if_stopped()
        task.add(job.name(target), job.do(target))
    return task


def _torchrun(job: Job, targets: list[Any], dist: Distributed | None = None) -> JobsResult:
    """Every rank a task; rank 0 merges after a barrier when a process group is live (torchrun sets MASTER_ADDR)."""
    dist = dist if dist is not None else Distributed.from_env(join="MASTER_ADDR" in os.environ)
    if dist.primary:
        claim_parts(parts_dir(job.out), job.kind, job.out, mark=False)
        own_folder(parts_dir(job.out), JOURNAL_DIR)
        check_task_locks(job, 1)   # (the other ranks' locks are theirs, held now or soon)
        write_plan(job.out, job.kind, [job.name(t) for t in targets], dist.world_size, "torchrun")
    result = JobsResult(targets=targets, executor="torchrun", rank=dist.rank, world_size=dist.world_size)
    try:
        result.tasks.append(run_task(job, dist.rank, dist.world_size, targets))
    except KeyboardInterrupt:
        if dist.world_size == 1:
            _merge(job, result)
        raise
    if dist.group:
        dist.barrier()
        if dist.primary:
            _merge(job, result)
        dist.barrier()   # nobody leaves (and tears the group down) before the merge is written
        dist.close()
    elif dist.world_size > 1:
        print(f"{job.prefix} rank {dist.rank}/{dist.world_size}: parts written to {parts_dir(job.out)}; when every "
              f"rank has finished, build the table with `interp jobs merge {job.out}`", file=sys.stderr, flush=True)
    else:
        _merge(job, result)
    return result


# ------------------------------------------------------------------------------------------------ slurm

def _slurm_task_class() -> type:
    """submitit's Checkpointable, so that a task preempted or timed out is requeued with the same arguments (it
    then skips the targets whose parts exist). Built on first use: submitit is imported only for --executor slurm."""
    import submitit

    class SlurmTask(submitit.helpers.Checkpointable):
        def __call__(self, factory: Factory, cfg: Any, index: int, count: int, targets: list[Any],
                     threads: int) -> TaskResult:
            if submitit.JobEnvironment().num_tasks > 1:   # ranks_per_task: torch.distributed's env from Slurm's
                submitit.helpers.TorchDistributedEnvironment().export(set_cuda_visible_devices=False, overwrite=True)
            return _task(factory, cfg, index, count, targets, threads)

    return SlurmTask


def slurm_executor(folder: Path, ex: ExecutorConfig, name: str, ranks: int = 1) -> Any:
    """A submitit executor for `ex`'s Slurm options (logs and pickles under `folder`); `ranks` processes per task
    (srun starts them; each sees every GPU of the task and takes its LOCAL_RANK's)."""
    import submitit

    executor = submitit.AutoExecutor(folder=str(folder / "%j"), cluster="slurm")
    params: dict[str, Any] = {"timeout_min": ex.time_min, "cpus_per_task": ex.cpus_per_task or 1, "name": name,
                              "slurm_signal_delay_s": 60}
    if ex.partition:
        params["slurm_partition"] = ex.partition
    if ranks > 1:
        params["tasks_per_node"] = ranks
        if ex.gpus_per_task:
            params["slurm_gpus_per_node"] = ex.gpus_per_task
    elif ex.gpus_per_task:
        params["slurm_gpus_per_task"] = ex.gpus_per_task
    if ex.array_parallelism:
        params["slurm_array_parallelism"] = ex.array_parallelism
    executor.update_parameters(**params)
    return executor


def _submit(job: Job, factory: Factory, targets: list[Any], tasks: int, ex: ExecutorConfig) -> list[Any]:
    """The array, submitted through submitit (which calls sbatch). sbatch failing (the controller down, a
    partition refused) is one InputError with sbatch's own message and the fix; what submitit wrote for the array
    that never was (its pickles, the sbatch script) is removed, and nothing claims a job."""
    folder = own_folder(parts_dir(job.out), SLURM_DIR)
    before = set(folder.iterdir())
    try:
        executor = slurm_executor(folder, ex, f"interp-{job.kind.replace(' ', '-')}", task_ranks(job, ex))
        cfg = getattr(job, "cfg", None)
        task = getattr(job, "slurm_task_class", _slurm_task_class)()   # a job may handle Slurm's signals its way
        return executor.map_array(task(), [factory] * tasks, [cfg] * tasks, list(range(tasks)),
                                  [tasks] * tasks, [targets] * tasks, [ex.cpus_per_task or 1] * tasks)
    except (RuntimeError, OSError, subprocess.SubprocessError) as err:   # submitit's FailedJobError: sbatch's error
        for entry in set(folder.iterdir()) - before:
            if entry.is_file() and not entry.is_symlink():
                entry.unlink()
        raise InputError(f"submitting the array of {tasks} task(s) failed: {one_line(err)}", field="--executor slurm",
                         fix="check that Slurm answers here (`sinfo`, `squeue`) and that the partition and limits are "
                             "allowed, or use --executor local") from None


def _slurm(job: Job, factory: Factory, targets: list[Any], tasks: int, ex: ExecutorConfig,
           result: JobsResult) -> JobsResult:
    folder = parts_dir(job.out) / SLURM_DIR
    since = time.time()
    submitted = _submit(job, factory, targets, tasks, ex)
    result.job_ids = [j.job_id for j in submitted]
    write_plan(job.out, job.kind, [job.name(t) for t in targets], tasks, "slurm", {"slurm_jobs": result.job_ids})
    print(f"{job.prefix} submitted {tasks} Slurm array task(s) ({result.job_ids[0].split('_')[0]}) for "
          f"{len(targets)} target(s); logs in {folder}", file=sys.stderr, flush=True)
    if not ex.wait:
        if not getattr(job, "says_no_wait", False):   # a job that says it its own way (a training experiment)
            print(f"{job.prefix} not waiting: `interp jobs status {job.out}` shows their progress, `interp jobs merge "
                  f"{job.out}` builds the table once they have ended", file=sys.stderr, flush=True)
        return result
    _wait(job, submitted, len(targets), since)
    for i, sub in enumerate(submitted):
        try:
            result.tasks.append(sub.result())
        except Exception as err:  # noqa: BLE001 - submitit's UncompletedJobError / FailedJobError: a task that died
            result.failed_tasks.append((i, f"Slurm job {sub.job_id} ({sub.state}): {one_line(err)}"))
    _merge(job, result)
    return result


def _wait(job: Job, submitted: list[Any], total: int, since: float) -> None:
    """Wait for the array, printing one line per target a task finishes (from the tasks' journals, records since
    the submission) with an ETA."""
    seen: set[str] = set()
    started = time.perf_counter()
    while True:
        finished = all(s.done() for s in submitted)
        for name, record in sorted(read_journal(job.out).items(), key=lambda kv: kv[1].get("time", 0)):
            if record.get("state") in ("done", "skipped", "failed") and name not in seen and record["time"] >= since:
                seen.add(name)
                elapsed = time.perf_counter() - started
                eta = elapsed / len(seen) * (total - len(seen)) if len(seen) < total else 0.0
                state = record["state"] if record["state"] != "failed" else f"FAILED ({record.get('error', '')})"
                print(f"{job.prefix} {len(seen)}/{total} {name}: {state} (task {record.get('task')}); elapsed "
                      f"{format_eta(elapsed)}, ETA {format_eta(eta if math.isfinite(eta) else math.nan)}",
                      file=sys.stderr, flush=True)
        if finished:
            return
        time.sleep(POLL_S)
