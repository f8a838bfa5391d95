"""Schedule x ratio sweep (paper Table 1): which taper shape and how steep?

16 variants with identical parameter counts: uniform, plus linear / cosine / sigmoid (k = 10) tapers
for start->end in 1.25->0.75, 1.375->0.625, 1.5->0.5, 1.625->0.375, 1.75->0.25 (multiples of d_ff;
every pair sums to 2, so the mean width is the baseline's). Same preset, data, steps and seeds.
The figure is a heatmap of validation perplexity relative to uniform, ours beside the paper's
440M numbers (printed in every cell). Default 3 seeds (issue 14): the cells carry t-CIs of the change
vs uniform paired by seed, as in group_ablation; with --seeds 1 there is no CI, and a single seed pair is a
noisy estimate. fp32 by default (--dtype; the same numbers on either CPU kind, see group_ablation).

    interp sweep --preset tiny --jobs 2 --set threads=1      # 48 runs (16 variants x 3 seeds)
    interp sweep --preset tiny --seeds 1 --jobs 2            # 16 runs, one seed, no CI
    torchrun --nproc_per_node=8 -m interp.cli.sweep --preset 440m --dtype bf16 --set grad_accum=1

Runs: runs/sweep-<preset>/<variant>/seed<k>/; the uniform run is not shared with the group ablation
(another experiment directory), so each experiment stands alone.
Tables: figures/schedule_sweep.csv (one row per variant, with the paper's numbers) and
figures/schedule_sweep_runs.csv (one row per run).

On the `tiny` preset (CPU, numbers ours): the model of analyses/group_ablation.py (6 layers, d_model 256,
10,489,088 parameters in every variant), the preset's steps (250 x 8 x 256 = 512,000 training tokens
per run when written); with 6 layers the steepest tapers run from 1792 to 256 (1.75 and 0.25 x 1024).
In fp32 with 1 thread per run, two at once, measured for the committed table (figures/README.md): ~5.3 min per
run and 45 min per seed on Intel (seeds 0-1), 6.6-7.5 min per run and ~58 min per seed on AMD EPYC (seed 2).
Its 48 runs are recorded under figures/records/sweep-tiny/, so a rerun on a fresh clone trains nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analyses import outputs, read_table
from analyses.group_ablation import (
    DTYPE_HELP,
    JOBS_HELP,
    NAME_HELP,
    ONLY_HELP,
    OVERRIDES_HELP,
    PRESET_HELP,
    ROOT_HELP,
    STEPS_HELP,
    build_experiment,
    compute_tables,
    execution_option,
    experiment_files,
)
from interp._util.config import option, path_component
from interp.jobs.executors import ExecutorConfig
from interp.training.config import DTYPES

NAME = "schedule_sweep"
HEAVY = True  # many training runs: `interp figures --recompute` re-renders unless named with --only
TABLE, RUNS_TABLE, FIGURE = experiment_files(NAME)
OUTPUTS = outputs(TABLE, RUNS_TABLE, FIGURE)

# Paper Table 1, 440M, validation perplexity; pairs in the order of interp.training.experiments.SWEEP_PAIRS.
PAPER_UNIFORM = 16.28
PAPER_TABLE = {
    "cosine": (15.18, 14.59, 14.44, 14.59, 15.49),
    "linear": (15.96, 15.80, 15.96, 15.64, 16.28),
    "sigmoid": (16.44, 16.44, 16.12, 15.96, 17.12),
}


def paper_val_ppl() -> dict[str, float]:
    """The paper's numbers keyed by our variant names ("cosine-1.5-0.5", ..., "uniform")."""
    from interp.training.experiments import SWEEP_PAIRS, slug
    from interp.widths import WidthSpec

    table = {"uniform": PAPER_UNIFORM}
    for schedule, values in PAPER_TABLE.items():
        for (start, end), ppl in zip(SWEEP_PAIRS, values, strict=True):
            table[slug(WidthSpec(schedule, start, end).label)] = ppl
    return table


@dataclass
class Config:
    preset: str = option("tiny", PRESET_HELP)
    seeds: int = option(3, "train seeds 0..N-1 per variant (issue 14 asks for >= 3)")
    steps: int | None = option(None, STEPS_HELP)  # None = the preset's steps (tiny: 250 = 512k tokens per run)
    dtype: str = option("fp32", DTYPE_HELP, choices=DTYPES)  # fp32: the same numbers on either CPU kind
    root: str = option("repo:runs", ROOT_HELP)
    name: str | None = option(None, NAME_HELP, parse=path_component)  # default "sweep-<preset>"
    only: tuple[str, ...] = option((), ONLY_HELP, metavar="VARIANT[,VARIANT]")
    jobs: int = option(1, JOBS_HELP)
    overrides: dict[str, Any] = option(help=OVERRIDES_HELP, default_factory=dict, cli=False)
    execution: ExecutorConfig = execution_option()


PAPER_VAL_PPL = paper_val_ppl()


def experiment(cfg: Config):
    """The interp.training.experiments.Experiment this config describes (no training)."""
    return build_experiment(cfg, "sweep")


def compute(cfg: Config, figures_dir: Path, data=None, train: bool = True):
    """Train the missing runs (unless train=False), then write both tables; returns (report or None, summary).
    ExperimentFailed (after writing) if a run failed."""
    return compute_tables(experiment(cfg), cfg, figures_dir, NAME, TABLE, RUNS_TABLE, PAPER_VAL_PPL, train=train,
                          data=data)


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure
    from interp.plots.experiments import plot_schedule_sweep

    summary = read_table(figures_dir, TABLE, NAME)
    return [save_figure(plot_schedule_sweep(summary), Path(figures_dir) / FIGURE)]
