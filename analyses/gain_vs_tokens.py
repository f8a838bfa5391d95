"""Does the tapering gain shrink, hold or grow as models train longer? (issue 14 §4)

The paired change in validation perplexity of cosine 1.5 -> 0.5 against uniform, at several training lengths,
5 seeds, for both block styles (Transformer++ "llama" and "gpt2", interp.model.arch). One warmup-stable-decay run
per variant and seed gives every length: the run itself is the longest, and each shorter length is a cooldown
branched off its stable phase (interp.training.cooldown; a branch is bit-identical to a run of that length with
its own wsd schedule, tested). The check the issue asks for: one pair (seed 0, llama) is also trained to one
length with its own cosine schedule, the schedule every other experiment here uses, and the table says whether
the ordering and the size of the gain agree with the branch at that length.

The arms (Config.arms, default wider-early and wider-late: the group ablation's profiles) ask the same of
claim 1: does wider-late's penalty, and wider-early's gain, grow or shrink with training? They are paired by
seed with the same uniform runs. Runs trained in another session keep their committed rows (Config.keep: a
recompute rebuilds the rows of the run directories under root and keeps the stored rows of every other run),
so the arms can be trained beside committed uniform and taper runs whose directories are not on this machine.

    interp figures --only gain_vs_tokens --recompute            # HEAVY: both block styles, one after the other

The two block styles are separate experiments (runs/gain-vs-tokens-<arch>/<variant>/seed<k>/), each trained on one
thread, because on these 2-core CPUs two 1-thread runs side by side train 1.47x the tokens of one 2-thread run
(measured: 3,322 vs 4,514 tokens/s for the shape below, fp32, Intel). So run them in two processes:

    python -c "from analyses import gain_vs_tokens as g; g.compute(g.Config(archs=('llama',)), 'figures')" &
    python -c "from analyses import gain_vs_tokens as g; g.compute(g.Config(archs=('gpt2',)), 'figures')" &

Each call trains its archs and rewrites the tables from every gain-vs-tokens run directory under root, so the
tables always hold what has finished (interp.training.results rebuilds from the directories).

The shape is smaller than `tiny` so the study fits the CPU: 6 layers x d_model 128, 4 heads, mean d_ff 512, the
8k BPE of the `english` corpus (8.69M training tokens, so even the longest length is less than one pass: no token
is seen twice), context 256, 8 sequences per step (2,048 tokens); fp32, so the numbers do not depend on the CPU
kind (issue 14 §3). Lengths 256/512/768/1024 steps = 0.52M/1.05M/1.57M/2.10M tokens; each branch cools down over
the last 20% of its own length. Validation: the first 16 fixed batches of the val split (32,768 tokens).

Cost, measured on the 2-core Intel machine (fp32, 1 thread per run, two runs side by side): ~3,100 tokens/s
per run, so a run (2.10M tokens + 0.31M of cooldowns + evaluations) took ~16 min on the loaded machine, and
the 20 runs plus the check pair take ~3 h of wall time in two processes. Longer lengths (e.g. lengths=(256, 512, 1024, 2048), 4.19M
tokens) double that: the longest length was chosen to finish in one working session, not for the question.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analyses import in_study_order, outputs, read_table, resolve_root, write_table
from analyses.group_ablation import ROOT_HELP, execution_option, experiment_files, train_runs
from interp._util.config import option
from interp.jobs.executors import ExecutorConfig

NAME = "gain_vs_tokens"
HEAVY = True  # 40 runs of 2.1M tokens each (20 of them the arms) plus a check pair (~6 h on 2 cores)
TABLE, RUNS_TABLE, FIGURE = experiment_files(NAME)
CURVES_TABLE = f"{NAME}_curves.csv"
TREND_TABLE = f"{NAME}_trend.csv"
OUTPUTS = outputs(TABLE, RUNS_TABLE, CURVES_TABLE, TREND_TABLE, FIGURE)
ARCHS = ("llama", "gpt2")
BASELINE, TAPER = "uniform", "cosine-1.5-0.5"
ARMS = ("wider-early", "wider-late")
VARIANT_ORDER = (BASELINE, TAPER, "wider-early", "wider-middle", "wider-late")  # rows of every table in this order
RUN_KEY = ["arch", "lr_schedule", "variant", "seed", "kind", "steps"]  # one row of RUNS_TABLE
CURVE_KEY = ["arch", "variant", "seed"]  # one run's rows of CURVES_TABLE


@dataclass
class Config:
    preset: str = option("tiny", "preset of every field not set here (optimizer, lr, warm-up, vocabulary, context)")
    archs: tuple[str, ...] = option(ARCHS, "block styles to train (each its own experiment)")
    seeds: int = option(5, "train seeds 0..N-1 per variant and block style (the issue asks for >= 5)")
    lengths: tuple[int, ...] = option((256, 512, 768, 1024), "training lengths in steps of 2,048 tokens; the "
                                      "longest is the run, the others cooldown branches")
    cooldown_fraction: float = option(0.2, "share of each length spent cooling down (Hagele et al.: 20 percent)")
    n_layers: int | None = option(None, "layers; None = the preset's (tiny: 6). The arms' thirds need at least 3")
    d_model: int = option(128, "residual width (smaller than tiny's 256, so the study fits the CPU)")
    n_heads: int = option(4, "attention heads")
    d_ff: int = option(512, "mean MLP width")
    source: str = option("english", "training corpus (interp.data): the largest clean offline one")
    dtype: str = option("fp32", "fp32: the same numbers on either CPU kind (bf16 moves a run by up to 4 percent)")
    threads: int = option(1, "torch threads per run (two 1-thread processes beat one 2-thread one)")
    jobs: int = option(2, "runs trained at once, one process each (run_experiment jobs; 2 = one per core here)")
    eval_batches: int = option(16, "validation batches of 8 x 256 tokens per evaluation")
    eval_interval: int = option(128, "steps between validation passes of the main run (the loss curves)")
    check_steps: int = option(512, "length of the own-schedule (cosine) check pair; 0 skips it")
    check_arch: str = option("llama", "block style of the check pair")
    arms: tuple[str, ...] = option(ARMS, "layer-group profiles trained beside uniform and the taper (interp.widths."
                                   "PROFILES; the issue's arms): does the wider-late penalty grow with training?")
    keep: bool = option(True, "keep the stored rows (figures/gain_vs_tokens_runs.csv, _curves.csv) of runs whose "
                              "directories are not under root, so a recompute of some runs keeps the others")
    root: str = option("repo:runs", ROOT_HELP)
    execution: ExecutorConfig = execution_option()


def experiment(cfg: Config, arch: str):
    """The wsd experiment of one block style: uniform and cosine 1.5 -> 0.5, seeds 0..N-1."""
    from interp.training.experiments import Experiment

    lengths = sorted(cfg.lengths)
    overrides = dict(arch=arch, d_model=cfg.d_model, n_heads=cfg.n_heads, d_ff=cfg.d_ff, source=cfg.source,
                     dtype=cfg.dtype, threads=cfg.threads, steps=lengths[-1], lr_schedule="wsd",
                     cooldown_fraction=cfg.cooldown_fraction, cooldowns=tuple(lengths[:-1]),
                     eval_batches=cfg.eval_batches, eval_interval=cfg.eval_interval, ckpt_interval=cfg.eval_interval,
                     log_interval=16) | ({} if cfg.n_layers is None else {"n_layers": cfg.n_layers})
    return Experiment(name=f"gain-vs-tokens-{arch}", preset=cfg.preset, variants=_variants(cfg.arms),
                      seeds=list(range(cfg.seeds)), root=resolve_root(cfg.root), overrides=overrides)


def check_experiment(cfg: Config):
    """One pair (seed 0) trained to check_steps with its own cosine schedule: does the branch's ordering hold?"""
    from interp.training.experiments import Experiment

    base = experiment(cfg, cfg.check_arch)
    overrides = {k: v for k, v in base.overrides.items() if k not in ("lr_schedule", "cooldowns", "cooldown_fraction")}
    return Experiment(name=f"gain-vs-tokens-{cfg.check_arch}-check", preset=cfg.preset, variants=_variants(), seeds=[0],
                      root=base.root, overrides={**overrides, "steps": cfg.check_steps})


