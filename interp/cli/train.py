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
import dataclasses
import signal
import sys

from interp._util.config import add_arguments, add_sections, given_options
from interp._util.dist import Distributed
from interp.training.config import SECTIONS, TrainConfig, fit_to_steps, parse_train_overrides
from interp.training.presets import PRESETS
from interp.widths import LAYOUTS, PROFILES, SCHEDULES, SHAPES

DESCRIPTION = (__doc__.split("\n")[0] + " Every flag below but --preset, --set and the width group is a TrainConfig "
               "field; a flag not given keeps the preset's value. A --steps shorter than the preset's warm-up shortens "
               "it (one line on stderr says so); the environment variable INTERP_MAX_STEPS=N caps --steps at N (a quick "
               "pass; said the same way). Progress goes to stderr (a bar on a terminal, else a line every "
               "tenth of the run or 30 s); the last line, on stdout, sums the run up.")
DEFAULT_PRESET = "tiny"
# Set by their own flags: --preset (a name, not a field value) and --out (required).
OWN_FLAGS = ("preset", "out_dir")


def _help(field: str) -> str:
    return next(f.metadata["help"] for f in dataclasses.fields(TrainConfig) if f.name == field)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("train", help="train a (tapered) LM from a preset", description=DESCRIPTION,
                              usage="%(prog)s --out DIR [--preset NAME] [FLAG ...]")
    groups = add_sections(p, SECTIONS)
    model, width, output = groups["model"], groups["width"], groups["output"]
    model.add_argument("--preset", default=DEFAULT_PRESET, metavar="NAME",
                       help=f"{' | '.join(PRESETS)}: named TrainConfig overrides (interp/training/presets.py; "
                            f"default {DEFAULT_PRESET})")
    output.add_argument("--out", dest="out_dir", required=True, metavar="DIR", help=_help("out_dir"))
    add_arguments(p, TrainConfig, exclude=OWN_FLAGS, groups=groups,
                  defaults={f.name: None for f in dataclasses.fields(TrainConfig)})  # the preset decides
    model.add_argument("--set", action="append", default=[], metavar="FIELD=JSON",
                       help="any TrainConfig field, e.g. --set warmup_steps=100 --set 'betas=[0.9,0.99]' "
                            "--set 'mixer_options={\"chunk_size\": 64}'")
    width.add_argument("--schedule", choices=SCHEDULES + SHAPES,
                       help="middle-heavy / x-shaped: --start is the edge layers' ratio, --end the centre's")
    width.add_argument("--start", type=float, help="first layer's width as a multiple of d_ff (e.g. 1.5)")
    width.add_argument("--end", type=float, help="last layer's width as a multiple of d_ff (e.g. 0.5)")
    width.add_argument("--profile", help=f"layer-group profile: {' | '.join(PROFILES)}; or a layout with layers "
                                         f"without an MLP: {' | '.join(LAYOUTS)}")
    width.add_argument("--multiple", type=int, help="round widths to this multiple (default 16)")
    width.add_argument("--width-file", metavar="FILE", help="widths derived from a measured profile "
                       "(`interp taper derive ... --out FILE`); resampled to this model's depth")
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The TrainConfig these arguments describe (no training): testable without a shell. A --steps shorter than the
    preset's schedule is fitted by interp.training.config.fit_to_steps, each change one line on stderr (rank 0)."""
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

        from interp.widths import load_width_spec

        spec = load_width_spec(args.width_file)
        width = {"width": dc.replace(spec, multiple=width.pop("multiple", spec.multiple))}
    try:
        sets = parse_train_overrides(args.set, "interp train")
    except ValueError as err:  # the message names the field and the expected type
        raise SystemExit(str(err)) from err
    try:
        overrides = {**width, **given_options(TrainConfig, args, exclude=OWN_FLAGS), "out_dir": args.out_dir,
                     **sets}
        cfg, notes = fit_to_steps(TrainConfig.from_preset(args.preset, **overrides), given=overrides)
    except ValueError as err:
        raise SystemExit(f"interp train: {err}") from err
    if Distributed.from_env(join=False).primary:  # under torchrun every rank parses; one says what changed
        for note in notes:
            print(f"interp train: {note}", file=sys.stderr)
    return cfg


def run(args: argparse.Namespace) -> int:
    """Errors are interp.cli.main's: bad input (ValueError / OSError, e.g. the run directory is locked by another
    process) is one line and exit 2, an interrupt exit 130 (SIGINT) or 143 (SIGTERM). A run that returns ends with one
    summary line on stdout (rank 0), so a log under nohup or Slurm says how it ended."""
    from interp.training import Trainer

    cfg = config_from_args(args)
    trainer = Trainer(cfg)  # a SIGTERM before the loop: interp.cli.main's stop_signals, exit 143
    already = trainer.finished is not None
    result = trainer.run()
    if trainer.dist.primary:
        print(summary_line(result, cfg, already), flush=True)
    if result["status"] != "interrupted":
        return 0
    return 128 + getattr(signal, str(result.get("reason")), signal.SIGINT)  # 130 for SIGINT, 143 for SIGTERM


def summary_line(result: dict, cfg: TrainConfig, already: bool = False) -> str:
    """'[train] done: 250/250 steps, val_loss 4.1234 (ppl 61.78), 3m12s -> runs/x' from a run's result.json."""
    from interp._util.progress import format_duration

    val_loss, val_ppl = result.get("val_loss"), result.get("val_ppl")
    val = f"val_loss {val_loss:.4f} (ppl {val_ppl:.2f})" if val_loss is not None else "no val_loss yet"
    status = "done already, nothing trained" if already else result.get("status")
    line = (f"[train] {status}: {result.get('step')}/{cfg.steps} steps, {val}, "
            f"{format_duration(result.get('elapsed_s') or 0.0)} -> {cfg.out_dir}")
    if result.get("status") == "interrupted":
        line += f" ({result.get('reason')}: rerun with --resume to continue)"
    return line


if __name__ == "__main__":  # `python -m interp.cli.train ...` (e.g. under torchrun)
    from interp.cli import main

    sys.exit(main(["train", *sys.argv[1:]]))
