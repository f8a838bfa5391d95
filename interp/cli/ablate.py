"""`interp ablate <kind>`: capacity ablations, one sub-command per kind.

    interp ablate groups --preset tiny --seeds 3     # layer-group ablation (paper Figure 2), trains 12 runs
    interp ablate pretrained --model smollm2-135m    # remove MLP neurons of a pretrained model
    interp ablate architectures --preset tiny        # uniform vs cosine 1.5->0.5 per token mixer
    interp ablate rivals --preset tiny --seeds 5     # the paper's taper vs the rival depth profiles, 25 runs
    torchrun --nproc_per_node=8 -m interp.cli.ablate groups --preset 440m --set grad_accum=1

`groups`, `architectures` and `rivals` are resumable like `interp sweep` (same shared flags, same exit status:
0 done, 1 a run failed, 130 interrupted). Every kind's flags are generated from its analysis Config
(interp._util.config.add_arguments). Adding a kind: write `_register_<kind>(kinds)` that adds its
parser and sets `func`, and append it to KINDS.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from interp._util.config import add_arguments, dataclass_from_args
from interp._util.paths import FIGURES_DIR
from interp.cli.sweep import add_experiment_arguments, check_output_dir, run_analysis


# -- groups ----------------------------------------------------------------------------------------
def _register_groups(kinds: argparse._SubParsersAction) -> None:
    from analyses import group_ablation

    p = kinds.add_parser("groups", help="uniform vs wider-early/-middle/-late at equal parameters (paper Fig. 2)",
                         description="Train the layer-group ablation (resumable), tabulate mean and paired "
                                     "differences with 95% t-CIs, plot figures/group_ablation.png.")
    add_experiment_arguments(p, group_ablation)
    p.set_defaults(func=run_groups, command="ablate groups")  # errors read "interp ablate groups: ..."


def run_groups(args: argparse.Namespace) -> int:
    from analyses import group_ablation

    return run_analysis(group_ablation, args, command="interp ablate groups")


# -- pretrained ------------------------------------------------------------------------------------
def _register_pretrained(kinds: argparse._SubParsersAction) -> None:
    from analyses import pretrained_ablation

    p = kinds.add_parser("pretrained", help="remove early/middle/late MLP neurons (or whole MLPs) of a pretrained "
                                            "model; change in held-out loss")
    add_arguments(p, pretrained_ablation.Config)
    p.add_argument("--figures-dir", type=Path, default=FIGURES_DIR,
                   help=f"where the table and the figure go (default {FIGURES_DIR})")
    p.set_defaults(func=run_pretrained, command="ablate pretrained")


def pretrained_config(args: argparse.Namespace):
    """The interp.ablations.AblationConfig these arguments describe, validated (no model is loaded)."""
    from analyses import pretrained_ablation as pa

    cfg = dataclass_from_args(pa.Config, args)
    cfg.validate()  # ValueError naming the flag: interp.cli.main prints it as one line, exit 2
    return cfg


def run_pretrained(args: argparse.Namespace) -> int:
    """`interp ablate pretrained`: run, store the table (+ sidecar), draw the figure, print the summary."""
    import pandas as pd

    from analyses import pretrained_ablation as pa
    from analyses import read_table

    cfg = pretrained_config(args)
    check_output_dir(args.figures_dir, "--figures-dir")
    pa.compute(cfg, args.figures_dir)  # a bad model spec, text or file: ValueError / OSError, one line
    paths = pa.render(args.figures_dir)
    summary = pa.summarize(read_table(args.figures_dir, pa.TABLE, pa.NAME))
    with pd.option_context("display.width", 200, "display.float_format", "{:+.4f}".format):
        print(summary.to_string())
    print(pa.verdict(summary))
    for path in [Path(args.figures_dir) / pa.TABLE, *paths]:
        print(f"wrote {path}")
    return 0


# -- architectures ---------------------------------------------------------------------------------
def _register_architectures(kinds: argparse._SubParsersAction) -> None:
    from analyses import architectures

    p = kinds.add_parser("architectures", help="uniform vs cosine 1.5->0.5 for each token mixer",
                         description="Train (resumable) and plot figures/architectures.png.")
    add_experiment_arguments(p, architectures)  # the shared experiment flags + --mixers, --budget
    p.set_defaults(func=run_architectures, command="ablate architectures")  # errors read "interp ablate architectures: ..."


def print_architectures(summary) -> None:
    cols = ["mixer", "variant", "n_seeds", "params", "val_ppl_mean", "rel_val_ppl_pct_mean",
            "rel_val_ppl_pct_ci_low", "rel_val_ppl_pct_ci_high"]
    print(summary[cols].to_string(index=False, float_format=lambda x: f"{x:.2f}"))


def run_architectures(args: argparse.Namespace, command: str = "interp ablate architectures") -> int:
    from analyses import architectures

    def estimate(cfg) -> str:
        return f"estimated training time at the measured CPU speeds: {architectures.estimate_minutes(cfg):.0f} min"

    return run_analysis(architectures, args, command, show=print_architectures, plan_note=estimate)


# -- rivals ----------------------------------------------------------------------------------------
def _register_rivals(kinds: argparse._SubParsersAction) -> None:
    from analyses import rival_profiles

    p = kinds.add_parser("rivals", help="uniform vs cosine 1.5->0.5 vs the reverse taper, middle-heavy and x-shaped "
                                        "profiles at equal parameters (issue 14)",
                         description="Train the rival width profiles (resumable), tabulate mean and paired "
                                     "differences vs uniform and vs cosine 1.5->0.5 with 95% t-CIs, plot "
                                     "figures/rival_profiles.png.")
    add_experiment_arguments(p, rival_profiles)
    p.set_defaults(func=run_rivals, command="ablate rivals")  # errors read "interp ablate rivals: ..."


def print_rivals(summary) -> None:
    """One line per variant: ppl mean [CI], paired change vs uniform and vs cosine 1.5->0.5 [CI]."""
    def ci(prefix: str, suffix: str = "") -> list[str]:
        return [f"{prefix}_{s}{suffix}" for s in ("mean", "ci_low", "ci_high")]

    cols = ["variant", "n_seeds", *ci("val_ppl"), *ci("rel_val_ppl_pct"), *ci("rel_val_ppl_pct", "_vs_cosine")]
    print(summary[cols].to_string(index=False, float_format=lambda x: f"{x:.2f}"))


def run_rivals(args: argparse.Namespace) -> int:
    from analyses import rival_profiles

    return run_analysis(rival_profiles, args, command="interp ablate rivals", show=print_rivals)


# One registrar per kind, in --help order.
KINDS: list[Callable[[argparse._SubParsersAction], None]] = [_register_groups, _register_pretrained,
                                                              _register_architectures, _register_rivals]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("ablate",
                              help="capacity ablations: `interp ablate groups|pretrained|architectures|rivals ...`",
                              description=__doc__.split("\n")[0])
    kinds = p.add_subparsers(dest="kind", required=True, metavar="KIND")
    for add_kind in KINDS:
        add_kind(kinds)


if __name__ == "__main__":  # `python -m interp.cli.ablate groups ...` (e.g. under torchrun)
    from interp.cli import main

    sys.exit(main(["ablate", *sys.argv[1:]]))
