"""`interp experiment NAME`: every experiment made of training runs, and the evaluation over one, as one command.

    interp experiment groups --preset tiny --jobs 2 --set threads=1   # paper Fig. 2: 4 variants x 5 seeds, fp32
    interp experiment sweep --preset tiny --seeds 3 --dry-run          # the plan: runs, widths, parameters
    interp experiment eval runs/rivals-tiny --out results/rivals       # the paper's tasks on every run of a root
    torchrun --nproc_per_node=8 -m interp.cli experiment groups --preset 440m --set grad_accum=1   # each run DDP
    interp experiment groups --preset 440m --seeds 5 --executor slurm --gpus-per-task 1 --time-min 1440 --no-wait
    interp jobs status runs/groups-440m                                 # per run: state, step/total, loss, error

NAME is one of analyses.EXPERIMENTS; each is an analysis module whose Config's fields are the flags, whose compute
trains and tabulates and whose render plots. Every training experiment also takes --dry-run (list the runs, train
nothing), --set FIELD=JSON, --no-train (only rebuild the tables from the run directories) and --out (the folder of
its tables and figure; default figures/); --seeds, --jobs and --root come from its Config. Rerunning a command
skips finished runs and resumes interrupted (or abandoned: a killed runner's) ones; a failed run leaves its traceback
in its run directory's error.txt and the others go on; a run whose folder another live process trains in is reported
as running elsewhere and left alone. Exit status: 0 all done, 1 a run failed or runs elsewhere, 130 / 143
interrupted by SIGINT / SIGTERM (the runs save their step, no table is written; rerun to resume).

--executor slurm (every training experiment) submits one Slurm array task per unfinished run, each resuming from its
run's last checkpoint when Slurm requeues it (preemption, time-out, scancel + `scontrol requeue`); the command waits
and tabulates, or with --no-wait returns at once and the rerun tabulates (interp.jobs.training; docs/scale.md).

`interp sweep`, `interp ablate groups|rivals|architectures` and `interp eval-experiment` are permanent aliases of
these commands (the same parser, built by add_parser).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from interp._util.config import add_arguments, dataclass_from_args, parse_set_overrides
from interp._util.paths import FIGURES_DIR
from interp.cli import add_out_argument, check_output_dir, check_output_file

EVAL = "eval"                  # the experiment that evaluates another's runs: it trains nothing
EVAL_LEGACY = "eval-experiment"   # its older command, whose --out is the eval table
RESULTS_DIR = Path("results")  # relative to the working directory: where analyses of a user's runs go by default
RESULTS_TEXT = "./results/ of the working directory"
SHARED = "options of every experiment"
EXECUTOR_OWN = ("jobs",)   # ExecutorConfig fields an experiment's Config declares itself (--jobs: runs at once here)


def register(subparsers: argparse._SubParsersAction) -> None:
    import analyses

    p = subparsers.add_parser("experiment", help=f"train an experiment's runs, tabulate, plot (or evaluate them): "
                                                 f"NAME = {' | '.join(analyses.EXPERIMENTS)}",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    names = p.add_subparsers(dest="experiment", required=True, metavar="NAME", title="experiments")
    for name in analyses.EXPERIMENTS:
        add_parser(names, name, f"experiment {name}")


def add_parser(subparsers: argparse._SubParsersAction, name: str, command: str) -> argparse.ArgumentParser:
    """The parser of experiment `name` (analyses.EXPERIMENTS) as `interp <command>`, its last word the sub-command.
    Any `command` other than `experiment <name>` is an older command kept as an alias: its --help says so."""
    import analyses

    module = analyses.experiment_analysis(name)
    about = analyses.EXPERIMENTS[name][1]
    alias = command != f"experiment {name}"
    head = f"Alias of `interp experiment {name}`. " if alias else ""
    if alias and name == EVAL:
        head += "Older flag names here: --out is its --eval-table, --figures-dir its --out. "
    p = subparsers.add_parser(command.split()[-1], help=f"alias of `interp experiment {name}`" if alias else about,
                              description=head + module.__doc__.strip().split("\n\n")[0])
    if name == EVAL:
        add_eval_arguments(p, module, legacy=alias)
        p.set_defaults(func=functools.partial(run_eval, command=f"interp {command}"))
    else:
        add_experiment_arguments(p, module)
        p.set_defaults(func=functools.partial(run_named, name, command=f"interp {command}"))
    p.set_defaults(command=command)  # errors read "interp <command>: ..."
    return p


# ------------------------------------------------------------------------------------ training experiments

def _takes_train_overrides(module: ModuleType) -> bool:
    """Whether the experiment's Config has `overrides` (TrainConfig fields for every run): --set fills them;
    otherwise --set sets a field of the Config itself."""
    return "overrides" in {f.name for f in dataclasses.fields(module.Config)}


def _has_execution(module: ModuleType) -> bool:
    """Whether the experiment's runs can train elsewhere (its Config embeds an interp.jobs.ExecutorConfig)."""
    return "execution" in {f.name for f in dataclasses.fields(module.Config)}


