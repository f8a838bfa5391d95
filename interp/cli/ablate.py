"""`interp ablate MODEL`: remove MLP neurons (or whole MLPs) of a model and measure the change in held-out loss.

    interp ablate smollm2-135m                          # early/middle/late thirds of SmolLM2 -> ./results/
    interp ablate runs/cosine --out results/cosine      # any model kind, ours included
    interp figures --recompute --only pretrained_ablation   # the committed figures/pretrained_capacity_ablation.*
    interp ablate runs/a runs/b gpt2 --jobs 2           # many models into one resumable table (--table)

Several MODELs, or --executor / --jobs, run the ablation as a job of interp.jobs (a model per target, local
processes, torchrun ranks or a Slurm array: docs/scale.md) into one resumable table, --table (default
OUT/ablation.parquet); `interp jobs status TABLE` and `interp jobs merge TABLE` work on it.

MODEL comes first: a registry name, HF dir, .gguf file, hub id or TransformerLens name (MODEL@REV for a revision),
or one of our checkpoints (a folder named like a KIND below: write ./groups). It trains nothing; the table and the
figure go to --out, by default ./results/ of the working directory, never into the repository unless asked.
`interp ablate MODEL --help` lists its options (interp.ablations.AblationConfig).

Permanent aliases (interp.cli's docstring says why): `interp ablate pretrained --model MODEL` (of `interp ablate
MODEL`) and `interp ablate groups|architectures|rivals` (of `interp experiment groups|architectures|rivals`). They
are why the first word is a sub-command: _ModelOrKind sends a KIND to its parser and any other word to MODEL's.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from interp._util.config import add_arguments, dataclass_from_args
from interp.cli import add_out_argument, check_output_dir
from interp.cli.experiment import RESULTS_DIR, RESULTS_TEXT, add_parser, run_named

MODEL = "MODEL"  # the sub-parser that takes any first word that is not a KIND (`interp ablate MODEL ...`)
KINDS = ("pretrained", "groups", "architectures", "rivals")  # older sub-commands, permanent aliases
OUT_HELP = ("folder of the table (pretrained_capacity_ablation.csv + .meta.json) and the figure; the repository's "
            "figures/ only when given (or through `interp figures --recompute`)")


class _AnyWord(Mapping):
    """The sub-parsers by name, as the choices argparse checks the first word against: every word passes (one
    that is not a KIND is a MODEL)."""

    def __init__(self, parsers: dict) -> None:
        self._parsers = parsers

    def __getitem__(self, name: str) -> argparse.ArgumentParser:
        return self._parsers[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._parsers)

    def __len__(self) -> int:
        return len(self._parsers)

    def __contains__(self, name: object) -> bool:
        return True


class _ModelOrKind(argparse._SubParsersAction):
    """`interp ablate KIND ...` for the older sub-commands, `interp ablate MODEL ...` for any other first word."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.choices = _AnyWord(self._name_parser_map)

    def __call__(self, parser, namespace, values, option_string=None):
        if values and values[0] not in self._name_parser_map:
            values = [MODEL, *values]
        super().__call__(parser, namespace, values, option_string)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("ablate", help="remove MLP neurons (or whole MLPs) of a model: `interp ablate MODEL`",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    kinds = p.add_subparsers(dest="kind", required=True, metavar="MODEL | KIND", action=_ModelOrKind,
                             title="MODEL, or one of the older KINDs (aliases)")
    model = kinds.add_parser(MODEL, prog=p.prog, usage=f"{p.prog} MODEL [options]",  # no help=: not listed as a KIND
                             description=__doc__.split("\n")[0])
    model.add_argument("model", metavar="MODEL", nargs="+", help=_model_help() + "; several: one table of all")
    _add_ablation_arguments(model, exclude=("model",))
    model.add_argument("--table", default=None, metavar="FILE",
                       help="the resumable table of several models (default: OUT/ablation.parquet); given with one "
                            "MODEL, that model goes into it")
    from interp.cli.jobs import add_executor_arguments

    add_executor_arguments(model)
    model.set_defaults(func=run_model, command="ablate")  # errors read "interp ablate: ..."
    pretrained = kinds.add_parser("pretrained", help="alias of `interp ablate MODEL` (--model MODEL)",
                                  description="Alias of `interp ablate MODEL`: "
                                              "`interp ablate pretrained --model M` is `interp ablate M`.")
    _add_ablation_arguments(pretrained)
    pretrained.set_defaults(func=run_model, command="ablate pretrained")
    for name in KINDS[1:]:
        add_parser(kinds, name, f"ablate {name}")


def _model_help() -> str:
    import dataclasses

    from interp.ablations.config import AblationConfig

    return next(f.metadata["help"] for f in dataclasses.fields(AblationConfig) if f.name == "model")


def _add_ablation_arguments(p: argparse.ArgumentParser, exclude: tuple[str, ...] = ()) -> None:
    from analyses import pretrained_ablation

    add_arguments(p, pretrained_ablation.Config, exclude=exclude)
    add_out_argument(p, OUT_HELP, default=RESULTS_DIR, default_text=RESULTS_TEXT, aliases=("--figures-dir",))


def pretrained_config(args: argparse.Namespace):
    """The interp.ablations.AblationConfig these arguments describe, validated (no model is loaded)."""
    from analyses import pretrained_ablation as pa

    cfg = dataclass_from_args(pa.Config, args)
    cfg.validate()  # ValueError naming the flag: interp.cli.main prints it as one line, exit 2
    return cfg


def run_model(args: argparse.Namespace) -> int:
    """`interp ablate MODEL`: run, store the table (+ sidecar), draw the figure, print the summary."""
    import pandas as pd

    from analyses import pretrained_ablation as pa
    from analyses import read_table

    models = args.model if isinstance(args.model, list) else [args.model]
    if (len(models) > 1 or getattr(args, "table", None) is not None or getattr(args, "executor", None) is not None
            or getattr(args, "jobs", None) is not None):   # --table with one model: its resumable table, not ignored
        return run_many(args, models)
    args.model = models[0]
    cfg = pretrained_config(args)
    out = Path(args.out)
    check_output_dir(out, args.out_flag)
    pa.compute(cfg, out)  # a bad model spec, text or file: ValueError / OSError, one line
    paths = pa.render(out)
    summary = pa.summarize(read_table(out, pa.TABLE, pa.NAME))
    with pd.option_context("display.width", 200, "display.float_format", "{:+.4f}".format):
        print(summary.to_string())
    print(pa.verdict(summary))
    for path in [out / pa.TABLE, *paths]:
        print(f"wrote {path}")
    return 0


def run_many(args: argparse.Namespace, models: list[str]) -> int:
    """Several models (or an executor): interp.ablations.many, one table; a summary per model."""
    import pandas as pd

    from analyses import pretrained_ablation as pa
    from interp.ablations.many import ManyConfig
    from interp.ablations.many import run_many as run
    from interp.cli.jobs import executor_from_args

    args.model = models[0]
    cfg = ManyConfig(models=models, ablation=pretrained_config(args), execution=executor_from_args(args),
                     out=str(args.table or Path(args.out) / "ablation.parquet"))
    result = run(cfg)
    if result.executor == "slurm" and result.table is None and not result.failed_tasks:
        print(f"[ablate] submitted Slurm job {result.job_ids[0].split('_')[0]}; `interp jobs status {cfg.out}`, "
              f"then `interp jobs merge {cfg.out}`")
        return 0
    table = result.table
    for spec, rows in ([] if table is None else table[table["status"] == "ok"].groupby("model_spec", sort=False)):
        with pd.option_context("display.width", 200, "display.float_format", "{:+.4f}".format):
            print(f"{spec}:\n{pa.summarize(rows).to_string()}")
    for index, error in result.failed_tasks:
        print(f"interp ablate: task {index} did not finish: {error}; rerun the same command", file=sys.stderr)
    for spec, error in result.failed:
        print(f"interp ablate: {spec} failed: {error}", file=sys.stderr)
    if table is not None:
        print(f"wrote {cfg.out}")
    return 0 if result.ok else 1


def run_architectures(args: argparse.Namespace, command: str = "interp ablate architectures") -> int:
    """`interp ablate architectures` (alias of `interp experiment architectures`)."""
    return run_named("architectures", args, command)


if __name__ == "__main__":  # `python -m interp.cli.ablate groups ...` (e.g. under torchrun)
    from interp.cli import main

    sys.exit(main(["ablate", *sys.argv[1:]]))
