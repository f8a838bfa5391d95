"""One task of a job: its share of the plan's targets, one at a time, each written as parts, under its own lock.

A Job is what a command (interp.probes.batch, interp.evals.run, interp.ablations.many) gives the jobs layer:

    plan() -> targets         every target, in order, the same in every task (expanded once, pickled to the tasks)
    prepare()                 per-task setup before the first target (the text's hash, a tokenizer)
    do(target) -> Outcome     analyse one target: write its part(s), or its failure row; never raises for a
                              broken target (only for a stop or a bug)
    merge() -> DataFrame      rebuild OUT from the parts (the command's order and extra rows)
    name(target) -> str       the target as the journal, the progress lines and `interp jobs status` show it

Task i of n takes targets i, i + n, i + 2n, ... (interp._util.dist.shard). It holds OUT.parts/.rank<i>.lock while it
runs (a second task with the same index fails at once naming the holder's pid) and, shared with the other tasks,
OUT.parts/.tasks.lock (no sweep removes a temporary of a live task), records each target in its journal, and prints
one line per finished target with an ETA for its share.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from interp._util.children import raise_if_stopped
from interp._util.dist import shard
from interp.jobs.parts import claim_parts, journal, own_folder, parts_dir, running_task

__all__ = ["Job", "Outcome", "TaskResult", "format_eta", "run_task"]


@dataclass
class Outcome:
    """What one target did: "done" (analysed now), "skipped" (its parts were there), "failed" (error), or "running"
    (another live process is at it, error says which: a training run; counted with the skipped)."""

    state: str
    error: str = ""
    stats: dict[str, float] = field(default_factory=dict)   # summed over the task (positions, probe_s, ...)
    detail: Any = None    # anything else the command wants back from its tasks (plain data: it is pickled)


class Job(Protocol):
    kind: str      # the claim_parts marker of OUT.parts/ ("probe batch", "eval", "ablation")
    prefix: str    # the progress lines' "[batch]"
    what: str      # what a held lock names: "batch output" (+ OUT), "the eval table"
    out: Path
    progress: bool

    def plan(self) -> list[Any]: ...
    def prepare(self) -> None: ...
    def do(self, target: Any) -> Outcome: ...
    def merge(self) -> Any: ...
    def name(self, target: Any) -> str: ...


@dataclass
class TaskResult:
    """What one task did (returned from a spawned process or a Slurm task, so plain data only)."""

    index: int = 0
    count: int = 1
    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)   # (target, error)
    stats: dict[str, float] = field(default_factory=dict)
    details: list[Any] = field(default_factory=list)   # the Outcomes' detail, in order
    elapsed_s: float = 0.0

    def add(self, name: str, outcome: Outcome) -> None:
        if outcome.state == "failed":
            self.failed.append((name, outcome.error))
        else:
            (self.done if outcome.state == "done" else self.skipped).append(name)
        for key, value in outcome.stats.items():
            self.stats[key] = self.stats.get(key, 0.0) + value
        if outcome.detail is not None:
            self.details.append(outcome.detail)


def format_eta(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = round(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 else \
        f"{seconds // 60}:{seconds % 60:02d}"


def _line(job: Job, result: TaskResult, total: int, name: str, outcome: Outcome, started: float) -> str:
    """`[batch] 3/8 runs/a/step_100: done in 4.1 s; ETA 0:21` (task 2/3 in front when the job is split)."""
    finished = len(result.done) + len(result.skipped) + len(result.failed)
    elapsed = time.perf_counter() - started
    worked = len(result.done) + len(result.failed)   # skipped targets cost nothing: the ETA ignores them
    per = elapsed / worked if worked else math.nan
    eta = 0.0 if finished == total else per * (total - finished)
    task = f" task {result.index + 1}/{result.count}" if result.count > 1 else ""
    what = (f"FAILED ({outcome.error})" if outcome.state == "failed" else
            f"{outcome.state} ({outcome.error})" if outcome.error else outcome.state)
    return f"{job.prefix}{task} {finished}/{total} {name}: {what}; elapsed {format_eta(elapsed)}, ETA {format_eta(eta)}"


def run_task(job: Job, index: int = 0, count: int = 1, targets: list[Any] | None = None) -> TaskResult:
    """Task `index` of `count`: this task's share of `targets` (default: job.plan()), under its lock."""
    targets = job.plan() if targets is None else targets
    mine = shard(targets, index, count)
    parts = parts_dir(job.out)
    claim_parts(parts, job.kind, job.out, mark=False)   # another command's parts: refused before any lock file
    own_folder(parts)
    result = TaskResult(index=index, count=count)
    with running_task(job.out, index, f"{job.what} {job.out}"):
        claim_parts(parts, job.kind, job.out)
        job.prepare()
        started = time.perf_counter()
        current = ""
        try:
            for target in mine:
                raise_if_stopped()
                current = job.name(target)
                journal(job.out, index, current, "running")
                outcome = job.do(target)
                journal(job.out, index, current, outcome.state, outcome.error)
                current = ""
                result.add(job.name(target), outcome)
                if job.progress or outcome.state == "failed":
                    print(_line(job, result, len(mine), job.name(target), outcome, started), file=sys.stderr,
                          flush=True)
        except KeyboardInterrupt:
            if current:
                journal(job.out, index, current, "interrupted")
            print(f"{job.prefix} interrupted: {len(result.done)} analysed this time; parts kept in {parts}; rerun "
                  "the same command to continue", file=sys.stderr, flush=True)
            raise
        finally:
            result.elapsed_s = time.perf_counter() - started
    return result
