"""Section 4 on our own tiny models: rho per layer of the uniform and the tapered run of train_comparison.

The paper motivates tapering with late layers that "reinforce" (rho > 0). This asks two things of
the two runs analyses.train_comparison trains (same data, seed and steps; uniform vs cosine 1.5->0.5):
does rho rise with depth in a small model trained here, and does tapering the MLP width change the
profile? Probed with the hookpoints backend on the held-out wiki split, tokenized by each run's own
BPE (probe() rebuilds it from the checkpoint's config and checks its hash). Rows carry the layer's
MLP width (column d_mlp), drawn faintly behind the curves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analyses import outputs, read_table, recompute_command, repo_relative, train_comparison, write_table
from interp._util.io import read_json
from interp._util.paths import RESULT_FILE
from interp.probes.config import ProbeConfig

NAME = "novelty_tapered"
TABLE = "novelty_tapered_vs_uniform.csv"
FIGURE = "novelty_tapered_vs_uniform.png"
OUTPUTS = outputs(TABLE, FIGURE)


def _default_run_dirs() -> tuple[str, ...]:
    return tuple(str(p) for p in train_comparison.run_dirs(train_comparison.Config()))


def _default_probe() -> ProbeConfig:
    # seq_len = the tiny preset's n_ctx; reference="normed": also rho_mlp_normed (vs ln2's output), same pass
    return ProbeConfig(tokens=16384, seq_len=256, batch_size=8, backend="hookpoints", reference="normed")


@dataclass
class Config:
    run_dirs: tuple[str, ...] = field(default_factory=_default_run_dirs)  # finished training runs
    probe: ProbeConfig = field(default_factory=_default_probe)  # text None = the held-out wiki split


def finished_runs(cfg: Config) -> list[Path]:
    """The configured run dirs whose training is done; a skip line naming the command for each other one."""
    from interp.training.checkpoints import is_checkpoint_dir

    done = []
    for run in map(Path, cfg.run_dirs):
        result = run / RESULT_FILE
        status = (read_json(result, missing_ok=True) or {}).get("status")
        if is_checkpoint_dir(run) and status == "done":
            done.append(run)
        else:
            state = "no checkpoint" if not is_checkpoint_dir(run) else f"training not finished (status {status})"
            print(f"[{NAME}] skip {run}: {state}; `{recompute_command(train_comparison.NAME)}` trains it",
                  flush=True)
    return done


def run_rows(run: Path, cfg: Config) -> pd.DataFrame:
    """The probe table of one run, with its width label and per-layer MLP width."""
    from interp.causal import probe  # interp.probes.probe, + the causal rows if cfg.probe.causal (novelty_vs_causal)
    from interp.training.checkpoints import read_config

    config = read_config(run)
    d_mlp = list(config["model"]["d_mlp"])
    df = probe(str(run), config=cfg.probe)
    return df.assign(label=config.get("label") or run.name, d_mlp=df["layer"].map(lambda l: d_mlp[int(l)]),
                     variant="default", checkpoint=df["checkpoint"].map(repo_relative))


def compute(cfg: Config, figures_dir: Path) -> None:
    from interp.stats import depth_correlations

    runs = finished_runs(cfg)
    if not runs:
        print(f"[{NAME}] no finished run to probe", flush=True)
        return
    df = pd.concat([run_rows(run, cfg) for run in runs], ignore_index=True)
    write_table(df, figures_dir, TABLE, cfg, NAME)
    summary = depth_correlations(df, "label", ("rho_mlp", "rho_block", "rho_mlp_normed"))
    print(summary.to_string(index=False, float_format=lambda v: f"{v:+.3f}"), flush=True)


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure
    from interp.plots.novelty import plot_novelty

    df = read_table(figures_dir, TABLE, NAME)
    fig = plot_novelty(df, series="label", width_column="d_mlp",
                       title="Layer-wise novelty of our tiny models: uniform vs tapered MLP width")
    return [save_figure(fig, Path(figures_dir) / FIGURE)]
