"""Training experiments as jobs: `interp experiment NAME` trains its runs through the jobs layer, locally (in this
process, or --jobs N processes) or on Slurm (one array task per run), by one code path.

Why a Job of their own: a training run is a target like a checkpoint of `interp batch`, but it writes no part. Its
run directory (config.json, train_state.pt, log.jsonl, result.json, error.txt) is its state, and the experiment's
tables are rebuilt from the run directories (interp.training.results). So the jobs layer gives the runs what it gives
every target (the plan, the tasks under their locks, the journals, submission, waiting, `interp jobs status`) and
the training code keeps its science:

    plan    the experiment's runs not finished yet, in its plan order (seed-major): (variant, seed, TrainConfig), each
            with resume=True
    do      interp.jobs.runs.train_run: skipped when finished, else trained, resuming from the run's last checkpoint
            (a task requeued after a preemption, a time-out or scancel + `scontrol requeue` resumes there; Slurm's
            stops save the step first: SIGTERM through the Trainer, the time-limit warning through
            training_task_class); a failure is kept in the run's error.txt and the task's journal, and the other runs
            go on; a stop (SIGINT/SIGTERM: the Trainer saves) stops the task, because the user asked to stop
    merge   nothing: the analysis collates its tables from the run directories

The jobs layer's files go to <root>/<experiment>/.jobs.parts/ (the plan, the journals, the task locks, submitit's
pickles and logs under .slurm/), whatever the executor, so `interp jobs status <root>/<experiment>` shows each run's
state, step, loss and error; <root>/<experiment>/.experiment.lock is held by the command for the whole time.

Executors: local (--jobs 1: in this process; --jobs N: N spawned tasks, each taking every N-th run with cores // N
threads: the same numbers as one after another), slurm (one array task per run). A run uses every rank of its task
(TrainingJob.spans_ranks): launched under torchrun, the command trains each run as one DDP/FSDP run over all ranks,
rank 0 doing the jobs layer's bookkeeping; `--executor torchrun` says so (it is that, checked to run under torchrun:
an experiment's ranks are never split into tasks of their own, as a batch's are). On Slurm a task may hold several
ranks (--ranks-per-task, default --gpus-per-task): srun starts them, submitit's TorchDistributedEnvironment gives them
torch.distributed's environment, and each run trains over all of them as under torchrun (interp.jobs.executors).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp._util.children import Interrupted, raise_if_stopped, stop_requested
from interp._util.dist import Distributed
from interp._util.errors import InputError
from interp._util.io import exclusive_lock
from interp._util.paths import RESULT_FILE
from interp._util.states import DONE, FAILED, INTERRUPTED, PENDING, RUNNING, SKIPPED
from interp.jobs.executors import ExecutorConfig, JobsResult, execute
from interp.jobs.parts import EXPERIMENT_OUT as JOBS_OUT
from interp.jobs.runner import Outcome
from interp.jobs.runs import (
    ELSEWHERE,
    EXPERIMENT_LOCK,
    DataCache,
    Report,
    RunStatus,
    lock_holder,
    run_state,
    skip_if_done,
    train_run,
)
from interp.training.experiments import Experiment, Variant, check_equal_params
from interp.training.results import _read, finished_dir

if TYPE_CHECKING:
    from interp.data import TokenData

__all__ = [
    "JOBS_OUT",
    "KIND",
    "SUBMITTED",
    "Run",
    "TrainingJob",
    "TrainingJobConfig",
    "check_executor",
    "jobs_out",
    "run_experiment",
    "run_progress",
    "submitted",
    "train_experiment",
    "with_run_progress",
]

KIND = "training"      # the jobs layer's marker of an experiment's parts folder (.kind, the plan's kind)
SUBMITTED = "submitted"   # a run's status in the Report of a --no-wait submission: its task is queued or running


def jobs_out(exp: Experiment) -> Path:
    """The OUT the jobs layer keys an experiment's plan, journals and locks by (parts_dir: <exp dir>/.jobs.parts)."""
    return exp.dir / JOBS_OUT


