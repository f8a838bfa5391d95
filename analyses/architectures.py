"""Does the taper carry over to other architectures? (paper: Transformer++, Gated Attention, Hope-attention, Titans)

For each token mixer (interp.model.mixers.MIXERS: attention = Transformer++, gated_attention, hope_attention,
titans = Titans MAG) two width variants with identical parameter counts *within the mixer*: uniform and
the paper's frozen choice, cosine 1.5->0.5 (docs/mixers.md: only the SwiGLU MLP is tapered; the mixer and
its memories are the same in both). Same preset, data, steps and seeds everywhere; per mixer: mean
validation perplexity with a 95% Student-t CI over seeds, and tapered minus uniform paired by seed with
its t-CI (interp.training.results.summarize).

    interp ablate architectures --preset tiny --seeds 2                   # reduced CPU budget, below
    interp ablate architectures --preset tiny --seeds 2 --budget preset   # the preset's own (a GPU)
    torchrun --nproc_per_node=8 -m interp.cli ablate architectures --preset 760m --set grad_accum=1

Runs: runs/architectures-<preset>[-full]/<mixer>/<variant>/seed<k>/: one interp.training.experiments.Experiment
whose variants are the eight arms "<mixer>/<width>", each overriding mixer (+ mixer_options) and width;
"-full" marks --budget preset where the preset also has a CPU budget, so the two never mix. The runner
goes seed-major (seed 0 of every mixer and variant, then seed 1), so a stopped comparison already holds
complete pairs; parameter counts are equal within each mixer. Rerun = resume. `--mixers` trains a subset
into the same directories.
Tables: figures/architectures.csv (one row per mixer x variant, with the paper's column) and
figures/architectures_runs.csv (one row per run, with the device and dtype it trained on).

Budgets. --budget preset: the tiny preset exactly as the group ablation and the sweep use it (250 steps
x 8 x 256 = 512k tokens, lr 2e-3, bf16 autocast where native). On an H200 that took 6-8 s per run for
attention and gated attention and 60-75 s for Titans and Hope-attention (their many small kernels).
On 2 quiet CPU cores (AMD EPYC, fp32, 1 thread per run, two at once; measured 2026-12-02/03) a run took
385-421 s for attention and gated attention, 639-692 s for Hope-attention and 1,876-1,906 s for Titans
(~270 tokens/s): the 16 runs in ~1.9 h of wall time. --budget cpu (the default; CPU_BUDGETS["tiny"], the
same for every mixer): n_ctx 128, 60 steps x 8 sequences = 61,440 training tokens per run, warm-up 10,
one evaluation at the end on 8 fixed validation batches (8,192 tokens), one thread per run. Measured
forward + backward + AdamW, one thread, 8 x 128, on a shared 2-core machine (load 6-7, so slow): attention
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

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analyses import outputs, read_table, resolve_root
from analyses.group_ablation import (
    JOBS_HELP,
    NAME_HELP,
    ONLY_HELP,
    PRESET_HELP,
    ROOT_HELP,
    SEEDS_HELP,
    execution_option,
    experiment_files,
    train_and_record,
    write_experiment_tables,
)
from interp._util.config import json_object, option, path_component
from interp.jobs.executors import ExecutorConfig
from interp.widths import WidthSpec

NAME = "architectures"
HEAVY = True  # 16 training runs (~75 min on 2 loaded cores): `--recompute` re-renders unless named with --only
TABLE, RUNS_TABLE, FIGURE = experiment_files(NAME)
OUTPUTS = outputs(TABLE, RUNS_TABLE, FIGURE)

# The paper's four architectures, cheapest first on a CPU (that is also the training order).
MIXERS: tuple[str, ...] = ("attention", "gated_attention", "hope_attention", "titans")
ARCHITECTURE_NAMES = {"attention": "Transformer++", "gated_attention": "Gated Attention",
                      "hope_attention": "Hope-attention", "titans": "Titans (MAG)", "titans_lmm": "Titans (LMM)"}
BASELINE = WidthSpec()                      # uniform
TAPERED = WidthSpec("cosine", 1.5, 0.5)     # the paper's frozen choice for the architecture comparison
ARM_SEP = "/"                               # variant name of an arm: "<mixer>/<width variant>"

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
    preset: str = option("tiny", PRESET_HELP)
    seeds: int = option(2, SEEDS_HELP)  # seeds 0..seeds-1; a CI needs >= 2
    # None = CPU_BUDGETS[preset]["steps"], else the preset's
    steps: int | None = option(None, "training steps per run (default: the budget's)")
    mixers: tuple[str, ...] = option(MIXERS, "comma-separated token mixers to compare", metavar="MIXER[,MIXER]")
    root: str = option("repo:runs", ROOT_HELP)
    name: str | None = option(None, NAME_HELP, parse=path_component)  # default "architectures-<preset>[-full]"
    # subset of width-variant names ("uniform", "cosine-1.5-0.5")
    only: tuple[str, ...] = option((), ONLY_HELP, metavar="VARIANT[,VARIANT]")
    jobs: int = option(1, JOBS_HELP)
    # TrainConfig fields shared by every run; they win over CPU_BUDGETS (e.g. {"n_ctx": 256, "threads": 2}).
    overrides: dict[str, Any] = option(help="TrainConfig fields shared by every run (--set FIELD=JSON)",
                                       default_factory=dict, cli=False)
    # Per mixer ModelConfig.mixer_options (TrainConfig.mixer_options), e.g. {"titans": {"chunk_size": 64}}.
    mixer_options: dict[str, dict[str, Any]] = option(help="per mixer ModelConfig.mixer_options as JSON, e.g. "
                                                           '\'{"titans": {"chunk_size": 64}}\' (--set '
                                                           "mixer_options gives every mixer the same ones)",
                                                      default_factory=dict, parse=json_object, metavar="JSON")
    # "cpu": CPU_BUDGETS[preset] where the preset has one; "preset": the preset's own steps, n_ctx, ... (GPU)
    budget: str = option("cpu", "cpu: the reduced CPU budget where the preset has one (CPU_BUDGETS); preset: the "
                                "preset's own steps and n_ctx (on a GPU); runs go to architectures-<preset>-full",
                         choices=BUDGETS)
    execution: ExecutorConfig = execution_option()


# -------------------------------------------------------------------------------------- experiments

def width_variants(only: tuple[str, ...] = ()):
    """[uniform, cosine 1.5->0.5] as interp.training.experiments.Variant (names "uniform", "cosine-1.5-0.5")."""
    from interp.training.experiments import select_variants, variant

    return select_variants([variant(BASELINE), variant(TAPERED)], only, where="Config.only")


def _check_mixers(cfg: Config) -> None:
    from interp.model.mixers import MIXERS as REGISTERED

    unknown = [m for m in cfg.mixers if m not in REGISTERED]
    if not cfg.mixers or unknown or len(set(cfg.mixers)) != len(cfg.mixers):
        raise ValueError(f"Config.mixers={list(cfg.mixers)}: need distinct registered mixers "
                         f"(unknown: {unknown}); choose from {sorted(REGISTERED)} (interp/model/mixers/)")
    stray = sorted(set(cfg.mixer_options) - set(cfg.mixers))
    if stray:
        raise ValueError(f"Config.mixer_options has entries for {stray}, which are not in Config.mixers")
    not_dicts = sorted(m for m, options in cfg.mixer_options.items() if not isinstance(options, dict))
    if not_dicts:
        raise ValueError(f"Config.mixer_options (--mixer-options): the entries for {not_dicts} must be JSON objects "
                         'of that mixer\'s options, e.g. {"titans": {"chunk_size": 64}}')
    if cfg.mixer_options and "mixer_options" in cfg.overrides:
        raise ValueError("give mixer options either to every mixer (--set mixer_options=...) or per mixer "
                         "(--mixer-options / Config.mixer_options), not both")


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
    # without a CPU budget a --steps below the preset's warm-up is fitted by Experiment (fit_to_steps), and said
    return overrides


def mixer_overrides(cfg: Config, mixer: str) -> dict[str, Any]:
    """What one mixer's arms override: the mixer and its mixer_options."""
    overrides: dict[str, Any] = {"mixer": mixer}
    options = cfg.mixer_options.get(mixer)
    if options:
        overrides["mixer_options"] = dict(options)
    return overrides


