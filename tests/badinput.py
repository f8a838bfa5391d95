"""The bad-input suite's harness: one `Case` per hostile-but-fair input, run through the real CLI.

Each case builds its scratch folder (`setup(tmp)`), runs `interp ARGV...` there (in-process through
`interp.cli.main` by default; `subprocess=True` for what needs a fresh process: signals, locks, prompts)
and asserts three things:
  - the exit status (2 for bad input unless the case says otherwise);
  - the message: `message` (a regex) found in stderr (or stdout, for a case that must succeed), on a line that
    starts with "interp" for exit status 2, and no traceback anywhere;
  - nothing lost: every file under the scratch folder is byte-identical afterwards, except paths matching
    the case's `may_change` globs (the expected outputs).
Cases register themselves in CASES at import (tests/bad_inputs/test_*.py), so benchmarks/bad_inputs.py can
count them: bad inputs tried / clear errors / data lost.

    CASE = Case("train-unknown-mixer", item="11", argv=["train", "--preset", "micro", "--mixer", "bogus",
                "--out", "runs/x"], message=r"mixer='bogus' is not registered")

ARGV entries may use "{tmp}" for the scratch folder's absolute path.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import io
import os
import re
import subprocess as sp
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES: list[Case] = []


@dataclass
class Case:
    id: str
    argv: list[str]
    message: str                                   # regex searched in stderr
    item: str = ""                                 # issue #11 item number(s), or "new"
    setup: Callable[[Path], None] | None = None    # builds the scratch folder
    rc: int = 2
    may_change: tuple[str, ...] = ()               # globs (relative to the scratch folder) allowed to change
    subprocess: bool = False                       # run `python -m interp.cli` in a fresh process
    env: dict[str, str] | Callable[[Path], dict[str, str]] = field(default_factory=dict)   # or env(tmp): a server's
    stdin: str | None = None                       # subprocess only: text fed to stdin (e.g. "y\n")
    check: Callable[[Path], None] | None = None    # extra assertions on the scratch folder afterwards
    timeout: float = 1800   # a hang, never a slow machine
    fsize: int | None = None  # subprocess only: RLIMIT_FSIZE in bytes, SIGXFSZ ignored: writes past it fail (a full disk)

    def __post_init__(self) -> None:
        if any(c.id == self.id for c in CASES):
            raise ValueError(f"duplicate bad-input case id {self.id!r}")
        CASES.append(self)


@dataclass
class Outcome:
    rc: int
    stdout: str
    stderr: str
    changed: list[str]           # files added, removed or modified outside may_change


def snapshot(root: Path) -> dict[str, str]:
    """relative path -> sha256 of every file under root (symlinks recorded by target, not followed)."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = "link:" + os.readlink(path)
            else:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def copy_run(template: Path, run: Path, dest: Path) -> None:
    """Copy the run `template`/runs/... at `run` to `dest` as if it had been trained beside `dest`'s corpus: runs
    store their source as an absolute path (TrainConfig.to_dict), so the template's corpus path is renamed."""
    import shutil

    shutil.copytree(run, dest)
    for path in dest.rglob("*.json"):
        path.write_text(path.read_text().replace(str(template / "corpus"), str(dest.parent.parent / "corpus")))


def _allowed(rel: str, globs: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatch(rel, g) or fnmatch.fnmatch(rel, g.rstrip("/") + "/*") for g in globs)


def _argv(case: Case, tmp: Path) -> list[str]:
    return [a.replace("{tmp}", str(tmp)) for a in case.argv]


def run_case(case: Case, tmp: Path) -> Outcome:
    """Set up, snapshot, run and diff one case in the empty folder `tmp`."""
    tmp.mkdir(parents=True, exist_ok=True)
    env = {"INTERP_CACHE_DIR": str(tmp / "cache"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           **(case.env(tmp) if callable(case.env) else case.env)}
    if case.setup is not None:
        with _in(tmp, env):
            case.setup(tmp)
    before = snapshot(tmp)
    argv = _argv(case, tmp)
    if case.subprocess:
        proc = sp.run([sys.executable, "-m", "interp.cli", *argv], cwd=tmp, input=case.stdin,
                      env={**os.environ, "PYTHONPATH": str(REPO), **env}, capture_output=True, text=True,
                      timeout=case.timeout, preexec_fn=_limit_file_size(case.fsize))
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    else:
        from interp.cli import main

        out_buf, err_buf = io.StringIO(), io.StringIO()
        with _in(tmp, env), contextlib.redirect_stdout(out_buf), contextlib.redirect_stderr(err_buf):
            try:
                rc = main(argv)
            except SystemExit as stop:  # argparse usage errors
                rc = stop.code if isinstance(stop.code, int) else 1
        out, err = out_buf.getvalue(), err_buf.getvalue()
    after = snapshot(tmp)
    changed = sorted(rel for rel in set(before) | set(after)
                     if before.get(rel) != after.get(rel) and not _allowed(rel, case.may_change))
    return Outcome(rc, out, err, changed)


def _limit_file_size(limit: int | None) -> Callable[[], None] | None:
    """preexec_fn of a subprocess case: no file it writes may exceed `limit` bytes (EFBIG, as on a full disk)."""
    if limit is None:
        return None

    def apply() -> None:
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an ignored signal stays ignored across exec
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@contextlib.contextmanager
def _in(folder: Path, env: dict[str, str]):
    """cwd = folder and env set for the block (restored after)."""
    old_cwd, old_env = Path.cwd(), {k: os.environ.get(k) for k in env}
    os.chdir(folder)
    os.environ.update(env)
    try:
        yield
    finally:
        os.chdir(old_cwd)
        for k, v in old_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def problems(case: Case, outcome: Outcome) -> list[str]:
    """What is wrong with an outcome (empty: the case passed)."""
    found = []
    if outcome.rc != case.rc:
        found.append(f"exit status {outcome.rc}, expected {case.rc}")
    if "Traceback (most recent call last)" in outcome.stderr:
        found.append("a traceback on stderr")
    said = outcome.stderr if case.rc != 0 else f"{outcome.stderr}\n{outcome.stdout}"   # a success may say it on stdout
    lines = [ln for ln in said.splitlines() if re.search(case.message, ln)]
    if not lines:
        found.append(f"no stderr line matches {case.message!r}")
    elif case.rc == 2 and not any(ln.startswith("interp") or ln.startswith("usage:") for ln in lines):
        found.append("the message line does not start with 'interp <command>:'")
    if outcome.changed:
        found.append(f"files changed outside the expected outputs: {outcome.changed[:10]}")
    return found


def check_case(case: Case, tmp: Path) -> Outcome:
    """run_case + assert: the pytest body of every case."""
    outcome = run_case(case, tmp)
    bad = problems(case, outcome)
    assert not bad, (f"{case.id}: " + "; ".join(bad) + f"\n--- stderr ---\n{outcome.stderr[-3000:]}"
                     f"\n--- stdout ---\n{outcome.stdout[-1500:]}")
    if case.check is not None:
        case.check(tmp)
    return outcome


def cases_of(prefix: str) -> list[Case]:
    """The registered cases whose id starts with prefix (for pytest.mark.parametrize)."""
    return [c for c in CASES if c.id.startswith(prefix)]