@dataclass(frozen=True)
class Run:
    """One target: a training run of the experiment (pickled to its task)."""

    variant: Variant
    seed: int
    cfg: Any   # its TrainConfig (resume=True, out_dir its run directory)


@dataclass
class TrainingJobConfig:
    """What every task needs to rebuild the job: the experiment (plain data, pickled to the tasks). `data`: the
    TokenData every run trains on, pickled to local tasks (None: each task memory-maps them from the token cache
    the submitting process filled; always None for Slurm). `threads`: each run's threads when the run sets none
    (0: the Trainer's default, all cores)."""

    experiment: Experiment
    progress: bool = True
    data: Any = None
    threads: int = 0


class _RunStopped(KeyboardInterrupt):
    """A run returned "interrupted" with no stop signal (the Trainer's stop_at): its task stops as at a signal."""


class TrainingJob:
    """An experiment's runs as a Job of interp.jobs.runner: one target per run, each using every rank of its task."""

    kind = KIND
    prefix = "[experiment]"
    what = "training experiment"
    says_no_wait = True   # train_experiment's own line (rerun the command to collate), not `interp jobs merge`
    spans_ranks = True    # under torchrun every rank trains the same run (interp.jobs.executors.execute)

    def __init__(self, cfg: TrainingJobConfig, data: TokenData | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        self.cfg, self.exp = cfg, cfg.experiment
        self.out = jobs_out(self.exp)
        self.progress = cfg.progress
        self.prefix = f"[{self.exp.name}]"
        self._data = DataCache(data if data is not None else cfg.data)
        self.say = log or (_say if cfg.progress else (lambda _msg: None))   # a task's own: its stderr, or quiet
        self.main = Distributed.from_env(join=False).primary
        self.statuses: dict[str, RunStatus] = {}   # what this process's do() said, by run name
        self._where = {f"{v.name}/seed{seed}": i for i, (v, seed, _) in enumerate(self.exp.configs(), 1)}

    def plan(self) -> list[Run]:
        threads = {"threads": self.cfg.threads} if self.cfg.threads else {}
        return [Run(v, seed, dataclasses.replace(cfg, **threads) if threads and not cfg.threads else cfg)
                for v, seed, cfg in self.exp.configs() if finished_dir(self.exp, v, seed, cfg) is None]

    def prepare(self) -> None:
        pass

    def do(self, run: Run) -> Outcome:
        name = self.name(run)
        status = train_run(self.exp, run.variant, run.seed, run.cfg, self._data, self.say,
                           f" {self._where.get(name, '?')}/{len(self._where)}", self.main)
        self.statuses[name] = status
        if status.status == INTERRUPTED:
            raise_if_stopped()   # SIGTERM (scancel, preemption): the run saved its step; the task stops, a requeue resumes
            raise _RunStopped(name)
        if status.status in (DONE, SKIPPED):
            return Outcome(status.status, detail=status)
        if status.status == RUNNING:   # another live process trains it: not failed, not ours to write to
            return Outcome(RUNNING, f"{ELSEWHERE}: {status.error}", detail=status)
        return Outcome(FAILED, str(status.error), detail=status)

    def merge(self) -> None:
        return None

    @staticmethod
    def slurm_task_class() -> type:
        return training_task_class()

    def name(self, run: Run) -> str:
        return f"{run.variant.name}/seed{run.seed}"


def training_task_class() -> type:
    """The jobs layer's Slurm task (submitit's Checkpointable) for a training run. Slurm's warning before a time-out
    (SIGUSR2, 60 s ahead) makes submitit requeue the task and exit at once, losing the steps since the last
    checkpoint; here, while the Trainer trains, it is a stop as SIGTERM is (the step finishes and is saved), and
    then the task requeues itself: the requeued task resumes where this one stopped. Outside the loop (loading the
    data, evaluating the end) submitit's own handler runs."""
    import subprocess

    import submitit

    from interp._util.children import StopFlag
    from interp.jobs.executors import _slurm_task_class

    class TrainingTask(_slurm_task_class()):
        def __call__(self, *args: Any) -> Any:
            warned: list[int] = []
            submitit_handler = signal.getsignal(signal.SIGUSR2)

            def warn(signum: int, frame: Any) -> None:
                stop = signal.getsignal(signal.SIGTERM)
                if not isinstance(getattr(stop, "__self__", None), StopFlag):
                    if callable(submitit_handler):
                        submitit_handler(signum, frame)
                    return
                _say(f"[experiment] {signal.Signals(signum).name}: the time limit is near; saving the step, then "
                     "requeueing this task")
                warned.append(signum)
                stop(signal.SIGTERM, frame)   # the Trainer's flag: finish the step, save, return "interrupted"

            signal.signal(signal.SIGUSR2, warn)
            try:
                return super().__call__(*args)
            except KeyboardInterrupt:
                if not warned:
                    raise
                env = submitit.JobEnvironment()
                job = env.job_id   # "<array>_<task>": a task's own id may be the array's
                if env.global_rank == 0:   # one requeue for the task's ranks (ranks_per_task)
                    subprocess.run(["scontrol", "requeue", job], check=True, timeout=60)
                    _say(f"[experiment] requeued Slurm job {job}: it resumes from the step saved now")
                raise SystemExit(-1) from None   # no result for submitit: the task runs again

    return TrainingTask


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def check_executor(ex: ExecutorConfig) -> None:
    """InputError for the executor settings an experiment cannot take (naming the flag and the fix)."""
    ex.validate()   # --executor torchrun: only inside torchrun's environment (interp._util.dist.check_env)
    if ex.executor == "torchrun" and ex.jobs > 1:
        raise InputError(f"--jobs {ex.jobs} under torchrun: each run trains on every rank, one run at a time",
                         field="--jobs", fix="drop --jobs (or use --executor local --jobs N without torchrun: N "
                                             "single-process runs at once)")


def run_experiment(exp: Experiment, data: TokenData | None = None, log: Callable[[str], None] | None = print,
                   jobs: int = 1) -> Report:
    """train_experiment here: in this process (jobs=1), or `jobs` runs at once in spawned processes."""
    return train_experiment(exp, ExecutorConfig(jobs=jobs), data=data, log=log)


def train_experiment(exp: Experiment, ex: ExecutorConfig | None = None, data: TokenData | None = None,
                     log: Callable[[str], None] | None = print) -> Report:
    """Train every unfinished run of `exp` where `ex` says and return the Report; never raises for a single run's
    failure.

    local: --jobs 1 in this process (under torchrun: each run over all ranks), --jobs N in N spawned tasks (each
    run with cores // N threads unless it sets `threads`: the same numbers as one after another). slurm: one array
    task per unfinished run (ex.jobs is ignored). Either way after the same pre-flight (equal parameters, the token
    data prepared once here, so a bad corpus fails before any run starts), through interp.jobs.executors.execute.
    With ex.wait (always, locally) the call returns when every task has ended, else at once, the unfinished runs
    SUBMITTED (rerun to collate). `data` (an interp.data.TokenData) is what every run trains on when given (tests,
    notebooks; not shipped to Slurm). The experiment's folder is locked while it runs (EXPERIMENT_LOCK): a second
    command on it fails at once with LockHeld naming the first one's pid.

    A SIGINT/SIGTERM: the runs save, the report is printed, then Interrupted is raised (interp.cli.main: exit 130 /
    143), so nothing after it (a table of the interrupted runs, the next experiment) runs."""
    ex = ex or ExecutorConfig()
    check_executor(ex)
    dist = Distributed.from_env(join=False)
    local = ex.executor in ("local", "torchrun")   # torchrun: one run at a time over every rank (spans_ranks)
    if local and ex.jobs > 1 and dist.world_size > 1:
        raise ValueError(f"run_experiment(jobs={ex.jobs}): jobs is the number of single-process runs trained at once, "
                         "and must be 1 under torchrun (there every rank trains the same run)")
    configs, notes = exp.plan()
    params = check_equal_params((cfg for _, _, cfg in configs), exp.equal_params_within)
    say = log if (log and dist.primary) else (lambda _msg: None)
    if log and dist.primary:
        for note in notes:  # the same rule and the same words as `interp train`
            print(f"[{exp.name}] {note}", file=sys.stderr)
    job = TrainingJob(TrainingJobConfig(exp, progress=log is not None, data=data if local else None), data,
                      log=say if dist.primary else (lambda _msg: None))
    result, tasks = None, 1
    lock = (exclusive_lock(exp.dir / EXPERIMENT_LOCK, f"experiment {exp.dir} (--root/--name)") if dist.primary
            else contextlib.nullcontext())
    try:
        with lock:
            for i, (v, seed, cfg) in enumerate(configs, 1):   # the finished runs (or recorded) are said once, here
                if skip_if_done(exp, f" {i}/{len(configs)}", v, seed, cfg, say, dist.primary) is not None:
                    job.statuses[f"{v.name}/seed{seed}"] = RunStatus(v.name, seed, Path(cfg.out_dir), SKIPPED)
            todo = job.plan()
            if not todo:
                return _report(exp, params, None, ex, job.statuses)
            if local and ex.jobs > 1:
                tasks = min(ex.jobs, len(todo))
                job.cfg.threads = ex.cpus_per_task or max(1, (os.cpu_count() or 1) // tasks)   # threads_per_run's rule
            if dist.primary:   # tokenizer and token files built once, before any run starts
                (job._data if local and tasks == 1 else DataCache(data))(todo[0].cfg)
            # Under torchrun, one process group for every run: torch re-creates a destroyed default group under the
            # same store prefix, so a rank joining run 2 can read rank 0's address from run 1 (gloo: "connection
            # refused"). Each Trainer finds this group live and leaves it open.
            group = Distributed.from_env() if local and dist.world_size > 1 else None
            try:
                result = execute(TrainingJob, job.cfg, dataclasses.replace(ex, jobs=0 if not local else tasks,
                                                                           executor="local" if local else ex.executor),
                                 job=job)
            finally:
                if group is not None:
                    group.close()
    except KeyboardInterrupt as stop:
        if not isinstance(stop, Interrupted | _RunStopped) and stop_requested() is None:
            raise   # a Ctrl-C outside the Trainer's loop (no run saved through it): as it came
        report = _report(exp, params, result, ex, job.statuses, stopped=True)
        if stop_requested() is None:
            return report   # a run stopped short of its steps by itself (stop_at): the report says interrupted
        say(report.summary())
        raise Interrupted(stop_requested()) from None
    if not ex.wait and not local:
        say(f"[{exp.name}] {len(todo)} run(s) submitted; `interp jobs status {exp.dir}` shows them; rerun the same "
            "command to collate the tables once they have finished (finished runs are skipped)")
    return _report(exp, params, result, ex, job.statuses)


def _report(exp: Experiment, params: int | None, result: JobsResult | None, ex: ExecutorConfig,
            said: dict[str, RunStatus], stopped: bool = False) -> Report:
    """The Report of the runs, from what the runs said (in this process, or carried back by their tasks), else read
    back from the run directories and what the tasks' journals said."""
    said = dict(said)
    for task in result.tasks if result else ():
        said.update({f"{d.variant}/seed{d.seed}": d for d in task.details if isinstance(d, RunStatus)})
    done = set(result.done) if result else set()
    failed = dict(result.failed) if result else {}
    died = "; ".join(error for _, error in result.failed_tasks) if result else ""
    statuses = []
    for v, seed, cfg in exp.configs():
        name, run_dir = f"{v.name}/seed{seed}", Path(cfg.out_dir)
        found = finished_dir(exp, v, seed, cfg)
        if params is not None:   # the real count (at the tokenizer's vocabulary) once a run has a result.json
            params = (_read((found or run_dir) / RESULT_FILE) or {}).get("params", params)
        if name in said:
            statuses.append(said[name])
        elif found is not None:
            statuses.append(RunStatus(v.name, seed, run_dir, DONE if name in done else SKIPPED))
        elif name in failed:
            state = RUNNING if failed[name].startswith((RUNNING, ELSEWHERE)) else FAILED
            statuses.append(RunStatus(v.name, seed, run_dir, state, error=failed[name]))
        elif not ex.wait and ex.executor == "slurm":
            statuses.append(RunStatus(v.name, seed, run_dir, SUBMITTED))
        elif stopped:   # a stop: a run its task was training saved its step; the others never started
            saved = _read(run_dir / RESULT_FILE) or {}
            statuses.append(RunStatus(v.name, seed, run_dir, INTERRUPTED, error=saved.get("reason"))
                            if saved.get("status") == INTERRUPTED else RunStatus(v.name, seed, run_dir, PENDING))
        else:   # its task died (cancelled, out of memory, a node failure) or was never started
            before = run_state(run_dir) or "nothing saved"
            statuses.append(RunStatus(v.name, seed, run_dir, FAILED, error=f"its task ended before the run did "
                                      f"({died or 'no result'}); {before}; rerun the command to train it"))
    return Report(exp.name, params, statuses)


def submitted(report: Report | None) -> bool:
    """Whether `report` is of a --no-wait submission with runs still queued or running (nothing to collate yet)."""
    return report is not None and any(r.status == SUBMITTED for r in report.runs)


# ------------------------------------------------------------------------------------ interp jobs status

def run_progress(run_dir: Path) -> tuple[str, str, str]:
    """(state, first line of its error, "step 40/250  loss 5.123") of one run, from its directory alone (read only:
    safe beside the run). The state in the jobs layer's words (interp.jobs.status.STATES): done (its result.json),
    running (a live process holds its lock), failed (error.txt), interrupted (a saved state to resume), pending."""
    from interp._util.io import read_json
    from interp._util.paths import CONFIG_FILE, LOG_FILE, RESULT_FILE, TRAIN_STATE_FILE
    from interp.training.results import ERROR_FILE

    result = read_json(run_dir / RESULT_FILE, missing_ok=True, torn_ok=True) or {}
    config = read_json(run_dir / CONFIG_FILE, missing_ok=True, torn_ok=True) or {}
    error = ""
    if isinstance(result, dict) and result.get("status") == DONE:
        state = DONE
    elif lock_holder(run_dir) is not None:
        state = RUNNING
    elif (run_dir / ERROR_FILE).is_file():
        lines = [ln.strip() for ln in (run_dir / ERROR_FILE).read_text(errors="replace").splitlines() if ln.strip()]
        state, error = FAILED, lines[-1] if lines else "see error.txt"   # a traceback's last line: the error's first
    elif (run_dir / TRAIN_STATE_FILE).is_file() or (isinstance(result, dict) and result.get("status") == INTERRUPTED):
        state = INTERRUPTED
    else:
        state = PENDING
    step, loss = _last_train_record(run_dir / LOG_FILE)
    total = (config.get("train") or {}).get("steps") if isinstance(config, dict) else None
    detail = (f"step {step if step is not None else 0}/{total if total is not None else '?'}"
              + (f"  loss {loss:.4g}" if isinstance(loss, int | float) else "")) if (step or total) else ""
    return state, error, detail


def _last_train_record(log: Path) -> tuple[int | None, float | None]:
    """(step, loss) of the last train line of a run's log.jsonl (None, None without one; torn lines skipped)."""
    import json

    step = loss = None
    for line in log.read_text(errors="replace").splitlines() if log.is_file() else ():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("kind") == "train":
            step, loss = record.get("step"), record.get("loss")
    return step, loss


def with_run_progress(folder: Path, states: list) -> list:
    """The jobs layer's states of an experiment's planned runs, told by their run directories (<folder>/<name>): the
    directory says done, running, failed or resumable whatever ran it (this plan, an earlier one, a local run), the
    journal what a task is at before its run has a directory. Each with its step, loss and error."""
    out = []
    for s in states:
        state, error, detail = run_progress(folder / s.target)
        if state in (PENDING, INTERRUPTED) and s.state in (RUNNING, FAILED):
            state, error = s.state, s.error   # a task at it before its first save; or its failure before any file
        out.append(dataclasses.replace(s, state=state, error=(error or s.error) if state == FAILED else "",
                                       detail=detail))
    return out
