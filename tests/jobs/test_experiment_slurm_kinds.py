"""Every training experiment kind under `--executor slurm` on the real single-node Slurm (tests/slurm.py), beside
`groups` (tests/jobs/test_experiment_slurm.py): a small `sweep` trained as an array equals the same sweep trained
locally, weights bit for bit and tables alike; `rivals`, `architectures` and `gain-vs-tokens` submit one array task
per planned run, in the plan's order (the submission checked, then the arrays cancelled: their runs are the groups
test's code path); `derived-taper` plans under --executor slurm (its first stage trains and measures a run before it
can plan the rest, so a full submission is a full experiment). Local and Slurm share one code path
(interp.jobs.training), so what the groups test proves of one kind's runs holds for every kind's."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from analyses import schedule_sweep
from interp._util.paths import WEIGHTS_FILE
from interp.cli import main
from interp.jobs.parts import read_plan
from tests.factories import write_corpus

pytestmark = pytest.mark.slow
TIMEOUT = 300.0
SETS = {"val_fraction": 0.25, "n_layers": 3, "warmup_steps": 1, "eval_batches": 1, "threads": 1, "log_interval": 1,
        "progress": False}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, module_cache) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus", n_docs=24, sentences=40, sentence_len=8)


def argv(kind: str, corpus: Path, root: Path, *extra: str) -> list[str]:
    if kind == "gain-vs-tokens":   # its own Config: no --set of TrainConfig fields
        own = ["--lengths", "2", "--archs", "llama", "--n-layers", "3", "--d-model", "32", "--n-heads", "2",
               "--d-ff", "64", "--source", str(corpus), "--threads", "1", "--eval-batches", "1"]
    elif kind == "derived-taper":   # no --set either; planned only (its first stage trains on its own corpus)
        own = ["--steps", "4"]
    else:
        own = ["--steps", "4", *(f"--set={k}={json.dumps(v)}" for k, v in {"source": str(corpus), **SETS}.items())]
    return ["experiment", kind, "--preset", "micro", "--seeds", "1", "--root", str(root), "--out", str(root / "fig"),
            *own, *extra]


def slurm(cluster) -> tuple[str, ...]:
    return ("--executor", "slurm", "--partition", cluster.partition, "--time-min", "20")


def planned(capsys, kind: str, corpus: Path, root: Path) -> dict[str, list[str]]:
    """The runs `--dry-run` lists, per experiment folder, in order: {"rivals-micro": ["uniform/seed0", ...]}."""
    capsys.readouterr()
    assert main(argv(kind, corpus, root, "--dry-run")) == 0
    runs: dict[str, list[str]] = {}
    for line in capsys.readouterr().out.splitlines():
        parts = line.split()
        if line.startswith("  ") and len(parts) > 2 and parts[1].startswith("seed") and "/" in parts[-1]:
            folder = Path(parts[-1]).parent.parent if "/" not in parts[0] else Path(parts[-1]).parents[2]
            runs.setdefault(folder.name, []).append(f"{parts[0]}/{parts[1]}")
    assert runs, f"no runs planned for {kind}"
    return runs


def same_weights(a: Path, b: Path) -> bool:
    wa, wb = load_file(str(a / WEIGHTS_FILE)), load_file(str(b / WEIGHTS_FILE))
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_a_sweep_as_an_array_equals_the_local_sweep(slurm_cluster, corpus, tmp_path, capsys):
    local, remote = tmp_path / "local", tmp_path / "slurm"
    only = ("--only", "uniform,cosine-1.5-0.5")
    assert main(argv("sweep", corpus, local, *only)) == 0
    assert main(argv("sweep", corpus, remote, *only, *slurm(slurm_cluster))) == 0
    assert "2 done" in capsys.readouterr().out
    exp = remote / "sweep-micro"
    assert read_plan(exp / ".jobs")["targets"] == ["uniform/seed0", "cosine-1.5-0.5/seed0"]
    for run in ("uniform/seed0", "cosine-1.5-0.5/seed0"):
        assert same_weights(exp / run, local / "sweep-micro" / run), run
    tables = [pd.read_csv(root / "fig" / schedule_sweep.TABLE) for root in (remote, local)]
    pd.testing.assert_frame_equal(*(t[["variant", "n_seeds", "val_loss_mean", "val_ppl_mean"]] for t in tables))


@pytest.mark.parametrize("kind", ["rivals", "architectures", "gain-vs-tokens"])
def test_every_kind_submits_one_array_task_per_planned_run(slurm_cluster, corpus, tmp_path, capsys, kind):
    runs = planned(capsys, kind, corpus, tmp_path / "plan")
    root = tmp_path / "slurm"
    try:
        assert main(argv(kind, corpus, root, *slurm(slurm_cluster), "--no-wait")) == 0
        out = capsys.readouterr().out
        for folder, names in runs.items():
            plan = read_plan(root / folder / ".jobs")
            assert plan is not None, (folder, out)
            assert plan["kind"] == "training" and plan["executor"] == "slurm", plan
            assert plan["targets"] == names and plan["tasks"] == len(names), (plan, names)
            assert len({j.split("_")[0] for j in plan["slurm_jobs"]}) == 1   # one array per experiment
    finally:
        slurm_cluster.cancel_all()


def test_derived_taper_plans_under_slurm(corpus, tmp_path, capsys):
    runs = planned(capsys, "derived-taper", corpus, tmp_path)
    assert runs == {"derived-micro": ["uniform/seed0", "cosine-1.5-0.5/seed0", "cosine-1.75-0.25/seed0"]}
