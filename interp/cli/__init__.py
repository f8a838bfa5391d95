"""`interp <command>`: a thin dispatcher. Each command lives in its own module in this package and
exposes `register(subparsers)`, which adds its parser and sets `func(args) -> int`. Commands parse
arguments into a config and call the library; they hold no analysis logic.

Errors (interp._util.errors): an expected failure of any command (bad input, a file, a missing package)
is one line `interp <command>: <message>` on stderr and exit status 2; `--debug` (or INTERP_DEBUG=1) shows
its traceback. Anything else is a bug and keeps its traceback."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback

from interp._util import cpu_kernels
from interp._util.errors import EXIT_INTERRUPTED, EXIT_USAGE, USER_ERRORS, debug_requested, one_line

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a tool killed by a closed pipe

# Module names under interp.cli, in the order they appear in --help.
COMMAND_MODULES = ("train", "probe", "models", "ablate", "sweep", "batch", "eval", "figures", "export", "taper", "data")


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
    for sub in _all_subparsers(subparsers):
        sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                         help=f"show the traceback of an error (also: {'INTERP_DEBUG'}=1)")
    return parser


def _all_subparsers(action: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:
    """Every (sub-)sub-command parser, once each (aliases share a parser)."""
    found: list[argparse.ArgumentParser] = []
    for parser in action.choices.values():
        if any(parser is p for p in found):
            continue
        found.append(parser)
        for nested in parser._subparsers._group_actions if parser._subparsers else ():
            if isinstance(nested, argparse._SubParsersAction):
                found.extend(p for p in _all_subparsers(nested) if not any(p is q for q in found))
    return found


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    debug = debug_requested(argv)
    command = " ".join(["interp", *(str(getattr(args, k)) for k in ("command",) if getattr(args, k, None))])
    try:
        cpu_kernels.check_at_start()  # a bad or ineffective INTERP_CPU_KERNELS fails before the command does anything
        if getattr(args, "offline", False):
            from interp._util.offline import set_offline

            set_offline(True)
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `interp models | head`: the reader left; say nothing, as other Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except SystemExit as stop:  # commands raise SystemExit("interp X: why") for their own usage errors
        if isinstance(stop.code, str):
            if debug:
                traceback.print_exc()
            print(stop.code, file=sys.stderr)
            return EXIT_USAGE
        raise
    except USER_ERRORS as err:
        if debug:
            traceback.print_exc()
        message = one_line(err)
        print(message if message.startswith("interp ") else f"{command}: {message}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
