"""Does the taper carry over to other architectures? (paper: Transformer++, Gated Attention, Hope-attention, Titans)

For each token mixer (interp.model.mixers.MIXERS: attention = Transformer++, gated_attention, hope_attention,
titans = Titans MAG) two width variants with identical parameter counts *within the mixer*: uniform and
the paper's frozen choice, cosine 1.5->0.5 (docs/mixers.md: only the SwiGLU MLP is tapered; the mixer and
its memories are the same in both). Same preset, data, steps and seeds everywhere; per mixer: mean
validation perplexity with a 95% Student-t CI over seeds, and tapered minus uniform paired by seed with
its t-CI (interp.training.experiments.summarize).

    interp ablate architectures --preset tiny --seeds 2                   # reduced CPU budget, below
    interp ablate architectures --preset tiny --seeds 2 --budget preset   # the preset's own (a GPU)
    torchrun --nproc_per_node=8 -m interp.cli ablate architectures --preset 760m --set grad_accum=1

Runs: runs/architectures-<preset>[-full]/<mixer>/<variant>/seed<k>/ (one interp.training.experiments.Experiment
per mixer, because an Experiment's variants differ only in width: the mixer is a shared override);
"-full" marks --budget preset where the preset also has a CPU budget, so the two never mix. Runs go
seed-major over all mixers (seed 0 of every mixer and variant, then seed 1), so a stopped comparison
already holds complete pairs. Rerun = resume. `--mixers` trains a subset into the same directories.
Tables: figures/architectures.csv (one row per mixer x variant, with the paper's column) and
figures/architectures_runs.csv (one row per run, with the device and dtype it trained on).

Budgets. --budget preset: the tiny preset exactly as the group ablation and the sweep use it (250 steps
x 8 x 256 = 512k tokens, lr 2e-3, bf16 autocast where native). On an H200 that took 6-8 s per run for
attention and gated attention and 60-75 s for Titans and Hope-attention (their many small kernels);
on 2 CPU cores Titans would need hours per run. --budget cpu (the default; CPU_BUDGETS["tiny"], the
same for every mixer): n_ctx 128, 60 steps x 8 sequences = 61,440 training tokens per run, warm-up 10,
one evaluation at the end on 8 fixed validation batches (8,192 tokens), one thread per run. Measured
forward + backward + AdamW, one thread, 8 x 128, on the shared 2-core machine (load 6-7): attention
926 tokens/s, gated_attention about the same, hope_attention 387, titans 81 (221 with mixer_options
chunk_size 64): ~75 min for the 16 runs (estimate_minutes). At 61k tokens per run (~0.05 epoch) the
models are far from converged: compare the sign and CI of the paired change, not perplexities, with
the paper's 760M (50B tokens). Presets without a CPU budget (micro, 440m, 760m, 1.3b) always train
with their own settings.

Hope-attention's inner learning rate: with lr_max = 1.0 the uniform tiny model diverged (NaN loss
between steps 25 and 50, --budget preset on the GPU); HopeOptions.lr_max is now 0.1 (docs/mixers.md,
guess 4). A run that diverges still ends "done" with a NaN perplexity: the table counts it
(n_diverged) and the figure marks it; it never enters a mean.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analyses import read_table, write_table
from interp._util.paths import REPO_ROOT
from interp.schedules import WidthSpec

NAME = "architectures"
HEAVY = True  # 16 training runs (~75 min on 2 loaded cores): `--recompute` re-renders unless named with --only
TABLE = "architectures.csv"
RUNS_TABLE = "architectures_runs.csv"
FIGURE = "architectures.png"
OUTPUTS = [TABLE, "architectures.meta.json", RUNS_TABLE, "architectures_runs.meta.json", FIGURE]

# The paper's four architectures, cheapest first on a CPU (that is also the training order).
MIXERS: tuple[str, ...] = ("attention", "gated_attention", "hope_attention", "titans")
ARCHITECTURE_NAMES = {"attention": "Transformer++", "gated_attention": "Gated Attention",
                      "hope_attention": "Hope-attention", "titans": "Titans (MAG)", "titans_lmm": "Titans (LMM)"}
BASELINE = WidthSpec()                      # uniform
TAPERED = WidthSpec("cosine", 1.5, 0.5)     # the paper's frozen choice for the architecture comparison

# Paper, 760M / 50B tokens, WikiText perplexity per architecture as (uniform, tapered): not public.
PAPER_760M_WIKI_PPL: dict[str, tuple[float, float] | None] = {m: None for m in MIXERS}
PAPER_NOTE = ("paper (760M and 1.3B, cosine 1.5->0.5 vs uniform, 4 architectures): tapered better in 7 of 8 "
              "WikiText perplexity and 8 of 8 average-accuracy (8 commonsense tasks) comparisons")

# Same budget for every mixer; keyed by preset. Fields are TrainConfig overrides (see module docstring).
CPU_BUDGETS: dict[str, dict[str, Any]] = {
    "tiny": dict(steps=60, n_ctx=128, warmup_steps=10, eval_interval=60, ckpt_interval=20, threads=1),
}
BUDGETS = ("cpu", "preset")  # Config.budget: CPU_BUDGETS where the preset has one, or the preset's own settings
# Training tokens/s per mixer at the tiny CPU budget (1 thread, 8 x 128, load 6-7): estimate_minutes' default.
MEASURED_TOKENS_PER_S = {"attention": 926.0, "gated_attention": 926.0, "hope_attention": 387.0, "titans": 81.0}


@dataclass
class Config:
    preset: str = "tiny"
    seeds: int = 2                   # seeds 0..seeds-1; a CI needs >= 2
    steps: int | None = None         # None = CPU_BUDGETS[preset]["steps"], else the preset's
    mixers: tuple[str, ...] = MIXERS
    root: str = "runs"               # relative paths resolve against the repo root
    name: str | None = None          # directory under root; default "architectures-<preset>"
    only: tuple[str, ...] = ()       # subset of width-variant names ("uniform", "cosine-1.5-0.5")
    # TrainConfig fields shared by every run; they win over CPU_BUDGETS (e.g. {"n_ctx": 256, "threads": 2}).
    overrides: dict[str, Any] = field(default_factory=dict)
    # Per mixer ModelConfig.mixer_options (TrainConfig.mixer_options), e.g. {"titans": {"chunk_size": 64}}.
    mixer_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    # "cpu": CPU_BUDGETS[preset] where the preset has one; "preset": the preset's own steps, n_ctx, ... (GPU)
    budget: str = "cpu"


# -------------------------------------------------------------------------------------- experiments

def width_variants(only: tuple[str, ...] = ()):
    """[uniform, cosine 1.5->0.5] as interp.training.experiments.Variant (names "uniform", "cosine-1.5-0.5")."""
    from interp.training.experiments import variant

    variants = [variant(BASELINE), variant(TAPERED)]
    if only:
        known = [v.name for v in variants]
        unknown = sorted(set(only) - set(known))
        if unknown:
            raise ValueError(f"Config.only={unknown}: unknown variant(s); choose from {', '.join(known)}")
        variants = [v for v in variants if v.name in only]
    return variants


def _check_mixers(cfg: Config) -> None:
    from interp.model.mixers import MIXERS as REGISTERED

    unknown = [m for m in cfg.mixers if m not in REGISTERED]
    if not cfg.mixers or unknown or len(set(cfg.mixers)) != len(cfg.mixers):
        raise ValueError(f"Config.mixers={list(cfg.mixers)}: need distinct registered mixers "
                         f"(unknown: {unknown}); choose from {sorted(REGISTERED)} (interp/mixers.py)")
    stray = sorted(set(cfg.mixer_options) - set(cfg.mixers))
    if stray:
        raise ValueError(f"Config.mixer_options has entries for {stray}, which are not in Config.mixers")


def shared_overrides(cfg: Config) -> dict[str, Any]:
    """TrainConfig overrides every run gets: the preset's CPU budget, then cfg.overrides, then cfg.steps."""
    if "mixer" in cfg.overrides:
        raise ValueError("Config.overrides may not set 'mixer': the comparison sets it per experiment "
                         "(choose mixers with Config.mixers / --mixers)")
    if cfg.budget not in BUDGETS:
        raise ValueError(f"Config.budget={cfg.budget!r}: choose from {', '.join(BUDGETS)}")
    budget = CPU_BUDGETS.get(cfg.preset, {}) if cfg.budget == "cpu" else {}
    overrides = {**budget, **cfg.overrides}
    if cfg.steps is not None:
        overrides["steps"] = cfg.steps
    if "warmup_steps" in budget and "warmup_steps" not in cfg.overrides and "steps" in overrides:
        overrides["warmup_steps"] = min(budget["warmup_steps"], overrides["steps"])  # --steps 5 stays valid
    return overrides


