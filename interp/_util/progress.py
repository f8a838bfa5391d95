"""Progress of a long loop on stderr, in the form that reads where stderr ends up.

On a terminal a tqdm bar. Anywhere else (nohup, Slurm, a pipe, a CI log) a bar's carriage returns either garble the
log or show nothing until the end, so there the loop prints plain lines instead, one every tenth of the work or
every 30 s, whichever comes first:

    [train runs/wsd] 125/250 steps (50%) | loss 4.812 | 2,431 tok/s | elapsed 1m52s | ETA 1m52s

`progress(total, label, unit, enabled=...)` picks one; every kind takes `update(done, *details)` and `close()`.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

EVERY_FRACTION = 0.1   # a line per tenth of the work...
EVERY_SECONDS = 30.0   # ...or per 30 s, whichever comes first


def format_duration(seconds: float) -> str:
    """12s, 3m05s, 2h07m: short enough for a progress line, exact enough for an ETA."""
    if not math.isfinite(seconds):
        return "?"
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class ProgressLines:
    """Plain progress lines: done/total, the caller's details, elapsed and ETA (from this session's pace, so a
    resumed run's ETA counts only what is left). A line at each tenth of `total`, and whenever `seconds` passed
    since the last one; the last unit always gets its line."""

    def __init__(self, total: int, label: str, unit: str = "", *, done: int = 0, stream: TextIO | None = None,
                 every: float = EVERY_FRACTION, seconds: float = EVERY_SECONDS,
                 clock: Callable[[], float] = time.monotonic):
        self.total, self.label, self.unit = max(1, int(total)), label, unit
        self.stream, self.seconds, self.clock = stream, seconds, clock
        self.stride = max(1, math.ceil(self.total * every))
        self.first = done
        self.start = self.last_time = clock()
        self.next_mark = (done // self.stride + 1) * self.stride
        self.printed = done

    def update(self, done: int, *details: str) -> None:
        """`done` units of `total` are done; prints a line when one is due (`details`: e.g. "loss 4.81")."""
        now = self.clock()
        if done <= self.printed or not (done >= self.next_mark or done >= self.total
                                        or now - self.last_time >= self.seconds):
            return
        self.printed, self.last_time = done, now
        self.next_mark = (done // self.stride + 1) * self.stride
        print(self.line(done, now - self.start, *details), file=self.stream or sys.stderr, flush=True)

    def line(self, done: int, elapsed: float, *details: str) -> str:
        rate = (done - self.first) / elapsed if elapsed > 0 else 0.0
        eta = (self.total - done) / rate if rate > 0 else math.inf
        unit = f" {self.unit}" if self.unit else ""
        parts = [f"[{self.label}] {done}/{self.total}{unit} ({100 * done / self.total:.0f}%)", *details,
                 f"elapsed {format_duration(elapsed)}", f"ETA {format_duration(eta)}"]
        return " | ".join(parts)

    def close(self) -> None:
        """Nothing to tidy (each line is complete); here so every kind of progress closes alike."""


class _Bar:
    """A tqdm bar with the same update(done, *details) as ProgressLines (the details as its postfix)."""

    def __init__(self, total: int, label: str, unit: str, done: int, stream: TextIO):
        from tqdm.auto import tqdm  # imported on use: a command that never shows a bar does not pay for it

        self.bar = tqdm(total=total, initial=done, desc=label, unit=unit or "it", dynamic_ncols=True, file=stream)

    def update(self, done: int, *details: str) -> None:
        if details:
            self.bar.set_postfix_str(" | ".join(details), refresh=False)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        self.bar.close()


class _Silent:
    def update(self, done: int, *details: str) -> None:
        pass

    def close(self) -> None:
        pass


def progress(total: int, label: str, unit: str = "", *, done: int = 0, enabled: bool = True,
             stream: TextIO | None = None) -> Any:
    """What a loop of `total` units reports to `stream` (default stderr): nothing when not enabled, a tqdm bar on a
    terminal, ProgressLines elsewhere. `done`: units already done (a resumed run)."""
    stream = stream or sys.stderr
    if not enabled:
        return _Silent()
    if stream.isatty():
        return _Bar(total, label, unit, done, stream)
    return ProgressLines(total, label, unit, done=done, stream=stream)
