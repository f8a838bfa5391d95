"""Which cheap measure predicts the damage of removing a layer? Every correlational measure against every causal
one, per model, on the same tokens (issue #34 item 2; the critique arXiv 2605.14075 asks it of cosine measures).

Correlational (per layer, interp.probes): rho_mlp and rho_block (the paper's cosines), block_influence (ShortGPT:
1 - cos(h_l, h_{l+1})), angular_distance (Gromov et al.: arccos of the same cosine / pi), norm_ratio (|F_l| /
|h_l|) and logit_lens_kl (KL of the final distribution from layer l's logit-lens one). Causal (per layer,
interp.ablations.layers): the loss increase when the whole block is removed (skip_block), its MLP skipped
(skip_mlp), its MLP replaced by its mean (mean_mlp) or its attention skipped (skip_attn). Across layers: the
Spearman rho of each measure with each causal effect, with a percentile bootstrap CI over sequences (the same
draws for both profiles; interp.causal.correlations). One interp.causal.probe(..., causal=True) per model gives
both sides.

The same question with the field's measure of damage, lm-eval accuracy, is analyses.removal_accuracy (hours on
a CPU, resumable).

Models: SmolLM2 and Gemma-3 (the registry's offline copies) and our own checkpoints: uniform and cosine 1.5->0.5,
GPT-2-style and Transformer++ (llama) blocks, seeds 0..4 (`experiments`: gain_vs_tokens' small shape, d_model 128,
trained for 256 steps of 2,048 tokens with a plain cosine learning rate; 20 runs of ~200 s of one core, two at
once). Their
weights live under runs/ (never committed); the run records under figures/records/importance-tiny-<arch>/ say
how each was trained, and a machine without the weights retrains them (the probe needs them). More finished runs
(e.g. gain_vs_tokens' final checkpoints) can be added through run_dirs. HEAVY.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analyses import novelty_pretrained, novelty_tapered, outputs, read_table, repo_relative, resolve_root, write_table
from analyses.group_ablation import RECORDS_DIR
from interp.probes.config import ProbeConfig

NAME = "importance_measures"
HEAVY = True  # SmolLM2: 1 + 4 x 30 forwards of 2,048 tokens plus the probe passes (~10 min on 2 quiet cores)
TABLE = "importance_measures.csv"              # one row per model, measure and causal effect
SUMMARY_TABLE = "importance_measures_summary.csv"  # per model or trained group (seeds pooled), measure and effect
FIGURE = "importance_measures.png"
OUTPUTS = outputs(TABLE, SUMMARY_TABLE, FIGURE)
MEASURES = ("rho_mlp", "rho_block", "block_influence", "angular_distance", "norm_ratio", "logit_lens_kl")


def _probe(tokens: int, seq_len: int, backend: str = "torch") -> ProbeConfig:
    # causal_tokens=0: the causal rows over every probed sequence, as this analysis was measured (not the default 4,096)
    return ProbeConfig(tokens=tokens, seq_len=seq_len, batch_size=8, backend=backend, causal=True, causal_tokens=0,
                       metrics=MEASURES)


@dataclass
class Config:
    models: tuple[str, ...] = ("smollm2-135m", "gemma3-270m")   # registry names; one not installed is skipped
    run_dirs: tuple[str, ...] = ()            # more finished runs to measure beside the trained ones
    archs: tuple[str, ...] = ("gpt2", "llama")  # block styles of our checkpoints (experiments); () trains none
    seeds: int = 5                            # seeds 0..N-1 of uniform and of cosine 1.5 -> 0.5 per block style
    steps: int = 256                          # x 2,048 tokens per run
    d_model: int = 128                        # gain_vs_tokens' shape: tiny with half the width, to fit the CPU
    d_ff: int = 512
    jobs: int = 2                             # runs trained at once (one 1-thread process each)
    root: str = "repo:runs"                   # where the runs' weights go
    probe: ProbeConfig = field(default_factory=lambda: _probe(2048, 128))       # 16 sequences x 128
    tiny_probe: ProbeConfig = field(default_factory=lambda: _probe(16384, 256))  # 64 sequences x 256
    n_boot: int = 2000
    confidence: float = 0.95
    seed: int = 0


def experiments(cfg: Config) -> list:
    """Our checkpoints, one Experiment per block style: uniform and cosine 1.5 -> 0.5, seeds 0..N-1, fp32."""
    from analyses.gain_vs_tokens import _variants
    from interp.training.experiments import Experiment

    overrides = dict(d_model=cfg.d_model, n_heads=4, d_ff=cfg.d_ff, source="english", dtype="fp32", threads=1,
                     steps=cfg.steps, eval_batches=16, ckpt_interval=cfg.steps, log_interval=16)
    return [Experiment(name=f"importance-tiny-{arch}", preset="tiny", variants=_variants(), seeds=list(range(cfg.seeds)),
                       root=resolve_root(cfg.root), overrides={**overrides, "arch": arch}) for arch in cfg.archs]


def trained_runs(cfg: Config, figures_dir: Path | None = None) -> list[Path]:
    """Train the runs of `experiments` whose weights are missing (a record alone does not count: the probe needs
    the weights), record them under figures_dir/records/ when given, and return every finished run directory
    (those of run_dirs after them)."""
    from interp.jobs.training import run_experiment
    from interp.training.experiments import ExperimentFailed
    from interp.training.results import save_records

    dirs = []
    for exp in experiments(cfg):
        report = run_experiment(exp, jobs=cfg.jobs)
        if figures_dir is not None:
            save_records(dataclasses.replace(exp, records=Path(figures_dir) / RECORDS_DIR / exp.name))
        if report.failed:
            raise ExperimentFailed(report)
        dirs += [exp.run_dir(v, seed) for v, seed, _ in exp.configs()]
    return [*dirs, *map(Path, cfg.run_dirs)]


def model_tables(cfg: Config, figures_dir: Path | None = None) -> list[tuple[str, str, pd.DataFrame]]:
    """(label, spec, probe table with causal rows) of every installed model and finished run."""
    from interp.causal import probe  # interp.probes.probe refuses causal=True: the causal rows are joined there

    runs = trained_runs(cfg, figures_dir)   # first: hours of training fail (or finish) before the probes start
    out = []
    for name in novelty_pretrained.installed_models(novelty_pretrained.Config(models=cfg.models)):
        out.append((name, name, probe(name, config=cfg.probe)))
    for run in novelty_tapered.finished_runs(novelty_tapered.Config(run_dirs=tuple(map(str, runs)))):
        df = probe(str(run), config=dataclasses.replace(cfg.tiny_probe, backend="hookpoints"))
        out.append((run_label(run), str(run), df))
    return out


def run_label(run: Path) -> str:
    """<experiment>/<variant>/seed<k> for a run of an experiment, else the folder's name."""
    parts = run.parts
    return "/".join(parts[-3:]) if len(parts) >= 3 and parts[-1].startswith("seed") else run.name


