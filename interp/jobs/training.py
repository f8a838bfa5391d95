"""Training experiments as jobs: `interp experiment NAME --executor slurm` trains one run per Slurm array task.

Why a Job of their own: a training run is a target like a checkpoint of `interp batch`, but it writes no part. Its
run directory (config.json, train_state.pt, log.jsonl, result.json, error.txt; interp.training.experiments) is its
state, and the experiment's tables are rebuilt from the run directories (interp.training.results). So the jobs layer
gives the runs what it gives every target (the plan, one task per run under its lock, the journals, submission,
waiting, `interp jobs status`) and the training code keeps its science:

    plan    the experiment's runs not finished yet, in its plan order (seed-major): (variant, seed, TrainConfig), each
            with resume=True
    do      interp.training.experiments.train_run: skipped when finished, else trained, resuming from the run's last
            checkpoint (a task requeued after a preemption, a time-out or scancel + `scontrol requeue` resumes there;
            Slurm's stops save the step first: SIGTERM through the Trainer, the time-limit warning through
            training_task_class);
            a failure is kept in the run's error.txt and the task's journal, and the other runs go on
    merge   nothing: the analysis collates its tables from the run directories, as after a local run

The jobs layer's files go to <root>/<experiment>/.jobs.parts/ (the plan, the journals, submitit's pickles and logs
under .slurm/), so `interp jobs status <root>/<experiment>` shows each run's state, step, loss and error.

Executors: local is run_experiment as before (--jobs N processes here; each run DDP when the command runs under
torchrun); slurm is one array task per run. `--executor torchrun` is refused: under torchrun every rank trains the
same run, so launch the command itself with torchrun. A run on several GPUs inside one task is not done yet
(--gpus-per-task above 1 is refused; docs/scale.md).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp._util.children import raise_if_stopped
from interp._util.errors import InputError
from interp._util.io import exclusive_lock
from interp.jobs.executors import ExecutorConfig, JobsResult, execute
from interp.jobs.parts import EXPERIMENT_OUT as JOBS_OUT
from interp.jobs.runner import Outcome
from interp.training import experiments
from interp.training.experiments import (LOCK_FILE, DataCache, Experiment, Report, RunStatus, Variant,
                                         check_equal_params, train_run)
from interp.training.results import (DONE, FAILED, INTERRUPTED, RUNNING_ELSEWHERE, SKIPPED, finished_dir,
                                     run_state)

if TYPE_CHECKING:
    from interp.data import TokenData

__all__ = ["KIND", "JOBS_OUT", "SUBMITTED", "Run", "TrainingJob", "TrainingJobConfig", "train_experiment",
           "jobs_out", "submitted", "check_executor", "run_progress", "with_run_progress"]

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
    """What every task needs to rebuild the job: the experiment (plain data, pickled to the tasks). The token
    data are not shipped: each task memory-maps them from the token cache the submitting process filled."""

    experiment: Experiment
    progress: bool = True


class TrainingJob:
    """An experiment's runs as a Job of interp.jobs.runner: one target per run."""

    kind = KIND
    prefix = "[experiment]"
    what = "training experiment"
    says_no_wait = True   # train_experiment's own line (rerun the command to collate), not `interp jobs merge`

    def __init__(self, cfg: TrainingJobConfig, data: TokenData | None = None) -> None:
        self.cfg, self.exp = cfg, cfg.experiment
        self.out = jobs_out(self.exp)
        self.progress = cfg.progress
        self.prefix = f"[{self.exp.name}]"
        self._data = DataCache(data)

    def plan(self) -> list[Run]:
        return [Run(v, seed, cfg) for v, seed, cfg in self.exp.configs() if finished_dir(self.exp, v, seed, cfg) is None]

    def prepare(self) -> None:
        pass

    def do(self, run: Run) -> Outcome:
        status = train_run(self.exp, run.variant, run.seed, run.cfg, self._data, _say, "")
        if status.status == INTERRUPTED:
            raise_if_stopped()   # SIGTERM (scancel, preemption): the run saved its step; the task stops, a requeue resumes
        if status.status in (DONE, SKIPPED):
            return Outcome(status.status)
        return Outcome("failed", f"{status.status}: {status.error}" if status.status != FAILED else str(status.error))

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
    import signal
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
                job = submitit.JobEnvironment().job_id   # "<array>_<task>": a task's own id may be the array's
                subprocess.run(["scontrol", "requeue", job], check=True, timeout=60)
                _say(f"[experiment] requeued Slurm job {job}: it resumes from the step saved now")
                raise SystemExit(-1) from None   # no result for submitit: the task runs again

    return TrainingTask


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def check_executor(ex: ExecutorConfig) -> None:
    """InputError for the executor settings an experiment cannot take (naming the flag and the fix)."""
    ex.validate()
    if ex.executor == "torchrun":
        raise InputError("an experiment's runs are not split over torchrun ranks: every rank trains the same run",
                         field="--executor torchrun", fix="launch the command itself under torchrun (each run then "
                                                          "trains on every rank), or use --executor slurm")
    if ex.executor == "slurm" and ex.gpus_per_task > 1:
        raise InputError(f"{ex.gpus_per_task} GPUs per run inside one Slurm task is not implemented yet",
                         field="--gpus-per-task", fix="use --gpus-per-task 1 (one GPU per run), or run a multi-GPU "
                                                      "run with torchrun (docs/scale.md)")


