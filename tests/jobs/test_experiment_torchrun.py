"""`torchrun ... interp experiment NAME --executor torchrun`: one run at a time over every rank (a training run spans
its task's ranks: interp.jobs.training.TrainingJob.spans_ranks), rank 0 alone planning, locking and journalling
through the jobs layer, as a local or Slurm run of the same experiment does."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from interp._util.paths import RESULT_FILE, WEIGHTS_FILE
from interp.cli import main
from interp.jobs.parts import read_plan
from tests.factories import write_corpus
from tests.launch import torchrun

pytestmark = pytest.mark.slow

RUNS = ["uniform/seed0", "wider-late/seed0"]


def argv(corpus, root, *extra: str) -> list[str]:
    sets = {"source": str(corpus), "val_fraction": 0.25, "n_layers": 3, "warmup_steps": 1, "eval_batches": 1,
            "threads": 1, "log_interval": 1, "progress": False}
    return ["experiment", "groups", "--preset", "micro", "--seeds", "1", "--steps", "4", "--only",
            "uniform,wider-late", "--root", str(root), "--out", str(root / "figures"),
            *(f"--set={k}={json.dumps(v)}" for k, v in sets.items()), *extra]


def test_each_run_trains_over_both_ranks_and_is_planned_by_rank_0(tmp_path, module_cache, capsys):
    corpus = write_corpus(tmp_path / "corpus", n_docs=24, sentences=40, sentence_len=8)
    assert main(argv(corpus, tmp_path / "prep", "--dry-run")) == 0   # fills nothing; the parser accepts the plan
    proc = torchrun(["-m", "interp.cli", *argv(corpus, tmp_path / "two", "--executor", "torchrun")])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    exp = tmp_path / "two" / "groups-micro"
    for run in RUNS:
        result = json.loads((exp / run / RESULT_FILE).read_text())
        assert result["status"] == "done" and result["world_size"] == 2, result
    plan = read_plan(exp / ".jobs")
    assert plan["kind"] == "training" and plan["targets"] == RUNS and plan["tasks"] == 1   # rank 0's plan, one task
    capsys.readouterr()
    assert main(["jobs", "status", str(exp)]) == 0
    assert "2 done" in capsys.readouterr().out

    # the same launch with --executor local is the same code path: the same weights, bit for bit
    proc = torchrun(["-m", "interp.cli", *argv(corpus, tmp_path / "local")])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for run in RUNS:
        a, b = (load_file(str(root / "groups-micro" / run / WEIGHTS_FILE)) for root in (tmp_path / "two",
                                                                                        tmp_path / "local"))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), run


def test_jobs_above_one_under_torchrun_is_refused(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "corpus", n_docs=8, sentences=10, sentence_len=8)
    assert main(argv(corpus, tmp_path / "r", "--executor", "torchrun", "--jobs", "2")) == 2
    err = capsys.readouterr().err
    assert "--jobs" in err and "every rank" in err, err