def add_experiment_arguments(p: argparse.ArgumentParser, module: ModuleType) -> None:
    """Flags of a training experiment: one per option field of `module.Config` (--seeds, --jobs, --root, ...),
    then the options every experiment shares (--set, --out, --dry-run, --no-train), then where its runs train
    (--executor, --partition, ...: interp.jobs.ExecutorConfig, whose --jobs is the Config's own)."""
    add_arguments(p, module.Config)
    shared = p.add_argument_group(SHARED)
    set_help = ("any TrainConfig field for every run, e.g. --set grad_accum=1 --set dtype='\"bf16\"'"
                if _takes_train_overrides(module) else
                f"a field of {module.__name__}.Config (JSON), e.g. --set seeds=2")
    shared.add_argument("--set", action="append", default=[], metavar="FIELD=JSON", help=set_help)
    add_out_argument(shared, "folder of the tables (CSV + .meta.json) and the figure (PNG)", default=FIGURES_DIR,
                     aliases=("--figures-dir",))
    shared.add_argument("--dry-run", action="store_true", help="list the runs, widths and parameter counts; train "
                                                                "nothing")
    shared.add_argument("--no-train", action="store_true", help="only rebuild the tables and figure from the run dirs")
    if _has_execution(module):
        from interp.cli.jobs import add_executor_arguments

        add_executor_arguments(p, exclude=EXECUTOR_OWN)


def config_from_args(module: ModuleType, args: argparse.Namespace, command: str) -> Any:
    """The analysis module's Config for these arguments (no training): testable without a shell."""
    from interp.training.config import parse_train_overrides

    if _takes_train_overrides(module):
        extra = {"overrides": parse_train_overrides(args.set, command)}
    else:
        extra = parse_set_overrides(args.set, command, module.Config)
    if _has_execution(module):
        from interp.cli.jobs import executor_from_args

        extra["execution"] = executor_from_args(args, exclude=EXECUTOR_OWN)
    cfg = dataclass_from_args(module.Config, args, **extra)
    try:
        check_counts(cfg)
    except ValueError as err:
        raise SystemExit(f"{command}: {err}") from err
    return cfg


def check_counts(cfg: Any, prefix: str = "--") -> None:
    """ValueError naming the field, its value and what it may be when an experiment Config's seeds or jobs is
    below 1 (`prefix` "--" names the flag; "" the --set field of `interp figures`)."""
    seeds, jobs = getattr(cfg, "seeds", 1), getattr(cfg, "jobs", 1)
    if isinstance(seeds, int) and seeds < 1:
        raise ValueError(f"{prefix}seeds must be >= 1 (seeds 0..N-1 per variant: an experiment needs at least one "
                         f"variant and one seed), got {seeds}")
    if isinstance(jobs, int) and jobs < 1:
        raise ValueError(f"{prefix}jobs must be >= 1 (runs trained at once), got {jobs}")


def _gain_vs_tokens_plan(module: ModuleType, cfg: Any) -> list:
    checks = [module.check_experiment(cfg)] if cfg.check_steps and cfg.check_arch in cfg.archs else []
    return [*checks, *(module.experiment(cfg, arch) for arch in cfg.archs)]


# Analyses whose runs are not the one Experiment `experiment(cfg)` keeps records of beside its tables: the
# Experiments they train, in order (derived_taper adds its derived variants after measuring; see NOTES).
PLANS = {"gain_vs_tokens": _gain_vs_tokens_plan, "derived_taper": lambda module, cfg: [module.experiment(cfg)]}
NOTES = {
    "architectures": lambda module, cfg: ("estimated training time at the measured CPU speeds: "
                                          f"{module.estimate_minutes(cfg):.0f} min"),
    "derived_taper": lambda module, cfg: ("then: measure uniform seed0, and train derived-tiny"
                                          f"{' and derived-smollm2' if cfg.smollm2 else ''} for the same seeds"),
}


def planned(module: ModuleType, cfg: Any, out: Path) -> list:
    """The interp.training.experiments.Experiments `module.compute(cfg, out)` trains (no training)."""
    from analyses.group_ablation import with_records

    if module.NAME in PLANS:
        return PLANS[module.NAME](module, cfg)
    return [with_records(module.experiment(cfg), out)]  # every rank skips the same recorded runs


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


