"""Needle in a haystack (paper Table 3) on the pretrained models we have offline: string_match_all by context
length and needle depth for S-NIAH-1/2/3 (interp.evals.niah: RULER's recipe, generated offline).

    interp figures --only niah --recompute      # HEAVY: greedy generation at up to 4K tokens on the CPU

compute() runs `interp eval --tasks niah` over the installed registry models into a resumable table under runs/,
and stores the per-length and per-depth rows in figures/niah.csv. Lengths beyond a model's context are skipped
with a note (SmolLM2: 8,192; Gemma-3-270m: 32,768). The longest answer, a UUID, is 33-35 tokens in SmolLM2's
tokenizer (every digit is a token), so 64 generated tokens (not RULER's 128) leave it room and halve the
decoding; 32 would cut UUIDs short and score S-NIAH-3 as failed whatever the model knows (measured).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analyses import outputs, read_table, resolve_root, write_table
from interp._util.config import option

NAME = "niah"
HEAVY = True   # 3 tasks x 3 lengths x 11 samples per model: about an hour per model on 2 loaded cores
TABLE, FIGURE = "niah.csv", "niah.png"
OUTPUTS = outputs(TABLE, FIGURE)
COLUMNS = ("model", "task", "context_length", "depth", "value", "stderr", "n", "status", "error",
           # what made each row (the eval table's; the generation settings are in the sidecar's config and `key`);
           # the committed niah.csv predates these columns: its sidecar holds its hardware and git commit
           "model_key", "key", "lm_eval_version", "device", "dtype", "batch_size", "hardware", "git_commit", "versions")


@dataclass
class Config:
    models: tuple[str, ...] = option(("smollm2-135m", "gemma3-270m"), "registry models (skipped if not installed)")
    lengths: tuple[int, ...] = option((1024, 2048, 4096), "context lengths in each model's tokens")
    samples: int = option(11, "samples per length (one per needle depth 0.0, 0.1, ..., 1.0)")
    gen_tokens: int = option(64, "tokens generated per question (a UUID needs ~35)")
    out: str = option("repo:runs/eval/niah.parquet", "the resumable interp eval table (relative: to the working "
                                                          "directory)")


def compute(cfg: Config, figures_dir: Path) -> None:
    from interp.evals import run_eval
    from interp.hf import REGISTRY

    models = [m for m in cfg.models if m in REGISTRY and REGISTRY[m].installed()]
    if not models:
        print(f"[{NAME}] no registry model installed: nothing to evaluate", flush=True)
        return
    result = run_eval(models=models, tasks="niah", limit=cfg.samples, niah_lengths=tuple(cfg.lengths),
                      niah_gen_tokens=cfg.gen_tokens, out=str(resolve_root(cfg.out)))
    df = result.table[result.table["context_length"].notna()]
    write_table(df[list(COLUMNS)].reset_index(drop=True), figures_dir, TABLE, cfg, NAME)


def plot_niah(df: pd.DataFrame):
    """One heatmap per model x task: needle depth (rows) by context length (columns), string_match_all."""
    import matplotlib
    from matplotlib.figure import Figure

    from interp.plots.style import STYLE

    cells = df[(df["status"] == "ok") & df["depth"].notna()]
    if cells.empty:
        raise ValueError(f"{TABLE} has no per-depth rows to plot; rerun `interp figures --only {NAME} --recompute`")
    models, tasks = list(dict.fromkeys(df["model"])), sorted(set(df["task"]))
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(3.2 * len(tasks), 2.8 * len(models)), layout="constrained")
        axes = fig.subplots(len(models), len(tasks), squeeze=False)
        for r, model in enumerate(models):
            for c, task in enumerate(tasks):
                ax = axes[r][c]
                grid = cells[(cells["model"] == model) & (cells["task"] == task)].pivot_table(
                    index="depth", columns="context_length", values="value")
                image = ax.imshow(grid.values, vmin=0, vmax=1, cmap="viridis", aspect="auto", origin="lower")
                ax.set_xticks(range(grid.shape[1]), [f"{int(n)}" for n in grid.columns])
                ax.set_yticks(range(grid.shape[0]), [f"{d:.1f}" for d in grid.index])
                ax.grid(False)
                ax.set_title(f"{model}: {task}")
                ax.set_xlabel("context length (tokens)")
                ax.set_ylabel("needle depth")
        fig.colorbar(image, ax=axes, shrink=0.8, label="string_match_all")
    return fig


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure

    return [save_figure(plot_niah(read_table(figures_dir, TABLE, NAME)), Path(figures_dir) / FIGURE)]
