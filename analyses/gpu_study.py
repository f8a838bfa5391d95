"""The GPU study (issue #35): the group ablation and the cosine-vs-linear cells at >= 10x the CPU study's tokens,
and a ~40M-parameter shape, trained on a lent GPU by scripts/gpu_study.sh; this module defines the runs and
reads their records.

Two experiments, each its own study, never mixed with CPU runs in a paired comparison:

    tiny-gpu   the `tiny` shape (10.5M parameters) on the `english` corpus, bf16, 5 seeds:
               uniform, wider-early / -middle / -late (interp.training.experiments.group_variants) and
               cosine / linear at 1.5->0.5 and 1.75->0.25 (the cells of sweep_variants where the paper's ranking
               and ours disagree); every variant paired by seed with the SAME uniform runs
    wide-gpu   a ~42M-parameter shape (8 x 512, 8 heads, d_ff 2048), uniform vs cosine 1.5->0.5, 3 seeds

Tokens per run = `scale` x the CPU study's (read from figures/records/groups-tiny: 512,000), at most 2 epochs of
the english training split (the epochs are in every run's `notes` and in the runs table). The runs are trained
only on a device (scripts/gpu_study.py); records: figures/records/<experiment>/<variant>/seed<k>/ (config.json,
result.json, log.jsonl), one JSON per device call under figures/records/gpu-study-calls/.

compute() trains nothing: it reads the records into gpu_study_runs.csv (one row per run), gpu_study.csv (per
experiment and variant: val loss / ppl with t-CIs over seeds, the change vs uniform paired by seed, beside the
CPU study's and the paper's change) and gpu_study_contrasts.csv (cosine minus linear at each ratio, in points of
the paired change vs uniform, paired by seed). Without GPU records it says so and writes empty tables.
docs/gpu-study.md says how to run it on a device and how to read it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from analyses import outputs, read_table, resolve_root, write_table
from analyses.group_ablation import PAPER_VAL_PPL as PAPER_GROUPS
from analyses.group_ablation import RECORDS_DIR, ROOT_HELP
from interp._util.config import option

NAME = "gpu_study"
HEAVY = True  # trained on a GPU only (scripts/gpu_study.sh); `interp figures --recompute` re-renders from records
TABLE, RUNS_TABLE, CONTRASTS_TABLE, FIGURE = "gpu_study.csv", "gpu_study_runs.csv", "gpu_study_contrasts.csv", \
    "gpu_study.png"
OUTPUTS = outputs(TABLE, RUNS_TABLE, CONTRASTS_TABLE, FIGURE)

TINY, WIDE = "tiny-gpu", "wide-gpu"
CALLS_DIR = "gpu-study-calls"           # figures/records/gpu-study-calls/<utc>.json: one per device call
CHECK_DIR = "trainer-check-gpu"         # figures/records/trainer-check-gpu/: the 440m kill/resume check
CPU_GROUPS = "groups-tiny"              # the CPU study whose tokens per run `scale` multiplies
MAX_EPOCHS = 2.0
SCHEDULE_CELLS = (("cosine", 1.5, 0.5), ("linear", 1.5, 0.5), ("cosine", 1.75, 0.25), ("linear", 1.75, 0.25))
# The ~40M shape (our choice: d_model x2, depth 8, d_ff x2 of tiny; 42M parameters at the english 8k BPE); lr
# halved from tiny's 2e-3 for a 4x larger model (a guess, the same in both arms).
WIDE_SHAPE = dict(d_model=512, n_layers=8, n_heads=8, d_ff=2048, lr=1e-3, min_lr=1e-4)
# The CPU smoke mode: the micro preset at 3 layers (the group profiles need a multiple of 3), a few steps.
SMOKE_TINY = dict(n_layers=3, d_ff=64)
SMOKE_WIDE = dict(n_layers=3, d_model=48, n_heads=2, d_ff=96)


@dataclass
class Config:
    scale: float = option(10.0, "tokens per run as a multiple of the CPU study's (figures/records/groups-tiny)")
    seeds: int = option(5, "seeds 0..N-1 of the tiny-gpu study (groups and schedule cells)")
    wide_seeds: int = option(3, "seeds of the ~40M wide-gpu study")
    dtype: str = option("bf16", "training precision of every GPU run")
    eval_batches: int = option(64, "validation batches per evaluation (8 x 256 tokens each): 131k tokens")
    root: str = option("repo:runs", ROOT_HELP)
    # the CPU smoke mode (tests, CI): the micro preset, `smoke_steps` steps, its own experiment names
    smoke: bool = option(False, "micro shapes and steps, for checking the path on a CPU (never a result)")
    smoke_steps: int = option(3, "steps per run in the smoke mode")
    # train-split tokens of the data (None: unknown here); only used to write the epochs into each run's notes
    train_tokens: int | None = option(None, "training tokens of the corpus (for the epoch count)", cli=False)


def names(cfg: Config) -> tuple[str, str]:
    """(tiny study, wide study) experiment names: tiny-gpu, wide-gpu (smoke: tiny-gpu-smoke, wide-gpu-smoke)."""
    return (f"{TINY}-smoke", f"{WIDE}-smoke") if cfg.smoke else (TINY, WIDE)


def cpu_tokens_per_run(figures_dir: Path) -> int:
    """The CPU group ablation's tokens per run, from its records (all equal), else the tiny preset's."""
    tokens = set()
    for result in sorted((Path(figures_dir) / RECORDS_DIR / CPU_GROUPS).glob("*/seed*/result.json")):
        tokens.add(int(json.loads(result.read_text())["tokens"]))
    if len(tokens) > 1:
        raise ValueError(f"the CPU records under {CPU_GROUPS} differ in tokens per run: {sorted(tokens)}")
    if tokens:
        return tokens.pop()
    from interp.training.presets import PRESETS

    tiny = PRESETS["tiny"]
    return tiny["steps"] * tiny["batch_size"] * tiny["n_ctx"]


def group_variants():
    from interp.training.experiments import group_variants as variants

    return variants()


def schedule_variants():
    """The four sweep cells of SCHEDULE_CELLS, as sweep_variants defines them (names, widths)."""
    from interp.training.experiments import sweep_variants

    cells = {v.name: v for v in sweep_variants()
             if (v.width.schedule, v.width.start, v.width.end) in set(SCHEDULE_CELLS)}
    if len(cells) != len(SCHEDULE_CELLS):
        raise ValueError(f"sweep_variants() lacks some of {SCHEDULE_CELLS}: found {sorted(cells)}")
    return list(cells.values())


def wide_variants():
    from interp.training.experiments import sweep_variants

    return [v for v in sweep_variants() if v.name in ("uniform", "cosine-1.5-0.5")]


def shared_overrides(cfg: Config, figures_dir: Path, batch_size: int, n_ctx: int) -> dict[str, Any]:
    """TrainConfig fields every run of the study shares (besides its shape)."""
    cpu = cpu_tokens_per_run(figures_dir)
    steps = cfg.smoke_steps if cfg.smoke else math.ceil(cfg.scale * cpu / (batch_size * n_ctx))
    tokens = steps * batch_size * n_ctx
    kw: dict[str, Any] = dict(steps=steps, dtype=cfg.dtype if not cfg.smoke else "fp32")
    if not cfg.smoke:
        kw.update(source="english", eval_batches=cfg.eval_batches, eval_interval=max(1, steps // 10),
                  ckpt_interval=steps, log_interval=25)
    else:
        kw.update(eval_interval=steps, ckpt_interval=steps, log_interval=1, eval_batches=2)
    notes = f"gpu_study: {tokens:,} tokens per run ({cfg.scale:g}x the CPU study's {cpu:,})"
    if cfg.train_tokens:
        epochs = tokens / cfg.train_tokens
        if epochs > MAX_EPOCHS and not cfg.smoke:
            raise ValueError(f"{tokens:,} tokens per run is {epochs:.2f} epochs of the {cfg.train_tokens:,} training "
                             f"tokens; the study allows at most {MAX_EPOCHS} (lower --scale)")
        notes += f" = {epochs:.3f} epochs of the {cfg.train_tokens:,} training tokens"
    kw["notes"] = notes   # a runtime field: never part of a run's identity (config_diff)
    return kw


def experiments(cfg: Config, figures_dir: Path) -> dict[str, Any]:
    """{stage: Experiment} in priority order: groups, schedules (the tiny-gpu experiment restricted to those
    variants: same directories and records, so both pair with one set of uniform runs), wide; plus "tiny": the
    whole tiny-gpu experiment (every variant), which the tables read."""
    from interp.training.experiments import Experiment
    from interp.training.presets import PRESETS

    preset = "micro" if cfg.smoke else "tiny"
    base = PRESETS[preset]
    shared = shared_overrides(cfg, figures_dir, base["batch_size"], base["n_ctx"])
    tiny_name, wide_name = names(cfg)
    records = Path(figures_dir) / RECORDS_DIR
    root = resolve_root(cfg.root)
    shape = SMOKE_TINY if cfg.smoke else {}
    wide_shape = SMOKE_WIDE if cfg.smoke else WIDE_SHAPE

    def exp(name, variants, seeds, overrides):
        return Experiment(name=name, preset=preset, variants=variants, seeds=list(range(seeds)), root=root,
                          overrides=overrides, records=records / name)

    groups, cells = group_variants(), schedule_variants()
    tiny_overrides = {**shared, **shape}
    return {
        "groups": exp(tiny_name, groups, cfg.seeds, tiny_overrides),
        "schedules": exp(tiny_name, [groups[0], *cells], cfg.seeds, tiny_overrides),
        "wide": exp(wide_name, wide_variants(), cfg.wide_seeds, {**shared, **wide_shape}),
        "tiny": exp(tiny_name, [*groups, *cells], cfg.seeds, tiny_overrides),
    }


# ------------------------------------------------------------------------------------------------- tables

def _epochs(record: Path) -> float | None:
    """Tokens trained / training tokens of the data, from a run's config.json and result.json."""
    try:
        config = json.loads((record / "config.json").read_text())
        result = json.loads((record / "result.json").read_text())
        return result["tokens"] / config["data"]["n_tokens"]["train"]
    except (OSError, KeyError, TypeError, ZeroDivisionError, json.JSONDecodeError):
        return None