def train_experiment(exp: Experiment, ex: ExecutorConfig | None = None, data: TokenData | None = None,
                     log: Callable[[str], None] | None = print) -> Report:
    """Train every unfinished run of `exp` where `ex` says and return run_experiment's Report.

    local: run_experiment(exp, data, jobs=ex.jobs). slurm: one array task per unfinished run (ex.jobs is ignored),
    submitted after the same pre-flight as a local run (equal parameters, the token data prepared once here, so
    a bad corpus fails before anything is queued); with ex.wait the call returns when every task has ended, its
    runs stated as run_experiment states them, else at once, the unfinished runs SUBMITTED (rerun to collate)."""
    ex = ex or ExecutorConfig()
    check_executor(ex)
    if ex.executor == "local":
        return experiments.run_experiment(exp, data=data, log=log, jobs=ex.jobs)   # looked up: tests stand in for it
    configs, notes = exp.plan()
    params = check_equal_params((cfg for _, _, cfg in configs), exp.equal_params_within)
    say = log or (lambda _msg: None)
    for note in notes:
        print(f"[{exp.name}] {note}", file=sys.stderr)
    job = TrainingJob(TrainingJobConfig(exp), data)
    with exclusive_lock(exp.dir / LOCK_FILE, f"experiment {exp.dir} (--root/--name)"):
        todo = job.plan()
        if not todo:
            return _report(exp, params, None, ex)
        DataCache(data)(todo[0].cfg)   # tokenizer and token files built once, before any task starts
        result = execute(TrainingJob, job.cfg, dataclasses.replace(ex, jobs=0), job=job)
    if not ex.wait:
        say(f"[{exp.name}] {len(todo)} run(s) submitted; `interp jobs status {exp.dir}` shows them; rerun the same "
            "command to collate the tables once they have finished (finished runs are skipped)")
    return _report(exp, params, result, ex)


def _report(exp: Experiment, params: int | None, result: JobsResult | None, ex: ExecutorConfig) -> Report:
    """The Report run_experiment would give, read back from the run directories and what the tasks said."""
    done = set(result.done) if result else set()
    failed = dict(result.failed) if result else {}
    died = "; ".join(error for _, error in result.failed_tasks) if result else ""
    statuses = []
    for v, seed, cfg in exp.configs():
        name, run_dir = f"{v.name}/seed{seed}", Path(cfg.out_dir)
        if finished_dir(exp, v, seed, cfg) is not None:
            statuses.append(RunStatus(v.name, seed, run_dir, DONE if name in done else SKIPPED))
        elif name in failed:
            state = RUNNING_ELSEWHERE if failed[name].startswith(RUNNING_ELSEWHERE) else FAILED
            statuses.append(RunStatus(v.name, seed, run_dir, state, error=failed[name]))
        elif not ex.wait:
            statuses.append(RunStatus(v.name, seed, run_dir, SUBMITTED))
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
    from interp.training.results import ERROR_FILE, lock_holder

    result = read_json(run_dir / RESULT_FILE, missing_ok=True, torn_ok=True) or {}
    config = read_json(run_dir / CONFIG_FILE, missing_ok=True, torn_ok=True) or {}
    error = ""
    if isinstance(result, dict) and result.get("status") == DONE:
        state = "done"
    elif lock_holder(run_dir) is not None:
        state = "running"
    elif (run_dir / ERROR_FILE).is_file():
        lines = [ln.strip() for ln in (run_dir / ERROR_FILE).read_text(errors="replace").splitlines() if ln.strip()]
        state, error = "failed", lines[-1] if lines else "see error.txt"   # a traceback's last line: the error's first
    elif (run_dir / TRAIN_STATE_FILE).is_file() or (isinstance(result, dict) and result.get("status") == INTERRUPTED):
        state = "interrupted"
    else:
        state = "pending"
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
        if state in ("pending", "interrupted") and s.state in ("running", "failed"):
            state, error = s.state, s.error   # a task at it before its first save; or its failure before any file
        out.append(dataclasses.replace(s, state=state, error=(error or s.error) if state == "failed" else "",
                                       detail=detail))
    return out
