"""The paper's downstream evaluations (Table 2) at our scale: per task, our numbers with their stderr beside the
published numbers of the pretrained models, and tapered vs uniform checkpoints where their runs exist.

    interp figures --only downstream --recompute      # HEAVY: every model on every task (see Config)

compute() runs `interp eval` (interp.evals.run_eval) over the installed registry models and every run found
under Config.runs (by default train_comparison's uniform / cosine pair under runs/figures/, when `make figures` has
trained it; their final models only, Config.checkpoints), into
a resumable table under runs/ (a rerun evaluates only what is missing), and stores the rows the figure needs in
figures/downstream.csv with each row's provenance, and interp.evals.published's model-card numbers as rows of
source "published". Stored rows of pretrained models not evaluated this time are kept (Config.keep).
Experiments of many seeds (the group ablation) are evaluated and summarised per variant by downstream_groups.
Tiny checkpoints sit near chance on most tasks: read their differences against the bars, 95% intervals of 1.96
standard errors (one standard error is sqrt(p(1-p)/n), 0.035 near p = 0.5 at n = 200, so a bar reaches +-0.069),
and expect only LAMBADA and the perplexities to move at this scale. A published task that averages ours
(interp.evals.published.DERIVED: the SmolLM2 card's ARC average) gets our rows computed the same way.
`--set evaluate=false` evaluates nothing: it rewrites the stored table's derived and published rows.
Ours: SmolLM2-135M-Instruct dequantized from Q4_1 (the card reports the unquantized model) and Gemma-3-270m base
from Q4_K_M; 4-bit quantization can cost small models a point or two.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analyses import outputs, read_table, repo_relative, resolve_root, write_table
from interp._util.config import option

NAME = "downstream"
HEAVY = True   # ~1 h per pretrained model at --limit 200 on 2 loaded cores (see docs/evals.md)
TABLE, FIGURE = "downstream.csv", "downstream.png"
OUTPUTS = outputs(TABLE, FIGURE)
# what made each of our rows (interp.evals.table); published rows leave them empty
PROVENANCE = ("model_key", "data_sha256", "lm_eval_version", "device", "dtype", "batch_size", "hardware", "git_commit",
              "versions")
COLUMNS = ("source", "model", "kind", "label", "checkpoint", "task", "metric", "value", "stderr", "n", "limit", "setup",
           "reference", *PROVENANCE)
PRETRAINED_COLORS = ("#1f77b4", "#2ca02c", "#8c564b", "#e377c2")   # schedule colours (red, grey) stay ours
ACCURACY_TASKS = ("lambada_openai", "piqa", "hellaswag", "winogrande", "arc_easy", "arc_challenge", "arc_avg",
                  "social_iqa", "boolq", "paper_avg8")
FIGURE_METRICS = {"paper_avg8": "acc", "arc_avg": "acc_norm"}   # beyond PAPER_METRICS: the metric each panel shows
PANEL_TITLES = {"paper_avg8": "avg (8)", "arc_avg": "ARC avg (e, c)"}


@dataclass
class Config:
    models: tuple[str, ...] = option(("smollm2-135m", "gemma3-270m"), "registry models (skipped if not installed)")
    # train_comparison's pair (make figures trains it); multi-seed experiments go through downstream_groups
    runs: tuple[str, ...] = option(("repo:runs/figures",),
                                   "run roots of our checkpoints (skipped if absent); relative: to the working "
                                   "directory")
    checkpoints: str = option("final", "which checkpoints of each run (interp eval --checkpoints): final = each "
                                       "run's last model")
    keep: bool = option(True, "keep the stored rows of models other than checkpoints that this recompute does not "
                               "evaluate (not installed, or left out: --set models= skips their ~1 h each); each row's "
                               "provenance columns say what made it. Checkpoint rows always come from `runs`")
    tasks: str = option("paper", "interp eval --tasks")
    limit: int = option(200, "documents per task (interp eval --limit)")
    out: str = option("repo:runs/eval/downstream.parquet", "the resumable interp eval table (relative: to the working "
                                                                  "directory)")
    evaluate: bool = option(True, "false: evaluate nothing; rewrite the stored table's derived rows (from its own "
                                  "rows) and published rows (from interp.evals.published)")


def targets(cfg: Config) -> list[str]:
    """The installed registry models and the run roots that exist (a skip line for the others)."""
    from interp.hf import REGISTRY

    found = []
    for name in cfg.models:
        if name in REGISTRY and REGISTRY[name].installed():
            found.append(name)
        else:
            print(f"[{NAME}] skip {name}: not installed", flush=True)
    for root in cfg.runs:
        path = resolve_root(root)
        if path.is_dir():
            found.append(str(path))
        else:
            print(f"[{NAME}] skip {root}: no runs there (train them first: docs/evals.md)", flush=True)
    return found


def figure_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The accuracy rows of an interp eval table (acc and acc_norm) and the published numbers; the figure shows
    each task's paper metric (PAPER_METRICS), so a published number in the other accuracy is in the table only."""
    ok = table[(table["status"] == "ok") & table["task"].isin(ACCURACY_TASKS) & table["context_length"].isna()]
    ours = ok[ok["metric"].isin(("acc", "acc_norm"))]
    setup = "lm-eval " + ours["lm_eval_version"].astype(str) + ", " + ours["num_fewshot"].astype(int).astype(str) \
        + "-shot, interp eval"
    rows = ours.assign(source="ours", setup=setup, reference="",
                       checkpoint=ours["checkpoint"].fillna("").map(repo_relative))
    return with_published(rows.reindex(columns=list(COLUMNS)))


