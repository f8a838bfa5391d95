"""The rival width profiles, head to head at the same budget (issue 14 section 4): is the paper's taper
better than the depth profiles related work proposes?

Five variants (interp.training.experiments.rival_variants), identical parameter counts and FLOPs (checked
before training and again in the table), same preset, data, steps and seeds; only the widths differ:

    uniform                      d_ff in every layer
    cosine 1.5->0.5              the paper's taper: wide early
    cosine 0.5->1.5              the reverse taper, growing with depth (OpenELM, DeLighT)
    middle-heavy 0.5->1.5->0.5   capacity concentrated in the middle layers (Ikeda/Lee et al. 2025)
    x-shaped 1.5->0.5->1.5       wide early and late (the d_ff analogue of Variable-Width Transformers)

All four non-uniform profiles span 0.5..1.5 x d_ff with mean 1 (rival_variants says why); the two
symmetric shapes are interp.widths.shapes (start = the edge layers' ratio, end = the centre's). On the
`tiny` preset (6 layers, d_ff 1024, 10,489,088 parameters each) the widths are 1024 x 6,
1536/1440/1184/864/608/512, its mirror, 512/1024/1536/1536/1024/512 and 1536/1024/512/512/1024/1536.

    interp ablate rivals --preset tiny --seeds 5          # 25 runs, fp32, resumable (rerun = resume)
    interp ablate rivals --preset tiny --dry-run          # the plan: runs, widths, parameter counts
    torchrun --nproc_per_node=8 -m interp.cli.ablate rivals --preset 440m --dtype bf16 --set grad_accum=1

Per variant (figures/rival_profiles.csv): mean validation loss and perplexity with a 95% Student-t CI over
seeds; the change vs uniform paired by seed (d_*, rel_val_ppl_pct_*) and vs cosine 1.5->0.5 (the same
columns with the suffix _vs_cosine), each with its t-CI (interp.training.results.summarize). One row per run
in figures/rival_profiles_runs.csv, with device, dtype and the hardware each run started on.

fp32 by default (--dtype): a committed training study must not depend on the CPU kind it ran on
(dtype="auto" is bf16 only where the CPU has native bf16, and bf16 numbers differ between CPU kinds).
Steps default to the preset's (tiny: 250 x 8 x 256 = 512k tokens per run, the group ablation's and the
sweep's regime). Cost, measured: ~7-10 min per run in fp32 with 1 thread, two runs at once
(`--jobs 2 --set threads=1`; ~1,030-1,240 tokens/s each on the 2-core Intel machine, ~980 on the AMD one), so
25 runs take ~1.5-2 h. All 25 are committed (AMD EPYC, 2026-12-02), with their records under
figures/records/rivals-tiny/ (a rerun skips them).
With `--layouts` (Config.layouts) the study adds the literature's layouts that leave layers without an MLP
(interp.widths.LAYOUTS: middle-ffn, Ikeda et al.'s FFNs in the middle ~70 percent; no-first-mlp,
modded-nanogpt's), at the same budget and parameter count (llama style), in the same root, so each pairs by
seed with the runs above: 10 more runs at `tiny` (trained 2026-12-06 on the same AMD EPYC machine, fp32).
Runs: runs/rivals-<preset>/<variant>/seed<k>/.
"""

from __future__ import annotations

import dataclasses
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

NAME = "rival_profiles"
HEAVY = True  # 25 training runs of `tiny`
KIND = "rivals"  # the variant set (interp.training.experiments.VARIANT_SETS) and the experiment's default name
COSINE = "cosine-1.5-0.5"  # the second baseline every variant is paired with
TABLE, RUNS_TABLE, FIGURE = experiment_files(NAME)
OUTPUTS = outputs(TABLE, RUNS_TABLE, FIGURE)


@dataclass
class Config:
    preset: str = option("tiny", PRESET_HELP)
    seeds: int = option(5, "train seeds 0..N-1 per variant (the issue asks for >= 5)")
    steps: int | None = option(None, STEPS_HELP)  # None = the preset's (tiny: 250 = 512k tokens per run)
    # fp32: the numbers must not depend on the CPU kind (see the module docstring); bf16 on GPUs
    dtype: str = option("fp32", DTYPE_HELP, choices=DTYPES)
    root: str = option("repo:runs", ROOT_HELP)
    name: str | None = option(None, NAME_HELP, parse=path_component)  # default "rivals-<preset>"
    only: tuple[str, ...] = option((), ONLY_HELP, metavar="VARIANT[,VARIANT]")
    jobs: int = option(1, JOBS_HELP)
    layouts: bool = option(False, "also the literature's layouts with layers WITHOUT an MLP (middle-ffn: Ikeda et "
                                  "al.'s FFNs in the middle ~70 percent; no-first-mlp: modded-nanogpt), paired by seed "
                                  "with the other runs: 2 x seeds more runs (HEAVY)")
    overrides: dict[str, Any] = option(help=OVERRIDES_HELP, default_factory=dict, cli=False)
    execution: ExecutorConfig = execution_option()


def experiment(cfg: Config):
    """The interp.training.experiments.Experiment this config describes (no training): the rivals set, with
    `dtype` as a shared override (build_experiment), and with `layouts` the layouts without MLPs."""
    from interp.training.experiments import layout_variants, select_variants

    exp = build_experiment(dataclasses.replace(cfg, only=()), KIND)
    exp.variants = select_variants(exp.variants + (layout_variants() if cfg.layouts else []), cfg.only)
    return exp


def compute(cfg: Config, figures_dir: Path, data=None, train: bool = True):
    """Train the missing runs (unless train=False), then write both tables; returns (report or None, summary).
    ExperimentFailed (after writing) if a run failed."""
    return compute_tables(experiment(cfg), cfg, figures_dir, NAME, TABLE, RUNS_TABLE, paper=None, train=train,
                          data=data, vs={COSINE: "vs_cosine"})


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure
    from interp.plots.rivals import plot_rival_profiles

    summary = read_table(figures_dir, TABLE, NAME)
    runs = read_table(figures_dir, RUNS_TABLE, NAME)
    return [save_figure(plot_rival_profiles(summary, runs[runs["status"] == "done"]), Path(figures_dir) / FIGURE)]
