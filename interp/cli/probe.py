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
CAUSAL_PREFIX = "delta_loss_"   # the causal rows' metrics (exact, or ending in _attribution)
INTERRUPTED = ("nothing was written: a probe keeps no partial table (neither its probe nor its causal phase); rerun "
               "to start again")
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


def format_summary(df: pd.DataFrame, metrics: tuple[str, ...] = SUMMARY_METRICS, prefix: str = "") -> str:
    """One line per layer: depth and mean +- 95% CI half-width of each metric present in the table (named without
    `prefix` in the header)."""
    metrics = tuple(m for m in metrics if m in set(df["metric"]))
    header = (f"{'layer':>5} {'depth':>5} " + " ".join(f"{m.removeprefix(prefix) + ' (95% CI)':>22}" for m in metrics)
              + f" {'tokens':>7}")
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


def causal_metrics(df: pd.DataFrame) -> tuple[str, ...]:
    """The causal rows' metrics in the table, in its order."""
    return tuple(m for m in dict.fromkeys(df["metric"]) if str(m).startswith(CAUSAL_PREFIX))


def header(df: pd.DataFrame) -> str:
    """The summary's first line: model, how it was loaded (revision, commit, dtype), the probe settings, the time."""
    timing, load = df.attrs.get("timing", {}), df.attrs.get("load", {})
    first = df.iloc[0]
    loaded = [f"{k}={load[k]}" for k in ("revision", "commit") if load.get(k)]
    weights = str(first.get("weights_sha256", "") or "")
    if not loaded and weights:
        loaded.append(f"weights_sha256={weights[:12]}")
    loaded.append(f"loaded as {load.get('model_dtype') or first.get('model_dtype', 'float32')}")
    causal = f" + causal rows {timing['extra_s']:.1f} s" if "extra_s" in timing else ""
    return (f"[probe] {first['model']} ({', '.join(loaded)}) backend={first['backend']} positions={first['positions']} "
            f"seq_len={first['seq_len']} text={first['text_source']} "
            f"({timing.get('positions', '?')} positions, {timing.get('probe_s', float('nan')):.1f} s{causal})")


def causal_summary(df: pd.DataFrame) -> str:
    """The causal rows per layer (delta loss, nats; its 95% CI over sequences), with how many sequences; '' when
    the table has none."""
    metrics = causal_metrics(df)
    if not metrics:
        return ""
    rows = df[df["metric"] == metrics[0]].iloc[0]
    how = "first-order estimates (attribution)" if metrics[0].endswith("_attribution") else "exact"
    return (f"[probe] causal rows, {how}: delta loss (nats) when the layer's part is removed, 95% CI over "
            f"{int(rows['n_sequences'])} sequences\n" + format_summary(df, metrics, prefix=CAUSAL_PREFIX))


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
    try:
        df = probe(args.model, config=cfg, trust_remote_code=args.trust_remote_code, revision=args.revision,
                   progress=args.progress)
    except KeyboardInterrupt as stop:
        stop.kept = INTERRUPTED   # interp.cli.main says it
        raise
    print(header(df))
    print(format_summary(df))
    if causal_metrics(df):
        print(causal_summary(df))
    for path in save_table(df, out, csv=args.csv):
        print(f"[probe] wrote {path}")
    return 0
