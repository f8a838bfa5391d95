"""kill -9 at the dangerous moments of a save, then resume: the result equals an uninterrupted run (issue #11
items 1, 2 and 4). Real processes: `python -m interp.cli train --preset micro ...`.

The kills are deterministic: INTERP_FAULT (interp._util.io.fault_point) makes the process SIGKILL itself just
before atomic_write moves a given file into place, e.g. 'replace step_000004/model.safetensors' (inside a step
checkpoint's write: its folder holds only temporaries) or 'replace */result.json' (after the final
train_state.pt, before result.json).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from interp._util.io import FAULT_ENV
from interp._util.paths import (
    CONFIG_FILE,
    LOG_FILE,
    RESULT_FILE,
    WEIGHTS_FILE,
)
from interp.training.checkpoints import (
    is_checkpoint_dir,
    load_train_state,
    validate_checkpoint,
)
from tests.badinput import REPO
from tests.factories import write_corpus

STEPS = 8
KILLED = -signal.SIGKILL


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A folder with a corpus and a token cache (built by the first run, reused by the others)."""
    root = tmp_path_factory.mktemp("kill")
    write_corpus(root / "corpus", n_docs=40, sentences=60)
    return root


def train(work: Path, out: str, *extra: str, fault: str | None = None, **popen) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "INTERP_CACHE_DIR": str(work / "cache"), "OMP_NUM_THREADS": "1"}
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    argv = [sys.executable, "-m", "interp.cli", "train", "--preset", "micro", "--source", "corpus", "--val-fraction",
            "0.25", "--threads", "1", "--steps", str(STEPS), "--ckpt-interval", "2", "--eval-interval", "4",
            "--log-interval", "1", "--keep-step-checkpoints", "--out", out, *extra]
    return subprocess.run(argv, check=False, cwd=work, env=env, capture_output=True, text=True, timeout=1800,
                          **popen)


def temps(run: Path) -> list[str]:
    return sorted(str(p.relative_to(run)) for p in run.rglob(".*.tmp"))


def same_weights(a: Path, b: Path) -> bool:
    wa, wb = load_file(str(a / WEIGHTS_FILE)), load_file(str(b / WEIGHTS_FILE))
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.integration  # spawns training processes (like the tests below)
def test_kills_inside_saves_resume_to_the_uninterrupted_run(work):
    straight = train(work, "straight")
    assert straight.returncode == 0, straight.stderr
    ref, run = work / "straight", work / "killed"
    steps = [f"step_{s:06d}" for s in range(2, STEPS + 1, 2)]
    assert sorted(p.name for p in (ref / "checkpoints").iterdir()) == steps

    # 1. killed inside step 4's step checkpoint (after train_state.pt at step 4): only temporaries there
    proc = train(work, "killed", fault="replace step_000004/model.safetensors")
    assert proc.returncode == KILLED, proc.stderr
    assert load_train_state(run)["step"] == 4 and not is_checkpoint_dir(run / "checkpoints" / steps[1])
    left = sorted(p.name for p in (run / "checkpoints" / steps[1]).iterdir())
    assert [n.split(".")[1] for n in left] == ["config", "model"]  # .config.json.XXXXXXXX.tmp, .model...
    assert temps(run) == [str(Path("checkpoints", steps[1], n)) for n in left]

    # 2. resumed, then killed between the weights and the config of step 6's step checkpoint
    proc = train(work, "killed", "--resume", fault="replace step_000006/config.json")
    assert proc.returncode == KILLED, proc.stderr
    assert validate_checkpoint(run / "checkpoints" / steps[1])["step"] == 4  # repaired on resume
    assert (run / "checkpoints" / steps[2] / WEIGHTS_FILE).is_file()
    assert not (run / "checkpoints" / steps[2] / CONFIG_FILE).exists() and load_train_state(run)["step"] == 6

    # 3. resumed, then killed after the final train_state.pt, before result.json
    proc = train(work, "killed", "--resume", fault="replace */result.json")
    assert proc.returncode == KILLED, proc.stderr
    assert load_train_state(run)["step"] == STEPS and not (run / RESULT_FILE).exists()
    assert [t for t in temps(run) if "result.json" in t], temps(run)

    # 4. resumed: nothing left to train; the result is computed again, equal to the uninterrupted run's
    proc = train(work, "killed", "--resume")
    assert proc.returncode == 0, proc.stderr
    assert temps(run) == []
    a, b = (json.loads((d / RESULT_FILE).read_text()) for d in (ref, run))
    assert b["status"] == "done" and not math.isnan(b["train_loss"]) and b["tokens_per_s"] > 0
    assert {k: b[k] for k in ("step", "tokens", "train_loss", "val_loss", "val_ppl", "widths", "params")} == {
        k: a[k] for k in ("step", "tokens", "train_loss", "val_loss", "val_ppl", "widths", "params")}
    assert same_weights(ref, run)
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == steps
    for step in steps:  # every step checkpoint complete, and bit-identical to the uninterrupted run's
        assert validate_checkpoint(run / "checkpoints" / step)["step"] == int(step[5:])
        assert same_weights(ref / "checkpoints" / step, run / "checkpoints" / step), step
    la, lb = ([json.loads(x) for x in (d / LOG_FILE).read_text().splitlines()] for d in (ref, run))
    assert [(r["kind"], r["step"]) for r in lb] == [(r["kind"], r["step"]) for r in la]  # each line once
    assert [r.get("loss", r.get("val_loss")) for r in lb] == [r.get("loss", r.get("val_loss")) for r in la]
    resumed = json.loads((run / CONFIG_FILE).read_text())["resumed"]  # the last session saved nothing
    assert [r["step"] for r in resumed] == [4, 6]