def print_rivals(summary) -> None:
    """One line per variant: ppl mean [CI], paired change vs uniform and vs cosine 1.5->0.5 [CI]."""
    def ci(prefix: str, suffix: str = "") -> list[str]:
        return [f"{prefix}_{s}{suffix}" for s in ("mean", "ci_low", "ci_high")]

    cols = ["variant", "n_seeds", *ci("val_ppl"), *ci("rel_val_ppl_pct"), *ci("rel_val_ppl_pct", "_vs_cosine")]
    print(summary[cols].to_string(index=False, float_format=lambda x: f"{x:.2f}"))


def print_architectures(summary) -> None:
    cols = ["mixer", "variant", "n_seeds", "params", "val_ppl_mean", "rel_val_ppl_pct_mean",
            "rel_val_ppl_pct_ci_low", "rel_val_ppl_pct_ci_high"]
    print(summary[cols].to_string(index=False, float_format=lambda x: f"{x:.2f}"))


def print_table(summary) -> None:
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(summary.to_string(index=False, float_format=lambda x: f"{x:.4g}"))


# How each analysis's summary table is printed (default: print_table).
SHOW = {"group_ablation": print_summary, "schedule_sweep": print_summary, "rival_profiles": print_rivals,
        "architectures": print_architectures}


def run_named(name: str, args: argparse.Namespace, command: str | None = None) -> int:
    """`interp experiment NAME` (or one of its aliases, whose errors carry its own `command`)."""
    import analyses

    return run_analysis(analyses.experiment_analysis(name), args, command or f"interp experiment {name}")


def run_analysis(module: ModuleType, args: argparse.Namespace, command: str) -> int:
    """Train (or skip/resume) every run the experiment plans, rebuild its tables (`module.compute`), render the
    figure; return the exit status."""
    from analyses import read_table
    from interp._util.dist import Distributed
    from interp.jobs.runs import describe
    from interp.jobs.training import run_experiment
    from interp.training.experiments import ExperimentFailed

    cfg = config_from_args(module, args, command)
    out = Path(args.out)
    # a bad preset, field, variant name or option raises ValueError naming the fix: interp.cli.main prints it
    experiments = planned(module, cfg, out)
    if args.dry_run:
        for exp in experiments:
            print(describe(exp))
        if module.NAME in NOTES:
            print(NOTES[module.NAME](module, cfg))
        print(f"tables and figure: {out}")
        return 0
    dist = Distributed.from_env(join=False)
    if module.NAME in PLANS and dist.world_size > 1:
        raise SystemExit(f"{command}: runs in one process (its runs train one after another, or side by side with "
                         "--jobs where it has it): run it without torchrun")
    execution = getattr(cfg, "execution", None)
    if execution is not None and execution.executor == "slurm" and dist.world_size > 1:
        raise SystemExit(f"{command}: --executor {execution.executor} submits the runs from one process: run it "
                         "without torchrun (a run's own ranks are its task's)")
    if not dist.primary:  # under torchrun: the other ranks only take part in training
        return run_experiment(experiments[0], log=None).exit_code if not args.no_train else 0
    for exp in experiments:
        check_output_dir(exp.dir, "--root")
    check_output_dir(out, args.out_flag)
    try:
        result = module.compute(cfg, out, train=not args.no_train)
        report, summary = result if isinstance(result, tuple) else (None, result)
    except ExperimentFailed as failed:
        report, summary = failed.report, failed.summary
        if summary is None and (out / module.TABLE).is_file():
            summary = read_table(out, module.TABLE, module.NAME)
    if report is not None:
        print(report.summary())
    from interp.jobs.training import submitted

    if submitted(report):   # --no-wait: nothing to tabulate until the runs finish; the rerun collates
        return report.exit_code
    if summary is not None and len(summary):
        SHOW.get(module.NAME, print_table)(summary)
        for path in module.render(out):
            print(f"[{command}] wrote {path}")
    else:
        where = ", ".join(str(exp.dir) for exp in experiments)
        print(f"[{command}] no finished runs under {where} yet: nothing to tabulate", file=sys.stderr)
    return report.exit_code if report is not None else 0


# ------------------------------------------------------------------------------------ eval over an experiment

def _field(cls: type, name: str) -> dataclasses.Field:
    return next(f for f in dataclasses.fields(cls) if f.name == name)


