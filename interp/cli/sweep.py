"""`interp sweep`: the schedule x ratio sweep (paper Table 1) as one resumable command.

    interp sweep --preset tiny                     # 16 variants x 1 seed
    interp sweep --preset tiny --seeds 3 --steps 200
    torchrun --nproc_per_node=8 -m interp.cli.sweep --preset 440m --set grad_accum=1   # each run is DDP

Rerunning the same command skips finished runs and resumes interrupted ones; a failed run leaves
its traceback in runs/<experiment>/<variant>/seed<k>/error.txt and the others go on. The tables and
figure are rebuilt from the run directories at the end. Exit status: 0 all done, 1 some run failed,
130 interrupted (rerun to resume).

This module also holds the arguments and the runner shared by every training experiment
(`interp ablate groups` and `interp ablate architectures` use them too): `add_experiment_arguments`
(flags generated from the analysis module's Config), `config_from_args`, `run_analysis`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from interp._util.config import add_arguments, dataclass_from_args
from interp._util.errors import InputError
from interp._util.paths import FIGURES_DIR
from interp.training.config import parse_train_overrides


def add_experiment_arguments(p: argparse.ArgumentParser, module: ModuleType) -> None:
    """Flags of a multi-run training experiment: one per option field of `module.Config`, plus --set and the
    command's own (--figures-dir, --dry-run, --no-train)."""
    add_arguments(p, module.Config)
    p.add_argument("--set", action="append", default=[], metavar="FIELD=JSON",
                   help="any TrainConfig field for every run, e.g. --set grad_accum=1 --set dtype='\"bf16\"'")
    p.add_argument("--figures-dir", type=Path, default=FIGURES_DIR, help=f"tables and PNG (default {FIGURES_DIR})")
    p.add_argument("--dry-run", action="store_true", help="list the runs, widths and parameter counts; train nothing")
    p.add_argument("--no-train", action="store_true", help="only rebuild the tables and figure from the run dirs")


def config_from_args(module: ModuleType, args: argparse.Namespace, command: str) -> Any:
    """The analysis module's Config for these arguments (no training): testable without a shell."""
    cfg = dataclass_from_args(module.Config, args, overrides=parse_train_overrides(args.set, command))
    if cfg.seeds < 1:
        raise SystemExit(f"{command}: --seeds must be >= 1, got {cfg.seeds}")
    if getattr(cfg, "jobs", 1) < 1:
        raise SystemExit(f"{command}: --jobs must be >= 1 (runs trained at once), got {cfg.jobs}")
    return cfg


def check_output_dir(path: str | Path, flag: str) -> None:
    """Refuse an output folder that cannot be written (a file on its path, no write permission) before any
    computation, instead of after hours of training; creates nothing."""
    path = Path(path)
    existing = next(p for p in (path, *path.parents) if p.exists())  # "/" always exists
    if not existing.is_dir():
        raise InputError(f"{existing} is a file, not a folder", field=f"{flag} {path}", fix="choose another folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"{existing} is not writable", field=f"{flag} {path}", fix="choose a folder you can write")


def print_summary(summary) -> None:
    """Ours beside the paper, one line per variant: ppl mean [CI], paired change vs uniform [CI]."""
    def fmt(mean, low, high, spec):
        ci = "" if low != low else f" [{low:{spec}}, {high:{spec}}]"  # NaN != NaN: no CI with one seed
        return f"{mean:{spec}}{ci}"

    print(f"{'variant':<20} {'n':>2}  {'val ppl (95% CI)':<28} {'vs uniform, paired (95% CI)':<34} paper")
    for r in summary.itertuples():
        paper = (f"{r.paper_val_ppl:.2f} ({r.paper_rel_val_ppl_pct:+.1f}%)"
                 if r.paper_val_ppl == r.paper_val_ppl else "-")
        print(f"{r.variant:<20} {r.n_seeds:>2}  {fmt(r.val_ppl_mean, r.val_ppl_ci_low, r.val_ppl_ci_high, '.2f'):<28} "
              f"{fmt(r.rel_val_ppl_pct_mean, r.rel_val_ppl_pct_ci_low, r.rel_val_ppl_pct_ci_high, '+.2f') + '%':<34} "
              f"{paper}")


def run_analysis(module: ModuleType, args: argparse.Namespace, command: str,
                 show: Callable[[Any], None] = print_summary, plan_note: Callable[[Any], str] | None = None) -> int:
    """Train (or skip/resume) every run of `module.experiment(cfg)`, rebuild the tables (`module.compute`),
    render the figure; return the exit status. `show` prints the summary table; `plan_note(cfg)` adds a
    line to --dry-run."""
    from analyses import read_table
    from analyses.group_ablation import with_records
    from interp._util.dist import Distributed
    from interp.training.experiments import ExperimentFailed, describe, run_experiment

    cfg = config_from_args(module, args, command)
    # a bad preset, field, variant name or option raises ValueError naming the fix: interp.cli.main prints it
    exp = with_records(module.experiment(cfg), args.figures_dir)  # every rank skips the same recorded runs
    if args.dry_run:
        print(describe(exp))
        if plan_note is not None:
            print(plan_note(cfg))
        return 0
    if not Distributed.from_env(join=False).primary:  # under torchrun: the other ranks only take part in training
        return run_experiment(exp, log=None).exit_code if not args.no_train else 0
    figures_dir = Path(args.figures_dir)
    check_output_dir(exp.dir, "--root")
    check_output_dir(figures_dir, "--figures-dir")
    try:
        report, summary = module.compute(cfg, figures_dir, train=not args.no_train)
    except ExperimentFailed as failed:
        report = failed.report
        summary = failed.summary if failed.summary is not None else read_table(figures_dir, module.TABLE, module.NAME)
    if report is not None:
        print(report.summary())
    if len(summary):
        show(summary)
        for path in module.render(figures_dir):
            print(f"[{command}] wrote {path}")
    else:
        print(f"[{command}] no finished runs under {exp.dir} yet: nothing to tabulate", file=sys.stderr)
    return report.exit_code if report is not None else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    from analyses import schedule_sweep

    p = subparsers.add_parser("sweep", help="schedule x ratio sweep (paper Table 1): train, tabulate, plot",
                              description=__doc__.split("\n")[0])
    add_experiment_arguments(p, schedule_sweep)
    p.set_defaults(func=run, command="sweep")


def run(args: argparse.Namespace) -> int:
    from analyses import schedule_sweep

    return run_analysis(schedule_sweep, args, command="interp sweep")


if __name__ == "__main__":  # `python -m interp.cli.sweep ...` (e.g. under torchrun)
    from interp.cli import main

    sys.exit(main(["sweep", *sys.argv[1:]]))
