"""`interp report`: REPORT.md and REPORT.html, every claim of the paper and of the literature we test, with our
measurement, its 95% interval, the regime, links to its figure and table, and a verdict by one stated rule
(analyses/report.py). Read from the stored tables (by default the repository's figures/) in a second, and written
to ./report/ of the working directory unless --out says otherwise; `make figures` writes the repository's
figures/REPORT.md (`interp report --out figures`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from interp._util.config import add_arguments, dataclass_from_args
from interp.cli import add_out_argument, check_output_dir

REPORT_DIR = Path("report")   # relative to the working directory: never into the repository unless asked
REPORT_TEXT = "./report/ of the working directory"


def register(subparsers: argparse._SubParsersAction) -> None:
    from analyses import report

    parser = subparsers.add_parser("report", help="write REPORT.md and REPORT.html (every claim, its verdict) from "
                                                  "the stored tables", description=__doc__)
    add_arguments(parser, report.Config)
    add_out_argument(parser, "folder the report is written to (REPORT.md, REPORT.html)", default=REPORT_DIR,
                     default_text=REPORT_TEXT)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from analyses import report, resolve_root

    cfg = dataclass_from_args(report.Config, args)
    tables = resolve_root(cfg.tables)
    if not tables.is_dir():
        raise ValueError(f"--tables {cfg.tables}: no such folder of tables (the default is the repository's "
                         "figures/; give the folder that holds the analyses' CSV tables)")
    check_output_dir(args.out, args.out_flag)
    for path in report.render(tables, args.out):
        print(f"[report] wrote {path}")
    return 0