def test_resume_after_the_final_save_rewrites_the_result(work, monkeypatch):
    """The issue's deterministic repro, in-process: result.json deleted after a finished run, then --resume.
    Before, the resume wrote "done" with train_loss NaN and val_loss / val_ppl null."""
    from interp.training import TrainConfig, Trainer

    monkeypatch.setenv("INTERP_CACHE_DIR", str(work / "cache"))
    monkeypatch.chdir(work)
    cfg = TrainConfig.from_preset("micro", source="corpus", val_fraction=0.25, threads=1, ckpt_interval=1,
                                  out_dir="final")
    before = Trainer(cfg).run()
    (work / "final" / RESULT_FILE).unlink()
    after = Trainer(cfg.with_overrides(resume=True)).run()
    assert after == json.loads((work / "final" / RESULT_FILE).read_text())
    assert after["status"] == "done" and after["tokens_per_s"] > 0
    assert {k: after[k] for k in ("train_loss", "val_loss", "val_ppl", "step", "tokens")} == {
        k: before[k] for k in ("train_loss", "val_loss", "val_ppl", "step", "tokens")}


@pytest.mark.integration
def test_a_second_run_on_the_same_out_is_refused(work):
    """Two `interp train --out runs/same`, different seeds: the second exits 2 with one line, the first's
    directory holds only the first's config and log."""
    out = work / "same"
    first = subprocess.Popen(
        [sys.executable, "-m", "interp.cli", "train", "--preset", "micro", "--source", "corpus", "--val-fraction",
         "0.25", "--threads", "1", "--steps", "100000", "--ckpt-interval", "50", "--no-progress", "--out", "same"],
        cwd=work, env={**os.environ, "PYTHONPATH": str(REPO), "INTERP_CACHE_DIR": str(work / "cache")},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and first.poll() is None and not (out / LOG_FILE).is_file():
            time.sleep(0.1)
        assert first.poll() is None and (out / ".lock").read_text().strip() == str(first.pid)
        second = train(work, "same", "--seed", "1")
        assert second.returncode == 2
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            f"interp train: run directory same is in use by another process (pid {first.pid}"), second.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        _, err = first.communicate(timeout=1800)
    assert first.returncode == 143, err
    assert json.loads((out / CONFIG_FILE).read_text())["train"]["seed"] == 0
    records = [json.loads(x) for x in (out / LOG_FILE).read_text().splitlines()]
    steps = [r["step"] for r in records if r["kind"] == "train"]
    assert steps == sorted(steps) and len(steps) == len(set(steps))  # one run's lines only
    assert json.loads((out / RESULT_FILE).read_text())["status"] == "interrupted"


@pytest.mark.integration
def test_sigterm_before_the_loop_exits_143_and_writes_nothing(tmp_path):
    """SIGTERM while the data is prepared (here: a BPE trained on a larger corpus): exit 143, one line."""
    write_corpus(tmp_path / "corpus", n_docs=300, sentences=300)
    proc = subprocess.Popen(
        [sys.executable, "-m", "interp.cli", "train", "--preset", "micro", "--source", "corpus", "--out", "runs/x"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO), "INTERP_CACHE_DIR": str(tmp_path / "cache")},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not (tmp_path / "cache" / "tokenizers").is_dir():
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=1800)
    assert proc.returncode == 143 and err.strip().splitlines()[-1].startswith("interp train: interrupted by SIGTERM"), err
    assert "Traceback" not in err and not (tmp_path / "runs").exists()
