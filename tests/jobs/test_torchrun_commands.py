"""`--executor torchrun` for eval, experiment eval and ablate MODEL...: the command launched by a real `torchrun
--nproc_per_node=2` (gloo) gives the table of the same command run once in this process; the ranks split the
targets and rank 0 merges (batch's torchrun test is in tests/probes/test_batch.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from interp.cli import main
from interp.jobs.parts import read_plan
from tests.jobs.commands import (Command, ablate_command, eval_command, experiment_eval_command,
                                 train_micro_experiment)
from tests.launch import torchrun
from tests.training.test_experiments import corpus  # noqa: F401  (module fixture)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _same_under_torchrun(command: Command, tmp_path) -> str:
    """Run `command` here and under torchrun (2 ranks); assert equal tables; return torchrun's stdout+stderr."""
    local, ranks = tmp_path / "local", tmp_path / "torchrun"
    assert main(command.argv(local)) == 0
    proc = torchrun(["-m", "interp.cli", *command.argv(ranks), "--executor", "torchrun"], timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    pd.testing.assert_frame_equal(command.values(ranks), command.values(local))
    return proc.stdout + proc.stderr


def test_eval_under_torchrun_equals_one_process(tmp_path, module_cache):
    printed = _same_under_torchrun(eval_command(tmp_path), tmp_path)
    plan = read_plan(tmp_path / "torchrun" / "eval.parquet")
    assert plan["executor"] == "torchrun" and plan["tasks"] == 2 and plan["kind"] == "eval"
    assert {f"task {i}/2" for i in (1, 2)} <= {" ".join(line.split()[1:3]) for line in printed.splitlines()
                                               if line.startswith("[eval] task ")}, printed[-3000:]


def test_ablate_several_models_under_torchrun_equals_one_process(tmp_path, module_cache):
    _same_under_torchrun(ablate_command(tmp_path), tmp_path)
    assert read_plan(tmp_path / "torchrun" / "ablation.parquet")["executor"] == "torchrun"


def test_experiment_eval_under_torchrun_equals_one_process(corpus, tmp_path):  # noqa: F811
    runs = train_micro_experiment(corpus[0], tmp_path / "runs")
    printed = _same_under_torchrun(experiment_eval_command(runs), tmp_path)
    assert (tmp_path / "torchrun" / "fig" / "downstream_groups.png").is_file()
    assert printed.count("wrote") >= 2, printed[-3000:]   # rank 0 tabulates and renders
