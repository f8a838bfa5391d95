"""One run of a training experiment as every runner takes it: its state read from its directory, trained or skipped,
reported; and the process pool several runs train in at once.

A run's directory (<root>/<experiment>/<variant>/seed<k>/: interp.training writes it) is its only state. Before a
run trains, and in the report, it is stated as what it is, in the words of interp._util.states: done or skipped
(its result.json, or its record), failed (error.txt, with its error), interrupted (its state saved: resumable; also
"abandoned": a saved state that no live process holds, its runner killed), running (another live process holds its
lock, <run>/.lock, interp._util.paths.RUN_LOCK_FILE: never written to, not failed) or pending (never started).

The experiment's runner (interp.jobs.training: the plan, the tasks, their locks and journals, local or on Slurm)
calls train_run once per run; a failure is kept in the run's error.txt and the other runs go on.
"""

from __future__ import annotations

import os
import signal
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from interp._util.children import stop_requested
from interp._util.dist import Distributed
from interp._util.io import LockHeld, write_text_atomic
from interp._util.io import lock_holder as held_by
from interp._util.paths import RESULT_FILE, RUN_LOCK_FILE, TRAIN_STATE_FILE
from interp._util.processes import Outcome, run_in_processes
from interp._util.states import DONE, FAILED, INTERRUPTED, PENDING, RUNNING, SKIPPED
from interp.training.config import TrainConfig
from interp.training.experiments import Experiment, Variant, check_equal_params
from interp.training.results import ERROR_FILE, _read, finished_dir, trained_on

if TYPE_CHECKING:
    from interp.data import TokenData

__all__ = [
    "ELSEWHERE",
    "EXPERIMENT_LOCK",
    "DataCache",
    "Report",
    "RunStatus",
    "describe",
    "lock_holder",
    "run_state",
    "skip_if_done",
    "threads_per_run",
    "train_in_processes",
    "train_one",
    "train_run",
]

EXPERIMENT_LOCK = ".experiment.lock"   # in <root>/<experiment>/: held by the command running its runs
ELSEWHERE = "running elsewhere"   # how a run another live process holds is said (its state is RUNNING)


# ------------------------------------------------------------------------------------------ a run's state

def lock_holder(run_dir: Path) -> str | None:
    """The pid (as its lock file says) of a live process training in `run_dir` (it holds RUN_LOCK_FILE), else None.
    Takes no lock, creates and writes nothing: a runner asks this before it trains a run, or writes error.txt,
    so it never writes into a folder some other process (an orphan of a killed runner, a second command) is
    training in. The OS drops a lock when its holder dies, so a killed run's folder has no holder."""
    try:
        return held_by(Path(run_dir) / RUN_LOCK_FILE)   # the one reader of a lock's holder (interp._util.io)
    except OSError:   # a lock file that vanished or cannot be read: nobody trains there that we can tell
        return None


def run_state(run_dir: Path) -> str:
    """What an unfinished run's directory holds, in the words the runner reports it with: "" (nothing yet),
    "running elsewhere: pid N holds <run>/.lock", "interrupted at step N by SIGTERM; resumable", "abandoned: ...;
    resumable" (a saved state that no live process holds: its runner was killed), "failed before: ..." (error.txt)."""
    run_dir = Path(run_dir)
    holder = lock_holder(run_dir)
    if holder is not None:
        return f"{ELSEWHERE}: pid {holder} holds {run_dir / RUN_LOCK_FILE}"
    result = _read(run_dir / RESULT_FILE) or {}
    if (run_dir / ERROR_FILE).is_file():
        lines = [ln for ln in (run_dir / ERROR_FILE).read_text(errors="replace").splitlines() if ln.strip()]
        return f"failed before: {lines[-1] if lines else 'see error.txt'}; retrying"
    if result.get("status") == INTERRUPTED:
        return f"{INTERRUPTED} at step {result.get('step')} by {result.get('reason')}; resumable, resuming"
    if (run_dir / TRAIN_STATE_FILE).is_file():
        return (f"abandoned: {TRAIN_STATE_FILE} but no finished {RESULT_FILE} and no live process holding it, so its "
                "runner was killed; resumable, resuming")
    return ""


