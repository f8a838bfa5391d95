"""Runs trained at once in child processes (interp.jobs.runs.train_in_processes; run_experiment(jobs=N), --jobs: the jobs layer's local tasks).

The micro preset on the synthetic corpus of tests/training/test_experiments.py; each child is a spawned Python that
imports torch (~3-5 s), so the tests keep to a few children.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file

from interp._util.paths import LOG_FILE, RESULT_FILE
from interp.jobs.runs import threads_per_run, train_in_processes
from interp.jobs.training import run_experiment
from interp.training import TrainConfig
from interp.training.results import ERROR_FILE, collect
from tests.training.test_experiments import corpus, micro_overrides, two_by_two  # noqa: F401 - corpus is a fixture


def weights(run_dir: Path) -> dict:
    return load_file(str(run_dir / "model.safetensors"))


def test_two_at_once_gives_the_numbers_of_one_after_another(corpus, tmp_path, capfd):  # noqa: F811
    folder, data = corpus
    one, two = two_by_two(folder, tmp_path / "one"), two_by_two(folder, tmp_path / "two")
    assert run_experiment(one, data=data, log=None).exit_code == 0
    capfd.readouterr()
    report = run_experiment(two, data=data, log=print, jobs=2)   # two local tasks of the jobs layer
    assert [r.status for r in report.runs] == ["done"] * 4 and report.exit_code == 0 and report.params is not None
    said = capfd.readouterr().err.splitlines()   # each task says its runs on its stderr
    assert sum("training ->" in line for line in said) == 4
    assert (two.dir / ".jobs.parts" / ".plan.json").is_file()   # planned, locked and journalled as on Slurm
    a, b = (collect(root).drop(columns=["elapsed_s", "tokens_per_s", "run_dir"]) for root in (one.dir.parent,
                                                                                               two.dir.parent))
    assert a.drop(columns=["versions"]).equals(b.drop(columns=["versions"]))  # val_loss etc., exactly
    for v in one.variants:
        for seed in one.seeds:
            wa, wb = weights(one.run_dir(v, seed)), weights(two.run_dir(v, seed))
            assert wa.keys() == wb.keys() and all((wa[k] == wb[k]).all() for k in wa)
    again = run_experiment(two, data=data, log=None, jobs=2)   # finished: nothing is spawned
    assert [r.status for r in again.runs] == ["skipped"] * 4


def test_a_failure_in_a_child_is_reported_with_its_traceback(corpus, tmp_path):  # noqa: F811
    folder, data = corpus
    run_experiment(two_by_two(folder, tmp_path), data=data, log=None)
    longer = two_by_two(folder, tmp_path, steps=3)         # the Trainer refuses the finished runs of 2 steps
    report = run_experiment(longer, data=data, log=None, jobs=2)
    assert [r.status for r in report.runs] == ["failed"] * 4 and report.exit_code == 1
    assert "steps: 2 -> 3" in report.failed[0].error
    text = (longer.run_dir(longer.variants[0], 0) / ERROR_FILE).read_text()
    assert "Traceback" in text and "steps: 2 -> 3" in text


def test_sigterm_to_the_parent_interrupts_the_children_who_save(corpus, tmp_path, monkeypatch):  # noqa: F811
    """Three long runs, two at a time: SIGTERM once both children log a step; both save and report
    'interrupted', the third never starts, and a rerun resumes from the saved step."""
    from interp._util import children

    monkeypatch.setattr(children, "_STOP", [])   # the SIGTERM is recorded process-wide: not past this test
    folder, data = corpus
    cfgs = [TrainConfig.from_preset("micro", **{**micro_overrides(folder), "steps": 100_000, "eval_interval": 10**6,
                                                 "ckpt_interval": 10**6}, seed=s, out_dir=str(tmp_path / f"r{s}"))
            for s in range(3)]

    def stop_when_both_train() -> None:
        logs = [Path(c.out_dir) / LOG_FILE for c in cfgs[:2]]
        deadline = time.monotonic() + 120
        while not all(p.is_file() and '"train"' in p.read_text() for p in logs) and time.monotonic() < deadline:
            time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=stop_when_both_train, daemon=True).start()
    outcomes = train_in_processes(cfgs, jobs=2, data=data)
    assert outcomes[2] is None                                        # never started
    for outcome, cfg in zip(outcomes[:2], cfgs, strict=False):
        assert outcome is not None and outcome.result is not None, outcome
        assert outcome.result["status"] == "interrupted" and outcome.result["reason"] == "SIGTERM"
        saved = json.loads((Path(cfg.out_dir) / RESULT_FILE).read_text())
        assert saved["status"] == "interrupted" and 0 < saved["step"] < 100_000
        assert (Path(cfg.out_dir) / "train_state.pt").is_file()
    assert not Path(cfgs[2].out_dir).exists()


def test_jobs_and_threads_are_checked():
    cfg = TrainConfig.from_preset("micro", threads=0)
    assert threads_per_run(cfg, 2) == max(1, (os.cpu_count() or 1) // 2)
    assert threads_per_run(TrainConfig.from_preset("micro", threads=3), 2) == 3
    with pytest.raises(ValueError, match="jobs=0"):
        train_in_processes([cfg], jobs=0)
