"""`interp sweep`: the schedule x ratio sweep (paper Table 1) as one resumable command.

    interp sweep --preset tiny                     # 16 variants x 1 seed
    interp sweep --preset tiny --seeds 3 --steps 200
    torchrun --nproc_per_node=8 -m interp.cli.sweep --preset 440m --set grad_accum=1   # each run is DDP

Rerunning the same command skips finished runs and resumes interrupted ones; a failed run leaves
its traceback in runs/<experiment>/<variant>/seed<k>/error.txt and the others go on. The tables and
figure are rebuilt from the run directories at the end. Exit status: 0 all done, 1 some run failed,
130 interrupted (rerun to resume).

This module also holds the arguments and the runner shared by every training experiment
(`interp ablate groups` uses them too): `add_experiment_arguments`, `run_analysis`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from interp._util.paths import FIGURES_DIR


def add_experiment_arguments(p: argparse.ArgumentParser, seeds: int) -> None:
    """Flags of a multi-run training experiment; they map onto the analysis module's Config."""
    p.add_argument("--preset", default="tiny", help="micro | tiny | 440m | 760m | 1.3b (interp/presets.py)")
    p.add_argument("--seeds", type=int, default=seeds, help=f"train seeds 0..N-1 per variant (default {seeds})")
    p.add_argument("--steps", type=int, help="training steps per run (default: the preset's)")
    p.add_argument("--root", default="runs", help="run root; runs go to ROOT/NAME/<variant>/seed<k>/ "
                                                  "(relative: to the repo root)")
    p.add_argument("--name", help="experiment directory under --root (default: <kind>-<preset>)")
    p.add_argument("--only", metavar="VARIANT[,VARIANT]", help="train only these variants (e.g. to split the "
                                                               "runs over machines); see --dry-run for names")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=JSON",
                   help="any TrainConfig field for every run, e.g. --set grad_accum=1 --set dtype='\"bf16\"'")
    p.add_argument("--figures-dir", type=Path, default=FIGURES_DIR, help=f"tables and PNG (default {FIGURES_DIR})")
    p.add_argument("--dry-run", action="store_true", help="list the runs, widths and parameter counts; train nothing")
    p.add_argument("--no-train", action="store_true", help="only rebuild the tables and figure from the run dirs")


def parse_set(items: list[str], command: str) -> dict:
    """`--set FIELD=JSON` items -> overrides; a value that is not JSON is taken as a bare string."""
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"{command}: --set {item!r} must look like FIELD=VALUE (VALUE as JSON)")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    return overrides


def config_from_args(module, args: argparse.Namespace, command: str):
    """The analysis module's Config for these arguments (no training): testable without a shell."""
    if args.seeds < 1:
        raise SystemExit(f"{command}: --seeds must be >= 1, got {args.seeds}")
    only = tuple(v.strip() for v in (args.only or "").split(",") if v.strip())
    return module.Config(preset=args.preset, seeds=args.seeds, steps=args.steps, root=args.root, name=args.name,
                         only=only, overrides=parse_set(args.set, command))


def _print_dry_run(exp) -> None:
    from interp.training.experiments import check_equal_params, is_done

    configs = exp.configs()
    params = check_equal_params(cfg for _, _, cfg in configs)
    cfg0 = configs[0][2]
    print(f"{exp.name}: {len(configs)} runs ({len(exp.variants)} variants x {len(exp.seeds)} seeds), "
          f"{params:,} params each, {cfg0.steps} steps x {cfg0.batch_size} x {cfg0.n_ctx} = "
          f"{cfg0.steps * cfg0.batch_size * cfg0.n_ctx:,} tokens per run")
    for v, seed, cfg in configs:
        state = "done" if is_done(Path(cfg.out_dir), cfg) else "to train"
        print(f"  {v.name:<20} seed{seed}  {state:<8}  widths {cfg.width.widths(cfg.n_layers, cfg.d_ff)}  "
              f"{cfg.out_dir}")


def _print_summary(summary) -> None:
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


def run_analysis(module, args: argparse.Namespace, command: str) -> int:
    """Train (or skip/resume) every run, rebuild the tables, render the figure; return the exit status."""
    from analyses import read_table
    from analyses.group_ablation import compute_tables
    from interp.training.experiments import (
        ExperimentFailed,
        is_main_rank,
        run_experiment,
    )

    cfg = config_from_args(module, args, command)
    try:
        exp = module.experiment(cfg)
        if args.dry_run:
            _print_dry_run(exp)
            return 0
    except ValueError as err:  # a bad preset, field or variant name: the message names the fix
        raise SystemExit(f"{command}: {err} (set any TrainConfig field with --set FIELD=VALUE)") from err
    if not is_main_rank():  # under torchrun: the other ranks only take part in the training
        return run_experiment(exp, log=None).exit_code if not args.no_train else 0
    figures_dir = Path(args.figures_dir)
    report = None
    try:
        report, summary = compute_tables(exp, cfg, figures_dir, module.NAME, module.TABLE, module.RUNS_TABLE,
                                         module.PAPER_VAL_PPL, train=not args.no_train)
    except ExperimentFailed as failed:
        report, summary = failed.report, read_table(figures_dir, module.TABLE, module.NAME)
    if report is not None:
        print(report.summary())
    if len(summary):
        _print_summary(summary)
        for path in module.render(figures_dir):
            print(f"[{command}] wrote {path}")
    else:
        print(f"[{command}] no finished runs under {exp.dir} yet: nothing to tabulate", file=sys.stderr)
    return report.exit_code if report is not None else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("sweep", help="schedule x ratio sweep (paper Table 1): train, tabulate, plot",
                              description=__doc__.split("\n")[0])
    add_experiment_arguments(p, seeds=1)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from analyses import schedule_sweep

    return run_analysis(schedule_sweep, args, command="interp sweep")


if __name__ == "__main__":  # `python -m interp.cli.sweep ...` (e.g. under torchrun)
    from interp.cli import main

    sys.exit(main(["sweep", *sys.argv[1:]]))
