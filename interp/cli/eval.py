"""`interp eval MODEL... --tasks paper`: the paper's evaluations through lm-evaluation-harness, offline, into
one resumable tidy table (one row per model x task x metric; value, stderr, n, provenance).

MODEL: a registry name (smollm2-135m), a .gguf file, an HF directory, one of our checkpoints, a run directory
(its step checkpoints, then the final model: evaluation over training) or a folder of them. Pretrained models
run through lm-eval's HFLM, ours through the lm-eval model class "interp". Tasks: the groups paper (held-out
wiki perplexity in place of WikiText-2, LAMBADA, PIQA, HellaSwag, WinoGrande, ARC-e, ARC-c, SIQA, BoolQ; the
table adds the paper's 8-task average, paper_avg8), commonsense and niah (S-NIAH-1/2/3), or task names.
Finished model/task pairs are skipped by a rerun; a failed pair is one row with its error (exit status 1).
See docs/evals.md.
"""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING

from interp._util.config import add_arguments, dataclass_from_args
from interp.cli.jobs import add_executor_arguments, executor_from_args

if TYPE_CHECKING:
    import pandas as pd

    from interp.evals.config import EvalConfig

EVAL_GROUP = "evaluation options (interp.evals.EvalConfig)"


def register(subparsers: argparse._SubParsersAction) -> None:
    from interp.evals import config, tasks  # torch- and lm-eval-free: --help stays fast

    parser = subparsers.add_parser("eval", help="commonsense tasks, LAMBADA, perplexity, needle-in-a-haystack",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                   epilog=f"tasks: {', '.join(tasks.available_tasks())}")
    parser.add_argument("models", nargs="+", metavar="MODEL",
                        help="registry name, .gguf file, HF dir, checkpoint dir, run dir or folder of them")
    add_arguments(parser.add_argument_group(EVAL_GROUP), config.EvalConfig)
    add_executor_arguments(parser)
    parser.set_defaults(func=run)
    _register_experiment(subparsers)


def _register_experiment(subparsers: argparse._SubParsersAction) -> None:
    """`interp eval-experiment ROOT`: a permanent alias of `interp experiment eval`, with its older flag
    names: --out for the resumable eval table (there: --eval-table), --figures-dir for the folder (there: --out)."""
    from interp.cli.experiment import add_parser

    add_parser(subparsers, "eval", "eval-experiment")


def config_from_args(args: argparse.Namespace) -> EvalConfig:
    from interp.evals.config import EvalConfig

    return dataclass_from_args(EvalConfig, args, models=list(args.models), execution=executor_from_args(args))


def summary(df: pd.DataFrame) -> str:
    """One line per model/checkpoint x task: its metrics as value +- stderr (needle rows: per length)."""
    lines = []
    ok = df[(df["status"] == "ok") & df["depth"].isna()]
    for (model, checkpoint, task), rows in ok.groupby(["model", "checkpoint", "task"], sort=False):
        cells = []
        for row in rows.itertuples():
            name = row.metric if math.isnan(row.context_length) else f"{row.metric}@{int(row.context_length)}"
            err = "" if math.isnan(row.stderr) else f" +- {row.stderr:.4g}"
            cells.append(f"{name} {row.value:.4g}{err}")
        where = f" [{checkpoint}]" if checkpoint else ""
        lines.append(f"  {model}{where}  {task} (n={int(rows['n'].max())}): " + "; ".join(cells))
    for row in df[df["status"] != "ok"].itertuples():
        lines.append(f"  {row.model}  {row.task}: {row.status}: {row.error}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from interp.evals.run import check_outputs, run_eval

    cfg = config_from_args(args)
    check_outputs(cfg.out, cfg.csv)   # the table, its parts folder and OUT.csv: before any model loads
    result = run_eval(cfg)
    jobs = result.jobs
    if jobs is not None and jobs.executor == "slurm" and jobs.table is None and not jobs.failed_tasks:
        print(f"[eval] submitted Slurm job {jobs.job_ids[0].split('_')[0]} ({len(jobs.job_ids)} task(s)); "
              f"`interp jobs status {cfg.out}`, then `interp jobs merge {cfg.out}`")
        return 0
    print(f"[eval] {len(result.evaluated)} pair(s) evaluated, {len(result.skipped)} skipped (already in the "
          f"table), {len(result.failed)} failed")
    if result.table is not None and len(result.table):
        print(summary(result.table))
    if result.out is not None:
        print(f"[eval] wrote {result.out}")
    import sys

    for index, error in jobs.failed_tasks if jobs is not None else ():
        print(f"interp eval: task {index} did not finish: {error}; rerun the same command to finish it",
              file=sys.stderr)
    if result.failed:
        print(f"interp eval: {len(result.failed)} model/task pair(s) failed:", file=sys.stderr)
        for model, task, error in result.failed:
            print(f"  {model} / {task}: {error}", file=sys.stderr)
    return 0 if result.ok else 1
