"""`interp taper derive`: widths from a measured per-layer profile (interp.widths.derived).

    interp taper derive --from results/probe-smollm2-135m.parquet --measure rho_mlp --transform one_minus \\
        --monotone --layers 6 --d-ff 1024 --out widths/novelty.json
    interp train --preset tiny --width-file widths/novelty.json --out runs/derived

Every flag comes from interp.widths.DeriveConfig.
"""

from __future__ import annotations

import argparse
import sys

from interp._util.config import add_arguments, dataclass_from_args
from interp.cli import check_output_file


def register(subparsers: argparse._SubParsersAction) -> None:
    from interp.widths import DeriveConfig

    p = subparsers.add_parser("taper", help="derive MLP widths from a measured per-layer profile",
                              description=__doc__.split("\n")[0])
    kinds = p.add_subparsers(dest="taper_command", required=True)
    derive = kinds.add_parser("derive", help="a probe table's per-layer measure -> budget-exact widths (+ file)",
                              description="Read one measure per layer from a probe table, turn it into "
                                          "importance, and print (and save) budget-exact widths.")
    add_arguments(derive, DeriveConfig)
    derive.set_defaults(func=run_derive)


def run_derive(args: argparse.Namespace) -> int:
    from interp.widths import DeriveConfig, derive, format_widths, save_widths

    cfg = dataclass_from_args(DeriveConfig, args)
    if not cfg.table:
        raise SystemExit("interp taper derive: --from TABLE is required (a probe table: .parquet or .csv)")
    if cfg.out:
        check_output_file(cfg.out, "--out")
    doc = derive(cfg)
    print(format_widths(doc))
    if doc.get("warning"):
        print(f"[taper] warning: {doc['warning']}", file=sys.stderr)
    if cfg.out:
        print(f"[taper] wrote {save_widths(doc, cfg.out)}")
    return 0