def experiment(cfg: Config):
    """The interp.training.experiments.Experiment this config describes (no training): the arms
    "<mixer>/<width>" in cfg.mixers order x cfg.seeds, in <root>/<name>/<mixer>/<width>/seed<k>/."""
    from interp.training.experiments import Experiment, Variant

    if cfg.seeds < 1:
        raise ValueError(f"Config.seeds must be >= 1, got {cfg.seeds}")
    _check_mixers(cfg)
    arms = [Variant(f"{mixer}{ARM_SEP}{w.name}", {**w.overrides, **mixer_overrides(cfg, mixer)})
            for mixer in cfg.mixers for w in width_variants(cfg.only)]
    return Experiment(name=cfg.name or default_name(cfg), preset=cfg.preset, variants=arms,
                      seeds=list(range(cfg.seeds)), root=resolve_root(cfg.root), overrides=shared_overrides(cfg),
                      equal_params_within=("mixer",))


def default_name(cfg: Config) -> str:
    """architectures-<preset>, with "-full" where a CPU budget exists but the preset's own is used."""
    full = cfg.budget == "preset" and cfg.preset in CPU_BUDGETS
    return f"{NAME}-{cfg.preset}" + ("-full" if full else "")


def split_arm(name: str) -> tuple[str, str]:
    """"titans/cosine-1.5-0.5" -> ("titans", "cosine-1.5-0.5")."""
    mixer, _, width = name.partition(ARM_SEP)
    return mixer, width


