"""`interp ablate <kind>`: capacity ablations, one sub-command per kind.

    interp ablate groups --preset tiny --seeds 3     # layer-group ablation (paper Figure 2), trains 12 runs
    torchrun --nproc_per_node=8 -m interp.cli.ablate groups --preset 440m --set grad_accum=1

`groups` is resumable like `interp sweep` (same flags, same exit status: 0 done, 1 a run failed,
130 interrupted). Adding a kind: write `_register_<kind>(kinds)` that adds its parser and sets
`func`, and append it to KINDS.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from interp.cli.sweep import add_experiment_arguments, run_analysis


def _register_groups(kinds: argparse._SubParsersAction) -> None:
    p = kinds.add_parser("groups", help="uniform vs wider-early/-middle/-late at equal parameters (paper Fig. 2)",
                         description="Train the layer-group ablation (resumable), tabulate mean and paired "
                                     "differences with 95%% t-CIs, plot figures/group_ablation.png.")
    add_experiment_arguments(p, seeds=3)
    p.set_defaults(func=run_groups)


def run_groups(args: argparse.Namespace) -> int:
    from analyses import group_ablation

    return run_analysis(group_ablation, args, command="interp ablate groups")


# One registrar per kind, in --help order.
def _register_pretrained(kinds: argparse._SubParsersAction) -> None:
    p = kinds.add_parser("pretrained", help="remove early/middle/late MLP neurons (or whole MLPs) of a pretrained "
                                            "model; change in held-out loss")
    from analyses.pretrained_ablation import Config, run_from_args

    Config.add_arguments(p)
    p.set_defaults(func=run_from_args)


def _register_architectures(kinds: argparse._SubParsersAction) -> None:
    from analyses import architectures

    p = kinds.add_parser("architectures", help="uniform vs cosine 1.5->0.5 for each token mixer",
                         description="Train (resumable) and plot figures/architectures.png.")
    architectures.add_arguments(p)  # shared experiment flags + --mixers
    p.set_defaults(func=run_architectures)


def run_architectures(args: argparse.Namespace) -> int:
    from analyses import architectures

    return architectures.run_cli(args, command="interp ablate architectures")


KINDS: list[Callable[[argparse._SubParsersAction], None]] = [_register_groups, _register_pretrained,
                                                              _register_architectures]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("ablate", help="capacity ablations: `interp ablate groups|pretrained|architectures ...`",
                              description=__doc__.split("\n")[0])
    kinds = p.add_subparsers(dest="kind", required=True, metavar="KIND")
    for add_kind in KINDS:
        add_kind(kinds)


if __name__ == "__main__":  # `python -m interp.cli.ablate groups ...` (e.g. under torchrun)
    from interp.cli import main

    sys.exit(main(["ablate", *sys.argv[1:]]))
