"""The error contract between the library and the CLI.

A library function that meets bad input raises `InputError` (a ValueError, so `except ValueError` keeps
working) whose message names the file, the field and the fix. `interp.cli.main` turns it, and the other
*expected* failures listed in `USER_ERRORS` (a missing or unreadable file, a missing optional package), into
one line on stderr and exit status 2; anything else is a bug and keeps its traceback. `--debug` (or
INTERP_DEBUG=1) shows the traceback of an expected failure too.
"""

from __future__ import annotations

import os
from pathlib import Path

DEBUG_ENV = "INTERP_DEBUG"
EXIT_USAGE = 2         # bad input: nothing was computed or written
EXIT_INTERRUPTED = 130  # a signal: state saved, rerun with --resume


class InputError(ValueError):
    """Bad input (a file, a field, a flag); the message names what is wrong and how to fix it."""

    def __init__(self, message: str, *, path: str | os.PathLike | None = None, field: str | None = None,
                 fix: str | None = None) -> None:
        parts = [f"{Path(path)}: " if path is not None else "", f"{field}: " if field else "", message]
        if fix:
            parts.append(f" ({fix})")
        super().__init__("".join(parts))
        self.path, self.field, self.fix = path, field, fix


# Expected failures of a command: bad input and the file system. ModuleNotFoundError: an optional
# package (nnsight, lm-eval, ...) is missing; its message is rewritten with the pip command where known.
USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, OSError, ModuleNotFoundError, EOFError)


def debug_requested(argv: list[str] | None = None) -> bool:
    """True when tracebacks of expected failures are wanted (--debug anywhere, or INTERP_DEBUG=1)."""
    return os.environ.get(DEBUG_ENV, "").strip() not in ("", "0", "false") or "--debug" in (argv or [])


def one_line(err: BaseException) -> str:
    """The error as one line (whitespace collapsed): its message, or its type when it has none."""
    return " ".join((str(err) or type(err).__name__).split())
