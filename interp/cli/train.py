"""`interp train`: parse arguments into a TrainConfig (a preset plus overrides) and run the Trainer.

    interp train --preset tiny --schedule cosine --start 1.5 --end 0.5 --out runs/cosine
    interp train --preset tiny --profile wider-early --out runs/wider-early
    torchrun --nproc_per_node=2 -m interp.cli.train --preset tiny --out runs/ddp   # same entry point

Exit status: 0 when the run finished (or had already finished), 130 when interrupted by a signal
(a checkpoint and train state were saved; rerun with --resume to continue).
"""

from __future__ import annotations

import argparse
import json
import sys

# Command-line flag -> TrainConfig field, for the flags that map one to one.
_FIELDS = {"schedule": "schedule", "start": "start", "end": "end", "profile": "profile", "multiple": "multiple",
           "mixer": "mixer", "seed": "seed", "steps": "steps", "dtype": "dtype", "batch_size": "batch_size",
           "grad_accum": "grad_accum", "lr": "lr", "source": "source", "eval_interval": "eval_interval",
           "ckpt_interval": "ckpt_interval", "threads": "threads", "out": "out_dir", "peak_flops": "peak_flops"}
EXIT_INTERRUPTED = 130


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("train", help="train a (tapered) LM from a preset",
                              description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="tiny", help="micro | tiny | 440m | 760m | 1.3b (interp/presets.py)")
    p.add_argument("--out", required=True, help="run directory, e.g. runs/cosine-1.5-0.5")
    width = p.add_argument_group("MLP width over depth (interp.schedules.WidthSpec)")
    width.add_argument("--schedule", choices=("uniform", "linear", "cosine", "sigmoid"))
    width.add_argument("--start", type=float, help="first layer's width as a multiple of d_ff (e.g. 1.5)")
    width.add_argument("--end", type=float, help="last layer's width as a multiple of d_ff (e.g. 0.5)")
    width.add_argument("--profile", help="layer-group profile: wider-early | wider-middle | wider-late | uniform")
    width.add_argument("--multiple", type=int, help="round widths to this multiple (default 16)")
    p.add_argument("--mixer", help="token mixer: attention | gated_attention | ... (interp.model.mixers)")
    p.add_argument("--source", help="corpus name (wiki, shakespeare), a text file or a folder")
    p.add_argument("--seed", type=int)
    p.add_argument("--steps", type=int)
    p.add_argument("--batch-size", type=int, help="sequences per optimizer step, over all ranks")
    p.add_argument("--grad-accum", type=int)
    p.add_argument("--lr", type=float, help="peak learning rate")
    p.add_argument("--dtype", choices=("fp32", "bf16", "auto"))
    p.add_argument("--eval-interval", type=int)
    p.add_argument("--ckpt-interval", type=int)
    p.add_argument("--keep-step-checkpoints", action="store_true", help="keep checkpoints/step_NNNNNN/")
    p.add_argument("--threads", type=int, help="CPU threads per rank (default: all cores / ranks)")
    p.add_argument("--peak-flops", type=float, help="per-device peak FLOP/s, to log MFU")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its train_state.pt")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=JSON",
                   help="any other TrainConfig field, e.g. --set warmup_steps=100 --set 'betas=[0.9,0.99]'")
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace):
    """The TrainConfig these arguments describe (no training): testable without a shell."""
    from interp.training import TrainConfig

    if (args.start is not None or args.end is not None) and args.schedule in (None, "uniform"):
        raise SystemExit("interp train: --start/--end need --schedule linear|cosine|sigmoid")
    if args.profile and args.schedule:
        raise SystemExit("interp train: give either --profile or --schedule, not both")
    overrides = {field: getattr(args, flag) for flag, field in _FIELDS.items() if getattr(args, flag) is not None}
    if args.resume:
        overrides["resume"] = True
    if args.keep_step_checkpoints:
        overrides["keep_step_checkpoints"] = True
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"interp train: --set {item!r} must look like FIELD=VALUE (VALUE as JSON)")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value  # a bare string
    try:
        return TrainConfig.from_preset(args.preset, **overrides)
    except ValueError as err:
        raise SystemExit(f"interp train: {err}") from err


def run(args: argparse.Namespace) -> int:
    from interp.training import Trainer

    cfg = config_from_args(args)
    try:
        trainer = Trainer(cfg)
    except ValueError as err:  # TrainConfig.validate: the message names the field and the fix
        raise SystemExit(f"interp train: {err}") from err
    result = trainer.run()
    return EXIT_INTERRUPTED if result["status"] == "interrupted" else 0


if __name__ == "__main__":  # `python -m interp.cli.train ...` (e.g. under torchrun)
    from interp.cli import main

    sys.exit(main(["train", *sys.argv[1:]]))
