"""`interp figures`: re-draw every registered analysis from its stored tables (seconds), or, with
--recompute, run each analysis's experiment first. One failing analysis never stops the others;
the exit status is non-zero if any failed. One experiment with its own flags (seeds, jobs, a plan with --dry-run):
`interp experiment NAME`."""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

from interp._util.children import raise_if_stopped
from interp._util.errors import USER_ERRORS, InputError, one_line
from interp._util.paths import FIGURES_DIR
from interp.cli import add_out_argument, check_output_dir


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("figures", help="render (or --recompute) the figures under figures/",
                                   description=__doc__)
    parser.add_argument("--recompute", action="store_true",
                        help="run each analysis (compute) with its quick default config, then render")
    parser.add_argument("--all", action="store_true",
                        help="with --recompute, also recompute HEAVY analyses (many training runs; hours on a CPU)")
    parser.add_argument("--only", metavar="NAME[,NAME]", default=None,
                        help="comma-separated analyses to run (see --list); default: all")
    parser.add_argument("--list", action="store_true", help="list the analyses and the files each writes")
    add_out_argument(parser, "folder where the tables and PNGs live", default=FIGURES_DIR, aliases=("--figures-dir",))
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=JSON",
                        help="with --recompute and one --only analysis: a field of its Config (analyses/NAME.py), "
                             "e.g. --only gain_vs_tokens --recompute --set 'archs=[\"gpt2\"]' --set keep=false")
    parser.set_defaults(func=run)


def select(only: str | None) -> list[str]:
    """Registered names to run, in registry order; ValueError naming unknown ones."""
    import analyses

    if not only:
        return list(analyses.ANALYSES)
    wanted = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in analyses.ANALYSES]
    if unknown:
        raise ValueError(f"--only: unknown analysis {unknown}; choose from {', '.join(analyses.ANALYSES)}")
    return [n for n in analyses.ANALYSES if n in wanted]


def analysis_config(name: str, items: list[str]):
    """The analysis's Config with the --set FIELD=JSON items applied (each checked against the field's type);
    ValueError naming the field otherwise."""
    import analyses
    from interp._util.config import parse_set_overrides

    module = analyses.get(name)
    return module.Config(**parse_set_overrides(items, f"{name}.Config", module.Config))


def check_planned(name: str, config, items: list[str], figures_dir: Path) -> None:
    """Before any work: the runs a training analysis plans with the --set `config` (interp.cli.experiment.planned),
    each TrainConfig built and validated, so a value it refuses (seeds=0, archs=["gpt3"]) is one line naming the
    analysis and the --set items (InputError, exit 2) instead of a failure after other work; so is a run folder
    that cannot be one (its root a file)."""
    import analyses
    from interp.cli.experiment import EVAL, check_counts, planned

    if name not in {module for key, (module, _) in analyses.EXPERIMENTS.items() if key != EVAL}:
        return
    try:
        check_counts(config, prefix="")
        for exp in planned(analyses.get(name), config, figures_dir):
            exp.plan()
            check_output_dir(exp.dir, "root")   # where its runs go: a folder (or new), before any run trains
    except USER_ERRORS as err:
        raise InputError(f"{name}: --set {' '.join(items)}: {one_line(err)}") from err


def run_one(name: str, figures_dir: Path, recompute: bool, include_heavy: bool = True, config=None) -> str:
    """Compute (optionally) and render one analysis; returns 'ok' or 'skipped'. Raises on failure.

    A HEAVY analysis is only recomputed when `include_heavy`; otherwise it is re-rendered from its tables.
    `config`: the analysis's Config for the recompute (default: its defaults).
    """
    import analyses

    module = analyses.get(name)
    if recompute and analyses.is_heavy(module) and not include_heavy:
        print(f"[figures] {name} is HEAVY: re-rendering its stored tables; recompute it with "
              f"`{analyses.recompute_command(name)}` (or --recompute --all)", file=sys.stderr, flush=True)
    elif recompute:
        module.compute(module.Config() if config is None else config, figures_dir)
    missing = analyses.missing_tables(module, figures_dir)
    if missing:
        print(f"[figures] skip {name}: missing {', '.join(str(p) for p in missing)}; "
              f"create with `{analyses.recompute_command(name)}`", file=sys.stderr, flush=True)
        return "skipped"
    for path in module.render(figures_dir):
        print(f"[figures] {name}: wrote {path}", flush=True)
    return "ok"


def run(args: argparse.Namespace) -> int:
    import analyses

    try:
        names = select(args.only)
    except ValueError as err:
        print(f"interp figures: {err}", file=sys.stderr, flush=True)
        return 2
    config = None
    if args.set:
        if not args.recompute or len(names) != 1:
            print("interp figures: --set: give it with --recompute and exactly one analysis (--only NAME): "
                  "its fields are that analysis's Config", file=sys.stderr, flush=True)
            return 2
        try:
            config = analysis_config(names[0], args.set)
        except (TypeError, ValueError) as err:
            print(f"interp figures: {err}", file=sys.stderr, flush=True)
            return 2
    if args.list:
        for name in names:
            module = analyses.get(name)
            heavy = " [HEAVY]" if analyses.is_heavy(module) else ""
            print(f"{name}{heavy}: {', '.join(module.OUTPUTS)}")
        return 0

    figures_dir = Path(args.out)
    check_output_dir(figures_dir, args.out_flag)   # before any analysis runs
    if config is not None:
        check_planned(names[0], config, args.set, figures_dir)
    status: dict[str, str] = {}
    for name in names:
        raise_if_stopped()   # SIGINT/SIGTERM during the last analysis: start no other (exit 130/143)
        t0 = time.perf_counter()
        try:
            status[name] = run_one(name, figures_dir, args.recompute,
                                   include_heavy=bool(args.all or args.only), config=config)
        except USER_ERRORS as err:
            raise_if_stopped()   # an error because a stop signal cut the analysis short is the stop itself
            if config is not None:   # --set: a value the analysis refuses is bad input, one line, exit 2
                raise InputError(f"{name}: --set {' '.join(args.set)}: {one_line(err)}") from err
            print(f"[figures] FAILED {name}: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
            status[name] = "FAILED"
        except Exception as err:  # noqa: BLE001 - one analysis failing must not stop the others
            raise_if_stopped()
            traceback.print_exc()
            print(f"[figures] FAILED {name}: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
            status[name] = "FAILED"
        print(f"[figures] {name}: {status[name]} in {time.perf_counter() - t0:.1f}s", flush=True)
    failed = [n for n, s in status.items() if s == "FAILED"]
    summary = ", ".join(f"{n}={s}" for n, s in status.items())
    print(f"[figures] done: {summary}" + (f"; {len(failed)} failed" if failed else ""))
    return 1 if failed else 0