def mixer_overrides(cfg: Config, mixer: str) -> dict[str, Any]:
    """shared_overrides plus the mixer and its mixer_options."""
    overrides = {**shared_overrides(cfg), "mixer": mixer}
    options = cfg.mixer_options.get(mixer)
    if options:
        overrides["mixer_options"] = dict(options)
    return overrides


def experiments(cfg: Config) -> list:
    """One interp.training.experiments.Experiment per mixer, in cfg.mixers order (no training).

    Each lives in <root>/<name>/<mixer>/ and holds the two width variants x cfg.seeds.
    """
    from interp.training.experiments import Experiment

    if cfg.seeds < 1:
        raise ValueError(f"Config.seeds must be >= 1, got {cfg.seeds}")
    _check_mixers(cfg)
    root = Path(cfg.root)
    root = (root if root.is_absolute() else REPO_ROOT / root) / (cfg.name or default_name(cfg))
    variants = width_variants(cfg.only)
    return [Experiment(name=mixer, preset=cfg.preset, variants=variants, seeds=list(range(cfg.seeds)), root=root,
                       overrides=mixer_overrides(cfg, mixer)) for mixer in cfg.mixers]


def default_name(cfg: Config) -> str:
    """architectures-<preset>, with "-full" where a CPU budget exists but the preset's own is used."""
    full = cfg.budget == "preset" and cfg.preset in CPU_BUDGETS
    return f"{NAME}-{cfg.preset}" + ("-full" if full else "")


