"""Layer-group ablation (paper Figure 2): where along depth should the MLP width go?

Four variants with identical parameter counts (checked before training and again in the table):
uniform, wider-early (1.5/1.0/0.5 x d_ff over the early/middle/late thirds), wider-middle
(0.75/1.5/0.75) and wider-late (0.5/1.0/1.5), interp.widths.PROFILES. Same preset, data, steps
and seeds; only the widths differ. Per variant: mean validation loss and perplexity with a 95%
Student-t CI over seeds, and the difference from uniform paired by seed with its t-CI
(interp.training.results.summarize; t_{0.975,4} = 2.776 for 5 seeds, computed, no scipy).

    interp ablate groups --preset tiny --jobs 2 --set threads=1     # CPU: the numbers below (5 seeds, fp32)
    torchrun --nproc_per_node=8 -m interp.cli.ablate groups --preset 440m --dtype bf16 --set grad_accum=1

Runs: runs/groups-<preset>/<variant>/seed<k>/ (rerun = resume; see interp.training.experiments); each finished
run's config and result are also kept under figures/records/groups-<preset>/, so a fresh clone skips them.
Tables: figures/group_ablation.csv (one row per variant, with the paper's numbers) and
figures/group_ablation_runs.csv (one row per run: widths, params, seed, steps, tokens, val loss/ppl, dtype,
hardware, preset, data source, tokenizer hash, package versions).

The `tiny` preset on CPU (all numbers ours, not the paper's): 6 layers, d_model 256, 4 heads,
mean d_ff 1024, SwiGLU, RoPE, untied embeddings, vocab 8,192 BPE trained on the offline Wikipedia
leads (1,128,334 train / 59,434 val tokens); 10,489,088 parameters in every variant. Widths per layer:
uniform 1024 x 6, wider-early 1536/1536/1024/1024/512/512, wider-middle 768/768/1536/1536/768/768,
wider-late 512/512/1024/1024/1536/1536. Steps are the preset's (250 when this was written:
250 x 8 sequences x 256 = 512,000 training tokens per run, ~0.45 epoch; `--dry-run` prints the
current numbers); validation on the first 8 fixed batches of the val split (16,384 tokens).

Precision: fp32 by default (--dtype), because bf16 numbers differ between CPU kinds (figures/README.md); the
committed 5-seed table is fp32, 1 thread per run, two runs at once (--jobs 2), AMD EPYC: ~6.5 min per run
quiet, 20 runs in ~65 min (measured; figures/README.md has the per-run times). bf16 (`--dtype bf16`) is
~1.65x faster where the CPU has native bf16, and the right choice on GPUs.
The paper's 440M runs see ~10^4 x more tokens: compare the direction of the effects, not their size.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from analyses import outputs, read_table, resolve_root, write_table
from interp._util.config import option, path_component
from interp.jobs.executors import ExecutorConfig
from interp.training.config import DTYPES

NAME = "group_ablation"
HEAVY = True  # many training runs: `interp figures --recompute` re-renders unless named with --only


def experiment_files(name: str) -> tuple[str, str, str]:
    """(summary table, per-run table, figure) of the multi-run training experiment `name` (compute_tables)."""
    return f"{name}.csv", f"{name}_runs.csv", f"{name}.png"


TABLE, RUNS_TABLE, FIGURE = experiment_files(NAME)
OUTPUTS = outputs(TABLE, RUNS_TABLE, FIGURE)

# Paper, 440M Transformer, validation perplexity (Figure 2); exact group widths were not published.
PAPER_VAL_PPL = {"uniform": 16.28, "wider-early": 15.96, "wider-middle": 16.61, "wider-late": 17.29}


# The options every multi-run training experiment has (`interp ablate groups`, `interp sweep`, and with
# more fields `interp ablate architectures`); each is a flag of its command (interp._util.config).
PRESET_HELP = "micro | tiny | 440m | 760m | 1.3b (interp/training/presets.py)"
SEEDS_HELP = "train seeds 0..N-1 per variant"
STEPS_HELP = "training steps per run (default: the preset's)"
ROOT_HELP = ("run root; runs go to ROOT/NAME/<variant>/seed<k>/ (default: the repository's runs/; a relative "
             "path: under the working directory)")
NAME_HELP = "experiment directory under --root (default: <kind>-<preset>)"
ONLY_HELP = "train only these variants (e.g. to split the runs over machines); see --dry-run for names"
OVERRIDES_HELP = "TrainConfig fields shared by every run (--set FIELD=JSON)"
DTYPE_HELP = ("training precision of every run: fp32 | bf16 (autocast) | auto (bf16 where native); fp32 keeps the "
              "numbers independent of the CPU kind")
EXECUTION_HELP = ("where the runs train (interp.jobs.ExecutorConfig, from --executor, --partition, --time-min, ...; "
                  "--executor slurm: one array task per run; docs/scale.md); its jobs is the Config's --jobs")
JOBS_HELP = ("runs trained at once, one process each with cores/jobs threads (2 on a 2-core CPU: 1.26x the "
             "throughput of 1 for tiny, benchmarks/RESULTS.md; the same numbers only at a fixed --set threads)")


def execution_option() -> Any:
    """The `execution` field of every training experiment's Config (the CLI fills it from the executor flags)."""
    return option(help=EXECUTION_HELP, default_factory=ExecutorConfig, cli=False)