def group_of(label: str) -> str:
    """The group a table label belongs to: <experiment>/<variant> for a seeded run, else the label itself."""
    head, _, last = label.rpartition("/")
    return head if head and last.startswith("seed") else label


def seed_summary(table: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """One row per group (a pretrained model, or an experiment's variant with its seeds pooled), measure and
    causal effect. A seeded group: the mean of the per-seed Spearman rhos with a Student-t CI over seeds (the
    spread between trained models; clipped to [-1, 1], where a t-interval on a bounded statistic can reach past
    the bound); a single model: its own rho and bootstrap CI over sequences (which cannot include the spread a
    retraining would show)."""
    from interp.stats_intervals import mean_ci

    rows = []
    table = table.assign(group=table["label"].map(group_of))
    for (group, measure, causal), g in table.groupby(["group", "measure", "causal"], sort=False):
        if len(g) == 1 and g["label"].iloc[0] == group:
            r = g.iloc[0]
            rho, low, high, kind = r["spearman_rho"], r["ci_low"], r["ci_high"], "bootstrap over sequences"
        else:
            rho, low, high = mean_ci(g["spearman_rho"].tolist(), confidence)
            low, high, kind = max(low, -1.0), min(high, 1.0), "t over seeds"
        rows.append({"group": group, "measure": measure, "causal": causal, "spearman_rho": rho, "ci_low": low,
                     "ci_high": high, "ci": kind, "n_seeds": len(g), "n_layers": int(g["n_layers"].iloc[0]),
                     "n_sequences": int(g["n_sequences"].iloc[0]), "n_tokens": int(g["n_tokens"].iloc[0]),
                     "text_sha256": g["text_sha256"].iloc[0], "dtype": g["dtype"].iloc[0],
                     "hardware": ", ".join(sorted(set(g["hardware"].astype(str))))})
    return pd.DataFrame(rows)


def compute(cfg: Config, figures_dir: Path) -> None:
    from interp.causal import correlation_table

    tables = model_tables(cfg, figures_dir)
    if not tables:
        print(f"[{NAME}] no model installed and no finished run: nothing to measure", flush=True)
        return
    summary = pd.concat([correlation_table(df, cfg.n_boot, cfg.confidence, cfg.seed).assign(label=label)
                         for label, _, df in tables], ignore_index=True)
    summary["checkpoint"] = summary["checkpoint"].map(repo_relative)
    summary = summary[["label", "model", *[c for c in summary.columns if c not in ("label", "model")]]]
    write_table(summary, figures_dir, TABLE, cfg, NAME)
    write_table(seed_summary(summary, cfg.confidence), figures_dir, SUMMARY_TABLE, cfg, NAME)
    print(summary.pivot_table(index=["label", "measure"], columns="causal", values="spearman_rho")
          .to_string(float_format=lambda v: f"{v:+.2f}"), flush=True)


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure
    from interp.plots.importance import plot_importance_measures

    summary = read_table(figures_dir, SUMMARY_TABLE, NAME)
    return [save_figure(plot_importance_measures(summary), Path(figures_dir) / FIGURE)]
