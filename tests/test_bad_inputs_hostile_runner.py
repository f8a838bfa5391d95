"""Issue #33, runner group: an unknown --baseline of `interp experiment eval` / `interp eval-experiment` (item 25)
is refused before any evaluation, naming the variants there are; a relative --root resolves against the working
directory, not the repository (item 23). Through the real CLI (tests/badinput.py), on a 2-variant micro
experiment trained once per session."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.badinput import Case, _in, cases_of, check_case
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


@pytest.mark.parametrize("case", cases_of("runner-"), ids=lambda c: c.id)
def test_case(case, tmp_path):
    check_case(case, tmp_path)
