"""Bad inputs of `interp train` (issue #11 items 1, 4, 11, 12): each through the real CLI (tests/badinput.py),
asserting exit 2, one clear line, and that nothing outside the expected outputs changed.

Config errors must be found before any data is prepared: their scratch folder has a corpus but no token cache,
so a tokenizer or token file built first shows up as a changed file. Cases about an existing run directory copy
one of two runs trained once per session (micro preset, 4 steps): "stopped" (stopped after step 2, resumable)
and "done". Their .lock may change (rank 0 writes its pid there when it takes the directory).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from interp._util.paths import CONFIG_FILE, RESULT_FILE, TRAIN_STATE_FILE
from tests.badinput import REPO, Case, _in, cases_of, check_case, copy_run
from tests.factories import write_corpus

OUT = "runs/x"
LOCK = f"{OUT}/.lock"
MICRO = ["train", "--preset", "micro", "--source", "corpus", "--val-fraction", "0.25", "--threads", "1",
         "--steps", "4", "--out", OUT]


@functools.cache
def _template() -> Path:
    """A corpus, its token cache and the two runs, trained in-process once (setups copy from here)."""
    from interp.training import TrainConfig, Trainer

    root = Path(tempfile.mkdtemp(prefix="interp-bad-train-"))
    atexit.register(shutil.rmtree, root, True)
    with _in(root, {"INTERP_CACHE_DIR": str(root / "cache")}):
        write_corpus(root / "corpus", n_docs=40, sentences=60)
        for name, stop_at in (("stopped", 2), ("done", None)):
            cfg = TrainConfig.from_preset("micro", source="corpus", val_fraction=0.25, threads=1, steps=4,
                                          out_dir=f"runs/{name}")
            Trainer(cfg).run(stop_at=stop_at)
    return root


def corpus(tmp: Path) -> None:
    shutil.copytree(_template() / "corpus", tmp / "corpus")


def run_dir(kind: str, cache: bool = True):
    """setup: the corpus and a copy of the template run `kind` at runs/x (and its token cache unless not `cache`:
    then a case that gets as far as the data shows it by building the cache again)."""
    def setup(tmp: Path) -> None:
        corpus(tmp)
        if cache:
            shutil.copytree(_template() / "cache", tmp / "cache")
        copy_run(_template(), _template() / "runs" / kind, tmp / OUT)
    return setup


def then(setup, change):
    """setup followed by change(tmp)."""
    def both(tmp: Path) -> None:
        setup(tmp)
        change(tmp)
    return both


def truncate(name: str, keep: int = 200):
    def change(tmp: Path) -> None:
        path = tmp / OUT / name
        path.write_bytes(path.read_bytes()[:keep])
    return change


def write(name: str, text: str):
    return lambda tmp: (tmp / OUT / name).write_text(text)


def delete(name: str):
    return lambda tmp: (tmp / OUT / name).unlink()


# ------------------------------------------------------------------------------- the config, before any data
Case("train-unknown-mixer", item="11", argv=[*MICRO, "--mixer", "bogus"], setup=corpus,
     message=r"^interp train: ModelConfig\.mixer='bogus' is not registered; choose one of")
Case("train-cosine-infeasible", item="11", argv=[*MICRO, "--schedule", "cosine", "--start", "3", "--end", "0.1"],
     setup=corpus, message=r"start=3 and end=0\.1 \(use start = 2 - end = 1\.9\) average 1\.55")
Case("train-multiple-7-tiny", item="11", argv=["train", "--preset", "tiny", "--multiple", "7", "--out", OUT],
     setup=corpus, message=r"TrainConfig\.width .*--multiple.*not divisible by multiple=7.*use d_ff=1022")
Case("train-multiple-48-tiny", item="11", argv=["train", "--preset", "tiny", "--multiple", "48", "--out", OUT],
     setup=corpus, message=r"TrainConfig\.width .*d_ff=1024 is not a multiple of multiple=48; use multiple=16")
Case("train-cooldowns-without-wsd", item="new", argv=[*MICRO, "--cooldowns", "4"], setup=corpus,
     message=r"TrainConfig\.cooldowns=\[4\] \(--cooldowns\) needs --lr-schedule wsd")
# a length as long as the run or longer is dropped, said on stderr (fit_to_steps); one of 0 steps is refused
Case("train-cooldown-not-positive", item="new", argv=[*MICRO, "--lr-schedule", "wsd", "--cooldowns", "0"],
     setup=corpus, message=r"--cooldowns\): each length must be an int in \(0, steps=4\)")
Case("train-cooldown-fraction-zero", item="new", argv=[*MICRO, "--lr-schedule", "wsd", "--cooldown-fraction", "0"],
     setup=corpus, message=r"TrainConfig\.cooldown_fraction=0\.0 \(--cooldown-fraction\) must be in \(0, 1\]")
Case("train-val-fraction-above-1", item="11", argv=[*MICRO, "--val-fraction", "1.5"], setup=corpus,
     message=r"TrainConfig\.val_fraction=1\.5 \(--val-fraction\) must be in \(0, 1\)")
Case("train-val-fraction-zero", item="11", argv=[*MICRO, "--val-fraction", "0"], setup=corpus,
     message=r"TrainConfig\.val_fraction=0\.0 \(--val-fraction\) must be in \(0, 1\)")
Case("train-threads-negative", item="12", argv=[*MICRO, "--threads", "-2"], setup=corpus,
     message=r"TrainConfig\.threads=-2 \(--threads\) must be >= 0")
Case("train-betas-out-of-range", item="new", argv=[*MICRO, "--betas", "0.9,1.5"], setup=corpus,
     message=r"TrainConfig\.betas=\[0\.9, 1\.5\] \(--betas\) must be two numbers in \[0, 1\)")

# ------------------------------------------------------------------------------- an existing run directory
Case("train-resume-changed-config", item="11", argv=[*MICRO, "--lr", "0.02", "--resume"],
     setup=run_dir("stopped", cache=False), may_change=(LOCK,),
     message=r"runs/x/config\.json: was written by a different run config; differing fields: lr: 0\.01 -> 0\.02")
Case("train-unfinished-without-resume", item="11", argv=MICRO, setup=run_dir("stopped", cache=False),
     may_change=(LOCK,), message=r"runs/x: holds an unfinished run \(status 'interrupted' at step 2\); pass --resume")
Case("train-killed-final-save-without-resume", item="1", argv=MICRO,
     setup=then(run_dir("done", cache=False), delete(RESULT_FILE)), may_change=(LOCK,),
     message=r"holds an unfinished run \(train_state\.pt but no result\.json: the last run was killed\); pass --resume")
Case("train-truncated-train-state", item="11", argv=[*MICRO, "--resume"],
     setup=then(run_dir("stopped", cache=False), truncate(TRAIN_STATE_FILE)), may_change=(LOCK,),
     message=r"runs/x/train_state\.pt: cannot be read .*corrupt or truncated.*delete it and rerun with --resume")
Case("train-corrupt-config-json", item="12", argv=[*MICRO, "--resume"],
     setup=then(run_dir("stopped", cache=False), write(CONFIG_FILE, '{"train": {"steps": 4,')), may_change=(LOCK,),
     message=r"runs/x/config\.json: cannot be read \(.*\) \(restore it from a copy, or choose another --out")
Case("train-config-json-not-an-object", item="12", argv=[*MICRO, "--resume"],
     setup=then(run_dir("stopped", cache=False), write(CONFIG_FILE, "[1, 2]")), may_change=(LOCK,),
     message=r"runs/x/config\.json: holds a JSON list, not an object")
Case("train-corrupt-result-json", item="12", argv=MICRO,
     setup=then(run_dir("done", cache=False), write(RESULT_FILE, '{"status": "do')), may_change=(LOCK,),
     message=r"runs/x/result\.json: cannot be read \(.*\) \(delete it and rerun with --resume")
Case("train-result-json-not-utf8", item="12", argv=MICRO,
     setup=then(run_dir("done", cache=False), lambda tmp: (tmp / OUT / RESULT_FILE).write_bytes(b"\xff\xfe{")),
     may_change=(LOCK,), message=r"runs/x/result\.json: cannot be read")
# Before: a fresh run started over it and overwrote the run's train_state.pt.
Case("train-config-json-deleted", item="new", argv=MICRO,
     setup=then(run_dir("stopped", cache=False), delete(CONFIG_FILE)), may_change=(LOCK,),
     message=r"runs/x: holds train_state\.pt but no config\.json")
Case("train-out-is-a-file", item="new", argv=MICRO,
     setup=lambda tmp: (corpus(tmp), (tmp / "runs").mkdir(), (tmp / OUT).write_text("notes\n")),
     message=r"runs/x: is a file, not a run directory; choose another --out")


# ------------------------------------------------------------------------------- a run directory in use
_holders: dict[Path, subprocess.Popen] = {}
_HOLD = ("import sys; from interp._util.io import exclusive_lock\n"
         "with exclusive_lock(sys.argv[1], 'test holder'):\n    print('locked', flush=True); sys.stdin.read()")


def held(tmp: Path) -> None:
    """A stopped run whose directory another live process has locked (as a running `interp train` does)."""
    run_dir("stopped", cache=False)(tmp)
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp / LOCK)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout.readline().strip() == "locked"
    _holders[tmp] = proc


def release(tmp: Path) -> None:
    proc = _holders.pop(tmp)
    proc.stdin.close()  # the holder exits on EOF (also if this test dies: the pipe closes)
    assert proc.wait(timeout=1800) == 0


Case("train-run-dir-in-use", item="4", argv=[*MICRO, "--resume"], setup=held, check=release,
     message=r"^interp train: run directory runs/x is in use by another process \(pid \d+, lock runs/x/\.lock\)")


@pytest.mark.parametrize("case", cases_of("train-"), ids=lambda c: c.id)
def test_case(case, tmp_path):
    try:
        check_case(case, tmp_path)
    finally:
        if tmp_path in _holders:
            _holders.pop(tmp_path).kill()


def test_run_files_have_normal_permissions(tmp_path):
    """Item 12: model.safetensors was written 0600 (safetensors' own temporary) while the rest was 0644."""
    from interp._util.io import atomic_write

    umask = os.umask(0)
    os.umask(umask)
    run = _template() / "runs" / "done"  # written by this process, under this umask
    modes = {p.name: p.stat().st_mode & 0o777 for p in run.iterdir() if p.is_file()}
    assert len(modes) >= 6 and modes == {name: 0o666 & ~umask for name in modes}, modes
    atomic_write(tmp_path, {"kept.txt": lambda p: (p.write_text("x"), os.chmod(p, 0o640))})
    assert (tmp_path / "kept.txt").stat().st_mode & 0o777 == 0o640  # a writer's own choice of mode stays
    assert json.loads((run / RESULT_FILE).read_text())["status"] == "done"


def test_a_directory_filled_while_preparing_data_is_not_overwritten(tmp_path, monkeypatch):
    """--out did not exist when the Trainer looked (so it was not locked yet) but another run wrote there before
    this one's first write: refused, and the other run's files stay as they were."""
    from interp._util.errors import InputError
    from interp.training import TrainConfig, Trainer

    run_dir("done")(tmp_path)
    (tmp_path / OUT).rename(tmp_path / "other")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INTERP_CACHE_DIR", str(tmp_path / "cache"))
    cfg = TrainConfig.from_preset("micro", source="corpus", val_fraction=0.25, threads=1, steps=4, out_dir=OUT)
    trainer = Trainer(cfg)
    (tmp_path / "other").rename(tmp_path / OUT)  # the other run, finished in the meantime
    with pytest.raises(InputError, match="was filled by another run while this one prepared its data"):
        trainer.run()
    assert json.loads((tmp_path / OUT / RESULT_FILE).read_text())["status"] == "done"
