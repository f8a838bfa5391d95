"""The quick uniform-vs-tapered training comparison that `make figures` runs on a laptop CPU.

Two models from the same preset, seed, data and step count, differing only in how the MLP width is
spread over depth: uniform vs cosine 1.5->0.5 (the paper's frozen choice). The taper keeps the mean
width, so both have exactly the same parameter count; compute() checks that and records it.
Runs live under runs/figures/ (git-ignored) and are reused: a finished run is a no-op for the Trainer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from analyses import outputs, read_table, recompute_command, resolve_root, write_table
from interp._util.io import read_json
from interp._util.paths import CONFIG_FILE, LOG_FILE, RESULT_FILE
from interp.training.results import hardware_label

NAME = "train_comparison"
TABLE = "train_comparison.csv"
FIGURE = "train_comparison.png"
OUTPUTS = outputs(TABLE, FIGURE)
COLUMNS = ["run", "label", "kind", "step", "tokens", "loss", "val_loss", "val_ppl", "params"]
# what produced the numbers: device and dtype (result.json), the CPU or GPU (config.json provenance)
RUN_COLUMNS = ["device", "dtype", "hardware"]


@dataclass
class Config:
    preset: str = "tiny"
    # 160 steps x 8 x 256 = 328k tokens per run (10.5M params, SwiGLU, untied embeddings). Measured on Intel:
    # fp32, 1 thread each, both at once: ~1,250 tokens/s per run in steady state (bench_jobs), so ~4.5 min
    # for both with evals and checkpoints quiet; 357 s beside another training job.
    steps: int = 160
    seed: int = 0
    out_root: str = "repo:runs/figures"  # under the repository (analyses.resolve_root)
    # (schedule, start, end) per run; start/end are multiples of the preset's d_ff.
    variants: tuple[tuple[str, float, float], ...] = (("uniform", 1.0, 1.0), ("cosine", 1.5, 0.5))
    eval_interval: int = 25         # val points on the curve; each costs eval_batches forward passes
    log_interval: int = 5
    # Fixed, not the preset's "auto" (bf16 only on CPUs with native bf16): the committed numbers must not
    # depend on the CPU kind (issue 14 s3; figures/README.md measures how far they move). One thread per run
    # and both runs at once (jobs=2): on 2 cores 1.26x faster than one after another with 2 threads each (bench_jobs),
    # and the thread count, which changes float results, is the same on every machine.
    dtype: str = "fp32"
    threads: int = 1
    jobs: int = 2
    # Step checkpoints every 20 steps: analyses/novelty_over_training probes these same runs over training.
    overrides: dict[str, Any] = field(  # extra TrainConfig fields, same for every run
        default_factory=lambda: {"ckpt_interval": 20, "keep_step_checkpoints": True})


def run_dirs(cfg: Config) -> list[Path]:
    """Where each variant's run lives; the name encodes everything that changes its result."""
    from interp.training.experiments import slug

    root = resolve_root(cfg.out_root)
    return [root / slug(f"{cfg.preset}-{s}-{a}-{b}-seed{cfg.seed}-steps{cfg.steps}-{cfg.dtype}")
            for s, a, b in cfg.variants]


def train_configs(cfg: Config) -> list:
    """One interp.training.TrainConfig per variant: same preset, seed, data and steps; only `width` differs.

    resume=True so an interrupted `make figures` continues where it stopped; a finished run is a no-op.
    `overrides` win over the Config's dtype and threads (a test sets threads).
    """
    from interp.training import TrainConfig
    from interp.widths import WidthSpec

    return [TrainConfig.from_preset(cfg.preset, steps=cfg.steps, seed=cfg.seed,
                                    width=WidthSpec(schedule=schedule, start=start, end=end),
                                    eval_interval=cfg.eval_interval, log_interval=cfg.log_interval,
                                    out_dir=str(out_dir), resume=True,
                                    **{"dtype": cfg.dtype, "threads": cfg.threads, **cfg.overrides})
            for (schedule, start, end), out_dir in zip(cfg.variants, run_dirs(cfg), strict=True)]


def train_runs(cfg: Config, name: str = NAME) -> list[Path]:
    """Train (or reuse) one run per variant, cfg.jobs at a time; returns their run directories.

    name: the analysis asking (its recompute command is the advice when a run stops early)."""
    from interp.jobs.runs import train_in_processes
    from interp.training.results import is_done

    configs = [c for c in train_configs(cfg) if not is_done(Path(c.out_dir), c)]
    for train_cfg in configs:
        print(f"[{name}] {train_cfg.width.label}: {train_cfg.out_dir}", flush=True)
    for train_cfg, outcome in zip(configs, train_in_processes(configs, cfg.jobs), strict=True):
        result = outcome.result if outcome is not None else {"reason": "not started"}
        if result is None:
            raise RuntimeError(f"run {train_cfg.out_dir} failed: {outcome.error}\n{outcome.traceback or ''}")
        if result.get("status") != "done":
            raise RuntimeError(f"run {train_cfg.out_dir} stopped early ({result.get('reason')}); "
                               f"`{recompute_command(name)}` resumes it")
    return run_dirs(cfg)


def _read_run_file(path: Path) -> dict:
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: is {path.parent} a finished training run?")
    return read_json(path)


def read_run(run_dir: Path) -> pd.DataFrame:
    """One run directory (config.json, log.jsonl, result.json) -> tidy rows in COLUMNS.

    Rows: every `train` and `eval` log line, plus one `result` row with the final numbers.
    """
    run_dir = Path(run_dir)
    result = _read_run_file(run_dir / RESULT_FILE)
    config = _read_run_file(run_dir / CONFIG_FILE)
    log_path = run_dir / LOG_FILE
    if not log_path.is_file():
        raise FileNotFoundError(f"{log_path} not found: is {run_dir} a training run?")
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    label = result.get("label") or config.get("label") or run_dir.name
    rows = [line for line in lines if line.get("kind") in ("train", "eval")]
    rows.append({"kind": "result", **{k: result.get(k) for k in ("step", "tokens", "val_loss", "val_ppl")}})
    df = pd.DataFrame(rows).reindex(columns=COLUMNS)
    df["run"] = run_dir.name
    df["label"] = label
    df["params"] = result.get("params")
    for column in ("device", "dtype"):
        df[column] = result.get(column)
    df["hardware"] = hardware_label(config)
    return df


def check_equal_params(df: pd.DataFrame) -> None:
    """The comparison is only fair at equal parameter count: refuse to plot it otherwise."""
    per_run = df.groupby("run")["params"].first()
    if per_run.nunique(dropna=False) != 1:
        raise ValueError(f"runs differ in parameter count {per_run.to_dict()}: the taper must keep the "
                         f"mean MLP width (check the width multiple and the budget rounding)")


def compute(cfg: Config, figures_dir: Path) -> None:
    dirs = train_runs(cfg)
    df = pd.concat([read_run(d) for d in dirs], ignore_index=True)
    write_table(df, figures_dir, TABLE, cfg, NAME)
    check_equal_params(df)


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import plot_loss_curves, save_figure

    df = read_table(figures_dir, TABLE, NAME)
    return [save_figure(plot_loss_curves(df), Path(figures_dir) / FIGURE)]
