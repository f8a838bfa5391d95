"""Several ranks per run inside one Slurm task (`--ranks-per-task 2`): srun starts two processes in the run's array
task, submitit's TorchDistributedEnvironment gives them torch.distributed's environment, and the run trains over
both (gloo on CPU, as DDP under torchrun): its weights equal, bit for bit, the same experiment launched locally by
`torchrun --nproc 2 ... --executor torchrun`. The real single-node Slurm of tests/slurm.py."""

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


def argv(corpus, root, *extra: str) -> list[str]:
    sets = {"source": str(corpus), "val_fraction": 0.25, "n_layers": 3, "warmup_steps": 1, "eval_batches": 1,
            "threads": 1, "log_interval": 1, "progress": False}
    return ["experiment", "groups", "--preset", "micro", "--seeds", "1", "--steps", "4", "--only", "wider-late",
            "--root", str(root), "--out", str(root / "figures"),
            *(f"--set={k}={json.dumps(v)}" for k, v in sets.items()), *extra]


def test_a_run_on_two_ranks_of_one_task_equals_torchrun_nproc_2(slurm_cluster, tmp_path, module_cache, capsys):
    corpus = write_corpus(tmp_path / "corpus", n_docs=24, sentences=40, sentence_len=8)
    proc = torchrun(["-m", "interp.cli", *argv(corpus, tmp_path / "torchrun", "--executor", "torchrun")])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert main(argv(corpus, tmp_path / "slurm", "--executor", "slurm", "--partition", slurm_cluster.partition,
                     "--time-min", "20", "--ranks-per-task", "2")) == 0, capsys.readouterr()
    run = "groups-micro/wider-late/seed0"
    result = json.loads((tmp_path / "slurm" / run / RESULT_FILE).read_text())
    assert result["status"] == "done" and result["world_size"] == 2, result
    assert read_plan(tmp_path / "slurm" / "groups-micro" / ".jobs")["tasks"] == 1
    a, b = (load_file(str(tmp_path / root / run / WEIGHTS_FILE)) for root in ("slurm", "torchrun"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_ranks_per_task_is_refused_where_it_cannot_be(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "corpus", n_docs=8, sentences=10, sentence_len=8)
    assert main(argv(corpus, tmp_path / "r", "--ranks-per-task", "2")) == 2
    assert "--ranks-per-task" in capsys.readouterr().err