def with_published(df: pd.DataFrame) -> pd.DataFrame:
    """df's own rows ("ours", derived rows dropped), our DERIVED rows computed again from them, and the published
    numbers of interp.evals.published: what a stored table becomes when published.py changes."""
    from interp.evals.published import DERIVED, published_rows

    ours = df[(df["source"] == "ours") & ~df["task"].isin(list(DERIVED))]
    published = pd.DataFrame(published_rows()).assign(source="published", kind="published", label="", checkpoint="",
                                                       stderr=float("nan"), n=0, limit=float("nan"))
    both = pd.concat([ours, derived_rows(ours), published], ignore_index=True)
    return both.reindex(columns=list(COLUMNS))


def derived_rows(ours: pd.DataFrame) -> pd.DataFrame:
    """Per model (or checkpoint) and metric with every part measured, the DERIVED tasks computed as the published
    number is (interp.evals.published.derived_number); setup and provenance from the first part."""
    from interp.evals.published import DERIVED, derived_number

    keys = ["model", "checkpoint", "metric"]
    ours = ours.assign(checkpoint=ours["checkpoint"].fillna(""))
    rows = []
    for task, parts in DERIVED.items():
        for _, g in ours[ours["task"].isin(parts)].groupby(keys, sort=False):
            found = [g[g["task"] == part] for part in parts]
            if any(len(f) != 1 for f in found):
                continue
            value, stderr, n = derived_number([(float(f["value"].iloc[0]), float(f["stderr"].iloc[0]),
                                                int(f["n"].iloc[0])) for f in found])
            first = found[0].iloc[0]
            rows.append({**first.to_dict(), "task": task, "value": value, "stderr": stderr, "n": n,
                         "setup": f"{first['setup']}; mean of {' and '.join(parts)}"})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def published_comparison(df: pd.DataFrame) -> pd.DataFrame:
    """One row per published number (interp.evals.published.PUBLISHED, in its order) with ours of the same
    pretrained model, task and metric from the table: ours, its stderr and n, and z = (ours - published) / stderr
    (the published number taken as exact)."""
    from interp.evals.published import PUBLISHED

    ours = df[(df["source"] == "ours") & (df["kind"] != "checkpoint")]
    rows = []
    for p in PUBLISHED:
        mine = ours[(ours["model"] == p.model) & (ours["task"] == p.task) & (ours["metric"] == p.metric)]
        if len(mine) != 1:
            continue
        value, stderr = float(mine["value"].iloc[0]), float(mine["stderr"].iloc[0])
        rows.append({"model": p.model, "task": p.task, "metric": p.metric, "ours": value, "stderr": stderr,
                     "n": int(mine["n"].iloc[0]), "published": p.value, "z": (value - p.value) / stderr,
                     "shots": p.shots, "setup": p.setup})
    return pd.DataFrame(rows)


def comparison_markdown(df: pd.DataFrame) -> str:
    """published_comparison as the markdown figures/README.md shows (a test checks the README holds exactly it)."""
    table = published_comparison(df)
    lines = ["| model | task (metric) | ours ± 1 stderr (n) | published | z | published setup |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r.model} | {r.task} ({r.metric}) | {r.ours:.4g} ± {r.stderr:.3f} ({r.n}) | {r.published:.4g} | "
              f"{r.z:+.2f} | {r.setup} |" for r in table.itertuples()]
    zero = table[table["shots"] == 0]
    worst = zero.loc[zero["z"].abs().idxmax()]
    half = 1.959964 * table["stderr"]
    lines.append(f"\nOf the {len(zero)} published numbers measured 0-shot, the farthest from ours is {worst['model']} "
                 f"{worst['task']} ({worst['setup']}), |z| = {abs(worst['z']):.2f}. Our 95% half-widths (1.96 stderr) "
                 f"are ±{half.min():.3f} to ±{half.max():.3f}: a smaller difference is not resolved.")
    return "\n".join(lines)


