"""`interp jobs status` on a training experiment's folder (or its parts folder): per run its state (done, failed,
running, interrupted, pending), its step out of its total, its last train loss and the first line of its error, told
by the run directories, in the order of the plan a submission wrote; without a plan (a local experiment), from the
run directories alone. Runs of `micro`, 4 steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interp._util.io import exclusive_lock
from interp._util.paths import CONFIG_FILE
from interp.cli import main
from interp.jobs.parts import parts_dir, write_plan
from interp.jobs.runs import DataCache, train_run
from interp.jobs.training import KIND, TrainingJob, TrainingJobConfig
from interp.training import Trainer
from interp.training.experiments import Experiment, variant
from interp.training.presets import PRESETS
from interp.widths import WidthSpec
from tests.factories import write_corpus


@pytest.fixture(scope="module")
def data(tmp_path_factory, module_cache):
    from interp.data import prepare_tokens

    folder = write_corpus(tmp_path_factory.mktemp("status") / "corpus", n_docs=24, sentences=40, sentence_len=8)
    return folder, prepare_tokens(str(folder), "bpe", PRESETS["micro"]["vocab_size"], val_fraction=0.25)


def status(path: Path, capsys) -> tuple[int, dict[str, str]]:
    """(exit status, {run: its line}) of `interp jobs status PATH`."""
    code = main(["jobs", "status", str(path)])
    lines = capsys.readouterr().out.splitlines()[1:]
    return code, {line.split()[3]: line for line in lines}


def test_status_of_an_experiment_per_run(data, tmp_path, capsys):
    folder, tokens = data
    exp = Experiment(name="exp", preset="micro", variants=[variant(WidthSpec())], seeds=[0, 1, 2, 3, 4], root=tmp_path,
                     overrides=dict(source=str(folder), val_fraction=0.25, steps=4, warmup_steps=1, eval_batches=1,
                                    threads=1, log_interval=1, progress=False))
    cfgs = {seed: cfg for _, seed, cfg in exp.configs()}
    job = TrainingJob(TrainingJobConfig(exp))
    write_plan(job.out, KIND, [job.name(r) for r in job.plan()], 5, "slurm")   # as a submission writes it
    Trainer(cfgs[0], data=tokens).run()                # done
    Trainer(cfgs[1], data=tokens).run(stop_at=2)       # interrupted at step 2 (its state saved)
    bad = Path(cfgs[2].out_dir)
    bad.mkdir(parents=True)
    (bad / CONFIG_FILE).write_text("{not json")        # failed: the Trainer refuses it, error.txt says why
    assert train_run(exp, exp.variants[0], 2, cfgs[2], DataCache(tokens), lambda _: None).status == "failed"
    first_error = [ln for ln in (bad / "error.txt").read_text().splitlines() if ln.strip()][-1].strip()

    with exclusive_lock(Path(cfgs[3].out_dir) / ".lock", "a run"):   # running: a live process holds its lock
        code, runs = status(exp.dir, capsys)
        assert status(parts_dir(job.out), capsys) == (code, runs)   # its parts folder names it too
    assert code == 1   # a failed run
    assert list(runs) == [f"uniform/seed{s}" for s in range(5)]
    state = {name: line.split()[0] for name, line in runs.items()}
    assert list(state.values()) == ["done", "interrupted", "failed", "running", "pending"]
    log = [json.loads(line) for line in (Path(cfgs[0].out_dir) / "log.jsonl").read_text().splitlines()]
    last = [r for r in log if r["kind"] == "train"][-1]
    assert f"step 4/4  loss {last['loss']:.4g}" in runs["uniform/seed0"]
    assert "step 2/4  loss " in runs["uniform/seed1"]
    assert runs["uniform/seed2"].endswith(first_error) and CONFIG_FILE in first_error

    (parts_dir(job.out) / ".plan.json").unlink()   # a local experiment: no plan, the run directories alone
    code, runs = status(exp.dir, capsys)
    assert code == 1 and [line.split()[0] for line in runs.values()] == ["done", "interrupted", "failed"]
