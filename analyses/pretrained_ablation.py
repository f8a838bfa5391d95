"""Capacity ablation of a pretrained model (beyond the paper): is late MLP capacity worth less?

On SmolLM2-135M (30 layers) we remove 10/25/50% of each layer's MLP neurons in the early, middle or
late third (lowest contribution, and random as a control), and skip each layer's whole MLP one at a
time, measuring the change in held-out loss (interp.ablations has the definitions). If the paper is
right that late layers mostly reinforce the stream, late removals should cost less.

Text: the held-out wiki split cut into consecutive 128-token sequences; the first 32 score neurons,
the next 16 (disjoint) evaluate every condition (see interp.ablations.AblationConfig for the budget).
`interp ablate pretrained --model smollm2-135m` runs it (interp/cli/ablate.py: flags from AblationConfig).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from analyses import outputs, read_table, write_table
from interp.ablations.config import AblationConfig

NAME = "pretrained_ablation"
HEAVY = False  # 67 forward passes of SmolLM2 (~4 min on 2 cores): part of `make figures`
TABLE = "pretrained_capacity_ablation.csv"
FIGURE = "pretrained_capacity_ablation.png"
OUTPUTS = outputs(TABLE, FIGURE)

# The library config (interp.ablations.AblationConfig); `interp ablate pretrained` builds its flags from it.
Config = AblationConfig


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
    mean and median Δ of skipping one of the group's MLPs (the median is robust to one outlier layer).

    A group none of whose MLPs was skipped gets NaN there (never a warning, never another group's value).
    Group spans come from the neuron rows; a table of MLP skips only has none, so its skips are summarised
    in one row "all skipped" rather than dropped."""
    from interp.plots.ablation import GROUP_ORDER, random_summary

    neurons = df[df["kind"] == "neurons"]
    lowest = neurons[neurons["selection"] == "lowest"].pivot_table(index="group", columns="fraction", values="delta")
    rand = random_summary(df).pivot_table(index="group", columns="fraction", values="delta")
    out = pd.concat([lowest.add_prefix("lowest "), rand.add_prefix("random ")], axis=1)
    out = out.reindex([g for g in GROUP_ORDER if g in out.index])
    skip = df[df["kind"] == "skip_mlp"]["delta"].set_axis(df.loc[df["kind"] == "skip_mlp", "layer"])
    if skip.empty:
        return out
    if out.empty:
        return pd.DataFrame({"skip_mlp mean": [skip.mean()], "skip_mlp median": [skip.median()]},
                            index=pd.Index(["all skipped"], name="group"))
    spans = neurons.groupby("group")["layers"].first()
    in_group = {g: skip[skip.index.to_series().between(*map(int, str(spans[g]).split("-"))).to_numpy()]
                for g in out.index}
    out["skip_mlp mean"] = [d.mean() if len(d) else math.nan for d in in_group.values()]
    out["skip_mlp median"] = [d.median() if len(d) else math.nan for d in in_group.values()]
    return out


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