def cpu_changes(figures_dir: Path) -> dict[str, float]:
    """The CPU studies' mean change vs uniform (%), per variant name, from their stored tables (for reading
    beside the GPU numbers; never paired with them)."""
    out: dict[str, float] = {}
    for table in ("schedule_sweep.csv", "group_ablation.csv"):
        path = Path(figures_dir) / table
        if path.is_file():
            df = pd.read_csv(path)
            out.update(dict(zip(df["variant"], df["rel_val_ppl_pct_mean"], strict=True)))
    return out


def paper_changes() -> dict[str, float]:
    from analyses.schedule_sweep import PAPER_VAL_PPL as PAPER_SWEEP

    paper = {**PAPER_SWEEP, **PAPER_GROUPS}
    return {name: 100.0 * (ppl / paper["uniform"] - 1.0) for name, ppl in paper.items()}


def contrasts(runs: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Cosine minus linear at each ratio of SCHEDULE_CELLS: the per-seed difference of their changes vs uniform
    (points of %), and of their val losses, with t-CIs over the seeds all three finished."""
    from interp.stats import mean_ci
    from interp.training.experiments import slug
    from interp.widths import WidthSpec

    done = runs[runs["status"] == "done"]
    base = done[done["variant"] == "uniform"].set_index("seed")["val_ppl"]
    rows = []
    for start, end in sorted({(s, e) for _, s, e in SCHEDULE_CELLS}):
        cos, lin = (done[done["variant"] == slug(WidthSpec(k, start, end).label)].set_index("seed")
                    for k in ("cosine", "linear"))
        seeds = sorted(set(cos.index) & set(lin.index) & set(base.index))
        d_pct = [100.0 * (cos.at[s, "val_ppl"] - lin.at[s, "val_ppl"]) / base[s] for s in seeds]
        d_loss = [cos.at[s, "val_loss"] - lin.at[s, "val_loss"] for s in seeds]
        row = {"ratio": f"{start}->{end}", "n_pairs": len(seeds), "seeds": ",".join(map(str, seeds))}
        for name, values in (("cos_minus_lin_pct_points", d_pct), ("cos_minus_lin_val_loss", d_loss)):
            row[f"{name}_mean"], row[f"{name}_ci_low"], row[f"{name}_ci_high"] = mean_ci(values, level)
        rows.append(row)
    columns = ["ratio", "n_pairs", "seeds"] + [f"{n}_{s}" for n in ("cos_minus_lin_pct_points",
                                                                    "cos_minus_lin_val_loss")
                                               for s in ("mean", "ci_low", "ci_high")]
    return pd.DataFrame(rows, columns=columns)


def gpu_runs(cfg: Config, figures_dir: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(one row per started run of both studies, from the run directories or the records; the experiments)."""
    from interp.training.results import RUN_COLUMNS, experiment_runs

    exps = experiments(cfg, figures_dir)
    frames = [experiment_runs(exps[k]) for k in ("tiny", "wide")]
    runs = pd.concat([f for f in frames if not f.empty] or [pd.DataFrame(columns=RUN_COLUMNS)], ignore_index=True)
    runs["epochs"] = [_epochs(Path(d)) for d in runs["run_dir"]]
    runs["run_dir"] = [_repo_relative(d) for d in runs["run_dir"]]
    return runs, exps


def _repo_relative(path: str) -> str:
    from analyses import repo_relative

    return repo_relative(path)


def summary_table(runs: pd.DataFrame, exps: dict[str, Any], figures_dir: Path) -> pd.DataFrame:
    """Per experiment and variant: summarize() (t-CIs over seeds, paired vs uniform), the CPU and paper changes."""
    from interp.training.results import summarize

    cpu, paper = cpu_changes(figures_dir), paper_changes()
    parts = []
    for key in ("tiny", "wide"):
        exp = exps[key]
        mine = runs[runs["experiment"] == exp.name]
        if not (mine["status"] == "done").any():
            continue
        s = summarize(mine, order=[v.name for v in exp.variants])
        s.insert(0, "experiment", exp.name)
        s["epochs"] = s["variant"].map(mine.groupby("variant")["epochs"].mean())
        s["hardware"] = s["variant"].map(mine.groupby("variant")["hardware"].agg(lambda h: ";".join(sorted(
            set(map(str, h.dropna()))))))
        s["cpu_rel_val_ppl_pct_mean"] = s["variant"].map(cpu) if key == "tiny" else math.nan
        s["paper_rel_val_ppl_pct"] = s["variant"].map(paper)
        parts.append(s)
    if not parts:
        return pd.DataFrame(columns=["experiment", "variant", "n_seeds", "val_ppl_mean", "rel_val_ppl_pct_mean",
                                     "rel_val_ppl_pct_ci_low", "rel_val_ppl_pct_ci_high", "epochs", "hardware",
                                     "cpu_rel_val_ppl_pct_mean", "paper_rel_val_ppl_pct"])
    return pd.concat(parts, ignore_index=True)


def compute(cfg: Config, figures_dir: Path, data=None, train: bool = False):
    """Read the GPU records (and any run directories under cfg.root) into the three tables; trains nothing (the
    device script does). Returns the summary. Without any finished GPU run it prints why and writes empty tables."""
    figures_dir = Path(figures_dir)
    runs, exps = gpu_runs(cfg, figures_dir)
    summary = summary_table(runs, exps, figures_dir)
    tiny = runs[runs["experiment"] == exps["tiny"].name]
    table = contrasts(tiny) if not tiny.empty else contrasts(runs.iloc[0:0])
    if summary.empty:
        print(f"[{NAME}] no finished GPU runs: nothing under {figures_dir / RECORDS_DIR}/{exps['tiny'].name} or "
              f"/{exps['wide'].name} (the study has not run on a GPU yet: docs/gpu-study.md); the tables are empty")
    for df, name in ((runs, RUNS_TABLE), (summary, TABLE), (table, CONTRASTS_TABLE)):
        write_table(df, figures_dir, name, dataclasses.asdict(cfg), NAME)
    return summary


def render(figures_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from interp.plots import save_figure

    summary = read_table(figures_dir, TABLE, NAME)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [4, 1]})
    if summary.empty:
        for ax in axes:
            ax.axis("off")
        axes[0].text(0.5, 0.5, "GPU study: no GPU records yet (docs/gpu-study.md)", ha="center", va="center")
        return [save_figure(fig, Path(figures_dir) / FIGURE)]
    for ax, (name, g) in zip(axes, summary.groupby("experiment", sort=False), strict=False):
        g = g[g["variant"] != "uniform"].reset_index(drop=True)
        x = range(len(g))
        err = [g["rel_val_ppl_pct_mean"] - g["rel_val_ppl_pct_ci_low"],
               g["rel_val_ppl_pct_ci_high"] - g["rel_val_ppl_pct_mean"]]
        ax.errorbar(x, g["rel_val_ppl_pct_mean"], yerr=err, fmt="o", capsize=3, label="GPU (paired 95% t-CI)")
        ax.plot(x, g["cpu_rel_val_ppl_pct_mean"], "s", mfc="none", label="CPU study (512k tokens)")
        ax.plot(x, g["paper_rel_val_ppl_pct"], "x", label="paper (440M)")
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xticks(list(x), g["variant"], rotation=35, ha="right")
        ax.set_title(f"{name}: {int(g['n_seeds'].max()) if len(g) else 0} seeds")
        ax.set_ylabel("val ppl vs uniform (%)")
    axes[0].legend(fontsize=8)
    return [save_figure(fig, Path(figures_dir) / FIGURE)]