def add_eval_arguments(p: argparse.ArgumentParser, module: ModuleType, legacy: bool = False) -> None:
    """`interp experiment eval [EXPERIMENT_DIR]`: the Config's fields as flags; its `out` (the resumable eval table)
    is --eval-table, since --out is the folder of the tables and figure. `legacy` (`interp eval-experiment`): the
    older names, --out for the eval table and --figures-dir for the folder."""
    table = _field(module.Config, "out")
    p.add_argument("runs", nargs="?", default=None, metavar="EXPERIMENT_DIR",
                   help=f"an experiment root of <variant>/seed<k>/ run directories with weights (default: "
                        f"{_field(module.Config, 'runs').default})")
    add_arguments(p, module.Config, exclude=("runs", "out"))
    shared = p.add_argument_group("outputs and plan")
    table_flags = ("--out", "--eval-table") if legacy else ("--eval-table",)
    shared.add_argument(*table_flags, dest="eval_table", metavar="FILE", default=None,
                        help=f"{table.metadata['help']} (default: {table.default})")
    out_help = ("folder of the summary and per-run tables and the figure; the repository's figures/ only when given "
                "(or through `interp figures --recompute --only downstream_groups`)")
    if legacy:
        add_out_argument(shared, out_help, default=RESULTS_DIR, default_text=RESULTS_TEXT, flag="--figures-dir")
    else:
        add_out_argument(shared, out_help, default=RESULTS_DIR, default_text=RESULTS_TEXT, aliases=("--figures-dir",))
    shared.add_argument("--set", action="append", default=[], metavar="FIELD=JSON",
                        help=f"a field of {module.__name__}.Config (JSON), e.g. --set limit=50")
    shared.add_argument("--dry-run", action="store_true", help="list the runs that would be evaluated; evaluate "
                                                                "nothing")
    from interp.cli.jobs import add_executor_arguments

    add_executor_arguments(p)


def eval_config(args: argparse.Namespace, command: str) -> Any:
    from analyses import downstream_groups as dg

    given = {"runs": args.runs} if args.runs is not None else {}
    given |= {"out": args.eval_table} if args.eval_table is not None else {}
    from interp.cli.jobs import executor_from_args

    return dataclass_from_args(dg.Config, args, exclude=("runs", "out"), execution=executor_from_args(args),
                               **{**given, **parse_set_overrides(args.set, command, dg.Config)})


def eval_plan(cfg: Any, out: Path) -> str:
    """What `interp experiment eval` would evaluate (the runs with weights under cfg.runs) and where it writes."""
    from analyses import downstream_groups as dg
    from analyses import resolve_root

    root = resolve_root(cfg.runs)
    runs = dg.finished_runs(root) if root.is_dir() else None
    n = 0 if runs is None else len(runs)
    lines = [(f"eval {root}: {n} finished run(s) with weights x tasks {cfg.tasks} (limit {cfg.limit}, device "
              f"{cfg.device}); resumable table {resolve_root(cfg.out)}")]
    for r in () if runs is None else runs.itertuples():
        lines.append(f"  {r.variant:<20} seed{r.seed}  {r.run_dir}")
    if not n:
        lines.append("  nothing to evaluate yet: train the experiment first")
    lines.append(f"tables and figure: {out}")
    return "\n".join(lines)


def run_eval(args: argparse.Namespace, command: str = "interp experiment eval") -> int:
    """Evaluate (resumable), tabulate, render; print the changes vs the baseline, resolved ones marked."""
    from analyses import downstream_groups as dg
    from analyses import read_table

    cfg = eval_config(args, command)
    out = Path(args.out)
    if args.dry_run:
        print(eval_plan(cfg, out))
        return 0
    from analyses import resolve_root

    check_output_dir(out, args.out_flag)
    check_output_file(resolve_root(cfg.out), "--out" if args.command == EVAL_LEGACY else "--eval-table")
    if not dg.compute(cfg, out):   # no run with weights there: FileNotFoundError, one line
        return 0                   # a torchrun rank other than 0, or Slurm's --no-wait: nothing to tabulate here
    summary = read_table(out, dg.TABLE, dg.NAME)
    for r in summary.itertuples():
        base = dg.baseline_of(r.variant, cfg.baseline)
        if r.variant == base:
            continue
        print(f"  {r.variant:<20} {r.task:<15} {r.metric:<16} {r.value_mean:.4g}  vs {base}: "
              f"{r.d_mean:+.4g} [seeds {r.d_ci_low:+.4g}, {r.d_ci_high:+.4g}; {r.scale} over seeds and documents "
              f"{r.change:+.3g} [{r.change_ci_low:+.3g}, {r.change_ci_high:+.3g}]]{'  resolved' if r.resolved else ''}")
    for path in [out / dg.TABLE, *dg.render(out)]:
        print(f"[{command}] wrote {path}")
    return 0


if __name__ == "__main__":  # `python -m interp.cli.experiment NAME ...` (e.g. under torchrun)
    from interp.cli import main

    sys.exit(main(["experiment", *sys.argv[1:]]))