def experiment(cfg: Config) -> list:
    """Alias of experiments(), named like the other experiment analyses (it returns a list here)."""
    return experiments(cfg)


def estimate_minutes(cfg: Config, tokens_per_s: dict[str, float] | None = None, eval_factor: float = 1 / 3) -> float:
    """Wall minutes to train every run of cfg at the given training tokens/s per mixer.

    Evaluation forwards eval_batches x batch x n_ctx tokens once per eval (forward only: `eval_factor`
    of a training step's cost per token). Default speeds: MEASURED_TOKENS_PER_S (tiny CPU budget, loaded).
    """
    speeds = tokens_per_s or MEASURED_TOKENS_PER_S
    total = 0.0
    for exp in experiments(cfg):
        for _, _, tc in exp.configs():
            if tc.mixer not in speeds:
                raise ValueError(f"estimate_minutes: no tokens/s for mixer {tc.mixer!r}; pass tokens_per_s")
            n_evals = tc.steps // tc.eval_interval + (tc.steps % tc.eval_interval != 0)
            per_batch = tc.batch_size * tc.n_ctx
            tokens = tc.steps * per_batch + eval_factor * n_evals * tc.eval_batches * per_batch
            total += tokens / speeds[tc.mixer]
    return total / 60.0


# ------------------------------------------------------------------------------------------ running

class ArchitecturesFailed(RuntimeError):
    """Raised after the tables were written if some run failed; carries every mixer's Report."""

    def __init__(self, reports: list):
        super().__init__("\n".join(r.summary() for r in reports))
        self.reports = reports
        self.report = next(r for r in reports if r.failed)


def run_all(exps: list, data=None, log=print) -> list:
    """Train what is missing, seed-major over mixers (seed 0 of every mixer, then seed 1, ...).

    Returns one interp.training.experiments.Report per (seed, mixer) call; stops after an interrupted run.
    """
    from interp.training.experiments import run_experiment

    reports = []
    for seed in sorted({s for exp in exps for s in exp.seeds}):
        for exp in exps:
            if seed not in exp.seeds:
                continue
            report = run_experiment(dataclasses.replace(exp, seeds=[seed]), data=data, log=log)
            reports.append(report)
            if report.interrupted:
                return reports
    return reports


def paper_columns(mixer: str, variant_name: str) -> dict[str, Any]:
    """The paper's 760M WikiText perplexity for this arm and the tapered-vs-uniform change (NaN if not public)."""
    pair = PAPER_760M_WIKI_PPL.get(mixer)
    if pair is None:
        return {"paper_wiki_ppl": math.nan, "paper_rel_wiki_ppl_pct": math.nan}
    uniform, tapered = pair
    ppl = uniform if variant_name == "uniform" else tapered
    return {"paper_wiki_ppl": ppl, "paper_rel_wiki_ppl_pct": 100.0 * (ppl / uniform - 1.0)}


def paper_note() -> str:
    """PAPER_NOTE, plus a statement of which architectures' numbers are not public."""
    missing = [ARCHITECTURE_NAMES.get(m, m) for m, pair in PAPER_760M_WIKI_PPL.items() if pair is None]
    if len(missing) == len(PAPER_760M_WIKI_PPL):
        return PAPER_NOTE + "; per-architecture numbers not public"
    return PAPER_NOTE + (f"; not public for {', '.join(missing)}" if missing else "")


