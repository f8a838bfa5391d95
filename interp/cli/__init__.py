"""`interp <command>`: a thin dispatcher. Each command lives in its own module in this package and
exposes `register(subparsers)`, which adds its parser and sets `func(args) -> int`. Commands parse
arguments into a config and call the library; they hold no analysis logic.

Errors (interp._util.errors): an expected failure of any command (bad input, a file, a missing package)
is one line `interp <command>: <message>` on stderr and exit status 2; `--debug` (or INTERP_DEBUG=1) shows
its traceback. Anything else is a bug and keeps its traceback.

Outputs: every command names where it writes with `--out` (a file or a folder, as its --help says), added by
`add_out_argument`; its older names (--figures-dir; export's --hf) stay as permanent aliases.

Older command names are permanent aliases too (README, "Experiments and long runs"): `interp sweep`, `interp ablate
groups|architectures|rivals`, `interp eval-experiment` build the same parser as the `interp experiment NAME` they name
(interp.cli.experiment.add_parser), and `interp ablate pretrained --model M` is `interp ablate M` (interp.cli.ablate).
They cost a parser each, and scripts, the bad-input cases and the figures' notes use them, so none is removed."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import traceback
from collections.abc import Iterable
from pathlib import Path

from interp._util import cpu_kernels
from interp._util.children import exit_status, stop_signals
from interp._util.errors import EXIT_USAGE, USER_ERRORS, debug_requested, one_line
from interp._util.io import check_output

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a tool killed by a closed pipe

# Module names under interp.cli, in the order they appear in --help.
COMMAND_MODULES = ("train", "probe", "models", "experiment", "ablate", "sweep", "batch", "eval", "figures", "export",
                   "taper", "data", "report", "jobs")


class OutPath(argparse.Action):
    """An output flag: stores the path, and the name the user typed as `<dest>_flag`, so an error about the
    destination names the flag that was given (--out, or an older alias)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        setattr(namespace, f"{self.dest}_flag", option_string)


def add_out_argument(parser: argparse.ArgumentParser, help: str, *, default: Path | None = None,
                     aliases: Iterable[str] = (), metavar: str = "DIR", required: bool = False,
                     flag: str = "--out", dest: str = "out", default_text: str | None = None) -> None:
    """The output flag of a command: `--out` (a file or a folder, as `help` says), its older names in `aliases`
    (permanent; --help names them). args.<dest> is a Path, args.<dest>_flag the name given.
    default_text: how --help shows the default (e.g. "./results/ of the working directory")."""
    aliases = tuple(aliases)
    shown = f" (default: {default_text or default})" if default is not None else ""
    note = f" (also: {', '.join(aliases)}, the older name)" if aliases else ""
    parser.add_argument(flag, *aliases, dest=dest, type=Path, default=default, required=required, metavar=metavar,
                        action=OutPath, help=help + shown + note)
    parser.set_defaults(**{f"{dest}_flag": flag})


def check_output_dir(path: str | Path, flag: str) -> None:
    """Refuse an output folder that cannot be written (a file on its path, a link, no write permission) before
    any computation, instead of after hours of training; creates nothing."""
    check_output(path, flag, folder=True)


def check_output_file(path: str | Path, flag: str) -> None:
    """Refuse an output file that cannot be written (a folder or a link at its name, a file on its path, no
    write permission, read-only) before any computation; creates nothing."""
    check_output(path, flag, folder=False)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="interp",
        description="Tapered Language Models toolkit: train, probe, ablate, run experiments, batch-analyse, plot.")
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
        # a sectioned --help (interp train) lists it under "output"; argparse keeps its groups in _action_groups
        target = next((g for g in sub._action_groups if g.title == "output"), sub)
        target.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
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
        with stop_signals():  # SIGTERM stops a command as Ctrl-C does: Interrupted, then exit 143 (130 for SIGINT)
            return int(args.func(args) or 0)
    except KeyboardInterrupt as stop:
        name = getattr(stop, "signum", None) and signal.Signals(stop.signum).name
        kept = getattr(stop, "kept", None) or "what finished is kept, rerun to go on"   # a command may say better
        print(f"{command}: interrupted{f' by {name}' if name else ''}; {kept}", file=sys.stderr)
        return exit_status(stop)
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
