"""Issue #33, runner and signals group: an unknown --baseline of `interp experiment eval` / `interp eval-experiment`
(item 25) is refused before any evaluation, naming the variants there are; a relative --root resolves against the
working directory, not the repository (item 23: `interp experiment`, `interp ablate groups`); a run folder whose
lock a live process holds is stated as running elsewhere and never written to (items 9, 30), one a killed runner
abandoned is stated as such and resumed (item 30); a SIGTERM to `interp experiment` or `interp figures --recompute`
stops it with its report, no table and exit 143 (items 7, 30); `interp figures --set` with a refused seeds/jobs or a
root under a file is one line naming the field, exit 2, before any work (items 21, 27). Through the real CLI
(tests/badinput.py), on a 2-variant micro experiment trained once per session."""

from __future__ import annotations

import atexit
import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.badinput import REPO, Case, _in, cases_of, check_case
from tests.factories import write_corpus
from tests.training.test_experiments import WORDS, two_by_two


@functools.cache
def _trained() -> Path:
    from interp.jobs.training import run_experiment

    root = Path(tempfile.mkdtemp(prefix="interp-bad-runner-"))
    atexit.register(shutil.rmtree, root, True)
    with _in(root, {"INTERP_CACHE_DIR": str(root / "cache")}):
        folder = write_corpus(root / "corpus", n_docs=24, sentences=40, words=WORDS, sentence_len=8)
        assert not run_experiment(two_by_two(folder, root / "runs")).failed
    return root


def _runs(tmp: Path) -> None:
    shutil.copytree(_trained() / "runs", tmp / "runs")


BASELINE = r"--baseline: no finished run of variant 'nosuch' to compare .* the variants are \['cosine-1.5-0.5', 'uniform'\]"
Case("runner-eval-unknown-baseline", item="33.25", setup=_runs,
     argv=["experiment", "eval", "runs/exp", "--baseline", "nosuch", "--tasks", "lambada", "--limit", "2",
           "--out", "figs"], message=BASELINE)
Case("runner-eval-experiment-unknown-baseline", item="33.25", setup=_runs,
     argv=["eval-experiment", "runs/exp", "--baseline", "nosuch", "--tasks", "lambada", "--limit", "2",
           "--figures-dir", "figs"], message=BASELINE)



def _trained_here(tmp: Path) -> None:
    """The run went to ./R-33-23 and nothing to <repository>/R-33-23 (where it went before)."""
    from tests.badinput import REPO

    assert (tmp / "R-33-23" / "sweep-micro" / "uniform" / "seed0").is_dir()
    assert not (REPO / "R-33-23").exists()


Case("runner-relative-root-is-the-working-directory", item="33.23", rc=0, subprocess=True, check=_trained_here,
     argv=["experiment", "sweep", "--preset", "micro", "--seeds", "1", "--steps", "1", "--only", "uniform",
           "--root", "R-33-23", "--out", "fig"],
     message=r"\[train /.*/R-33-23/sweep-micro/uniform/seed0\] 1/1 steps",
     may_change=("R-33-23", "R-33-23/*", "fig", "fig/*", "cache", "cache/*"))


def _ablate_trained_here(tmp: Path) -> None:
    assert (tmp / "R-33-23-ablate" / "groups-micro" / "uniform" / "seed0" / "result.json").is_file()
    assert not (REPO / "R-33-23-ablate").exists()


# `interp ablate groups` (the older name of `interp experiment groups`), in process: the same rule.
Case("runner-ablate-groups-relative-root-is-the-working-directory", item="33.23", rc=0, check=_ablate_trained_here,
     argv=["ablate", "groups", "--preset", "micro", "--seeds", "1", "--steps", "1", "--only", "uniform",
           "--root", "R-33-23-ablate", "--out", "fig"],
     message=r"\[train /.*/R-33-23-ablate/groups-micro/uniform/seed0\] 1/1 steps",
     may_change=("R-33-23-ablate", "fig", "cache"))


def _a_file(tmp: Path) -> None:
    (tmp / "afile").write_text("not a folder\n")


