"""`interp jobs status OUT` and `interp jobs merge OUT`: the tables that `interp batch`, `interp eval` and `interp
ablate` build from resumable parts, looked at and rebuilt while (or after) their tasks run anywhere.

    interp batch runs/ --out results/batch.parquet --executor slurm --jobs 8 --no-wait
    interp jobs status results/batch.parquet     # done / failed / running / interrupted / pending per target
    interp jobs merge results/batch.parquet      # rebuild the table from the parts (what --merge-only did)
    interp jobs status runs/groups-440m          # an experiment's runs: state, step out of total, loss, error

Also the executor flags every such command shares (interp.jobs.ExecutorConfig): --executor local|torchrun|slurm,
--jobs, and the Slurm options. See docs/scale.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from interp._util.config import add_arguments, dataclass_from_args

EXECUTOR_GROUP = "where the tasks run (interp.jobs.ExecutorConfig; docs/scale.md)"


def add_executor_arguments(parser: argparse.ArgumentParser, exclude: tuple[str, ...] = ()) -> None:
    """The ExecutorConfig flags; `exclude` leaves out those the command declares itself (an experiment's --jobs)."""
    from interp.jobs.executors import ExecutorConfig  # torch-free

    add_arguments(parser.add_argument_group(EXECUTOR_GROUP), ExecutorConfig, exclude=exclude)


def executor_from_args(args: argparse.Namespace, exclude: tuple[str, ...] = ()):
    from interp.jobs.executors import ExecutorConfig

    return dataclass_from_args(ExecutorConfig, args, exclude=exclude)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("jobs", help="status and merge of a resumable table (batch, eval, ablate)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    kinds = p.add_subparsers(dest="jobs_command", required=True, metavar="status | merge")
    status = kinds.add_parser("status", help="done / failed / running / interrupted / pending per target")
    status.add_argument("out", type=Path, metavar="OUT", help="the table a command writes (its --out), its parts "
                                                              "folder, or an experiment's folder (<root>/<name>: "
                                                              "per run its step, loss and error)")
    status.set_defaults(func=run_status)
    merge = kinds.add_parser("merge", help="rebuild OUT from OUT.parts/ (after tasks that did not merge)")
    merge.add_argument("out", type=Path, metavar="OUT", help="the table a command writes (its --out)")
    merge.add_argument("--csv", action="store_true", help="also write OUT as CSV beside it")
    merge.set_defaults(func=run_merge)


def run_status(args: argparse.Namespace) -> int:
    from interp.jobs.status import format_status, job_status

    plan, states = job_status(args.out)
    print(format_status(args.out, plan, states))
    return 1 if any(s.state == "failed" for s in states) else 0


def _kind(out: Path, default: str | None = None) -> str:
    """Which command's parts OUT.parts/ holds: its .kind marker (or its parts' columns), else the plan's, else
    `default` (the command whose --merge-only asked)."""
    from interp.jobs.parts import parts_dir, parts_kind, read_plan

    found = parts_kind(parts_dir(out)) if parts_dir(out).is_dir() else None
    if found:
        return found
    plan = read_plan(out)
    if plan is None and default:
        return default
    if plan is None:
        raise FileNotFoundError(f"{parts_dir(out)}: no parts of interp batch, eval or ablate to merge; run the "
                                f"command with --out {out} first")
    return str(plan.get("kind"))


def merge(out: Path, csv: bool = False, default: str | None = None):
    """The table of whichever command wrote OUT.parts/, rebuilt under its merge rules."""
    kind = _kind(out, default)
    if kind == "probe batch":
        from interp.probes.batch import merge_only
    elif kind == "eval":
        from interp.evals.run import merge_only
    elif kind == "ablation":
        from interp.ablations.many import merge_only
    else:
        raise ValueError(f"{out}: parts of an unknown command {kind!r}; interp merges batch, eval and ablate tables")
    return merge_only(out, csv=csv)


def run_merge(args: argparse.Namespace) -> int:
    from interp.jobs.parts import parts_dir

    df = merge(args.out, args.csv, getattr(args, "merge_default", None))
    print(f"[jobs] merged {len(df)} rows from {parts_dir(args.out)} into {args.out}")
    failed = df[df["status"] == "failed"] if "status" in df.columns else df.iloc[:0]
    if len(failed):
        print(f"interp jobs merge: {len(failed)} of {len(df)} row(s) in {args.out} are failed rows (status failed); "
              "fix their cause and rerun the command that wrote them", file=sys.stderr)
    for row in failed.itertuples():
        where = getattr(row, "path", None) or getattr(row, "model", "")
        print(f"  failed: {where}: {row.error}", file=sys.stderr)
    return 1 if len(failed) else 0
