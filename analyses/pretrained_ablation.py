"""Capacity ablation of a pretrained model (beyond the paper): is late MLP capacity worth less?

On SmolLM2-135M (30 layers) we remove 10/25/50% of each layer's MLP neurons in the early, middle or
late third (lowest contribution, and random as a control), and skip each layer's whole MLP one at a
time, measuring the change in held-out loss (interp.ablations has the definitions). If the paper is
right that late layers mostly reinforce the stream, late removals should cost less.

Text: the held-out wiki split cut into consecutive 128-token sequences; the first 32 score neurons,
the next 16 (disjoint) evaluate every condition (see interp.ablations.AblationConfig for the budget).
`interp ablate pretrained --model smollm2-135m` runs it (the CLI calls add_arguments / run_from_args).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analyses import read_table, write_table
from interp._util.paths import FIGURES_DIR
from interp.ablations.config import DTYPE_NAMES, GROUPS, SELECTIONS, AblationConfig

NAME = "pretrained_ablation"
HEAVY = False  # 67 forward passes of SmolLM2 (~4 min on 2 cores): part of `make figures`
TABLE = "pretrained_capacity_ablation.csv"
FIGURE = "pretrained_capacity_ablation.png"
OUTPUTS = [TABLE, "pretrained_capacity_ablation.meta.json", FIGURE]


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(v) for v in text.split(",") if v.strip())


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(",") if v.strip())


def _names(choices: tuple[str, ...]):
    def parse(text: str) -> tuple[str, ...]:
        names = tuple(v.strip() for v in text.split(",") if v.strip())
        bad = [n for n in names if n not in choices]
        if bad:
            raise argparse.ArgumentTypeError(f"{bad} not in {choices}")
        return names
    return parse


def _skip_layers(text: str) -> tuple[int, ...] | None:
    return None if text == "all" else () if text == "none" else _ints(text)


@dataclass
class Config(AblationConfig):
    """The library config (interp.ablations.AblationConfig), with its command-line form."""

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """Arguments of `interp ablate pretrained`; defaults are the Config defaults."""
        d = Config()
        parser.add_argument("--model", default=d.model, help="registry name, HF dir, .gguf file or hub id")
        parser.add_argument("--text", default=d.text,
                            help="corpus name (wiki, shakespeare) or UTF-8 text file; default: held-out wiki split")
        parser.add_argument("--seq-len", type=int, default=d.seq_len, help="tokens per sequence")
        parser.add_argument("--score-sequences", type=int, default=d.score_sequences,
                            help="sequences (from the start of the text) that score the neurons")
        parser.add_argument("--eval-sequences", type=int, default=d.eval_sequences,
                            help="the next sequences, on which every condition's loss is measured")
        parser.add_argument("--batch-size", type=int, default=d.batch_size)
        parser.add_argument("--fractions", type=_floats, default=d.fractions, metavar="F[,F]",
                            help="fractions of each layer's neurons to remove (default 0.1,0.25,0.5)")
        parser.add_argument("--seeds", type=_ints, default=d.seeds, metavar="S[,S]",
                            help="seeds of the random-selection control (default 0,1,2)")
        parser.add_argument("--groups", type=_names(GROUPS), default=d.groups, metavar="G[,G]",
                            help=f"layer thirds to ablate, from {','.join(GROUPS)}")
        parser.add_argument("--selections", type=_names(SELECTIONS), default=d.selections, metavar="S[,S]",
                            help=f"neuron selections, from {','.join(SELECTIONS)}")
        parser.add_argument("--skip-layers", type=_skip_layers, default=d.skip_layers, metavar="all|none|L[,L]",
                            help="layers whose whole MLP is skipped, one at a time (default: all)")
        parser.add_argument("--dtype", choices=DTYPE_NAMES, default=d.dtype,
                            help="bfloat16 = bf16 autocast (~2.5x faster on CPU; the fp32 baseline is recorded too)")
        parser.add_argument("--attn-implementation", default=d.attn_implementation, help="sdpa | eager")
        parser.add_argument("--threads", type=int, default=d.threads, help="torch.set_num_threads")
        parser.add_argument("--figures-dir", type=Path, default=FIGURES_DIR,
                            help=f"where the table and the figure go (default {FIGURES_DIR})")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Config:
        names = [f for f in cls.__dataclass_fields__ if hasattr(args, f)]
        cfg = cls(**{f: getattr(args, f) for f in names})
        cfg.validate()
        return cfg


def compute(cfg: Config, figures_dir: Path) -> None:
    from interp.ablations import run_pretrained_ablation

    df = run_pretrained_ablation(cfg)
    write_table(df, figures_dir, TABLE, cfg, NAME)


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure
    from interp.plots.ablation import plot_capacity_ablation

    df = read_table(figures_dir, TABLE, NAME)
    return [save_figure(plot_capacity_ablation(df), Path(figures_dir) / FIGURE)]


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """One row per group: Δ loss of removing each fraction (lowest; random = mean over seeds) and the
    mean and median Δ of skipping one of the group's MLPs (the median is robust to one outlier layer)."""
    from interp.plots.ablation import GROUP_ORDER, random_summary

    neurons = df[df["kind"] == "neurons"]
    lowest = neurons[neurons["selection"] == "lowest"].pivot_table(index="group", columns="fraction", values="delta")
    rand = random_summary(df).pivot_table(index="group", columns="fraction", values="delta")
    out = pd.concat([lowest.add_prefix("lowest "), rand.add_prefix("random ")], axis=1)
    skip = df[df["kind"] == "skip_mlp"]
    if not skip.empty and "layers" in neurons.columns:
        spans = neurons.groupby("group")["layers"].first()
        in_group = {g: skip[skip["layer"].between(*map(int, s.split("-")))]["delta"] for g, s in spans.items()}
        out["skip_mlp mean"] = {g: d.mean() for g, d in in_group.items()}
        out["skip_mlp median"] = {g: d.median() for g, d in in_group.items()}
    return out.reindex([g for g in GROUP_ORDER if g in out.index])


def verdict(summary: pd.DataFrame) -> str:
    """Plain answer to "do late removals cost less than early and middle ones?", column by column."""
    lines = []
    for column in summary.columns:
        values = summary[column].dropna()
        if {"early", "middle", "late"} <= set(values.index):
            cheapest = values.idxmin()
            late_less = values["late"] < min(values["early"], values["middle"])
            lines.append(f"{column:>16}: cheapest = {cheapest:<6} late costs less than both others: {late_less}")
    return "\n".join(lines)


def run_from_args(args: argparse.Namespace) -> int:
    """`interp ablate pretrained`: run, store the table (+ sidecar), draw the figure, print the summary."""
    cfg = Config.from_args(args)
    compute(cfg, args.figures_dir)
    paths = render(args.figures_dir)
    summary = summarize(read_table(args.figures_dir, TABLE, NAME))
    with pd.option_context("display.width", 200, "display.float_format", "{:+.4f}".format):
        print(summary.to_string())
    print(verdict(summary))
    for path in [Path(args.figures_dir) / TABLE, *paths]:
        print(f"wrote {path}")
    return 0
