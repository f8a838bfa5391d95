"""`interp batch PATH...`: novelty probes over many checkpoints (step checkpoints of a run, folders of
runs, HF model dirs, .gguf files), one model in memory at a time, into one table that a rerun resumes.

PATH expansion: a checkpoint dir -> itself; a run dir -> its checkpoints/step_* by step, then the final
model (unless identical to the last step); an HF dir or .gguf -> itself; any other folder -> everything
of those kinds below it. `--dry-run` lists what a PATH expands to. Rows are written per checkpoint to
OUT.parts/ and OUT is rebuilt from them; checkpoints already analysed with the same settings are
skipped. Failed checkpoints get a status="failed" row and make the exit status 1.
Under torchrun (or with RANK/WORLD_SIZE set) each rank takes every WORLD_SIZE-th checkpoint; see
interp/batch.py for how the shards are merged (`--merge-only`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("batch", help="probe many checkpoints into one resumable table",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="checkpoint dir, run dir, folder of runs, HF model dir or .gguf file")
    parser.add_argument("--out", type=Path, default=Path("results/batch.parquet"),
                        help="merged table (parquet); parts go to OUT.parts/ (default results/batch.parquet)")
    parser.add_argument("--text", default=None,
                        help="text file, or a corpus name (wiki, shakespeare); default: held-out wiki split")
    parser.add_argument("--tokens", type=int, default=2048, help="model positions per checkpoint (default 2048)")
    parser.add_argument("--seq-len", type=int, default=256, help="positions per sequence (default 256)")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--backend", default="torch", help="torch | transformer_lens | nnsight | hookpoints")
    parser.add_argument("--positions", default="skip_first", help="skip_first (default) | all")
    parser.add_argument("--prepend-bos", action="store_true", help="start every sequence with BOS")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                        help="precision of the metric math")
    parser.add_argument("--metrics", default=None, metavar="M[,M]", help="subset of metrics; default: all")
    parser.add_argument("--tokenizer", default=None,
                        help="tokenizer for interp.data.get_tokenizer, overriding every model's own")
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--csv", action="store_true", help="also write OUT as CSV beside the parquet file")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--merge-only", action="store_true",
                        help="only rebuild OUT from OUT.parts/ (after sharded ranks without a process group)")
    parser.add_argument("--dry-run", action="store_true", help="list what the PATHs expand to and exit")
    parser.set_defaults(func=run)


def config_from_args(args: argparse.Namespace):
    """interp.probes.batch.BatchConfig for parsed arguments."""
    from interp.probes import METRIC_NAMES
    from interp.probes.batch import BatchConfig

    metrics = tuple(m.strip() for m in args.metrics.split(",") if m.strip()) if args.metrics else METRIC_NAMES
    return BatchConfig(paths=list(args.paths), out=str(args.out), text=args.text, tokens=args.tokens,
                       seq_len=args.seq_len, batch_size=args.batch_size, backend=args.backend,
                       positions=args.positions, prepend_bos=args.prepend_bos, dtype=args.dtype, metrics=metrics,
                       tokenizer=args.tokenizer, csv=args.csv, progress=not args.no_progress, threads=args.threads)


def run(args: argparse.Namespace) -> int:
    from interp.probes import batch

    try:
        if args.merge_only:
            df = batch.merge_parts(args.out, csv=args.csv)
            print(f"[batch] merged {len(df)} rows from {batch.parts_dir(args.out)} into {args.out}")
            return _report_failed_rows(df)
        if args.dry_run:
            for t in batch.expand_paths(args.paths):
                step = "" if t.step != t.step else f" step={int(t.step)}"
                print(f"{t.kind:<10} {t.path}{f' run={t.run}' if t.run else ''}{step}")
            return 0
        result = batch.run_batch(config_from_args(args))
    except (ValueError, FileNotFoundError) as err:
        print(f"interp batch: {err}", file=sys.stderr)
        return 2
    print(f"[batch] rank {result.rank}/{result.world_size}: {len(result.analysed)} analysed, "
          f"{len(result.skipped)} skipped (already in the table), {len(result.failed)} failed"
          + (f"; {result.positions_per_s:,.0f} positions/s" if result.analysed else ""))
    if result.out is not None:
        print(f"[batch] wrote {result.out} ({len(result.table)} rows)")
    if result.failed:
        print(f"interp batch: {len(result.failed)} checkpoint(s) failed:", file=sys.stderr)
        for path, error in result.failed:
            print(f"  {path}: {error}", file=sys.stderr)
        return 1
    return 0


def _report_failed_rows(df) -> int:
    failed = df[df["status"] == "failed"] if "status" in df.columns else df.iloc[:0]
    for row in failed.itertuples():
        print(f"  failed: {row.path}: {row.error}", file=sys.stderr)
    return 1 if len(failed) else 0