def estimate_minutes(cfg: Config, tokens_per_s: dict[str, float] | None = None, eval_factor: float = 1 / 3) -> float:
    """Wall minutes to train every run of cfg at the given training tokens/s per mixer.

    Evaluation forwards eval_batches x batch x n_ctx tokens once per eval (forward only: `eval_factor`
    of a training step's cost per token). Default speeds: MEASURED_TOKENS_PER_S (tiny CPU budget, loaded).
    """
    speeds = tokens_per_s or MEASURED_TOKENS_PER_S
    total = 0.0
    for _, _, tc in experiment(cfg).configs():
        if tc.mixer not in speeds:
            raise ValueError(f"estimate_minutes: no tokens/s for mixer {tc.mixer!r}; pass tokens_per_s")
        n_evals = tc.steps // tc.eval_interval + (tc.steps % tc.eval_interval != 0)
        per_batch = tc.batch_size * tc.n_ctx
        tokens = tc.steps * per_batch + eval_factor * n_evals * tc.eval_batches * per_batch
        total += tokens / speeds[tc.mixer]
    return total / 60.0


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


def tables(exp) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs, summary) rebuilt from the run directories: one row per run, one per mixer x variant.

    The runs table keeps the per-mixer layout these tables always had: `mixer`, then `experiment` = the
    mixer and `variant` = the width variant ("uniform"), not the arm's full name."""
    from interp.training.results import DONE, experiment_runs, summarize

    every = experiment_runs(exp)
    arms = [split_arm(v.name) for v in exp.variants]
    run_tables, summaries = [], []
    for mixer in dict.fromkeys(m for m, _ in arms):
        order = [w for m, w in arms if m == mixer]
        runs = every[every["variant"].isin([f"{mixer}{ARM_SEP}{w}" for w in order])].copy()
        runs["experiment"] = mixer
        runs["variant"] = [split_arm(v)[1] for v in runs["variant"]]
        runs.insert(0, "mixer", mixer)
        run_tables.append(runs)
        summary = summarize(runs, order=order)
        done = runs[runs["status"] == DONE]
        speed = done.groupby("variant")["tokens_per_s"].median()
        # a run that diverged is "done" with a NaN perplexity, which mean_ci drops: count it visibly
        diverged = (~np.isfinite(done["val_ppl"].astype(float))).groupby(done["variant"]).sum()
        summary.insert(0, "architecture", ARCHITECTURE_NAMES.get(mixer, mixer))
        summary.insert(0, "mixer", mixer)
        summary["tokens_per_s_median"] = summary["variant"].map(speed)
        summary["n_diverged"] = summary["variant"].map(diverged).fillna(0).astype(int)
        for col in ("paper_wiki_ppl", "paper_rel_wiki_ppl_pct"):
            summary[col] = [paper_columns(mixer, v)[col] for v in summary["variant"]]
        summary["paper_note"] = paper_note()
        summaries.append(summary)
    runs = pd.concat(run_tables, ignore_index=True) if run_tables else pd.DataFrame()
    return runs, pd.concat(summaries, ignore_index=True)


def compute(cfg: Config, figures_dir: Path, data=None, train: bool = True):
    """Train the missing runs (unless train=False), then write both tables.

    Returns (report or None, summary); raises interp.training.experiments.ExperimentFailed after writing
    if any run failed.
    """
    from interp.jobs.training import submitted
    from interp.training.experiments import ExperimentFailed

    exp, report = train_and_record(experiment(cfg), cfg, figures_dir, train, data)
    if submitted(report):   # --no-wait: the runs are queued; the rerun collates
        return report, None
    runs, summary = tables(exp)
    write_experiment_tables(runs, summary, figures_dir, RUNS_TABLE, TABLE, cfg, NAME)
    if report is not None and report.failed:
        raise ExperimentFailed(report, summary)
    return report, summary


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure
    from interp.plots.architectures import plot_architectures

    summary = read_table(figures_dir, TABLE, NAME)
    runs = read_table(figures_dir, RUNS_TABLE, NAME)
    runs = runs[runs["status"] == "done"]
    return [save_figure(plot_architectures(summary, runs), Path(figures_dir) / FIGURE)]
