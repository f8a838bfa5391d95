"""Does rho predict which layers matter? Each correlational measure against each causal one, per layer.

The paper reads a high rho_mlp (the MLP writes along the stream: it "reinforces") as a layer whose MLP
capacity is worth less. Here that is tested, not assumed: for SmolLM2-135M, Gemma-3-270m and the tiny
uniform and tapered runs of analyses.train_comparison, one `interp.causal.probe(..., causal=True)` per model
gives the correlational rows (rho_mlp, rho_block, ...) and the causal rows (delta held-out loss when the
layer's MLP is skipped, mean-ablated, its attention skipped, or the whole block removed;
interp.ablations.layers) for the same tokens and positions. Across layers, the Spearman rho of each
correlational profile with each causal one, with a percentile bootstrap CI over sequences
(interp.causal.correlations). A negative rho of rho_mlp with delta_loss_skip_mlp would support the paper's
reading (more reinforcing, less needed).

Budget: 1 + 4 x n_layers forwards per model plus the probe passes: 121 for SmolLM2, 73 for Gemma3 over
16 x 128 tokens (the pretrained ablation's eval budget), 25 for each 6-layer tiny run over 64 x 256 tokens
(the tiny runs are train_comparison's: train them first). Measured on 2 quiet AMD EPYC cores (2026-12-07):
24 min (SmolLM2 517 s, Gemma3 ~725 s, the tiny runs 77 s and 70 s), more than `make figures` affords, hence HEAVY:
`interp figures --recompute` re-renders the stored tables; `interp figures --only novelty_vs_causal --recompute`
recomputes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analyses import novelty_pretrained, novelty_tapered, outputs, read_table, repo_relative, write_table
from interp.probes.config import ProbeConfig

NAME = "novelty_vs_causal"
HEAVY = True  # 24 min on 2 quiet cores (see the module docstring): more than `make figures` affords
TABLE = "novelty_vs_causal.csv"                 # one row per model, measure and causal kind
LAYERS_TABLE = "novelty_vs_causal_layers.csv"   # the probe tables: correlational + causal rows per layer
FIGURE = "novelty_vs_causal.png"
OUTPUTS = outputs(TABLE, LAYERS_TABLE, FIGURE)
PRETRAINED = ("smollm2-135m", "gemma3-270m")


def _pretrained_probe() -> ProbeConfig:
    # 16 sequences x 128 tokens (the pretrained ablation's eval budget): a Student-t CI with 15 degrees of freedom
    return ProbeConfig(tokens=2048, seq_len=128, batch_size=8, backend="torch", reference="normed", causal=True,
                       causal_tokens=0)   # the causal rows over every probed sequence (not the default 4,096 tokens)


def _tiny_probe() -> ProbeConfig:
    # the tiny preset's n_ctx; 64 sequences (a tiny model's forward is ~15x cheaper than SmolLM2's)
    return ProbeConfig(tokens=16384, seq_len=256, batch_size=8, backend="hookpoints", reference="normed",
                       causal=True, causal_tokens=0)   # the causal rows over all 64 sequences


@dataclass
class Config:
    models: tuple[str, ...] = PRETRAINED          # registry names; one not installed is skipped
    run_dirs: tuple[str, ...] = field(default_factory=novelty_tapered._default_run_dirs)  # tiny uniform + tapered
    probe: ProbeConfig = field(default_factory=_pretrained_probe)
    tiny_probe: ProbeConfig = field(default_factory=_tiny_probe)
    n_boot: int = 2000        # bootstrap draws over sequences
    confidence: float = 0.95
    seed: int = 0


def _with_causal(probe: ProbeConfig) -> ProbeConfig:
    return probe if probe.causal else dataclasses.replace(probe, causal=True)


def model_tables(cfg: Config) -> list[tuple[str, pd.DataFrame]]:
    """(label, probe table with causal rows and attrs["causal"]) for every installed model and finished run."""
    from interp.causal import probe  # interp.probes.probe refuses causal=True: the causal rows are joined there

    out = []
    if cfg.models:
        for name in novelty_pretrained.installed_models(novelty_pretrained.Config(models=cfg.models)):
            out.append((name, probe(name, config=_with_causal(cfg.probe)).assign(label=name)))
            _report(*out[-1])
    tiny = novelty_tapered.Config(run_dirs=cfg.run_dirs, probe=_with_causal(cfg.tiny_probe))
    for run in novelty_tapered.finished_runs(tiny):
        df = novelty_tapered.run_rows(run, tiny)
        out.append((str(df["label"].iloc[0]), df))
        _report(*out[-1])
    return out


def _report(label: str, df: pd.DataFrame) -> None:
    timing, causal = df.attrs.get("timing", {}), df.attrs.get("causal", {})
    print(f"[{NAME}] {label}: probe {timing.get('probe_s', float('nan')):.0f} s, causal rows "
          f"{causal.get('seconds', float('nan')):.0f} s", flush=True)


def compute(cfg: Config, figures_dir: Path) -> None:
    from interp.causal import correlation_table

    tables = model_tables(cfg)
    if not tables:
        print(f"[{NAME}] no model installed and no finished run: nothing to measure", flush=True)
        return
    layers = pd.concat([df for _, df in tables], ignore_index=True)
    layers["checkpoint"] = layers["checkpoint"].fillna("").map(repo_relative)
    summary = pd.concat([correlation_table(df, cfg.n_boot, cfg.confidence, cfg.seed).assign(label=label)
                         for label, df in tables], ignore_index=True)
    summary["checkpoint"] = summary["checkpoint"].map(repo_relative)
    summary = summary[["label", "model", *[c for c in summary.columns if c not in ("label", "model")]]]
    write_table(layers, figures_dir, LAYERS_TABLE, cfg, NAME)
    write_table(summary, figures_dir, TABLE, cfg, NAME)
    print(summary.to_string(index=False, float_format=lambda v: f"{v:+.3f}"), flush=True)


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure
    from interp.plots.causal import plot_novelty_vs_causal

    layers = read_table(figures_dir, LAYERS_TABLE, NAME)
    summary = read_table(figures_dir, TABLE, NAME)
    return [save_figure(plot_novelty_vs_causal(layers, summary), Path(figures_dir) / FIGURE)]
