"""`interp probe`: per-layer novelty metrics (rho_mlp, rho_block, ...) of one model over held-out text;
prints a per-layer summary and writes the tidy table (parquet, optionally CSV)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING

from interp._util.config import add_arguments, dataclass_from_args

if TYPE_CHECKING:
    import pandas as pd

    from interp.probes.config import ProbeConfig

SUMMARY_METRICS = ("rho_mlp", "rho_block")
PROBE_GROUP = "probe options (interp.probes.ProbeConfig)"
TRUST_REMOTE_CODE_HELP = ("let a Hugging Face directory whose config.json / tokenizer_config.json has an auto_map "
                          "run its own Python files (refused otherwise; never asked)")


def thread_count(text: str) -> int:
    """--threads: an int >= 0 (0: torch's default), as an argparse usage error otherwise."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of threads >= 1, or 0 for torch's default")
    return value


def add_loader_arguments(parser: argparse.ArgumentParser, threads: bool = True, revision: bool = True) -> None:
    """--threads (0: torch's default), --trust-remote-code (args.trust_remote_code), --revision (args.revision)
    and --offline, shared by every command that loads a model (probe, batch, models, and any other entry point:
    pass the flags on to interp.hf.resolve_model / load_pretrained / probe as trust_remote_code= / revision=;
    interp.cli.main applies --offline)."""
    from interp.hf.resolve import TRUST_REMOTE_CODE_FLAG

    if threads:
        parser.add_argument("--threads", type=thread_count, default=0,
                            help="torch.set_num_threads (default: torch's)")
    parser.add_argument(TRUST_REMOTE_CODE_FLAG, action="store_true", help=TRUST_REMOTE_CODE_HELP)
    if revision:
        parser.add_argument("--revision", default=None, metavar="REV",
                            help=REVISION_HELP)
    add_offline_argument(parser)


REVISION_HELP = "a hub model's branch, tag or commit (also: MODEL@REV); a local model refuses it"
OFFLINE_HELP = ("never ask the network (as HF_HUB_OFFLINE=1): hub models load from the Hugging Face cache, and one "
                "that is not cached fails at once")


def add_offline_argument(parser: argparse.ArgumentParser) -> None:
    """--offline (args.offline), applied by interp.cli.main before the command runs."""
    parser.add_argument("--offline", action="store_true", help=OFFLINE_HELP)


def register(subparsers: argparse._SubParsersAction) -> None:
    from interp.probes import config  # torch-free: --help stays fast

    parser = subparsers.add_parser("probe", help="layer-wise novelty probes (rho_mlp, rho_block, ...)",
                                   description=__doc__)
    parser.add_argument("--model", default="smollm2-135m",
                        help="registry name, HF dir, .gguf file, hub id or TransformerLens name (gpt2-small; "
                             "MODEL@REV for a revision; downloaded where not cached), or a checkpoint dir (runs/NAME)")
    add_arguments(parser.add_argument_group(PROBE_GROUP), config.ProbeConfig)
    add_loader_arguments(parser)
    parser.add_argument("--out", type=Path, default=None,
                        help="output table (.parquet, or .csv); default results/probe-<model>.parquet")
    parser.add_argument("--csv", action="store_true", help="also write a CSV beside the parquet file")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                        help="progress on stderr: a bar on a terminal, else (nohup, Slurm, a pipe) a line every tenth "
                             "of the batches or 30 s with positions/s and the ETA (default: on)")
    parser.set_defaults(func=run)


def probe_config(args: argparse.Namespace) -> ProbeConfig:
    """The ProbeConfig of parsed command-line arguments: ProbeConfig's defaults for every flag not given."""
    from interp.probes import config

    return dataclass_from_args(config.ProbeConfig, args)


def default_out(model: str, revision: str | None = None) -> Path:
    model = f"{model}@{revision}" if revision else str(model)
    label = re.sub(r"[^A-Za-z0-9_.@-]+", "_", Path(model).name or model).strip("_") or "model"
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
    from interp.cli import check_output_file
    from interp.probes.outputs import check_output

    out = check_output(args.out if args.out is not None else default_out(args.model, args.revision))  # before any work
    check_output_file(out, "--out")   # a symbolic link there, a read-only file
    if args.csv and out.suffix != ".csv":
        check_output(out.with_suffix(".csv"), (".csv",), flag="--csv")
        check_output_file(out.with_suffix(".csv"), "--csv")
    cfg = probe_config(args).validate()
    from interp.probes import save_table

    if cfg.causal:   # joined one layer above probes and ablations: interp.probes.probe refuses causal=True
        from interp.causal import probe
    else:
        from interp.probes import probe

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    df = probe(args.model, config=cfg, trust_remote_code=args.trust_remote_code, revision=args.revision,
               progress=args.progress)
    timing = df.attrs.get("timing", {})
    first = df.iloc[0]
    print(f"[probe] {first['model']} backend={first['backend']} positions={first['positions']} "
          f"seq_len={first['seq_len']} text={first['text_source']} "
          f"({timing.get('positions', '?')} positions, {timing.get('probe_s', float('nan')):.1f} s)")
    print(format_summary(df))
    for path in save_table(df, out, csv=args.csv):
        print(f"[probe] wrote {path}")
    return 0
