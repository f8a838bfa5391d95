"""`interp report`: figures/REPORT.md and REPORT.html, every claim of the paper and of the literature we test,
with our measurement, its 95% CI, the regime and a verdict by one stated rule (analyses/report.py). Read from
the stored tables in a second; `make figures` regenerates it too."""

from __future__ import annotations

import argparse

from interp._util.paths import FIGURES_DIR
from interp.cli import add_out_argument, check_output_dir


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("report", help="write figures/REPORT.md and REPORT.html from the stored tables",
                                   description=__doc__)
    add_out_argument(parser, "folder holding the tables; REPORT.md and REPORT.html are written there",
                     default=FIGURES_DIR)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from analyses import report

    if not args.out.is_dir():
        raise ValueError(f"{args.out_flag} {args.out}: no such folder of tables (the default is the repository's "
                         "figures/)")
    check_output_dir(args.out, args.out_flag)
    for path in report.render(args.out):
        print(f"[report] wrote {path}")
    return 0
