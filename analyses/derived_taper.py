"""A taper derived from measurement vs the paper's hand-picked cosine 1.5 -> 0.5 vs uniform (issue #13.3).

The loop no other tool closes: measure how much each layer's MLP matters, build widths from that, train.
1. Train the uniform variant's seed 0 (it is also the experiment's uniform seed 0).
2. Measure it causally: the increase in loss when one layer's MLP is skipped (zeroed), per layer
   (interp.ablations.run_pretrained_ablation, skip conditions only), on text from the TRAINING split
   (measuring on the validation split would let the design see the tokens it is judged on).
3. Derive widths ∝ importance ** exponent, monotone if asked, budget-exact (interp.widths
   measured_widths); a second derived variant takes SmolLM2-135M's skip-MLP profile from
   figures/pretrained_capacity_ablation.csv, resampled from 30 layers over normalised depth.
4. Train uniform, cosine 1.5->0.5, cosine 1.75->0.25 (the steepest of that family: a control without
   measurement), derived (tiny) and derived (SmolLM2) for `seeds` seeds; summarise with
   Student-t CIs over seeds and differences paired by seed (vs uniform, and derived vs cosine).

    interp figures --only derived_taper      # HEAVY: 4 variants x 5 seeds of `tiny` at 160 steps (~2 min each
                                             # on 2 quiet Intel cores with bf16); resumable, finished runs skip

Runs: runs/derived-<preset>/<variant>/seed<k>/. Tables: figures/derived_taper.csv (one row per variant),
figures/derived_taper_runs.csv (one row per run), figures/derived_taper_profile.csv (the measured
profiles and the widths they give). A widths file per derived variant: runs/derived-<preset>/widths/.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analyses import outputs, read_table, repo_relative, resolve_root, write_table
from analyses.group_ablation import (
    PRESET_HELP,
    ROOT_HELP,
    STEPS_HELP,
    execution_option,
    experiment_files,
    paired_vs,
    train_runs,
)
from interp._util.config import option
from interp.jobs.executors import ExecutorConfig

NAME = "derived_taper"
HEAVY = True  # 25 training runs of `tiny`
TABLE, RUNS_TABLE, FIGURE = experiment_files(NAME)
PROFILE_TABLE = f"{NAME}_profile.csv"
OUTPUTS = outputs(TABLE, RUNS_TABLE, PROFILE_TABLE, FIGURE)
SMOLLM2_TABLE = "pretrained_capacity_ablation.csv"  # committed; its skip_mlp rows are SmolLM2's profile


@dataclass
class Config:
    preset: str = option("tiny", PRESET_HELP)
    seeds: int = option(5, "train seeds 0..N-1 per variant (the issue asks for >= 5)")
    # 160 (not the preset's 250), as train_comparison: 20 runs must fit a session on 2 CPU cores
    steps: int | None = option(160, STEPS_HELP)
    root: str = option("repo:runs", ROOT_HELP)
    exponent: float = option(1.0, "widths follow importance ** exponent")
    monotone: bool = option(True, "force the derived profiles non-increasing (a taper)")
    measure_chars: int = option(400_000, "characters of training-split text the skip-MLP profile is measured on")
    measure_sequences: int = option(64, "sequences (of 128 tokens) per skip condition")
    smollm2: bool = option(True, "add the variant derived from SmolLM2's committed skip-MLP profile")
    # a control: is a derived taper better than the steepest hand-picked one (start + end = 2 keeps the budget)?
    steepest: bool = option(True, "add cosine 1.75 -> 0.25, the steepest cosine taper of the paper's family")
    execution: ExecutorConfig = execution_option()


def _spec_from_rows(rows: pd.DataFrame, cfg: Config, source: str):
    from interp.widths import MEASURED, WidthSpec

    rows = rows.sort_values("layer")
    return WidthSpec(MEASURED, measure=tuple(float(v) for v in rows["delta"]), exponent=cfg.exponent,
                     monotone=cfg.monotone, origin=source)


def measure_profile(run_dir: Path, cfg: Config, work: Path) -> pd.DataFrame:
    """Skip-MLP deltas per layer of the checkpoint in run_dir, on training-split text (rows: kind skip_mlp)."""
    from interp import data
    from interp._util.io import write_text_atomic
    from interp.ablations import AblationConfig, run_pretrained_ablation
    from interp.training.checkpoints import read_config

    train = read_config(run_dir).get("train") or {}
    text = data.heldout_text(train.get("source", "wiki"), "train", float(train.get("val_fraction", 0.05)))
    text_file = work / "measure_text.txt"
    write_text_atomic(text_file, text[: cfg.measure_chars])
    ablation = AblationConfig(model=str(run_dir), text=str(text_file), fractions=(), groups=(), selections=(),
                              seeds=(), skip_layers=None, score_sequences=1, eval_sequences=cfg.measure_sequences)
    return run_pretrained_ablation(ablation)


def experiment(cfg: Config, variants: list | None = None):
    from interp.training.experiments import Experiment, Variant

    base = [Variant("uniform"), Variant("cosine-1.5-0.5", {"schedule": "cosine", "start": 1.5, "end": 0.5})]
    if cfg.steepest:
        base.append(Variant("cosine-1.75-0.25", {"schedule": "cosine", "start": 1.75, "end": 0.25}))
    overrides = {"steps": cfg.steps} if cfg.steps is not None else {}
    return Experiment(name=f"derived-{cfg.preset}", preset=cfg.preset, variants=base + list(variants or []),
                      seeds=list(range(cfg.seeds)), root=resolve_root(cfg.root), overrides=overrides)


def compute(cfg: Config, figures_dir: Path, data=None, train: bool = True) -> pd.DataFrame:
    """Train what is missing (train=False: only tabulate the finished runs; the measured run must exist),
    measure, derive, and write the three tables; returns the summary."""
    from interp._util.io import write_json_atomic
    from interp.jobs.training import submitted
    from interp.training.experiments import ExperimentFailed, Variant
    from interp.training.results import experiment_runs, summarize
    from interp.widths import WIDTHS_FORMAT

    figures_dir = Path(figures_dir)
    first = experiment(cfg)
    first.seeds = [0]
    first.variants = first.variants[:1]
    # uniform seed 0: the model that is measured, so this stage waits for its run even under --no-wait
    report = train_runs(first, cfg, data, wait=True) if train else None
    if report is not None and report.failed:
        raise ExperimentFailed(report)
    measured_dir = first.run_dir(first.variants[0], 0)
    work = Path(first.dir) / "widths"
    work.mkdir(parents=True, exist_ok=True)
    profile = measure_profile(Path(measured_dir), cfg, work)
    skips = profile[profile["kind"] == "skip_mlp"].assign(profile="tiny uniform seed0")
    specs = {"derived-tiny": _spec_from_rows(skips, cfg, f"skip_mlp delta of {cfg.preset} uniform seed0")}
    if cfg.smollm2:
        smol = read_table(figures_dir, SMOLLM2_TABLE, "pretrained_ablation")
        smol = smol[(smol["kind"] == "skip_mlp") & (smol["model"] == "smollm2-135m")].assign(profile="smollm2-135m")
        specs["derived-smollm2"] = _spec_from_rows(smol, cfg, "skip_mlp delta of smollm2-135m (30 layers, resampled)")
        skips = pd.concat([skips, smol], ignore_index=True)
    variants = [Variant(name, {"width": spec}) for name, spec in specs.items()]
    for name, spec in specs.items():
        write_json_atomic(work / f"{name}.json", {"format": WIDTHS_FORMAT, "width": spec.to_dict(), "label": spec.label})
    exp = experiment(cfg, variants)
    report = train_runs(exp, cfg, data) if train else None
    if submitted(report):   # --no-wait: the runs are queued; the rerun collates
        return pd.DataFrame()
    runs = experiment_runs(exp)
    order = [v.name for v in exp.variants]
    summary = paired_vs(summarize(runs, order=order), runs, "cosine-1.5-0.5", "vs_cosine", order)
    cfg_widths = exp.configs()[0][2]
    skips = skips.assign(widths_for=skips["profile"].map(
        {"tiny uniform seed0": str(specs["derived-tiny"].widths(cfg_widths.n_layers, cfg_widths.d_ff)),
         "smollm2-135m": str(specs["derived-smollm2"].widths(cfg_widths.n_layers, cfg_widths.d_ff))
         if "derived-smollm2" in specs else ""}))
    skips = skips.assign(model=skips["model"].map(repo_relative))
    write_table(skips[["profile", "model", "layer", "delta", "delta_ci_low", "delta_ci_high", "loss", "n_tokens",
                       "text_source", "text_sha256", "widths_for",
                       # what made each row (the ablation table's own columns)
                       "seq_len", "dtype", "device", "hardware", "versions"]], figures_dir, PROFILE_TABLE, cfg, NAME)
    write_table(runs, figures_dir, RUNS_TABLE, cfg, NAME)
    write_table(summary, figures_dir, TABLE, cfg, NAME)
    if report is not None and report.failed:
        raise ExperimentFailed(report)
    return summary


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure
    from interp.plots.derived import plot_derived_taper

    summary = read_table(figures_dir, TABLE, NAME)
    runs = read_table(figures_dir, RUNS_TABLE, NAME)
    profile = read_table(figures_dir, PROFILE_TABLE, NAME)
    return [save_figure(plot_derived_taper(summary, runs[runs["status"] == "done"], profile),
                        Path(figures_dir) / FIGURE)]