def _variants(arms: tuple[str, ...] = ()):
    """uniform, the taper, then the group profiles named in `arms` (those of interp.training.experiments'
    group ablation, so a run here and there differ only in shape and training length)."""
    from interp.training.experiments import Variant, group_variants, select_variants

    profiles = [v for v in group_variants() if v.name != BASELINE]
    groups = select_variants(profiles, arms, "gain_vs_tokens.Config.arms") if arms else []
    return [Variant(BASELINE), Variant(TAPER, {"schedule": "cosine", "start": 1.5, "end": 0.5}), *groups]


def length_runs(exp, arch: str, schedule: str) -> pd.DataFrame:
    """One row per (run, length): the run's own end, and each finished cooldown branch (also of runs still
    training: a branch is final once its result is written), with the run's provenance columns
    (interp.training.results.RUN_COLUMNS) and the CPU that trained it. A branch written by another config is
    marked stale, as experiment_runs marks runs."""
    from interp._util.io import read_json
    from interp._util.paths import CONFIG_FILE
    from interp.training import cooldown
    from interp.training.config import config_diff
    from interp.training.results import experiment_runs

    expected = {str(exp.run_dir(v, seed)): cfg for v, seed, cfg in exp.configs()}
    rows = []
    for run in experiment_runs(exp).to_dict("records"):
        run_dir, cfg = Path(run["run_dir"]), expected[run["run_dir"]]
        config = read_json(run_dir / CONFIG_FILE) if (run_dir / CONFIG_FILE).is_file() else {}
        hardware = config.get("provenance", {}).get("hardware", {})
        base = {**run, "arch": arch, "lr_schedule": schedule, "cpu": hardware.get("cpu"),
                "bf16_native": hardware.get("bf16_native"), "torch_threads": hardware.get("torch_threads"),
                "kind": "run", "branched_at": None}
        for length in sorted(cfg.cooldowns):
            branch = cooldown.branch_result(run_dir, length)
            if branch is None:
                continue
            stored = read_json(cooldown.branch_dir(run_dir, length) / CONFIG_FILE).get("train", {})
            rows.append({**base, "kind": "cooldown", "status": "stale" if config_diff(stored, cfg) else "done",
                         "steps": branch["step"], "tokens": branch["tokens"], "val_loss": branch["val_loss"],
                         "val_ppl": branch["val_ppl"], "train_loss": branch["train_loss"],
                         "branched_at": branch["branched_at"], "elapsed_s": None, "tokens_per_s": None})
        rows.append(base)
    return pd.DataFrame(rows)


