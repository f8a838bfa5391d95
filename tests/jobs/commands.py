"""The commands that run as jobs, ready to run under each executor: `interp eval`, `interp experiment eval` and
`interp ablate MODEL...` (batch has its own tests), each as an argv without executor flags and a reader of the
values that must not depend on where the tasks ran.

Used by tests/jobs/test_torchrun_commands.py and tests/jobs/test_slurm_commands.py: each command once in the test's
process (the local executor, one task), then under the executor, the tables compared value for value.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from tests.jobs.zoo import make_zoo

EVAL_VALUES = ["model", "checkpoint", "task", "metric", "value", "stderr", "n", "status"]
ABLATE_VALUES = ["model_spec", "kind", "group", "fraction", "selection", "seed", "layer", "loss", "delta", "status"]
RUN_VALUES = ["variant", "seed", "task", "metric", "value", "stderr", "n"]


@dataclass
class Command:
    """One command: argv(out) writes its table(s) under the folder `out`; values(out) reads them back."""

    name: str
    argv: Callable[[Path], list[str]]
    values: Callable[[Path], pd.DataFrame]


def _sorted(df: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    return df[columns].sort_values(columns[:-1], kind="stable").reset_index(drop=True)


def eval_command(root: Path) -> Command:
    """`interp eval` of 3 tiny checkpoints on the text task."""
    folder, text = make_zoo(root, 3)
    models = [str(folder / f"ck{i}") for i in range(3)]
    return Command("eval",
                   lambda out: ["eval", *models, "--tasks", "text_ppl", "--text", str(text), "--limit", "2",
                                "--out", str(out / "eval.parquet")],
                   lambda out: _sorted(pd.read_parquet(out / "eval.parquet"), EVAL_VALUES))


def ablate_command(root: Path) -> Command:
    """`interp ablate MODEL MODEL MODEL --table`: the capacity ablation of 3 tiny checkpoints."""
    folder, text = make_zoo(root, 3)
    models = [str(folder / f"ck{i}") for i in range(3)]
    flags = ["--text", str(text), "--seq-len", "16", "--score-sequences", "2", "--eval-sequences", "3",
             "--batch-size", "2", "--fractions", "0.5", "--seeds", "0", "--skip-layers", "1"]
    return Command("ablate",
                   lambda out: ["ablate", *models, *flags, "--out", str(out / "fig"), "--table",
                                str(out / "ablation.parquet")],
                   lambda out: _sorted(pd.read_parquet(out / "ablation.parquet"), ABLATE_VALUES))


def experiment_eval_command(runs: Path) -> Command:
    """`interp experiment eval ROOT` over an experiment root of trained runs: its eval table and per-run table."""
    from analyses import downstream_groups as dg

    def values(out: Path) -> pd.DataFrame:
        evals = _sorted(pd.read_parquet(out / "eval.parquet"), EVAL_VALUES).assign(table="eval")
        per_run = _sorted(pd.read_csv(out / "fig" / dg.RUNS_TABLE), RUN_VALUES).assign(table="runs")
        return pd.concat([evals.drop(columns=["model", "checkpoint"]), per_run], ignore_index=True)

    return Command("experiment eval",
                   lambda out: ["experiment", "eval", str(runs), "--tasks", "lambada", "--limit", "2", "--threads",
                                "1", "--eval-table", str(out / "eval.parquet"), "--out", str(out / "fig")],
                   values)


def train_micro_experiment(folder: Path, root: Path) -> Path:
    """Two micro runs (uniform, cosine 1.5 -> 0.5; one seed) on the corpus `folder`: an experiment root."""
    from interp.widths import WidthSpec
    from interp.jobs.training import run_experiment
    from interp.training.experiments import Experiment, variant
    from tests.training.test_experiments import micro_overrides

    exp = Experiment(name="exp", preset="micro", seeds=[0], root=root,
                     variants=[variant(WidthSpec()), variant(WidthSpec("cosine", 1.5, 0.5))],
                     overrides=micro_overrides(folder))
    assert not run_experiment(exp).failed
    return exp.root / exp.name