@dataclass
class Config:
    preset: str = option("tiny", PRESET_HELP)
    # seeds 0..seeds-1; the paired CI needs >= 2, issue 14 asks for >= 5
    seeds: int = option(5, SEEDS_HELP)
    # None = the preset's steps (tiny: 250 = 512k tokens per run, ~3.5 min on 2 quiet cores; see above).
    steps: int | None = option(None, STEPS_HELP)
    # fp32: a committed training study must not depend on the CPU kind (dtype="auto" is bf16 only where the CPU has
    # native bf16, and bf16 numbers differ between CPU kinds); bf16 on GPUs
    dtype: str = option("fp32", DTYPE_HELP, choices=DTYPES)
    root: str = option("repo:runs", ROOT_HELP)
    name: str | None = option(None, NAME_HELP, parse=path_component)  # default "groups-<preset>"
    only: tuple[str, ...] = option((), ONLY_HELP, metavar="VARIANT[,VARIANT]")
    jobs: int = option(1, JOBS_HELP)
    overrides: dict[str, Any] = option(help=OVERRIDES_HELP, default_factory=dict, cli=False)
    execution: ExecutorConfig = execution_option()


def experiment(cfg: Config):
    """The interp.training.experiments.Experiment this config describes (no training)."""
    return build_experiment(cfg, "groups")


def build_experiment(cfg: Any, kind: str):
    """Experiment of variant set `kind` (interp.training.experiments.VARIANT_SETS) for a Config with preset, seeds,
    steps, dtype, root, name, only, overrides. Shared with schedule_sweep and rival_profiles.

    The precision is given once: a `--set dtype=...` that disagrees with Config.dtype is refused."""
    from interp.training.experiments import VARIANT_SETS, Experiment, select_variants

    if cfg.overrides.get("dtype", cfg.dtype) != cfg.dtype:
        raise ValueError(f"Config.dtype={cfg.dtype!r} and --set dtype={cfg.overrides['dtype']!r} disagree: "
                         "give the precision once, with --dtype")
    variants = select_variants(VARIANT_SETS[kind](), cfg.only)
    overrides = dict(cfg.overrides, dtype=cfg.dtype, **({"steps": cfg.steps} if cfg.steps is not None else {}))
    return Experiment(name=cfg.name or f"{kind}-{cfg.preset}", preset=cfg.preset, variants=variants,
                      seeds=list(range(cfg.seeds)), root=resolve_root(cfg.root), overrides=overrides)


def with_paper(summary: pd.DataFrame, paper: dict[str, float]) -> pd.DataFrame:
    """Add the paper's perplexity and its change vs the paper's uniform, in percent, per variant."""
    summary = summary.copy()
    summary["paper_val_ppl"] = summary["variant"].map(paper)
    summary["paper_rel_val_ppl_pct"] = 100.0 * (summary["paper_val_ppl"] / paper["uniform"] - 1.0)
    return summary


def paired_vs(summary: pd.DataFrame, runs: pd.DataFrame, baseline: str, suffix: str,
              order: list[str] | None = None) -> pd.DataFrame:
    """`summary` plus the paired differences from a second baseline variant (n_pairs, d_*, rel_*; t-CIs), as
    columns named <column>_<suffix>, e.g. rel_val_ppl_pct_mean_vs_cosine. Shared with derived_taper."""
    from interp.training.results import summarize

    vs = summarize(runs, baseline=baseline, order=order)
    paired = [c for c in vs.columns if c.startswith(("d_", "rel_")) or c == "n_pairs"]
    return summary.merge(vs[["variant", *paired]].rename(columns={c: f"{c}_{suffix}" for c in paired}),
                         on="variant", how="left")


