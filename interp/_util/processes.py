"""Run calls in spawned child processes, at most `jobs` at a time: the one pool behind training several runs at
once (interp.jobs.runs.train_in_processes) and the local executor of interp.jobs.

Why processes: torch's intra-op threads cannot be split between two pieces of work in one process, and small
matmuls do not scale over threads, so on a few cores two 1-thread processes do more than one 2-thread process
(benchmarks/RESULTS.md: bench_jobs, bench_executors). Children are spawned (not forked: torch's thread pools do not
survive a fork), call die_with_parent first, and send one Outcome back through a pipe.

Stopping: SIGINT/SIGTERM to the parent stops starting calls and sends SIGTERM to the running children (which stop
after or inside their current unit, keeping what is finished); the calls never started come back as None. A child
that dies without an outcome (killed, out of memory) is an Outcome with its exit code as the error. On any other
way out of the pool (an exception, a second Ctrl-C) the children still running are killed.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from interp._util.children import StopFlag, die_with_parent, kill_children, request_stop

__all__ = ["Call", "Outcome", "run_in_processes"]

Call = tuple[Callable[..., Any], tuple]   # a picklable function (module level) and its arguments


@dataclass
class Outcome:
    """How one call in a child ended: its return value (None when it raised or died), and the error."""

    result: Any
    seconds: float
    error: str | None = None        # "TypeName: message", or the exit code of a child that died
    traceback: str | None = None    # the child's formatted traceback


def _child(call: Call, conn: Connection, parent: int | None = None) -> None:
    """One call in a spawned process; `parent`: the pool's pid. A child whose parent is already gone (killed
    between the spawn and here) exits before it does anything."""
    die_with_parent()   # first: a kill -9 of the parent must not leave this child working on (issue #33 item 9)
    if parent is not None and os.getppid() != parent:
        os._exit(128 + signal.SIGTERM)
    fn, args = call
    t0 = time.perf_counter()
    try:
        conn.send(Outcome(fn(*args), time.perf_counter() - t0))
    except BaseException as err:  # noqa: BLE001 - the parent reports it; a child must always answer
        conn.send(Outcome(None, time.perf_counter() - t0, f"{type(err).__name__}: {err}", traceback.format_exc()))
    finally:
        conn.close()


class _ParentStop(StopFlag):
    """SIGINT/SIGTERM in the parent: stop starting calls and pass SIGTERM on to the running children."""

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
    """On any way out of the block, SIGKILL the children still running (a kill -9 of the parent: die_with_parent)."""
    try:
        yield
    finally:
        kill_children(children, signal.SIGKILL)


def run_in_processes(calls: Sequence[Call], jobs: int, on_start: Callable[[int], None] | None = None,
                     on_end: Callable[[int, Outcome], None] | None = None, name: str = "interp") -> list[Outcome | None]:
    """Run `calls` in order, at most `jobs` at a time, one spawned process each; one Outcome per call (None: never
    started, because a stop signal came first). on_start(i) / on_end(i, outcome) report progress."""
    if jobs < 1:
        raise ValueError(f"jobs={jobs}: the number of processes at once must be at least 1")
    ctx = mp.get_context("spawn")
    outcomes: list[Outcome | None] = [None] * len(calls)
    running: dict[Connection, tuple[int, mp.process.BaseProcess, float]] = {}
    queue = list(enumerate(calls))
    with _ParentStop() as stop, _killing(stop.children):
        while running or (queue and not stop.stopped):
            while queue and len(running) < jobs and not stop.stopped:
                i, call = queue.pop(0)
                receive, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_child, args=(call, send, os.getpid()), name=f"{name}-{i}")
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
                                      f"the child process exited with code {proc.exitcode} before it finished "
                                      "(killed, or out of memory?)")
                outcomes[i] = outcome
                if on_end:
                    on_end(i, outcome)
    return outcomes
