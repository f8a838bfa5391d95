"""`interp train`: parse arguments into a TrainConfig (a preset plus overrides) and run the Trainer.

    interp train --preset tiny --schedule cosine --start 1.5 --end 0.5 --out runs/cosine
    interp train --preset tiny --profile wider-early --out runs/wider-early
    torchrun --nproc_per_node=2 -m interp.cli.train --preset tiny --out runs/ddp   # same entry point

Every TrainConfig field is a flag (generated from its declaration, interp.training.config); a flag not
given keeps the preset's value. Exit status: 0 when the run finished (or had already finished); 2 for bad
input, one line naming the file, field and fix (checked before any data is prepared where possible; a run
directory another process is using is refused the same way); 130 when interrupted by a signal (in the loop a
checkpoint and train state were saved first: rerun with --resume to continue).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import signal
import sys
import threading
from collections.abc import Iterator

from interp._util.config import add_arguments, given_options
from interp.schedules import PROFILES, SCHEDULES, SHAPES
from interp.training.config import TrainConfig, parse_train_overrides
from interp.training.presets import PRESETS

EXIT_INTERRUPTED = 130
DEFAULT_PRESET = "tiny"
# Set by their own flags: --preset (a name, not a field value) and --out (required).
OWN_FLAGS = ("preset", "out_dir")


def _help(field: str) -> str:
    return next(f.metadata["help"] for f in dataclasses.fields(TrainConfig) if f.name == field)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("train", help="train a (tapered) LM from a preset",
                              description=__doc__.split("\n")[0])
    p.add_argument("--preset", default=DEFAULT_PRESET,
                   help=f"{' | '.join(PRESETS)}: named TrainConfig overrides (interp/training/presets.py; "
                        f"default {DEFAULT_PRESET})")
    p.add_argument("--out", dest="out_dir", required=True, metavar="DIR", help=_help("out_dir"))
    width = p.add_argument_group("MLP width over depth (interp.schedules.WidthSpec)")
    width.add_argument("--schedule", choices=SCHEDULES + SHAPES,
                       help="middle-heavy / x-shaped: --start is the edge layers' ratio, --end the centre's")
    width.add_argument("--start", type=float, help="first layer's width as a multiple of d_ff (e.g. 1.5)")
    width.add_argument("--end", type=float, help="last layer's width as a multiple of d_ff (e.g. 0.5)")
    width.add_argument("--profile", help=f"layer-group profile: {' | '.join(PROFILES)}")
    width.add_argument("--multiple", type=int, help="round widths to this multiple (default 16)")
    width.add_argument("--width-file", metavar="FILE", help="widths derived from a measured profile "
                       "(`interp taper derive ... --out FILE`); resampled to this model's depth")
    fields = p.add_argument_group("TrainConfig fields (default: the preset's value)")
    add_arguments(fields, TrainConfig, exclude=OWN_FLAGS,
                  defaults={f.name: None for f in dataclasses.fields(TrainConfig)})  # the preset decides
    p.add_argument("--set", action="append", default=[], metavar="FIELD=JSON",
                   help="any TrainConfig field, e.g. --set warmup_steps=100 --set 'betas=[0.9,0.99]' "
                        "--set 'mixer_options={\"chunk_size\": 64}'")
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The TrainConfig these arguments describe (no training): testable without a shell."""
    if (args.start is not None or args.end is not None) and args.schedule in (None, "uniform"):
        raise SystemExit("interp train: --start/--end need --schedule linear|cosine|sigmoid")
    if args.profile and args.schedule:
        raise SystemExit("interp train: give either --profile or --schedule, not both")
    if args.width_file and (args.profile or args.schedule or args.start is not None or args.end is not None):
        raise SystemExit("interp train: --width-file sets the widths; drop --schedule/--start/--end/--profile")
    width = {k: getattr(args, k) for k in ("schedule", "start", "end", "profile", "multiple")
             if getattr(args, k) is not None}
    if args.width_file:
        import dataclasses as dc

        from interp.taper import load_width_spec

        spec = load_width_spec(args.width_file)
        width = {"width": dc.replace(spec, multiple=width.pop("multiple", spec.multiple))}
    try:
        sets = parse_train_overrides(args.set, "interp train")
    except ValueError as err:  # the message names the field and the expected type
        raise SystemExit(str(err)) from err
    try:
        overrides = {**width, **given_options(TrainConfig, args, exclude=OWN_FLAGS), "out_dir": args.out_dir,
                     **sets}
        return TrainConfig.from_preset(args.preset, **overrides)
    except ValueError as err:
        raise SystemExit(f"interp train: {err}") from err


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM outside the training loop (while the data is prepared, say) stops like Ctrl-C: KeyboardInterrupt,
    which interp.cli.main turns into exit 130. Inside the loop the Trainer's StopFlag takes over and saves first."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(args: argparse.Namespace) -> int:
    """Errors are interp.cli.main's: bad input (ValueError / OSError, e.g. the run directory is locked by another
    process) is one line and exit 2, an interrupt before the loop exit 130."""
    from interp.training import Trainer

    cfg = config_from_args(args)
    with _sigterm_interrupts():
        result = Trainer(cfg).run()
    return EXIT_INTERRUPTED if result["status"] == "interrupted" else 0


if __name__ == "__main__":  # `python -m interp.cli.train ...` (e.g. under torchrun)
    from interp.cli import main

    sys.exit(main(["train", *sys.argv[1:]]))
