"""Several single-process training runs at once, one child process each, so a CPU's cores are all busy.

Why processes: on these 2-core CPUs two 1-thread runs of the tiny shape side by side train 1.26x the tokens
per second of two 2-thread runs one after another (1.18x in steady state; smaller shapes gain more: small matmuls
do not scale over threads; benchmarks/RESULTS.md, bench_jobs), and torch intra-op threads cannot be split
between runs in one process. A child runs exactly the Trainer a sequential runner would, with
threads = cfg.threads or cores // jobs, so a run's numbers do not depend on how many ran beside it (tested:
bit-identical weights). It is spawned (not forked: torch's thread pools do not survive a fork) and sends one
outcome back through a pipe.

Stopping: SIGINT/SIGTERM to the parent stops starting runs and sends SIGTERM to the running children, whose
Trainer saves and returns "interrupted" (Ctrl-C reaches them directly as well); the runs never started come
back as None. A child that dies without an outcome (killed, out of memory) is a failed run with its exit code.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING

from interp._util.children import die_with_parent, kill_children, request_stop
from interp.training.config import TrainConfig
from interp.training.runtime import StopFlag

if TYPE_CHECKING:
    from interp.data import TokenData


@dataclass
class Outcome:
    """How one run in a child ended: result is the Trainer's result dict (None when it raised or died)."""

    result: dict | None
    seconds: float
    error: str | None = None        # "TypeName: message", or the exit code of a child that died
    traceback: str | None = None    # the child's formatted traceback, for the run's error.txt


def threads_per_run(cfg: TrainConfig, jobs: int) -> int:
    """The run's own `threads`, else an equal share of the cores (at least one)."""
    return cfg.threads or max(1, (os.cpu_count() or 1) // jobs)


def _child(cfg: TrainConfig, data: TokenData | None, conn: Connection, parent: int | None = None) -> None:
    """One run in a spawned process: the Trainer, then its outcome down the pipe. `parent`: the runner's pid; a
    child whose runner is already gone (killed between the spawn and here) exits before it touches the run."""
    die_with_parent()   # first: a kill -9 of the runner must not leave this run training on (issue #33 item 9)
    if parent is not None and os.getppid() != parent:
        os._exit(128 + signal.SIGTERM)
    from interp.training.trainer import Trainer

    t0 = time.perf_counter()
    try:
        result = Trainer(cfg, data=data).run()
        conn.send(Outcome(result, time.perf_counter() - t0))
    except BaseException as err:  # noqa: BLE001 - the parent reports it; a child must always answer
        conn.send(Outcome(None, time.perf_counter() - t0, f"{type(err).__name__}: {err}", traceback.format_exc()))
    finally:
        conn.close()


class _ParentStop(StopFlag):
    """SIGINT/SIGTERM in the parent: stop starting runs and pass SIGTERM on to the running children."""

    def __init__(self) -> None:
        super().__init__()
        self.children: list[mp.process.BaseProcess] = []

    @property
    def stopped(self) -> bool:
        return self.signal is not None

    def _handle(self, signum, frame) -> None:
        request_stop(signum)
        self.signal = signal.Signals(signum).name
        for proc in self.children:
            if proc.is_alive() and proc.pid is not None:
                os.kill(proc.pid, signal.SIGTERM)


@contextlib.contextmanager
def _killing(children: list) -> Iterator[None]:
    """On any way out of the block (an exception, a second Ctrl-C), SIGKILL the children still running: a run
    must not go on training with no parent to record it. (A kill -9 of the parent: die_with_parent.)"""
    try:
        yield
    finally:
        kill_children(children, signal.SIGKILL)


def train_in_processes(configs: Sequence[TrainConfig], jobs: int, data: TokenData | None = None,
                       on_start: Callable[[int], None] | None = None,
                       on_end: Callable[[int, Outcome], None] | None = None) -> list[Outcome | None]:
    """Train `configs` in order, at most `jobs` at a time; one Outcome per config (None: never started).

    data: the TokenData every child trains on (pickled to it); None = each child prepares its own from the
    run's config (the token cache makes that a memmap). on_start(i) / on_end(i, outcome) report progress.
    """
    if jobs < 1:
        raise ValueError(f"jobs={jobs}: the number of runs trained at once must be at least 1")
    ctx = mp.get_context("spawn")
    outcomes: list[Outcome | None] = [None] * len(configs)
    running: dict[Connection, tuple[int, mp.process.BaseProcess, float]] = {}
    queue = list(enumerate(configs))
    with _ParentStop() as stop, _killing(stop.children):
        while running or (queue and not stop.stopped):
            while queue and len(running) < jobs and not stop.stopped:
                i, cfg = queue.pop(0)
                receive, send = ctx.Pipe(duplex=False)
                child_cfg = replace(cfg, threads=threads_per_run(cfg, jobs))
                proc = ctx.Process(target=_child, args=(child_cfg, data, send, os.getpid()), name=f"interp-train-{i}")
                proc.start()
                send.close()  # the child holds the other end: EOF here once it exits
                stop.children.append(proc)
                running[receive] = (i, proc, time.perf_counter())
                if on_start:
                    on_start(i)
            for conn in wait(list(running)):
                i, proc, t0 = running.pop(conn)
                try:
                    outcome = conn.recv()
                except EOFError:  # died before answering
                    outcome = None
                proc.join()
                conn.close()
                stop.children.remove(proc)
                if outcome is None:
                    outcome = Outcome(None, time.perf_counter() - t0,
                                      f"the training process exited with code {proc.exitcode} before it finished "
                                      "(killed, or out of memory?)")
                outcomes[i] = outcome
                if on_end:
                    on_end(i, outcome)
    return outcomes


__all__ = ["Outcome", "threads_per_run", "train_in_processes"]