def describe(exp: Experiment) -> str:
    """The plan of `exp` as text (what `--dry-run` prints): one line per run, done or to train."""
    from interp.model import param_counts

    configs, notes = exp.plan()
    params = check_equal_params((cfg for _, _, cfg in configs), exp.equal_params_within)
    shapes = {(c.steps, c.batch_size, c.n_ctx) for _, _, c in configs}
    head = f"{exp.name}: {len(configs)} runs ({len(exp.variants)} variants x {len(exp.seeds)} seeds)"
    if params is not None:
        head += f", {params:,} params each"
    if len(shapes) == 1:
        steps, batch, n_ctx = shapes.pop()
        head += f", {steps} steps x {batch} x {n_ctx} = {steps * batch * n_ctx:,} tokens per run"
    lines = [head, *(f"  note: {note}" for note in notes)]
    width = max(20, *(len(v.name) for v in exp.variants))
    for v, seed, cfg in configs:
        found = finished_dir(exp, v, seed, cfg)
        state = "to train" if found is None else ("done" if found == Path(cfg.out_dir) else "recorded")
        before = run_state(Path(cfg.out_dir)) if found is None else ""   # what an unfinished run's folder holds
        if before:
            state = (ELSEWHERE if before.startswith(ELSEWHERE) else
                     "to retry" if before.startswith("failed") else "to resume")
        extra = "" if params is not None else f"  {param_counts(cfg.model_config(cfg.vocab_size))['total']:,} params"
        lines.append(f"  {v.name:<{width}} seed{seed}  {state:<8}  widths {cfg.width.widths(cfg.n_layers, cfg.d_ff)}"
                     f"{extra}  {cfg.out_dir}" + (f"  [{before}]" if before else ""))
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ the report

@dataclass
class RunStatus:
    variant: str
    seed: int
    run_dir: Path
    status: str                 # interp._util.states: done | skipped | failed | interrupted | running | pending
    seconds: float = 0.0        #   (and interp.jobs.training.SUBMITTED: queued on Slurm, not waited for)
    error: str | None = None


@dataclass
class Report:
    """What one run of an experiment's runs did (interp.jobs.training.train_experiment); `exit_code` is what a CLI
    should return."""

    experiment: str
    params: int | None          # per run when equal in all (from result.json once a run has one), else None
    runs: list[RunStatus]

    @property
    def failed(self) -> list[RunStatus]:
        return [r for r in self.runs if r.status == FAILED]

    @property
    def interrupted(self) -> bool:
        return any(r.status == INTERRUPTED for r in self.runs)

    @property
    def exit_code(self) -> int:
        """128 + the signal that interrupted it (130 SIGINT, 143 SIGTERM), 1 a run failed or is running elsewhere,
        else 0."""
        if self.interrupted:
            return 128 + (stop_requested() or signal.SIGINT)
        return 1 if self.failed or any(r.status == RUNNING for r in self.runs) else 0

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([{"variant": r.variant, "seed": r.seed, "status": r.status,
                              "seconds": round(r.seconds, 1), "error": r.error or ""} for r in self.runs])

    def summary(self) -> str:
        counts = self.table()["status"].value_counts().to_dict()
        each = f", {self.params:,} params each" if self.params is not None else ""
        lines = [f"[{self.experiment}] {len(self.runs)} runs{each}: "
                 + ", ".join(f"{n} {s}" for s, n in counts.items())]
        lines += [f"  FAILED {r.variant} seed{r.seed}: {r.error} (traceback: {r.run_dir / ERROR_FILE})"
                  for r in self.failed]
        lines += [f"  {ELSEWHERE} {r.variant} seed{r.seed}: another live process holds {r.run_dir} "
                  f"({r.error}); not touched (rerun when it has finished)"
                  for r in self.runs if r.status == RUNNING]
        lines += [f"  interrupted {r.variant} seed{r.seed} ({r.error}): resumable, its state is saved in {r.run_dir}"
                  for r in self.runs if r.status == INTERRUPTED]
        if self.interrupted:
            lines.append("  interrupted (resumable): rerun the same command to resume from the saved steps")
        if any(r.status == PENDING for r in self.runs):
            lines.append("  pending: never started (the experiment stopped first); a rerun trains them")
        return "\n".join(lines)


