"""`interp batch PATH...`: novelty probes over many checkpoints (step checkpoints of a run, folders of
runs, HF model dirs, .gguf files), one model in memory at a time, into one table that a rerun resumes.

PATH expansion: a checkpoint dir -> itself; a run dir -> its checkpoints/step_* by step, then the final
model (unless identical to the last step); an HF dir or .gguf -> itself; any other folder -> everything
of those kinds below it. `--dry-run` lists what a PATH expands to. Rows are written per checkpoint to
OUT.parts/ and OUT is rebuilt from them; checkpoints already analysed with the same settings are
skipped. Failed checkpoints get a status="failed" row and make the exit status 1.
--executor local --jobs N runs N processes here; under torchrun (or with RANK/WORLD_SIZE set) each rank takes every
WORLD_SIZE-th checkpoint; --executor slurm submits an array job (docs/scale.md). `interp jobs status OUT` shows
each checkpoint's state, `interp jobs merge OUT` rebuilds the table (`--merge-only` is its older name).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from interp._util.config import add_arguments, given_options
from interp.cli.jobs import add_executor_arguments, executor_from_args
from interp.cli.probe import PROBE_GROUP, add_loader_arguments

if TYPE_CHECKING:
    from interp.probes.batch import BatchConfig


def register(subparsers: argparse._SubParsersAction) -> None:
    from interp.jobs.targets import CHECKPOINTS_HELP
    from interp.probes import batch, config  # torch-free: --help stays fast

    parser = subparsers.add_parser("batch", help="probe many checkpoints into one resumable table",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="checkpoint dir, run dir, folder of runs, HF model dir, .gguf file, or a hub id / "
                             "TransformerLens name (MODEL@REV; --revisions for a series)")
    parser.add_argument("--out", type=Path, default=Path("results/batch.parquet"),
                        help="merged table (parquet); parts go to OUT.parts/ (default results/batch.parquet)")
    # every option of `interp probe`, with the batch's own defaults (tokens 2048, seq_len 256)
    add_arguments(parser.add_argument_group(PROBE_GROUP), config.ProbeConfig, defaults=batch.PROBE_DEFAULTS)
    add_loader_arguments(parser)
    parser.add_argument("--checkpoints", default="all", metavar="all|final|S[,S]", help=CHECKPOINTS_HELP)
    parser.add_argument("--revisions", default=None, metavar="R[,R]|A..B:K|all",
                        help="a checkpoint series of each hub id among the PATHs: a list (step0,step1000), a range "
                             "(step0..step143000:1000) or all (the repo's branches and tags); each row gets its step "
                             "(and tokens) from the revision's name")
    parser.add_argument("--revision-pattern", default=None, metavar="REGEX",
                        help="how the --revisions series names its steps, where no built-in scheme does (Pythia "
                             "step1000, OLMo stage1-step1000-tokens4B, SmolLM2 step-240000, FineWeb ablations "
                             "step-001000-2BT, ours step_000128): a regex matching the whole name with a group "
                             "(?P<step>...) and/or (?P<tokens>...), tokens with an optional K/M/B/T unit, e.g. "
                             "'ckpt-(?P<step>\\d+)-(?P<tokens>\\d+[KMBT])'; orders `all` and fills step/tokens")
    parser.add_argument("--follow-symlinks", action="store_true",
                        help="follow symlinks that lead out of a PATH's tree (each directory is visited once)")
    parser.add_argument("--csv", action="store_true", help="also write OUT as CSV beside the parquet file")
    parser.add_argument("--no-progress", action="store_true", help="no line per checkpoint on stderr")
    parser.add_argument("--merge-only", action="store_true",
                        help="alias of `interp jobs merge OUT`: only rebuild OUT from OUT.parts/")
    parser.add_argument("--dry-run", action="store_true", help="list what the PATHs expand to and exit")
    add_executor_arguments(parser)
    parser.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> BatchConfig:
    """interp.probes.batch.BatchConfig for parsed arguments: the batch's probe defaults for every probe
    flag not given."""
    from interp.probes import config
    from interp.probes.batch import BatchConfig, default_probe_config

    probe = config.ProbeConfig.build(default_probe_config(), **given_options(config.ProbeConfig, args))
    return BatchConfig(paths=list(args.paths), out=str(args.out), probe=probe, csv=args.csv,
                       progress=not args.no_progress, threads=args.threads, follow_symlinks=args.follow_symlinks,
                       checkpoints=args.checkpoints, trust_remote_code=args.trust_remote_code,
                       revision=args.revision, revisions=args.revisions, revision_pattern=args.revision_pattern,
                       execution=executor_from_args(args))


def run(args: argparse.Namespace) -> int:
    from interp import causal  # run_batch: interp.probes.batch's, with the causal rows joined under --causal
    from interp.jobs.targets import expand_paths, select_checkpoints

    if args.merge_only:   # the older name of `interp jobs merge OUT`
        from interp.cli.jobs import run_merge

        args.merge_default = "probe batch"
        return run_merge(args)
    if args.dry_run:
        for t in select_checkpoints(expand_paths(args.paths, follow_symlinks=args.follow_symlinks,
                                                 revision=args.revision, revisions=args.revisions,
                                                 revision_pattern=args.revision_pattern),
                                    args.checkpoints):
            step = "" if t.step != t.step else f" step={int(t.step)}"
            commit = f" commit={t.commit[:12]}" if t.commit else ""
            print(f"{t.kind:<10} {t.path}{f' run={t.run}' if t.run else ''}{step}{commit}")
        return 0
    result = causal.run_batch(config_from_args(args))
    jobs = result.jobs
    if jobs is not None and jobs.executor == "slurm" and jobs.table is None and not jobs.failed_tasks:
        print(f"[batch] submitted Slurm job {jobs.job_ids[0].split('_')[0]} ({len(jobs.job_ids)} task(s)); "
              f"`interp jobs status {args.out}`, then `interp jobs merge {args.out}`")
        return 0
    where = f"rank {result.rank}/{result.world_size}" if jobs is None or jobs.executor == "torchrun" else \
        f"{jobs.executor}, {max(1, len(jobs.tasks) + len(jobs.failed_tasks))} task(s)"
    print(f"[batch] {where}: {len(result.analysed)} analysed, "
          f"{len(result.skipped)} skipped (already in the table), {len(result.failed)} failed"
          + (f"; {result.positions_per_s:,.0f} positions/s; probing {result.probe_s:.1f} s of "
             f"{result.elapsed_s:.1f} s" if result.analysed else ""))
    if result.out is not None:
        print(f"[batch] wrote {result.out} ({len(result.table)} rows)")
    if jobs is not None:
        for index, error in jobs.failed_tasks:
            print(f"interp batch: task {index} did not finish: {error}; rerun the same command to finish it",
                  file=sys.stderr)
    if result.failed:
        print(f"interp batch: {len(result.failed)} checkpoint(s) failed:", file=sys.stderr)
        for path, error in result.failed:
            print(f"  {path}: {error}", file=sys.stderr)
    return 0 if result.ok else 1
