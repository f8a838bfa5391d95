"""The paper's evaluations on the layer-group ablation's checkpoints (issue 12): does wider-early beat uniform on
the paper's tasks too, or only in held-out perplexity?

    interp experiment groups --preset tiny --seeds 3 --jobs 2 --set threads=1 --out /tmp/groups-ckpt  # weights
    interp figures --only downstream_groups --recompute                                 # HEAVY: evaluate them
    interp experiment eval runs/rivals-tiny --baseline uniform --out results/rivals        # any experiment

(The first command trains the runs' weights into the repository's runs/groups-tiny/, the default --root, wherever
it is started; a path given on the command line, as the --root of the first or the EXPERIMENT_DIR of the third, is
read from the working directory. Its `--out` elsewhere keeps the committed records of figures/records/groups-tiny/
out of sight, which would otherwise skip every recorded run, and keeps figures/group_ablation.csv as it is. Same
config, so the same models up to the CPU kind. `interp ablate groups` and `interp eval-experiment` are older
names of the same commands.)

compute() runs `interp eval` (interp.evals.run_eval: lm-eval 0.4.13 with its own task definitions, our offline
sets) on the final model of every finished run under Config.runs that still has its weights, into a resumable
table under runs/ (a rerun evaluates only what is missing), and summarises it per variant over seeds:

- figures/downstream_groups_runs.csv: one row per run x task x metric (value, lm-eval's stderr, n documents, the
  run's variant, seed and hardware, the data's sha256), plus the run's own validation perplexity (task
  `training_val`, the held-out split it was validated on while training) so the two can be read side by side;
- figures/downstream_groups.csv: per variant x task x metric, the mean over seeds with its 95% t-CI, and the
  difference from the baseline variant paired by seed: mean, t-CI over seeds (model noise) and the documents'
  stderr of that mean (sqrt(sum over seeds of se_variant^2 + se_baseline^2) / n_pairs; an upper bound, since both
  models answer the same documents). Perplexities also as a percentage change (rel_pct_*), as in group_ablation.
- the verdict columns, by the report's one rule (interp.stats_intervals.change_ci; analyses/report.py): `change`
  on `scale` "difference" (accuracies) or "log ratio" (perplexities: ln(ppl / ppl_baseline) per seed, the
  documents' stderr by the delta method, since a perplexity of 7e7 at chance has no meaningful difference),
  `change_ci_*` its 95% interval over seeds and documents together, and `resolved` = its interval at the
  Bonferroni level of its `family` (the variant's testable accuracies, its perplexities, or its training_val
  row: `family_size` tests, each at `family_level`; `change_fw_*`) excludes 0. The figure's star is `resolved`,
  and the report's verdicts read the same columns. A comparison whose paired differences are all 0 (every
  model answers alike) is no test (`testable` False): never resolved, not counted in its family.

Any experiment root works (`interp experiment eval ROOT`, or Config.runs): the variants are its run directories'
names, the baseline is Config.baseline. A root of nested arms (architectures: <mixer>/<width>/seed<k>) names its
variants "<mixer>/<width>" and pairs each with its own arm's baseline ("attention/cosine-1.5-0.5" with
"attention/uniform"). Only runs with weights can be evaluated: runs known from their committed records
alone (figures/records/) are skipped with a note, so the seeds here can be fewer than group_ablation's.
Tiny models sit at chance on most tasks; expect only the perplexities (LAMBADA, wiki_heldout, training_val) to
resolve differences at this scale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analyses import outputs, read_table, repo_relative, resolve_root, write_table
from analyses.architectures import ARM_SEP  # "<arm>/<variant>": a run of a nested experiment
from interp._util.config import option
from interp._util.devices import device_option
from interp.jobs.executors import ExecutorConfig

NAME = "downstream_groups"
HEAVY = True   # 12 tiny checkpoints x the paper set at --limit 200: 5.4 min on 2 Intel cores (measured)
TABLE, RUNS_TABLE, FIGURE = "downstream_groups.csv", "downstream_groups_runs.csv", "downstream_groups.png"
OUTPUTS = outputs(TABLE, RUNS_TABLE, FIGURE)
TRAINING_VAL = "training_val"      # the pseudo-task of each run's own validation perplexity (result.json)
# What the summary keeps: each commonsense task in the paper's metric, the 8-task average, and the perplexities.
PERPLEXITIES = {"lambada_openai": "perplexity", "wiki_heldout": "word_perplexity", TRAINING_VAL: "val_ppl"}
RUN_COLUMNS = ("variant", "label", "seed", "task", "metric", "value", "stderr", "n", "limit", "num_fewshot",
               "task_version", "params", "widths", "dtype", "hardware", "eval_hardware", "eval_dtype", "data_source",
               "data_sha256", "checkpoint", "model_key", "versions", "git_commit")
# hardware, dtype: where and how the run was trained (its result.json); eval_hardware, eval_dtype (of the weights
# as evaluated), versions, git_commit: the evaluation's (training_val rows: the training's)


@dataclass
class Config:
    runs: str = option("repo:runs/groups-tiny", "experiment root whose finished runs are evaluated (relative: to "
                                                "the working directory)")
    baseline: str = option("uniform", "variant every other is paired with, seed by seed")
    tasks: str = option("paper", "interp eval --tasks")
    limit: int = option(200, "documents per task (interp eval --limit)")
    threads: int = option(0, "torch threads (0: torch's default)")
    device: str = device_option()
    out: str = option("repo:runs/eval/downstream_groups.parquet", "the resumable interp eval table (relative: to "
                                                                  "the working directory)")
    tabulate_only: bool = option(False, "evaluate nothing: rebuild the summary table from the stored runs table "
                                        "(after a change to the summary's rules)")
    execution: ExecutorConfig = field(default_factory=ExecutorConfig, metadata={"cli": False})  # where tasks run


def paper_metrics() -> set[tuple[str, str]]:
    """The (task, metric) pairs the summary keeps (LAMBADA has two: accuracy and perplexity)."""
    from interp.evals.tasks import PAPER_AVERAGE, PAPER_METRICS

    return {*PAPER_METRICS.items(), (PAPER_AVERAGE, "acc"), *PERPLEXITIES.items()}


def finished_runs(root: Path, name: str = NAME) -> pd.DataFrame:
    """The finished runs under root that still have their weights (a note for those that do not)."""
    from interp._util.paths import WEIGHTS_FILE
    from interp.training.results import DONE, collect

    runs = collect(root)
    runs = runs[runs["status"] == DONE]
    nested = runs["experiment"] != root.name   # root/<arm>/<variant>/seed<k>, e.g. architectures' <mixer>/<width>
    runs = runs.assign(variant=[f"{e}{ARM_SEP}{v}" if n else v for e, v, n in
                                zip(runs["experiment"], runs["variant"], nested)],
                       label=[f"{e}: {lab}" if n else lab for e, lab, n in
                              zip(runs["experiment"], runs["label"], nested)])
    has_weights = runs["run_dir"].map(lambda d: (Path(d) / WEIGHTS_FILE).is_file())
    for _, row in runs[~has_weights].iterrows():
        print(f"[{name}] skip {row['variant']} seed {row['seed']}: no weights in {row['run_dir']}", flush=True)
    return runs[has_weights].reset_index(drop=True)


def known_order() -> list[str]:
    """Variant names in the order their experiments define them (uniform, wider-early, -middle, -late, ...)."""
    from interp.training.experiments import VARIANT_SETS

    return [v.name for make in VARIANT_SETS.values() for v in make()]


def baseline_of(variant: str, baseline: str) -> str:
    """The variant `variant` is paired with: `baseline`, or "<arm>/<baseline>" for an arm's "<arm>/<width>"
    (an experiment of nested arms, e.g. architectures: each mixer's tapered model against its own uniform)."""
    arm, sep, _ = variant.rpartition(ARM_SEP)
    return f"{arm}{sep}{baseline}"


def check_baseline(runs: pd.DataFrame, baseline: str) -> None:
    """InputError before any evaluation when some arm has no `baseline` variant to pair with (every comparison
    would be NaN), naming the variants there are."""
    from interp._util.errors import InputError

    variants = list(dict.fromkeys(runs["variant"]))
    missing = [v for v in variants if baseline_of(v, baseline) not in variants]
    if missing:
        names = sorted({v.rpartition(ARM_SEP)[2] for v in variants})
        raise InputError(f"no finished run of variant {baseline!r} to compare {missing[0]!r} with; the variants "
                         f"are {names}", field="--baseline", fix="name one of them")


def variant_order(variants: list[str], baseline: str) -> list[str]:
    """Arms in order of first appearance; within each, the baseline, then known_order(), then the rest sorted."""
    rank = {w: i for i, w in enumerate(dict.fromkeys([baseline, *known_order()]))}
    arms = dict.fromkeys(v.rpartition(ARM_SEP)[0] for v in variants)
    return [v for arm in arms for v in sorted((v for v in variants if v.rpartition(ARM_SEP)[0] == arm),
                                              key=lambda v: (rank.get(v.rpartition(ARM_SEP)[2], len(rank)), v))]


def run_rows(evals: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The eval rows of the runs' final models in the summary's metrics, joined with variant and seed, plus one
    training_val row per run (RUN_COLUMNS)."""
    keep = paper_metrics()
    ok = evals[(evals["status"] == "ok") & evals["context_length"].isna()]
    ok = ok[[pair in keep for pair in zip(ok["task"], ok["metric"])]]
    by_dir = runs.assign(checkpoint=runs["run_dir"].map(repo_relative))
    ok = ok.assign(checkpoint=ok["checkpoint"].map(repo_relative), eval_hardware=ok["hardware"],
                   eval_dtype=ok.get("dtype", ""))      # eval tables before 2026-12-03: none
    joined = ok.drop(columns=["label", "hardware", "dtype"], errors="ignore").merge(   # versions, git_commit: the evaluation's (lm-eval too)
        by_dir[["checkpoint", "variant", "label", "seed", "params", "widths", "dtype", "hardware"]], on="checkpoint")
    val = by_dir.assign(task=TRAINING_VAL, metric="val_ppl", value=by_dir["val_ppl"], stderr=math.nan,
                        n=math.nan, limit=math.nan, num_fewshot=math.nan, task_version="", eval_hardware="",
                        eval_dtype="",
                        data_source=by_dir["source"], data_sha256=by_dir["source_hash"], model_key="")
    both = pd.concat([joined[list(RUN_COLUMNS)], val[list(RUN_COLUMNS)]], ignore_index=True)
    return both.sort_values(["task", "variant", "seed"], ignore_index=True)


FAMILIES = ("accuracy", "perplexity", "training")   # the claims a variant's comparisons test, corrected apart


def family_of(task: str, metric: str) -> str:
    """Which claim a comparison tests: the paper's task accuracies, held-out perplexities, or the runs' own
    validation perplexity (training_val, the group ablation's claim read again)."""
    return FAMILIES[2] if task == TRAINING_VAL else FAMILIES[1] if metric in PERPLEXITIES.values() else FAMILIES[0]


def summarize(rows: pd.DataFrame, baseline: str, order: list[str] | None = None, level: float = 0.95
              ) -> pd.DataFrame:
    """Per variant x task x metric: mean over seeds [t-CI], and the difference from its baseline (baseline_of)
    paired by seed [t-CI], the documents' stderr of its mean, its percentage form for perplexities, and the
    verdict columns (module docstring): the change over seeds and documents and `resolved`, Bonferroni within
    the variant's family of comparisons."""
    import numpy as np

    from interp.stats import mean_ci
    from interp.stats_intervals import change_ci, direction, family_level

    names = [n for n in (order or sorted(rows["variant"].unique())) if n in set(rows["variant"])]
    out, changes = [], []
    for (task, metric), group in rows.groupby(["task", "metric"], sort=False):
        for name in names:
            g = group[group["variant"] == name]
            if g.empty:
                continue
            base_name = baseline_of(name, baseline)
            base = group[group["variant"] == base_name].set_index("seed")
            row = {"variant": name, "label": g["label"].iloc[0], "task": task, "metric": metric,
                   "n_seeds": len(g), "seeds": ",".join(str(s) for s in sorted(g["seed"])),
                   "n_docs": g["n"].iloc[0], "stderr_mean": g["stderr"].mean()}
            row["value_mean"], row["value_ci_low"], row["value_ci_high"] = mean_ci(g["value"], level)
            paired = g.set_index("seed").join(base[["value", "stderr"]], rsuffix="_base", how="inner")
            k = len(paired)
            row["n_pairs"] = k
            d = paired["value"] - paired["value_base"]
            row["d_mean"], row["d_ci_low"], row["d_ci_high"] = mean_ci(d, level)
            log = metric in PERPLEXITIES.values()
            rel = 100.0 * (paired["value"] / paired["value_base"] - 1.0)
            row["rel_pct_mean"], row["rel_pct_ci_low"], row["rel_pct_ci_high"] = (
                mean_ci(rel, level) if log else (math.nan,) * 3)
            se = (paired["stderr"] ** 2 + paired["stderr_base"] ** 2).sum(skipna=False)
            row["d_doc_stderr"] = math.sqrt(se) / k if k and math.isfinite(se) else math.nan
            # the verdict's scale: a difference of accuracies, the log ratio of perplexities (delta-method stderr)
            diffs = np.log(paired["value"] / paired["value_base"]) if log else d
            rel_se = ((paired["stderr"] / paired["value"]) ** 2
                      + (paired["stderr_base"] / paired["value_base"]) ** 2).sum(skipna=False) if log else se
            doc_se = math.sqrt(rel_se) / k if k and math.isfinite(rel_se) else math.nan
            row["scale"] = "log ratio" if log else "difference"
            row["change"], row["change_ci_low"], row["change_ci_high"] = change_ci(diffs, doc_se, level)
            row["change_doc_stderr"] = doc_se
            row["family"] = family_of(task, metric)
            testable = bool(name != base_name and k and (np.asarray(diffs, dtype=float) != 0).any())
            out.append(row)
            changes.append((testable, list(diffs), doc_se))
    sizes: dict[tuple[str, str], int] = {}
    for row, (testable, _, _) in zip(out, changes):
        sizes[row["variant"], row["family"]] = sizes.get((row["variant"], row["family"]), 0) + testable
    for row, (testable, diffs, doc_se) in zip(out, changes):
        row["family_size"] = sizes[row["variant"], row["family"]]
        row["family_level"] = family_level(row["family_size"], level)
        _, row["change_fw_low"], row["change_fw_high"] = change_ci(diffs, doc_se, row["family_level"])
        row["testable"] = testable
        row["resolved"] = testable and direction(row["change_fw_low"], row["change_fw_high"]) != 0
    return pd.DataFrame(out)


def tabulate(figures_dir: Path, cfg: Config, files: tuple[str, str] = (TABLE, RUNS_TABLE), name: str = NAME
             ) -> None:
    """The summary table `files[0]` rebuilt from the stored runs table `files[1]` alone (no model is loaded):
    what `--set tabulate_only=true` does after a change to the summary's rules."""
    table, runs_table = files
    rows = read_table(figures_dir, runs_table, name)
    order = variant_order(list(dict.fromkeys(rows["variant"])), cfg.baseline)
    write_table(summarize(rows, cfg.baseline, order), figures_dir, table, cfg, name)


def compute(cfg: Config, figures_dir: Path, files: tuple[str, str] = (TABLE, RUNS_TABLE), name: str = NAME) -> bool:
    """Evaluate (resumable) and write the summary and per-run tables `files` (another analysis of another
    experiment's runs, e.g. downstream_architectures, passes its own file names and `name`). False when this
    process holds no merged eval table to tabulate: a torchrun rank other than 0 (rank 0 tabulates), or a Slurm
    array submitted with --no-wait (the same command, run again once it has finished, tabulates)."""
    from interp._util.devices import resolve_device
    from interp.evals import run_eval

    if cfg.tabulate_only:
        tabulate(figures_dir, cfg, files, name)
        return True
    resolve_device(cfg.device)   # a typo or a missing GPU fails before the runs are even listed
    root = resolve_root(cfg.runs)
    runs = finished_runs(root, name) if root.is_dir() else pd.DataFrame()
    if runs.empty:
        raise FileNotFoundError(f"{root}: no finished run with weights to evaluate (train them first: "
                                f"analyses/{name}.py's docstring gives the command and says why its --out)")
    check_baseline(runs, cfg.baseline)
    result = run_eval(models=list(runs["run_dir"]), tasks=cfg.tasks, limit=cfg.limit, threads=cfg.threads,
                      device=cfg.device, out=str(resolve_root(cfg.out)), execution=cfg.execution)
    for model, task, error in result.failed:
        print(f"[{name}] {model} / {task} failed: {error}", flush=True)
    jobs = result.jobs
    if result.table is None:
        if jobs is not None and jobs.executor == "torchrun":
            print(f"[{name}] rank {jobs.rank}/{jobs.world_size}: evaluated its share; rank 0 writes the tables",
                  flush=True)
        else:
            ids = ", ".join(jobs.job_ids) if jobs is not None else ""
            print(f"[{name}] submitted the evaluations ({ids}); when they have finished, run the same command again "
                  f"to write the tables (`interp jobs status {resolve_root(cfg.out)}` shows where they are)",
                  flush=True)
        return False
    rows = run_rows(result.table, runs)
    table, runs_table = files
    write_table(rows, figures_dir, runs_table, cfg, name)
    order = variant_order(sorted(set(runs["variant"]), key=list(runs["variant"]).index), cfg.baseline)
    write_table(summarize(rows, cfg.baseline, order), figures_dir, table, cfg, name)
    return True


def render(figures_dir: Path, files: tuple[str, str, str] = (TABLE, RUNS_TABLE, FIGURE), name: str = NAME
           ) -> list[Path]:
    from interp.plots import save_figure
    from interp.plots.downstream import plot_downstream_runs

    table, runs_table, figure = files
    summary = read_table(figures_dir, table, name)
    rows = read_table(figures_dir, runs_table, name)
    return [save_figure(plot_downstream_runs(summary, rows), Path(figures_dir) / figure)]
