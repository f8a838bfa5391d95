"""`interp sweep`: a permanent alias of `interp experiment sweep`, the schedule x ratio sweep
(paper Table 1) as one resumable command.

    interp experiment sweep --preset tiny                     # 16 variants x 3 seeds (was: interp sweep)
    interp experiment sweep --preset tiny --seeds 3 --steps 200
    torchrun --nproc_per_node=8 -m interp.cli.sweep --preset 440m --set grad_accum=1   # each run is DDP

The parser, the runner and the arguments shared by every training experiment live in interp/cli/experiment.py
(`add_experiment_arguments`, `config_from_args`, `run_analysis`); this module only registers the old name.
"""

from __future__ import annotations

import argparse
import sys

from interp.cli.experiment import add_parser


def register(subparsers: argparse._SubParsersAction) -> None:
    add_parser(subparsers, "sweep", "sweep")  # flags, runner and errors ("interp sweep: ...") as the experiment's


if __name__ == "__main__":  # `python -m interp.cli.sweep ...` (e.g. under torchrun)
    from interp.cli import main

    sys.exit(main(["sweep", *sys.argv[1:]]))
