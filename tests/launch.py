"""Launch `torchrun` from a test, and say why when it hangs.

Every multi-process test goes through `torchrun()`, so each launch:
- gets its own port (`--standalone`: torchrun binds port 0 itself; no pick-then-release race, and no fixed
  port shared with a leftover process of an earlier test);
- writes stdout/stderr to files, so nothing is lost when it must be killed (`subprocess.run(timeout=)` kills
  torchrun only, leaves its workers, which torchrun starts in sessions of their own, and shows no output);
- on timeout sends SIGABRT to each of torchrun's workers, then to torchrun: with PYTHONFAULTHANDLER=1 each
  prints every thread's Python stack to stderr, which the failure shows; then SIGKILL to whatever is left.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from interp._util.paths import REPO_ROOT


def torchrun(args: list[str], *, env: dict[str, str] | None = None, cwd: Path = REPO_ROOT, nproc: int | None = 2,
             timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m torch.distributed.run --standalone --nproc_per_node=N *args` (args: `-m module ...`, or a
    script and its arguments; nproc=None when args name it already). Returns the CompletedProcess (text);
    raises AssertionError with each process's stacks when it outlives `timeout` seconds."""
    environ = {**(os.environ if env is None else env), "PYTHONFAULTHANDLER": "1"}
    environ.setdefault("OMP_NUM_THREADS", "1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           *([f"--nproc_per_node={nproc}"] if nproc else []), *args]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, cwd=cwd, env=environ, stdout=out, stderr=err)
        try:
            returncode: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop_tree(proc)
            returncode = None
        out.seek(0), err.seek(0)
        stdout, stderr = out.read(), err.read()
    if returncode is None:
        raise AssertionError(f"torchrun outlived {timeout:.0f} s: {' '.join(cmd)}\n--- stdout (tail)\n"
                             f"{stdout[-4000:]}\n--- stderr, with each process's stacks (tail)\n{stderr[-12000:]}")
    return subprocess.CompletedProcess(cmd, returncode, stdout, stderr)


def free_port() -> int:
    """A port free now, for launches without torchrun (mp.start_processes); it may be taken before it is bound."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, children first (from /proc: Linux, which is where these tests run)."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:  # field 4 of /proc/PID/stat is the parent; the name (field 2) may hold spaces, so split after ')'
                parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [pid]
    while frontier:
        kids = [p for p, pp in parent.items() if pp in frontier]
        found += kids
        frontier = kids
    return found


def _stop_tree(proc: subprocess.Popen) -> None:
    """Freeze torchrun (else it SIGTERMs the other workers once one dies), SIGABRT each worker one at a time so
    their stacks (faulthandler) do not interleave in the shared stderr, then torchrun itself (a hang in the
    rendezvous is its own); then SIGKILL whatever is left."""
    workers = descendants(proc.pid)
    steps = [(proc.pid, signal.SIGSTOP, 0.0), *[(pid, signal.SIGABRT, 1.0) for pid in workers],
             (proc.pid, signal.SIGABRT, 0.0), (proc.pid, signal.SIGCONT, 1.0),
             *[(pid, signal.SIGKILL, 0.0) for pid in [*workers, proc.pid]]]
    for pid, sig, pause in steps:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            continue
        time.sleep(pause)
    proc.wait()
