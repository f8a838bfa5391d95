"""`--executor slurm` for eval, experiment eval and ablate MODEL... on the real single-node Slurm cluster of
tests/slurm.py: each command as a 2-task array gives the table of the same command run once in this process
(batch's Slurm tests are tests/jobs/test_slurm_executor.py). experiment eval with --no-wait writes no table and
says so; run again once the array has finished, it tabulates without evaluating anything twice. And one batch over
every kind of model on disk or on the (loopback) hub gives one table under every executor."""

from __future__ import annotations

import pandas as pd
import pytest

from interp.cli import main
from interp.jobs.parts import parts_dir, read_plan
from tests.hub_server import LoopbackHub, patch_clients, tiny_model_folder
from tests.jobs.commands import (Command, ablate_command, eval_command, experiment_eval_command,
                                 train_micro_experiment)
from tests.jobs.zoo import PROBE_ARGS, make_zoo, values
from tests.launch import torchrun
from tests.training.test_experiments import corpus  # noqa: F401  (module fixture)

pytestmark = pytest.mark.slow


def slurm(cluster) -> list[str]:
    return ["--executor", "slurm", "--jobs", "2", "--partition", cluster.partition, "--time-min", "60"]


def _same_under_slurm(command: Command, cluster, tmp_path, table: str) -> dict:
    """Run `command` here and as a 2-task Slurm array; assert equal tables; return the array's plan."""
    local, array = tmp_path / "local", tmp_path / "slurm"
    assert main(command.argv(local)) == 0
    assert main([*command.argv(array), *slurm(cluster)]) == 0
    pd.testing.assert_frame_equal(command.values(array), command.values(local))
    plan = read_plan(array / table)
    assert plan["executor"] == "slurm" and plan["tasks"] == 2 and len(plan["slurm_jobs"]) == 2
    assert cluster.wait(plan["slurm_jobs"][0].split("_")[0]) == "COMPLETED"
    return plan


def test_eval_as_a_slurm_array_equals_one_process(slurm_cluster, tmp_path, module_cache):
    plan = _same_under_slurm(eval_command(tmp_path), slurm_cluster, tmp_path, "eval.parquet")
    assert plan["kind"] == "eval"


def test_ablate_several_models_as_a_slurm_array_equals_one_process(slurm_cluster, tmp_path, module_cache):
    _same_under_slurm(ablate_command(tmp_path), slurm_cluster, tmp_path, "ablation.parquet")


def test_experiment_eval_as_a_slurm_array_equals_one_process(slurm_cluster, corpus, tmp_path, capfd):  # noqa: F811
    command = experiment_eval_command(train_micro_experiment(corpus[0], tmp_path / "runs"))
    _same_under_slurm(command, slurm_cluster, tmp_path, "eval.parquet")
    assert (tmp_path / "slurm" / "fig" / "downstream_groups.png").is_file()
    # --no-wait: submitted, no table yet, one line saying what to do; the same command again tabulates
    later = tmp_path / "later"
    capfd.readouterr()
    assert main([*command.argv(later), *slurm(slurm_cluster), "--no-wait"]) == 0
    assert "run the same command again to write the tables" in capfd.readouterr().out
    assert not (later / "fig" / "downstream_groups.csv").exists()
    slurm_cluster.wait(read_plan(later / "eval.parquet")["slurm_jobs"][0].split("_")[0], timeout=600)
    parts = {p.name: p.stat().st_mtime_ns for p in parts_dir(later / "eval.parquet").glob("*.parquet")}
    assert len(parts) == 2   # one (run, task) pair per run
    assert main([*command.argv(later), *slurm(slurm_cluster)]) == 0
    assert {p.name: p.stat().st_mtime_ns for p in parts_dir(later / "eval.parquet").glob("*.parquet")} == parts
    pd.testing.assert_frame_equal(command.values(later), command.values(tmp_path / "local"))


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A loopback hub serving one tiny GPT-NeoX repo at two revisions (tests/hub_server.py)."""
    root = tmp_path_factory.mktemp("loopback")
    with LoopbackHub(root / "served") as server:
        series = {rev: tiny_model_folder("gpt_neox", root / rev, seed=i) for i, rev in enumerate(("step0", "step1000"))}
        server.add_model("org/series", series)
        yield server


@pytest.mark.integration
def test_every_model_kind_under_every_executor_gives_one_table(slurm_cluster, hub, tmp_path, module_cache,
                                                               monkeypatch):
    """One batch over our checkpoint, a save_pretrained directory and a hub id at two revisions (the real
    huggingface_hub client against the loopback hub, in every task's process): one process, two local processes,
    two torchrun ranks and a 2-task Slurm array give the same rows."""
    patch_clients(hub, tmp_path / "hf", monkeypatch)
    folder, text = make_zoo(tmp_path, 1)
    hf_dir = tiny_model_folder("llama", tmp_path / "llama", seed=7)
    argv = ["batch", str(folder / "ck0"), str(hf_dir), "org/series@step0", "org/series@step1000", "--text",
            str(text), *PROBE_ARGS, "--no-progress", "--out"]
    tables = {}
    for name, flags in {"one": [], "local2": ["--jobs", "2"], "slurm": slurm(slurm_cluster)}.items():
        assert main([*argv, str(tmp_path / f"{name}.parquet"), *flags]) == 0, name
        tables[name] = pd.read_parquet(tmp_path / f"{name}.parquet")
    proc = torchrun(["-m", "interp.cli", *argv, str(tmp_path / "torchrun.parquet")], timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    tables["torchrun"] = pd.read_parquet(tmp_path / "torchrun.parquet")
    assert set(tables["one"]["kind"]) == {"checkpoint", "hf_dir", "hub"} and set(tables["one"]["status"]) == {"ok"}
    assert sorted(set(tables["one"]["revision"].dropna()) - {""}) == ["step0", "step1000"]
    for name, table in tables.items():
        pd.testing.assert_frame_equal(values(table), values(tables["one"]), obj=name)
