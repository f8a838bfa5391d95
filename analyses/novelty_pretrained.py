"""Section 4 on the pretrained models we have offline: does rho rise with depth, as on GPT-2?

Probes every registry model (interp.hf.available_models(): SmolLM2-135M, Gemma-3-270m; one
that is not installed is skipped with its pip command) over the held-out wiki split with the torch
backend, which stops each forward after the last layer (no unembedding: Gemma3's 262k vocabulary
would otherwise cost more than its layers). The table holds every metric of interp.probes plus
rho_mlp_normed (reference="normed", same pass); the figure shows rho_mlp and rho_block.

Variants (column `variant`): "default", and "no_massive_dims", which zeroes the `massive_k` residual
dimensions of largest mean |resid_pre| in every operand (measured on a first pass; a second forward).
SmolLM2 has 3 such dimensions (mean |h| 65-105 vs a median of 4); Gemma3's largest is ~100x its median.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from analyses import outputs, read_table, write_table
from interp.probes.config import ProbeConfig

NAME = "novelty_pretrained"
TABLE = "novelty_pretrained.csv"
FIGURE = "novelty_pretrained.png"
OUTPUTS = outputs(TABLE, FIGURE)
VARIANTS = ("default", "no_massive_dims")


def _default_probe() -> ProbeConfig:
    # 16,384 tokens per model and variant (~25 s per pass for SmolLM2 on 2 quiet cores); position 0 (attention
    # sink, huge norms) left out; reference="normed": also rho_mlp_normed, at no extra forward
    return ProbeConfig(tokens=16384, seq_len=512, batch_size=4, backend="torch", positions="skip_first",
                       reference="normed")


@dataclass
class Config:
    models: tuple[str, ...] | None = None     # registry names; None = every registered model
    probe: ProbeConfig = field(default_factory=_default_probe)
    variants: tuple[str, ...] = VARIANTS
    variant_models: tuple[str, ...] | None = None  # models that get the non-default variants; None = all
    massive_k: int = 3


def variant_kwargs(variant: str, cfg: Config) -> dict[str, Any]:
    """The ProbeConfig fields one variant changes."""
    if variant == "default":
        return {}
    if variant == "no_massive_dims":
        return {"exclude_massive_dims": cfg.massive_k}
    raise ValueError(f"Config.variants: unknown variant {variant!r}; choose from {VARIANTS}")


def installed_models(cfg: Config) -> list[str]:
    """The configured registry models that are installed; prints a skip line (with the pip command) for the rest."""
    from interp.hf import available_models

    infos = {m.name: m for m in available_models()}
    wanted = list(cfg.models) if cfg.models is not None else list(infos)
    unknown = [m for m in wanted if m not in infos]
    if unknown:
        raise ValueError(f"Config.models: {unknown} are not registry names; known: {sorted(infos)}")
    for name in wanted:
        if not infos[name].installed:
            print(f"[{NAME}] skip {name}: not installed; `{infos[name].pip_command}` installs it", flush=True)
    return [name for name in wanted if infos[name].installed]


def compute(cfg: Config, figures_dir: Path) -> None:
    from interp.probes import probe
    from interp.stats import depth_correlations

    for variant in cfg.variants:
        variant_kwargs(variant, cfg)  # fail on a typo before any model runs
    tables = []
    for name in installed_models(cfg):
        for variant in cfg.variants:
            if variant != "default" and cfg.variant_models is not None and name not in cfg.variant_models:
                continue
            df = probe(name, config=dataclasses.replace(cfg.probe, **variant_kwargs(variant, cfg)))
            timing = df.attrs.get("timing", {})
            print(f"[{NAME}] {name} [{variant}]: {timing.get('positions', '?')} positions in "
                  f"{timing.get('probe_s', float('nan')):.1f} s", flush=True)
            tables.append(df.assign(variant=variant))
    if not tables:
        print(f"[{NAME}] no pretrained model installed: nothing to probe", flush=True)
        return
    df = pd.concat(tables, ignore_index=True)
    write_table(df, figures_dir, TABLE, cfg, NAME)
    summary = depth_correlations(df, "model", ("rho_mlp", "rho_block", "rho_mlp_normed"))
    print(summary.to_string(index=False, float_format=lambda v: f"{v:+.3f}"), flush=True)


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure
    from interp.plots.novelty import plot_novelty

    df = read_table(figures_dir, TABLE, NAME)
    fig = plot_novelty(df, series="model", title="Layer-wise novelty of pretrained models on held-out wiki text")
    return [save_figure(fig, Path(figures_dir) / FIGURE)]
