"""`interp probe`: per-layer novelty metrics (rho_mlp, rho_block, ...) of one model over held-out text;
prints a per-layer summary and writes the tidy table (parquet, optionally CSV)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

SUMMARY_METRICS = ("rho_mlp", "rho_block")


def register(subparsers: argparse._SubParsersAction) -> None:
    # choices are validated by interp.probes.probe (its error lists them), so --help never imports torch
    parser = subparsers.add_parser("probe", help="layer-wise novelty probes (rho_mlp, rho_block, ...)",
                                   description=__doc__)
    parser.add_argument("--model", default="smollm2-135m",
                        help="registry name, HF dir, .gguf file, hub id, or a checkpoint dir (runs/NAME)")
    parser.add_argument("--text", default=None,
                        help="text file, or a corpus name (wiki, shakespeare); default: held-out wiki split")
    parser.add_argument("--tokens", type=int, default=16384,
                        help="model positions to run, rounded down to a multiple of --seq-len (default 16384)")
    parser.add_argument("--seq-len", type=int, default=512, help="positions per sequence, BOS included")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--backend", default="torch", help="torch | transformer_lens | nnsight | hookpoints")
    parser.add_argument("--positions", default="skip_first",
                        help="skip_first (default: position 0 of each sequence, the attention sink, left out) | all")
    parser.add_argument("--prepend-bos", action="store_true", help="start every sequence with BOS")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                        help="precision of the metric math (the model runs in its own dtype)")
    parser.add_argument("--metrics", default=None, metavar="M[,M]", help="subset of metrics; default: all")
    parser.add_argument("--reference", default="raw",
                        help="raw (default) | normed: also rho_mlp_normed, the cosine with the MLP's normalised input")
    parser.add_argument("--exclude-massive-dims", default=None, metavar="K|D[,D]",
                        help="zero residual dims in every cosine: K = the K of largest mean |resid_pre| "
                             "(measured on a first pass), or a comma list of dims")
    parser.add_argument("--tokenizer", default=None,
                        help="tokenizer for interp.data.get_tokenizer, overriding the model's own")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--out", type=Path, default=None,
                        help="output table (.parquet, or .csv); default results/probe-<model>.parquet")
    parser.add_argument("--csv", action="store_true", help="also write a CSV beside the parquet file")
    parser.set_defaults(func=run)


def probe_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of interp.probes.probe for parsed command-line arguments."""
    from interp.probes import METRIC_NAMES

    kwargs: dict[str, Any] = dict(model=args.model, text=args.text, tokens=args.tokens, seq_len=args.seq_len,
                                  batch_size=args.batch_size, backend=args.backend, positions=args.positions,
                                  prepend_bos=args.prepend_bos, dtype=args.dtype)
    kwargs["metrics"] = tuple(m.strip() for m in args.metrics.split(",") if m.strip()) if args.metrics else METRIC_NAMES
    kwargs["reference"] = args.reference
    kwargs["exclude_massive_dims"] = parse_dims(args.exclude_massive_dims)
    if args.tokenizer:
        from interp.data import get_tokenizer

        kwargs["tokenizer"] = get_tokenizer(args.tokenizer)
    return kwargs


def parse_dims(spec: str | None) -> int | list[int] | None:
    """--exclude-massive-dims: "3" -> 3 (measure the top 3), "17,247,507" -> [17, 247, 507]."""
    if spec is None:
        return None
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts or not all(p.isdigit() for p in parts):
        raise ValueError(f"--exclude-massive-dims {spec!r}: give K (e.g. 3) or a comma list of dims (e.g. 17,247,507)")
    return int(parts[0]) if len(parts) == 1 and "," not in spec else [int(p) for p in parts]


def default_out(model: str) -> Path:
    label = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(str(model)).name or str(model)).strip("_") or "model"
    return Path("results") / f"probe-{label}.parquet"


def format_summary(df: pd.DataFrame, metrics: tuple[str, ...] = SUMMARY_METRICS) -> str:
    """One line per layer: depth and mean +- 95% CI half-width of each metric present in the table."""
    metrics = tuple(m for m in metrics if m in set(df["metric"]))
    header = f"{'layer':>5} {'depth':>5} " + " ".join(f"{m + ' (95% CI)':>22}" for m in metrics) + f" {'tokens':>7}"
    lines = [header]
    wide = df.set_index(["layer", "metric"])
    for layer in sorted(df["layer"].unique()):
        cells = []
        for m in metrics:
            row = wide.loc[(layer, m)]
            cells.append(f"{row['mean']:+.4f} +- {(row['ci_high'] - row['ci_low']) / 2:.4f}".rjust(22))
        first = wide.loc[(layer, metrics[0])] if metrics else None
        depth = float(first["depth"]) if first is not None else float("nan")
        tokens = int(first["n_tokens"]) if first is not None else 0
        lines.append(f"{layer:>5} {depth:>5.2f} " + " ".join(cells) + f" {tokens:>7}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from interp.probes import probe, save_table

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    try:
        df = probe(**probe_kwargs(args))
    except (ValueError, FileNotFoundError, ModuleNotFoundError) as err:
        print(f"interp probe: {err}", file=sys.stderr)
        return 2
    timing = df.attrs.get("timing", {})
    first = df.iloc[0]
    print(f"[probe] {first['model']} backend={first['backend']} positions={first['positions']} "
          f"seq_len={first['seq_len']} text={first['text_source']} "
          f"({timing.get('positions', '?')} positions, {timing.get('probe_s', float('nan')):.1f} s)")
    print(format_summary(df))
    out = args.out if args.out is not None else default_out(args.model)
    for path in save_table(df, out, csv=args.csv):
        print(f"[probe] wrote {path}")
    return 0
