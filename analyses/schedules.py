"""The width-schedule figure: what each taper schedule and layer-group profile does to d_ff(l).

No training: it tabulates interp.widths for one model shape. The default shape, 24 layers with
d_ff = 2048, is a 440M-class depth (the paper's sweep model) chosen for readability: enough layers
for smooth curves; at d_ff = 2048 the multiple-of-16 rounding moves a width by under 1%, so the
rounded markers sit on the un-rounded curves.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analyses import outputs, read_table, write_table

NAME = "schedules"
TABLE = "schedules.csv"
FIGURE = "schedules.png"
OUTPUTS = outputs(TABLE, FIGURE)


@dataclass
class Config:
    n_layers: int = 24
    d_ff: int = 2048
    multiple: int = 16
    start: float = 1.5
    end: float = 0.5
    k: float = 10.0
    schedules: tuple[str, ...] = ("uniform", "linear", "cosine", "sigmoid")
    profiles: tuple[str, ...] = ("uniform", "wider-early", "wider-middle", "wider-late")


def schedule_table(cfg: Config) -> pd.DataFrame:
    """One row per (kind, name, layer): the un-rounded multiplier and the budget-exact integer width.

    Profiles are defined per layer group, so they have no un-rounded per-layer curve: ratio_unrounded
    is NaN for them (their rounding lives in interp.widths.group_widths); `group` is the index of
    the layer's group in its profile (NaN for schedules).
    """
    from interp.widths import PROFILES, WidthSpec, group_sizes, ratios

    rows = []
    for schedule in cfg.schedules:
        start, end = (1.0, 1.0) if schedule == "uniform" else (cfg.start, cfg.end)
        spec = WidthSpec(schedule=schedule, start=start, end=end, multiple=cfg.multiple, k=cfg.k)
        unrounded = ratios(cfg.n_layers, schedule, start, end, cfg.k)
        for layer, (r, w) in enumerate(zip(unrounded, spec.widths(cfg.n_layers, cfg.d_ff), strict=True)):
            rows.append(("schedule", spec.label, layer, float(r), int(w), float("nan")))
    for profile in cfg.profiles:
        spec = WidthSpec(schedule="profile", profile=profile, multiple=cfg.multiple)
        sizes = group_sizes(cfg.n_layers, len(PROFILES[profile]))
        groups = [g for g, size in enumerate(sizes) for _ in range(size)]
        for layer, (w, g) in enumerate(zip(spec.widths(cfg.n_layers, cfg.d_ff), groups, strict=True)):
            rows.append(("profile", spec.label, layer, float("nan"), int(w), float(g)))
    df = pd.DataFrame(rows, columns=["kind", "name", "layer", "ratio_unrounded", "width", "group"])
    df["d_ff"] = cfg.d_ff
    df["multiple"] = cfg.multiple
    return df[["layer", "kind", "name", "ratio_unrounded", "width", "group", "d_ff", "multiple"]]


def compute(cfg: Config, figures_dir: Path) -> None:
    write_table(schedule_table(cfg), figures_dir, TABLE, cfg, NAME)


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import plot_schedules, save_figure

    df = read_table(figures_dir, TABLE, NAME)
    return [save_figure(plot_schedules(df), Path(figures_dir) / FIGURE)]