def tables(exps: list) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs, summary) rebuilt from the run directories: one row per run, one per mixer x variant."""
    from interp.training.experiments import DONE, experiment_runs, summarize

    run_tables, summaries = [], []
    for exp in exps:
        runs = experiment_runs(exp)
        runs.insert(0, "mixer", exp.name)
        run_tables.append(runs)
        order = [v.name for v in exp.variants]
        summary = summarize(runs, order=order)
        done = runs[runs["status"] == DONE]
        speed = done.groupby("variant")["tokens_per_s"].median()
        # a run that diverged is "done" with a NaN perplexity, which mean_ci drops: count it visibly
        diverged = (~np.isfinite(done["val_ppl"].astype(float))).groupby(done["variant"]).sum()
        summary.insert(0, "architecture", ARCHITECTURE_NAMES.get(exp.name, exp.name))
        summary.insert(0, "mixer", exp.name)
        summary["tokens_per_s_median"] = summary["variant"].map(speed)
        summary["n_diverged"] = summary["variant"].map(diverged).fillna(0).astype(int)
        for col in ("paper_wiki_ppl", "paper_rel_wiki_ppl_pct"):
            summary[col] = [paper_columns(exp.name, v)[col] for v in summary["variant"]]
        summary["paper_note"] = paper_note()
        summaries.append(summary)
    runs = pd.concat(run_tables, ignore_index=True) if run_tables else pd.DataFrame()
    return runs, pd.concat(summaries, ignore_index=True)


def compute(cfg: Config, figures_dir: Path, data=None, train: bool = True) -> tuple[list, pd.DataFrame]:
    """Train the missing runs (unless train=False), then write both tables.

    Returns (reports, summary); raises ArchitecturesFailed after writing if any run failed.
    """
    exps = experiments(cfg)
    reports = run_all(exps, data=data) if train else []
    runs, summary = tables(exps)
    write_table(runs, figures_dir, RUNS_TABLE, cfg, NAME)
    write_table(summary, figures_dir, TABLE, cfg, NAME)
    if any(r.failed for r in reports):
        raise ArchitecturesFailed(reports)
    return reports, summary


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure
    from interp.plots.architectures import plot_architectures

    summary = read_table(figures_dir, TABLE, NAME)
    runs = read_table(figures_dir, RUNS_TABLE, NAME)
    runs = runs[runs["status"] == "done"]
    return [save_figure(plot_architectures(summary, runs), Path(figures_dir) / FIGURE)]


# ----------------------------------------------------------------------------------------------- CLI

def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `interp ablate architectures`: the shared experiment flags plus --mixers."""
    from interp.cli.sweep import add_experiment_arguments

    add_experiment_arguments(p, seeds=2)
    p.add_argument("--mixers", default=",".join(MIXERS),
                   help=f"comma-separated token mixers to compare (default {','.join(MIXERS)})")
    p.add_argument("--budget", choices=BUDGETS, default="cpu",
                   help="cpu: the reduced CPU budget where the preset has one (CPU_BUDGETS, default); "
                        "preset: the preset's own steps and n_ctx (on a GPU); runs go to architectures-<preset>-full")


def config_from_args(args: argparse.Namespace, command: str) -> Config:
    from interp.cli.sweep import config_from_args as shared_config

    mixers = tuple(m.strip() for m in args.mixers.split(",") if m.strip())
    return dataclasses.replace(shared_config(sys.modules[__name__], args, command), mixers=mixers,
                               budget=args.budget)


def run_cli(args: argparse.Namespace, command: str = "interp ablate architectures") -> int:
    """Train (or skip/resume), tabulate, plot; exit status 0 done, 1 a run failed, 130 interrupted."""
    from interp.cli.sweep import _print_dry_run
    from interp.training.experiments import is_main_rank

    cfg = config_from_args(args, command)
    try:
        exps = experiments(cfg)
        if args.dry_run:
            for exp in exps:
                _print_dry_run(exp)
            print(f"estimated training time at the measured CPU speeds: {estimate_minutes(cfg):.0f} min")
            return 0
    except ValueError as err:
        raise SystemExit(f"{command}: {err} (set any TrainConfig field with --set FIELD=VALUE)") from err
    if not is_main_rank():  # under torchrun: the other ranks only take part in the training
        reports = run_all(exps, log=None) if not args.no_train else []
        return max((r.exit_code for r in reports), default=0)
    try:
        reports, summary = compute(cfg, Path(args.figures_dir), train=not args.no_train)
    except ArchitecturesFailed as failed:
        reports, summary = failed.reports, read_table(Path(args.figures_dir), TABLE, NAME)
    for r in reports:
        if r.failed or r.interrupted:
            print(r.summary())
    cols = ["mixer", "variant", "n_seeds", "params", "val_ppl_mean", "rel_val_ppl_pct_mean",
            "rel_val_ppl_pct_ci_low", "rel_val_ppl_pct_ci_high"]
    if len(summary):
        print(summary[cols].to_string(index=False, float_format=lambda x: f"{x:.2f}"))
        for path in render(Path(args.figures_dir)):
            print(f"[{command}] wrote {path}")
    else:
        print(f"[{command}] no finished runs yet: nothing to tabulate")
    return max((r.exit_code for r in reports), default=0)
