"""How layer-wise novelty (rho_mlp, rho_block; paper section 4) develops over training, uniform vs tapered.

Two short runs of the tiny preset's shape, differing only in how the MLP width is spread over depth
(uniform vs cosine 1.5->0.5), keep a step checkpoint every `ckpt_interval` steps; interp.probes.batch probes
every checkpoint over the held-out wiki text, and the figure shows each metric as a layer x step
heatmap, the two runs side by side on one colour scale.

Budget (quick defaults): the SAME two runs as analyses/train_comparison (160 steps x 8 x 256 tokens,
step checkpoints every 20 steps, under runs/figures/), so after `train_comparison` has trained them
this analysis only probes 2 x 8 checkpoints x 2,048 held-out tokens (seconds to a minute). Run alone, it
trains them itself. A finished run is a no-op for the Trainer, an analysed checkpoint a no-op for the
batch (its table lives under runs/figures/batch.parquet).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from analyses import outputs, read_table, resolve_root, train_comparison, write_table
from interp.probes.config import ProbeConfig

NAME = "novelty_over_training"
TABLE = "novelty_over_training.csv"
FIGURE = "novelty_over_training.png"
OUTPUTS = outputs(TABLE, FIGURE)
FIGURE_METRICS = ("rho_mlp", "rho_block")
COLUMNS = ["run", "label", "step", "layer", "n_layers", "depth", "metric", "mean", "sem", "ci_low", "ci_high",
           "ci_method", "q05", "q50", "q95", "n_tokens", "n_sequences", "weights_sha256",
           # what made each row (the batch table's): text, positions, dtype, where it ran, with what
           "text_source", "text_sha256", "positions", "seq_len", "dtype", "backend", "device", "hardware", "versions"]


def _default_probe() -> ProbeConfig:
    # per checkpoint: the paper's 2,048 tokens, held-out wiki (text None), sequences of the preset's n_ctx
    return ProbeConfig(tokens=2048, seq_len=256, batch_size=4,
                       metrics=("rho_mlp", "rho_block", "rho_attn", "norm_ratio", "block_influence"))


@dataclass
class Config:
    preset: str = "tiny"
    steps: int = 160                 # = train_comparison.Config.steps: the same runs
    ckpt_interval: int = 20          # a step checkpoint every 20 steps: 8 per run
    seed: int = 0
    out_root: str = "repo:runs/figures"   # = train_comparison's (analyses.resolve_root)
    variants: tuple[tuple[str, float, float], ...] = (("uniform", 1.0, 1.0), ("cosine", 1.5, 0.5))
    eval_interval: int = 25
    log_interval: int = 5
    probe: ProbeConfig = field(default_factory=_default_probe)
    overrides: dict[str, Any] = field(default_factory=dict)  # extra TrainConfig fields, same for every run


def _root(cfg: Config) -> Path:
    return resolve_root(cfg.out_root)   # "repo:runs/figures": the repository's, wherever it runs from


def _training_config(cfg: Config) -> train_comparison.Config:
    """The run config train_comparison builds, plus step checkpoints: its dtype, threads and jobs, so the
    runs are the same ones."""
    extra = {"ckpt_interval": cfg.ckpt_interval, "keep_step_checkpoints": True, **cfg.overrides}
    return train_comparison.Config(preset=cfg.preset, steps=cfg.steps, seed=cfg.seed, out_root=cfg.out_root,
                                   variants=cfg.variants, eval_interval=cfg.eval_interval,
                                   log_interval=cfg.log_interval, overrides=extra)


def train_runs(cfg: Config) -> list[Path]:
    """Train (or reuse) one run per variant, as train_comparison does; returns their run directories."""
    return train_comparison.train_runs(_training_config(cfg), NAME)


def probe_runs(cfg: Config, dirs: list[Path]) -> pd.DataFrame:
    """interp.probes.batch over the runs' step checkpoints; the rows of these settings, in COLUMNS."""
    from interp.probes.batch import BatchConfig, run_batch

    result = run_batch(BatchConfig(paths=[str(d) for d in dirs], out=str(_root(cfg) / "batch.parquet"),
                                   probe=cfg.probe))
    if result.failed:
        raise RuntimeError(f"{len(result.failed)} checkpoint(s) failed to probe: {result.failed[0]}")
    df = result.table
    wanted = {str(t.path) for t in result.targets}
    df = df[(df["status"] == "ok") & (df["settings_hash"] == result.settings_hash) & df["path"].isin(wanted)
            & df["step"].notna()]
    return df[COLUMNS].sort_values(["run", "step", "metric", "layer"]).reset_index(drop=True)


def compute(cfg: Config, figures_dir: Path) -> None:
    df = probe_runs(cfg, train_runs(cfg))
    if df["label"].nunique() < 2:
        raise ValueError(f"{NAME}: expected a uniform and a tapered run, got labels {sorted(set(df['label']))}")
    write_table(df, figures_dir, TABLE, cfg, NAME)


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure
    from interp.plots.training import plot_novelty_over_training

    df = read_table(figures_dir, TABLE, NAME)
    return [save_figure(plot_novelty_over_training(df, FIGURE_METRICS), Path(figures_dir) / FIGURE)]
