"""`interp <command>`: a thin dispatcher. Each command lives in its own module in this package and
exposes `register(subparsers)`, which adds its parser and sets `func(args) -> int`. Commands parse
arguments into a config and call the library; they hold no analysis logic."""

from __future__ import annotations

import argparse
import importlib
import sys

# Module names under interp.cli, in the order they appear in --help.
COMMAND_MODULES = ("train", "probe", "models", "ablate", "sweep", "batch", "figures")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="interp",
        description="Tapered Language Models toolkit: train, probe, ablate, sweep, batch-analyse, plot.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"interp.cli.{name}")
        except ModuleNotFoundError as err:
            if err.name == f"interp.cli.{name}":
                continue  # command not built yet
            raise
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