def kept_rows(stored: pd.DataFrame, fresh: pd.DataFrame) -> pd.DataFrame:
    """The stored "ours" rows of models (not checkpoints) that the fresh table does not hold (matched on model and
    checkpoint). Checkpoint rows are never kept: the run roots evaluated now say which checkpoints the figure shows."""
    ours = stored[(stored["source"] == "ours") & (stored["kind"] != "checkpoint")]
    ran = fresh[fresh["source"] == "ours"]
    done = set(zip(ran["model"], ran["checkpoint"].fillna("")))
    return ours[[(m, c) not in done for m, c in zip(ours["model"], ours["checkpoint"].fillna(""))]]


def paper_metric_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows in each task's paper metric (interp.evals.tasks.PAPER_METRICS; the average: acc)."""
    from interp.evals.tasks import PAPER_METRICS

    metric = {**PAPER_METRICS, **FIGURE_METRICS}
    return df[[metric.get(t) == m for t, m in zip(df["task"], df["metric"])]]


def compute(cfg: Config, figures_dir: Path) -> None:
    from interp.evals import run_eval

    stored_path = Path(figures_dir) / TABLE
    if not cfg.evaluate:
        table = with_published(read_table(figures_dir, TABLE, NAME).fillna({"label": "", "checkpoint": ""}))
        write_table(table, figures_dir, TABLE, cfg, NAME)
        print(f"[{NAME}] evaluated nothing: rewrote the derived and published rows of {stored_path}", flush=True)
        return
    models = targets(cfg)
    if not models:
        print(f"[{NAME}] nothing to evaluate", flush=True)
        return
    result = run_eval(models=models, tasks=cfg.tasks, limit=cfg.limit, checkpoints=cfg.checkpoints,
                      out=str(resolve_root(cfg.out)))
    for model, task, error in result.failed:
        print(f"[{NAME}] {model} / {task} failed: {error}", flush=True)
    table = figure_rows(result.table)
    if cfg.keep and stored_path.is_file():
        kept = kept_rows(pd.read_csv(stored_path), table)
        if len(kept):
            print(f"[{NAME}] kept the stored rows of {', '.join(dict.fromkeys(kept['model']))} (not evaluated "
                  f"this time; --set keep=false drops them)", flush=True)
            table = with_published(pd.concat([kept.reindex(columns=list(COLUMNS)), table], ignore_index=True))
    write_table(table, figures_dir, TABLE, cfg, NAME)


def plot_downstream(df: pd.DataFrame):
    """One panel per task: each model's accuracy in the paper's metric with a 95% interval (1.96 stderr), published
    numbers in the same metric as x."""
    import matplotlib
    from matplotlib.figure import Figure

    from interp.plots.style import STYLE, color_for

    df = paper_metric_rows(df)
    tasks = [t for t in ACCURACY_TASKS if t in set(df["task"])]
    ours = df[df["source"] == "ours"]
    series = list(dict.fromkeys(ours["label"].where(ours["label"] != "", ours["model"])))
    ours_names = ours["label"].where(ours["label"] != "", ours["model"])
    pretrained = list(dict.fromkeys(ours_names[ours["kind"] != "checkpoint"]))
    colors = {s: (PRETRAINED_COLORS[pretrained.index(s) % len(PRETRAINED_COLORS)] if s in pretrained
                  else color_for(s, i)) for i, s in enumerate(series)}
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(2.2 * len(tasks), 3.6), layout="constrained")
        axes = fig.subplots(1, len(tasks), squeeze=False)[0]
        for ax, task in zip(axes, tasks):
            rows = ours[ours["task"] == task]
            names = rows["label"].where(rows["label"] != "", rows["model"])
            for i, name in enumerate(series):
                picked = rows[names == name]
                if len(picked):
                    value, err = picked["value"].mean(), 1.96 * picked["stderr"].mean()
                    ax.errorbar([i], [value], yerr=[err], fmt="o", color=colors[name], capsize=3)
                published = df[(df["source"] == "published") & (df["task"] == task) & (df["model"] == name)]
                for _, p in published.iterrows():
                    ax.plot([i + 0.15], [p["value"]], "x", color=colors[name], markersize=7)
            ax.set_xticks(range(len(series)), series, rotation=60, ha="right")
            ax.set_xlim(-0.6, len(series) - 0.4)
            ax.set_title(PANEL_TITLES.get(task, task.replace("_openai", "")))
        axes[0].set_ylabel("accuracy (o: ours, 95% CI; x: published)")
        fig.suptitle("Downstream accuracy, 0-shot (lm-eval 0.4.13 through interp eval)")
    return fig


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure

    df = read_table(figures_dir, TABLE, NAME)
    df["label"] = df["label"].fillna("")
    return [save_figure(plot_downstream(df), Path(figures_dir) / FIGURE)]
