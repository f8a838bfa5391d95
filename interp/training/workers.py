"""Several single-process training runs at once, one child process each, so a CPU's cores are all busy.

Why processes: on these 2-core CPUs two 1-thread runs of the tiny shape side by side train 1.26x the tokens
per second of two 2-thread runs one after another (1.18x in steady state; smaller shapes gain more: small matmuls
do not scale over threads; benchmarks/RESULTS.md, bench_jobs), and torch intra-op threads cannot be split
between runs in one process. A child runs exactly the Trainer a sequential runner would, with
threads = cfg.threads or cores // jobs, so a run's numbers do not depend on how many ran beside it (tested:
bit-identical weights). It is spawned (not forked: torch's thread pools do not survive a fork) and sends one
outcome back through a pipe.

The pool is interp._util.processes (also the local executor of interp.jobs). Stopping: SIGINT/SIGTERM to the
parent stops starting runs and sends SIGTERM to the running children, whose Trainer saves and returns
"interrupted" (Ctrl-C reaches them directly as well); the runs never started come back as None. A child that dies
without an outcome (killed, out of memory) is a failed run with its exit code.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from interp._util.processes import Outcome, run_in_processes
from interp.training.config import TrainConfig

if TYPE_CHECKING:
    from interp.data import TokenData


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
    """Train `configs` in order, at most `jobs` at a time; one Outcome per config (None: never started); an
    Outcome's result is the Trainer's result dict (None when it raised or died).

    data: the TokenData every child trains on (pickled to it); None = each child prepares its own from the
    run's config (the token cache makes that a memmap). on_start(i) / on_end(i, outcome) report progress.
    """
    if jobs < 1:
        raise ValueError(f"jobs={jobs}: the number of runs trained at once must be at least 1")
    calls = [(train_one, (replace(cfg, threads=threads_per_run(cfg, jobs)), data)) for cfg in configs]
    return run_in_processes(calls, jobs, on_start, on_end, name="interp-train")


__all__ = ["Outcome", "threads_per_run", "train_in_processes", "train_one"]