class DataCache:
    """Token data per (source, tokenizer, vocab_size, val_fraction), loaded on first need: every run of an
    experiment shares one TokenData, and an all-skipped rerun never touches the corpus."""

    def __init__(self, data: TokenData | None = None):
        self.fixed, self.loaded = data, {}

    def __call__(self, cfg: TrainConfig) -> TokenData:
        if self.fixed is not None:
            return self.fixed
        key = (cfg.source, cfg.tokenizer, cfg.vocab_size, cfg.val_fraction)
        if key not in self.loaded:
            from interp.data import prepare_tokens

            self.loaded[key] = prepare_tokens(*key)
        return self.loaded[key]


# ------------------------------------------------------------------------------------------ one run

def train_run(exp: Experiment, v: Variant, seed: int, cfg: TrainConfig, get_data: Callable[[TrainConfig], TokenData],
              say: Callable[[str], None], where: str = "", main: bool = True) -> RunStatus:
    """One run of `exp` as every runner takes it: skipped when finished (its directory or its record), left alone
    when another live process trains it, else trained (resuming its saved state) with a failure kept in error.txt.
    `where` follows the experiment's name in its lines (" 3/8"); `main`: this process writes (rank 0)."""
    from interp.training.trainer import Trainer

    run_dir = Path(cfg.out_dir)
    if skip_if_done(exp, where, v, seed, cfg, say, main) is not None:
        return RunStatus(v.name, seed, run_dir, SKIPPED)
    # under torchrun the ranks must agree on training it: there the Trainer's own lock check decides (LockHeld)
    before = run_state(run_dir) if Distributed.from_env(join=False).world_size == 1 else ""
    if before.startswith(ELSEWHERE):
        say(f"[{exp.name}{where}] {v.name} seed{seed}: {before}: not touched")
        return RunStatus(v.name, seed, run_dir, RUNNING, 0.0, before.partition(": ")[2])
    say(f"[{exp.name}{where}] {v.name} seed{seed}: training -> {run_dir}" + (f" ({before})" if before else ""))
    t0 = time.perf_counter()
    data = get_data(cfg)  # outside the try: a missing or bad corpus fails every run alike, so it stops here
    try:
        result = Trainer(cfg, data=data).run()
    except Exception as err:  # noqa: BLE001 - one failed run must not stop the others
        outcome = Outcome(None, time.perf_counter() - t0, f"{type(err).__name__}: {err}", traceback.format_exc())
    else:
        outcome = Outcome(result, time.perf_counter() - t0)
    return _record(exp, v, seed, run_dir, outcome, say, main)


def skip_if_done(exp: Experiment, where: str, v: Variant, seed: int, cfg: TrainConfig,
                  say: Callable[[str], None], main: bool) -> Path | None:
    """Where the run is finished (its directory or its record), saying so; None: it is to train."""
    run_dir = Path(cfg.out_dir)
    found = finished_dir(exp, v, seed, cfg)
    if found is None:
        return None
    if main and found == run_dir:
        (run_dir / ERROR_FILE).unlink(missing_ok=True)  # left by a rerun with another config
    recorded = "" if found == run_dir else f" (recorded in {found}, trained on {trained_on(found)})"
    say(f"[{exp.name}{where}] {v.name} seed{seed}: done already{recorded}, skipped")
    return found