# Before: `[Errno 20] Not a directory` after the plan was printed (and, without --set, from inside the runner).
Case("runner-figures-set-root-under-a-file", item="33.27", setup=_a_file,
     argv=["figures", "--recompute", "--only", "schedule_sweep", "--set", 'preset="micro"', "--set", "seeds=1",
           "--set", 'root="afile"', "--out", "fig"],
     message=r"^interp figures: schedule_sweep: --set .*root=\"afile\": root .*/afile/sweep-micro: .*/afile is a file, "
             r"not a folder")


SWEEP = ["experiment", "sweep", "--preset", "micro", "--seeds", "1", "--steps", "2", "--only", "uniform", "--root", "R"]
RUN = "R/sweep-micro/uniform/seed0"


def _abandoned(tmp: Path) -> None:
    """R/.../seed0 as a runner killed after the run saved step 1 of 2 leaves it: train_state.pt, no result.json, no
    live holder of its lock."""
    from interp.cli import main
    from interp.training import Trainer

    original = Trainer.run
    Trainer.run = lambda self, stop_at=None: original(self, stop_at=1)
    try:
        assert main([*SWEEP, "--out", "fig0"]) == 130   # stopped after step 1 (no signal: not a stop of the process)
    finally:
        Trainer.run = original
    (tmp / RUN / "result.json").unlink()


def _resumed(tmp: Path) -> None:
    import json

    assert json.loads((tmp / RUN / "result.json").read_text())["status"] == "done"
    assert not (tmp / RUN / "error.txt").exists()


# Before: the runner said only "training ->", as for a new run; a dry run listed it as "to train".
Case("runner-abandoned-run-is-stated-and-resumed", item="33.30", rc=0, setup=_abandoned, check=_resumed,
     argv=[*SWEEP, "--out", "fig"], message=r"\[train /.*/R/sweep-micro/uniform/seed0\] 2/2 steps",
     may_change=(RUN, "fig", "cache", "R/sweep-micro/.jobs.parts/"))
STDOUT = {"runner-abandoned-run-is-stated-and-resumed":
          r"uniform seed0: training -> /.*/R/sweep-micro/uniform/seed0 \(abandoned: train_state\.pt but no finished "
          r"result\.json and no live process holding it, so its runner was killed; resumable, resuming\)"}


# Before: --set jobs=0 passed the plan and failed inside the analysis (a traceback, exit 1); seeds=0 named no field.
Case("runner-figures-set-zero-jobs", item="33.21",
     argv=["figures", "--recompute", "--only", "group_ablation", "--set", "jobs=0", "--out", "fig"],
     message=r"^interp figures: group_ablation: --set jobs=0: jobs must be >= 1 \(runs trained at once\), got 0$")
Case("runner-figures-set-zero-seeds-names-the-field", item="33.21",
     argv=["figures", "--recompute", "--only", "schedule_sweep", "--set", "seeds=0", "--out", "fig"],
     message=r"^interp figures: schedule_sweep: --set seeds=0: seeds must be >= 1 .*, got 0$")


_HOLDERS: list[subprocess.Popen] = []


def _held_elsewhere(tmp: Path) -> None:
    """R/.../seed0 as an orphan of a kill -9'd runner leaves it: a live process (not this one) holds its run lock
    and keeps training in it."""
    run = tmp / RUN
    run.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time\nfrom interp._util.io import exclusive_lock\n"
         f"with exclusive_lock(r'{run / '.lock'}', 'run'):\n    print('held', flush=True)\n    time.sleep(900)\n"],
        env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, text=True)
    _HOLDERS.append(holder)
    atexit.register(holder.kill)
    assert holder.stdout.readline().strip() == "held"


def _untouched(tmp: Path) -> None:
    for holder in _HOLDERS:
        holder.kill()
        holder.wait()
    assert not (tmp / RUN / "error.txt").exists() and not (tmp / RUN / "result.json").exists()


# Before: the rerun trained into the live run's folder or marked it FAILED and wrote error.txt into it.
Case("runner-live-run-lock-is-running-elsewhere", item="33.9", rc=1, setup=_held_elsewhere, check=_untouched,
     argv=["experiment", "sweep", "--preset", "micro", "--seeds", "1", "--steps", "1", "--only", "uniform",
           "--root", "R", "--out", "fig"],
     message=r"no finished runs under .*R/sweep-micro yet: nothing to tabulate",
     may_change=("fig", "cache", "R/sweep-micro/.experiment.lock", "R/sweep-micro/.jobs.parts/"))
