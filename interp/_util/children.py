"""Signals and child processes: one meaning for SIGINT and SIGTERM in every command, and children that never
outlive their parent.

- `stop_signals()`: while a command runs, SIGTERM raises `Interrupted` just as Ctrl-C (SIGINT) does, so every
  long command stops after (or inside) its current unit, keeps what is finished, says so, and exits 128 + the
  signal: 130 for SIGINT, 143 for SIGTERM (interp.cli.main). The Trainer's StopFlag overrides both inside its
  loop to finish the step and save first.
- `die_with_parent()`: called first thing in a child process (a spawned training run, a tokenize worker, a
  multiprocessing manager), it asks Linux to send the child SIGTERM when its parent dies (PR_SET_PDEATHSIG), so a
  `kill -9` of the parent does not leave orphans that hold locks or write into run folders. Elsewhere it is a
  no-op; `kill_children()` covers the ordinary exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Self

PR_SET_PDEATHSIG = 1


_STOP: list[int] = []   # the signals received by any handler of this process (StopFlag, stop_signals, ...)


def request_stop(signum: int) -> None:
    """Remember that SIGINT/SIGTERM arrived, also where a handler chose to finish its unit first (the Trainer
    saving its step): later units check stop_requested() and do not start, later tables are not written."""
    _STOP.append(int(signum))


def clear_stop() -> None:
    """Forget earlier stop signals: each command (and each notebook cell's command, each test) starts clean."""
    _STOP.clear()


def stop_requested() -> int | None:
    """The first stop signal this process received, or None."""
    return _STOP[0] if _STOP else None


def raise_if_stopped() -> None:
    """Interrupted(signum) when a stop was requested: the check before starting a unit or writing a result."""
    if _STOP:
        raise Interrupted(_STOP[0])


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM: stop now; `signum` says which (the exit status is 128 + signum)."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)


def exit_status(err: BaseException) -> int:
    """128 + the signal of an interrupt (130 for Ctrl-C / a bare KeyboardInterrupt, 143 for SIGTERM)."""
    return 128 + int(getattr(err, "signum", signal.SIGINT))


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """SIGINT and SIGTERM raise Interrupted(signum) in the main thread while the block runs (previous handlers
    restored after). Outside the main thread (a notebook's worker, a test thread) it changes nothing."""
    clear_stop()
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame) -> None:
        request_stop(signum)
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class StopFlag:
    """SIGINT/SIGTERM set a flag; the loop finishes its step, saves, and exits. A second SIGINT aborts."""

    def __init__(self) -> None:
        self.signal: str | None = None
        self._previous: dict[int, object] = {}

    def _handle(self, signum, frame) -> None:
        request_stop(signum)   # what runs after this loop (an experiment's next run, a table) sees it too
        if self.signal is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signal = signal.Signals(signum).name

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """In a child process: receive `sig` when the parent dies (Linux PR_SET_PDEATHSIG), and exit at once if the
    parent is already gone (it may have died before this call). Harmless elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - no prctl
        return
    if parent == 1 or os.getppid() != parent:
        os._exit(128 + int(sig))


def kill_children(procs, sig: int = signal.SIGTERM) -> None:
    """Send `sig` to every live process of `procs` (multiprocessing Process or subprocess.Popen objects)."""
    for proc in procs:
        pid = getattr(proc, "pid", None)
        alive = proc.is_alive() if hasattr(proc, "is_alive") else proc.poll() is None
        if pid and alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)


__all__ = ["Interrupted", "StopFlag", "clear_stop", "die_with_parent", "exit_status", "kill_children", "raise_if_stopped",
           "request_stop", "stop_requested", "stop_signals"]