def _record(exp: Experiment, v: Variant, seed: int, run_dir: Path, outcome: Outcome, say: Callable[[str], None],
            main: bool) -> RunStatus:
    """One trained (or failed) run's status; its error.txt written (a failure) or cleared (fixed now)."""
    if outcome.result is None:
        holder = lock_holder(run_dir) if main else None
        if holder is not None or (outcome.error or "").startswith(f"{LockHeld.__name__}:"):
            # another live process holds the run's lock (an orphan of a killed runner, a second command): its
            # folder is not ours to write an error into, and the run has not failed
            why = (f"pid {holder} holds {run_dir / RUN_LOCK_FILE}" if holder is not None
                   else (outcome.error or "").partition(": ")[2])
            say(f"[{exp.name}] {v.name} seed{seed}: {ELSEWHERE}: {why}")
            return RunStatus(v.name, seed, run_dir, RUNNING, outcome.seconds, why)
        if main:
            run_dir.mkdir(parents=True, exist_ok=True)
            write_text_atomic(run_dir / ERROR_FILE, outcome.traceback or outcome.error or "")
        say(f"[{exp.name}] FAILED {v.name} seed{seed}: {outcome.error}")
        return RunStatus(v.name, seed, run_dir, FAILED, outcome.seconds, outcome.error)
    result = outcome.result
    status = DONE if result.get("status") == DONE else INTERRUPTED
    if main:
        (run_dir / ERROR_FILE).unlink(missing_ok=True)  # an earlier failure is fixed now
    say(f"[{exp.name}] {v.name} seed{seed}: {status}, val_ppl {result.get('val_ppl')}")
    return RunStatus(v.name, seed, run_dir, status, outcome.seconds, result.get("reason"))


# ------------------------------------------------------------------------------------------ runs at once

def threads_per_run(cfg: TrainConfig, jobs: int) -> int:
    """The run's own `threads`, else an equal share of the cores (at least one)."""
    return cfg.threads or max(1, (os.cpu_count() or 1) // jobs)


def train_one(cfg: TrainConfig, data: TokenData | None) -> dict:
    """One run in a child: exactly the Trainer a sequential runner would run; its result dict."""
    from interp.training.trainer import Trainer

    return Trainer(cfg, data=data).run()


def train_in_processes(configs: Sequence[TrainConfig], jobs: int, data: TokenData | None = None,
                       on_start: Callable[[int], None] | None = None,
                       on_end: Callable[[int, Outcome], None] | None = None) -> list[Outcome | None]:
    """Train `configs` in order, at most `jobs` at a time, one spawned process each (interp._util.processes, the
    pool of the local executor too); one Outcome per config (None: never started); an Outcome's result is the
    Trainer's result dict (None when it raised or died). For bare TrainConfigs (benchmarks, studies): an
    experiment's runs go through interp.jobs.training, which adds the plan, the locks and the report.

    Why processes: on these 2-core CPUs two 1-thread runs of the tiny shape side by side train 1.26x the tokens per
    second of two 2-thread runs one after another (benchmarks/RESULTS.md, bench_jobs), and torch intra-op threads
    cannot be split between runs in one process. A child runs exactly the Trainer a sequential runner would, with
    threads = cfg.threads or cores // jobs, so a run's numbers do not depend on how many ran beside it.

    data: the TokenData every child trains on (pickled to it); None = each child prepares its own from the
    run's config (the token cache makes that a memmap). on_start(i) / on_end(i, outcome) report progress.
    """
    if jobs < 1:
        raise ValueError(f"jobs={jobs}: the number of runs trained at once must be at least 1")
    calls = [(train_one, (replace(cfg, threads=threads_per_run(cfg, jobs)), data)) for cfg in configs]
    return run_in_processes(calls, jobs, on_start, on_end, name="interp-train")
