"""Issue #33, runner and signals group: an unknown --baseline of `interp experiment eval` / `interp eval-experiment`
(item 25) is refused before any evaluation, naming the variants there are; a relative --root resolves against the
working directory, not the repository (item 23); a run folder a killed runner abandoned is stated as such and
resumed (items 9, 30); a SIGTERM to `interp experiment` stops it with its report, no table and exit 143 (items 7,
30). Through the real CLI (tests/badinput.py), on a 2-variant micro experiment trained once per session."""

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
from tests.test_experiments import WORDS, two_by_two


@functools.cache
def _trained() -> Path:
    from interp.training.experiments import run_experiment

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
     may_change=(RUN, "fig", "cache"))
STDOUT = {"runner-abandoned-run-is-stated-and-resumed":
          r"uniform seed0: training -> /.*/R/sweep-micro/uniform/seed0 \(abandoned: train_state\.pt but no finished "
          r"result\.json and no live process holding it, so its runner was killed; resumable, resuming\)"}


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