RECORDS_DIR = "records"  # <figures>/records/<experiment>/<variant>/seed<k>/: committed run records


def with_records(exp, figures_dir: str | Path):
    """`exp` keeping its run records beside the tables (figures_dir/records/<experiment>/), unless it has its own:
    a finished run's config.json and result.json, committed, so that the experiment continues on a machine
    without its runs/ (interp.training.experiments, "Run records")."""
    if exp.records is not None:
        return exp
    return dataclasses.replace(exp, records=Path(figures_dir) / RECORDS_DIR / exp.name)


def train_runs(exp, cfg: Any, data=None, wait: bool | None = None):
    """run_experiment's Report for `exp`, trained where cfg.execution says: here with cfg.jobs processes (the
    default), or one Slurm array task per run (interp.jobs.training). `wait` overrides --no-wait (a stage whose
    runs the next one reads). Shared by every training analysis."""
    from interp.jobs.training import train_experiment

    execution = getattr(cfg, "execution", None) or ExecutorConfig()
    execution = dataclasses.replace(execution, jobs=getattr(cfg, "jobs", 1),
                                    wait=execution.wait if wait is None else wait)
    return train_experiment(exp, execution, data=data)


def train_and_record(exp, cfg: Any, figures_dir: Path, train: bool = True, data=None):
    """(exp with its records, Report or None): train the runs neither finished nor recorded (unless train=False;
    train_runs), then record every run finished in its directory. Shared with architectures."""
    from interp.training.results import save_records

    exp = with_records(exp, figures_dir)
    report = train_runs(exp, cfg, data) if train else None
    save_records(exp)
    return exp, report


def compute_tables(exp, cfg: Any, figures_dir: Path, name: str, table: str, runs_table: str,
                   paper: dict[str, float] | None, train: bool = True, data=None,
                   vs: dict[str, str] | None = None):
    """Train what is missing (unless train=False), rebuild both tables from the run directories and records,
    write them and the records of the runs finished now (with_records).

    paper: the paper's perplexity per variant (None: no paper columns); vs: more baselines to pair with,
    {variant: column suffix} (paired_vs).
    Returns (report or None, summary). Raises ExperimentFailed after writing if any run failed.
    """
    from interp.jobs.training import submitted
    from interp.training.experiments import ExperimentFailed
    from interp.training.results import experiment_runs, summarize

    exp, report = train_and_record(exp, cfg, figures_dir, train, data)
    if submitted(report):   # --no-wait: the runs are queued; the rerun collates
        return report, None
    runs = experiment_runs(exp)
    order = [v.name for v in exp.variants]
    summary = summarize(runs, order=order)
    summary = with_paper(summary, paper) if paper is not None else summary
    for baseline, suffix in (vs or {}).items():
        summary = paired_vs(summary, runs, baseline, suffix, order)
    write_experiment_tables(runs, summary, figures_dir, runs_table, table, cfg, name)
    if report is not None and report.failed:
        raise ExperimentFailed(report, summary)
    return report, summary


def write_experiment_tables(runs: pd.DataFrame, summary: pd.DataFrame, figures_dir: Path, runs_table: str,
                            table: str, cfg: Any, name: str) -> bool:
    """Write the per-run and summary tables, unless no run finished and a table is already there: an
    experiment whose every run failed (a typo in --set) must not replace stored results with an empty table.
    Returns whether it wrote. Shared with architectures."""
    from interp.training.results import DONE

    if not (runs["status"] == DONE).any() and (Path(figures_dir) / table).exists():
        return False
    write_table(runs, figures_dir, runs_table, cfg, name)
    write_table(summary, figures_dir, table, cfg, name)
    return True


def compute(cfg: Config, figures_dir: Path, data=None, train: bool = True):
    """Train the missing runs (unless train=False), then write both tables; returns (report or None, summary).
    ExperimentFailed (after writing) if a run failed."""
    exp = experiment(cfg)
    return compute_tables(exp, cfg, figures_dir, NAME, TABLE, RUNS_TABLE, PAPER_VAL_PPL, train=train, data=data)


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure
    from interp.plots.experiments import plot_group_ablation

    summary = read_table(figures_dir, TABLE, NAME)
    runs = read_table(figures_dir, RUNS_TABLE, NAME)
    runs = runs[runs["status"] == "done"]
    return [save_figure(plot_group_ablation(summary, runs), Path(figures_dir) / FIGURE)]