STDOUT["runner-live-run-lock-is-running-elsewhere"] = (
    r"uniform seed0: running elsewhere: pid \d+ holds .*/R/sweep-micro/uniform/seed0/\.lock: not touched"
    r"(.|\n)*running elsewhere uniform seed0: another live process holds .*\(pid \d+ holds")


def _sigterm_once_training(tmp: Path) -> None:
    """A thread that sends this process SIGTERM once the run has begun training (its log has a "train" line), as a
    user's kill would; only while a command's handler is installed (never the default: it would end pytest)."""
    import threading

    log = tmp / "R" / "sweep-micro" / "uniform" / "seed0" / "log.jsonl"

    def watch() -> None:
        deadline = time.time() + 1200
        while time.time() < deadline:
            if log.is_file() and '"train"' in log.read_text() and signal.getsignal(signal.SIGTERM) not in (
                    signal.SIG_DFL, signal.SIG_IGN, None):
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()


def _no_table_from_the_interrupted_run(tmp: Path) -> None:
    import json

    assert not list((tmp / "fig").glob("*.csv")) if (tmp / "fig").is_dir() else True
    assert json.loads((tmp / RUN / "result.json").read_text())["status"] == "interrupted"


# Before: the analysis tabulated the interrupted run, the loop went on to the next analysis, and it exited 0.
Case("runner-figures-recompute-sigterm-stops-with-no-table", item="33.7", rc=143, setup=_sigterm_once_training,
     check=_no_table_from_the_interrupted_run,
     argv=["figures", "--recompute", "--only", "schedule_sweep", "--set", 'preset="micro"', "--set", "seeds=1",
           "--set", "steps=100000", "--set", 'only=["uniform"]', "--set", 'root="R"',
           "--set", 'overrides={"eval_interval": 100000, "ckpt_interval": 100000}', "--out", "fig"],
     message=r"^interp figures: interrupted by SIGTERM; what finished is kept, rerun to go on$",
     may_change=("R", "fig", "cache"))
STDOUT["runner-figures-recompute-sigterm-stops-with-no-table"] = (
    r"interrupted uniform seed0 \(SIGTERM\): resumable")


@pytest.mark.parametrize("case", cases_of("runner-"), ids=lambda c: c.id)
def test_case(case, tmp_path):
    outcome = check_case(case, tmp_path)
    if case.id in STDOUT:
        assert re.search(STDOUT[case.id], outcome.stdout), outcome.stdout[-2000:]


def test_sigterm_to_an_experiment_exits_143_with_its_report_and_no_table(tmp_path):
    """Items 7 and 30: SIGTERM while `interp experiment sweep` trains: the run saves its step, the report states it
    as interrupted and resumable, no table is written from it, and the exit status is 143 (it was 130, whatever
    the signal, and the tables were written from the interrupted run)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "INTERP_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    argv = [*SWEEP[:6], "--steps", "100000", "--set", "eval_interval=100000", "--set", "ckpt_interval=100000",
            "--only", "uniform", "--root", "R", "--out", "fig"]
    proc = subprocess.Popen([sys.executable, "-m", "interp.cli", *argv], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = tmp_path / RUN / "log.jsonl"
    deadline = time.time() + 1200   # a hang, not a slow machine
    while time.time() < deadline and proc.poll() is None and not (log.is_file() and '"train"' in log.read_text()):
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=1800)
    assert proc.returncode == 143, err[-3000:]
    assert err.strip().splitlines()[-1].startswith("interp experiment sweep: interrupted by SIGTERM"), err[-2000:]
    assert "Traceback" not in err
    assert "interrupted uniform seed0 (SIGTERM): resumable" in out, out[-2000:]
    assert not list(tmp_path.glob("fig/*.csv"))   # no table from the interrupted run
    import json

    assert json.loads((tmp_path / RUN / "result.json").read_text())["status"] == "interrupted"