def summarize_lengths(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (arch, schedule, length, variant): mean val ppl with t-CI over seeds, and the change vs uniform
    paired by seed (interp.training.results.summarize at each length)."""
    from interp.training.results import summarize

    parts = []
    for (arch, schedule, steps), g in runs.groupby(["arch", "lr_schedule", "steps"], sort=True):
        s = summarize(g, order=VARIANT_ORDER)
        parts.append(s.assign(arch=arch, lr_schedule=schedule, steps=steps, tokens=int(g["tokens"].iloc[0]),
                              multi_epoch=False))
    if not parts:
        return pd.DataFrame()
    out = pd.concat(parts, ignore_index=True)
    lead = ["arch", "lr_schedule", "steps", "tokens", "variant"]
    return out[lead + [c for c in out.columns if c not in lead]]


def trend(runs: pd.DataFrame) -> pd.DataFrame:
    """The answer to the question, per block style and variant (the taper and each arm, against uniform): per
    seed, the least-squares slope of its % change vs uniform against log2(tokens) over the wsd lengths
    (percentage points per doubling of training), and the change from the shortest to the longest length; mean
    and 95% t-CI over the seeds that finished every length. A negative slope means the change becomes more
    negative with training: a gain that grows, or a penalty that shrinks."""
    import numpy as np

    from interp.stats import mean_ci

    rows = []
    done = runs[(runs["status"] == "done") & (runs["lr_schedule"] == "wsd")]
    for arch, g in done.groupby("arch", sort=True):
        wide = g.pivot_table(index=["seed", "tokens"], columns="variant", values="val_ppl")
        for variant in [v for v in VARIANT_ORDER if v != BASELINE and v in wide.columns and BASELINE in wide.columns]:
            rel = (100.0 * (wide[variant] / wide[BASELINE] - 1.0)).dropna().unstack("tokens")
            rel = rel.dropna()  # seeds with every length
            if rel.empty or rel.shape[1] < 2:
                continue
            x = np.log2(rel.columns.to_numpy(dtype=float))
            slopes = [float(np.polyfit(x, row.to_numpy(dtype=float), 1)[0]) for _, row in rel.iterrows()]
            change = rel.iloc[:, -1] - rel.iloc[:, 0]
            row = {"arch": arch, "variant": variant, "n_seeds": len(rel), "seeds": ",".join(map(str, rel.index)),
                   "tokens": "/".join(str(int(t)) for t in rel.columns)}
            for name, values in (("slope_pct_per_doubling", slopes), ("last_minus_first_pct", change)):
                row[f"{name}_mean"], row[f"{name}_ci_low"], row[f"{name}_ci_high"] = mean_ci(pd.Series(values))
            rows.append(row)
    return pd.DataFrame(rows)


def stored_rows(path: Path, key: list[str]) -> pd.DataFrame | None:
    """The stored table at `path` (None when there is none), checked for the columns that match its rows to
    runs: read before any training, so a damaged table fails at once, not after hours of runs."""
    if not path.is_file():
        return None
    stored = pd.read_csv(path)
    missing = [k for k in key if k not in stored.columns]
    if missing:
        raise ValueError(f"{path}: field {missing[0]} missing, so its rows cannot be matched to runs (restore "
                         f"it with `git checkout {path.name}`, or recompute with --set keep=false)")
    return stored


def with_stored(rebuilt: pd.DataFrame, stored: pd.DataFrame | None, key: list[str], what: str) -> pd.DataFrame:
    """`rebuilt` plus the rows of the `stored` table whose `key` it lacks: the runs trained elsewhere (their
    directories are gitignored, their rows committed), so recomputing some runs keeps the rest. A rebuilt row
    replaces the stored row with its key."""
    if stored is None:
        return rebuilt
    have = (set(map(tuple, rebuilt[key].astype(str).to_numpy())) if len(rebuilt) and set(key) <= set(rebuilt)
            else set())
    kept = stored[[tuple(r) not in have for r in stored[key].astype(str).to_numpy()]]
    if len(kept):
        runs = kept.drop_duplicates([k for k in ("arch", "lr_schedule", "variant", "seed") if k in kept])
        print(f"[{NAME}] kept {len(kept)} stored {what} row(s) of {len(runs)} run(s) not under this root "
              f"(--set keep=false drops them)", flush=True)
    frames = [f for f in (rebuilt, kept) if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else rebuilt


def _in_order(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Block styles in ARCHS order, the wsd runs before the check, variants in VARIANT_ORDER."""
    return in_study_order(df, by, {"arch": ARCHS, "lr_schedule": ("wsd", "cosine"), "variant": VARIANT_ORDER})


def curves(exp, arch: str) -> pd.DataFrame:
    """The main runs' logged losses (train every 16 steps, validation every eval_interval) for the figure."""
    import json

    from interp._util.paths import LOG_FILE

    rows = []
    for v, seed, _ in exp.configs():
        path = exp.run_dir(v, seed) / LOG_FILE
        for line in path.read_text().splitlines() if path.is_file() else ():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            if r.get("kind") in ("train", "eval"):
                rows.append({"arch": arch, "variant": v.name, "seed": seed, "kind": r["kind"], "step": r["step"],
                             "tokens": r["tokens"], "loss": r["loss"] if r["kind"] == "train" else r["val_loss"]})
    return pd.DataFrame(rows, columns=["arch", "variant", "seed", "kind", "step", "tokens", "loss"])


def compute(cfg: Config, figures_dir: Path, data=None, train: bool = True) -> pd.DataFrame:
    """Train cfg.archs (and the check pair when its arch is among them), then rewrite the tables from every
    gain-vs-tokens run directory under root; returns the summary."""
    from interp.jobs.training import submitted
    from interp.training.experiments import ExperimentFailed

    unknown = sorted(set(cfg.archs) - set(ARCHS))
    if unknown:
        raise ValueError(f"gain_vs_tokens.Config.archs: unknown block styles {unknown}; use {list(ARCHS)}")
    figures_dir = Path(figures_dir)
    stored = ((stored_rows(figures_dir / RUNS_TABLE, RUN_KEY), stored_rows(figures_dir / CURVES_TABLE, CURVE_KEY))
              if cfg.keep else (None, None))
    failed, queued = [], False
    if train:  # the check pair first: two short runs, so the schedule check is there early
        checks = [check_experiment(cfg)] if cfg.check_steps and cfg.check_arch in cfg.archs else []
        for exp in checks + [experiment(cfg, arch) for arch in cfg.archs]:
            report = train_runs(exp, cfg, data)
            failed += [report] if report.failed else []
            queued = queued or submitted(report)
    if queued:   # --no-wait: the runs are queued; the rerun collates
        return pd.DataFrame()
    runs, curve_parts = [], []
    for arch in ARCHS:
        exp = experiment(cfg, arch)
        if exp.dir.is_dir():
            runs.append(length_runs(exp, arch, "wsd"))
            curve_parts.append(curves(exp, arch))
    check = check_experiment(cfg)
    if cfg.check_steps and check.dir.is_dir():
        runs.append(length_runs(check, cfg.check_arch, "cosine"))
    runs = pd.concat(runs, ignore_index=True) if runs else pd.DataFrame(columns=RUN_KEY)
    curve = pd.concat(curve_parts, ignore_index=True) if curve_parts else curves(check, cfg.check_arch)
    runs = with_stored(runs, stored[0], RUN_KEY, f"{RUNS_TABLE} run")
    curve = with_stored(curve, stored[1], CURVE_KEY, f"{CURVES_TABLE} loss-curve")
    if not len(runs):
        raise FileNotFoundError(f"no gain-vs-tokens runs under {resolve_root(cfg.root)}: train them first "
                                "(gain_vs_tokens.compute with train=True)")
    runs = _in_order(runs.astype({"seed": "Int64", "steps": "Int64"}), ["arch", "lr_schedule", "variant", "seed"])
    summary = summarize_lengths(runs)
    write_table(_in_order(curve, ["arch", "seed", "variant"]), figures_dir, CURVES_TABLE, cfg, NAME)
    write_table(runs, figures_dir, RUNS_TABLE, cfg, NAME)
    write_table(trend(runs), figures_dir, TREND_TABLE, cfg, NAME)
    write_table(summary, figures_dir, TABLE, cfg, NAME)
    if failed:
        raise ExperimentFailed(failed[0])
    return summary


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure
    from interp.plots.gain_vs_tokens import plot_gain_vs_tokens

    summary = read_table(figures_dir, TABLE, NAME)
    curve = read_table(figures_dir, CURVES_TABLE, NAME)
    runs = read_table(figures_dir, RUNS_TABLE, NAME)
    return [save_figure(plot_gain_vs_tokens(summary, curve, runs[runs["status"] == "done"]),
                        Path(figures_dir) / FIGURE)]
