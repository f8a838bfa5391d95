"""Full-set evaluations beside the published numbers (issue 49): every document of each task, not the first 200.

    interp figures --only full_set_evals --recompute      # HEAVY: about 3 h for SmolLM2, 1 h for Gemma-3, 2 cores
    interp figures --only full_set_evals --recompute --set evaluate=false   # merge the finished pairs only

Why: at 200 documents a task's 95% half-width is +-0.06 to +-0.07, and every committed number sat inside the
noise of every published one, so nothing could be told apart. Over the whole set (HellaSwag's 10,042 documents:
+-0.010) a bias of our evaluation path of a point or two becomes visible.

compute() runs `interp eval` (interp.evals.run_eval, lm-eval 0.4.13's task definitions, 0-shot) for each
"MODEL:TASKS" entry of Config.plan into one resumable table under runs/ (each finished model/task pair is a part;
a rerun evaluates only what is missing, so the run survives interruption one pair at a time), then writes
  full_set_evals.csv          every accuracy and perplexity row of ours, with n, stderr, 95% CI and provenance;
  full_set_vs_published.csv   one row per published number of interp.evals.published with our number in the
                              same metric: delta, z = delta / our stderr, and a verdict by RULE.
A pair still running is simply absent: the tables hold what has finished (the `complete` column of the
comparison says whether every planned pair of that model is in).

What a difference can and cannot mean: our weights are dequantized 4-bit GGUF copies (SmolLM2-135M-Instruct from
Q4_1, Gemma-3-270m base from Q4_K_M), not the published bf16 weights; a third party measured 0.5-1.3 points lost
from Q8_0 to Q4_K_M on Gemma-2 (../shared/published-numbers.md), so a gap of that size is expected from
quantization alone. The SmolLM2 card scores with lighteval's acc_norm_nospace and its own prompts (HellaSwag's
especially), not lm-eval's: a gap there measures prompt and metric as much as weights. Only rows whose setup
matches ours (0-shot) get a verdict; the others are listed as not comparable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analyses import outputs, read_table, resolve_root, write_table
from interp._util.config import option

NAME = "full_set_evals"
HEAVY = True   # hours on 2 cores: every document of 9 tasks (SmolLM2) and 3 (Gemma-3)
TABLE, COMPARISON, FIGURE = "full_set_evals.csv", "full_set_vs_published.csv", "full_set_vs_published.png"
OUTPUTS = outputs(TABLE, COMPARISON, FIGURE)
Z95 = 1.959963984540054
RULE = ("consistent: the published number lies within our 95% CI (|z| <= 1.96, z = (ours - published) / our "
        "stderr, the published number taken as exact); differs: outside it; not comparable: the published setup "
        "uses few-shot prompts (ours are 0-shot)")
SMOLLM2_TASKS = "arc_challenge,openbookqa,arc_easy,winogrande,piqa,social_iqa,boolq,lambada_openai,hellaswag"
GEMMA3_TASKS = "piqa,arc_easy,boolq"     # the tasks its card reports 0-shot
METRICS = ("acc", "acc_norm", "perplexity")
PROVENANCE = ("data_sha256", "lm_eval_version", "dtype", "batch_size", "device", "hardware", "git_commit", "versions",
              "model_key", "elapsed_s")


@dataclass
class Config:
    plan: tuple[str, ...] = option((f"smollm2-135m:{SMOLLM2_TASKS}", f"gemma3-270m:{GEMMA3_TASKS}"),
                                   "MODEL:TASK,TASK... entries, evaluated on every document, in order")
    evaluate: bool = option(True, "false: evaluate nothing, merge the pairs that have finished (commit the rows "
                                  "of a long run as they complete)")
    threads: int = option(0, "torch.set_num_threads for the evaluations (0: torch's default)")
    out: str = option("repo:runs/eval/full_set.parquet", "the resumable interp eval table (relative: to the working "
                                                              "directory)")


def parse_plan(plan: tuple[str, ...]) -> list[tuple[str, list[str]]]:
    """("model:t1,t2", ...) -> [(model, [t1, t2])]; a ValueError naming the entry and the fix otherwise."""
    out = []
    for entry in plan:
        model, sep, tasks = entry.rpartition(":")
        names = [t for t in tasks.split(",") if t]
        if not sep or not model or not names:
            raise ValueError(f"full_set_evals plan entry {entry!r}: expected MODEL:TASK[,TASK...], e.g. "
                             f"gemma3-270m:{GEMMA3_TASKS}")
        out.append((model, names))
    return out


def ours_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The finished accuracy and perplexity rows of an interp eval table, with their 95% CI (value +- 1.96 stderr,
    lm-eval's stderr: binomial for accuracies, bootstrap for LAMBADA's perplexity)."""
    ok = table[(table["status"] == "ok") & table["metric"].isin(METRICS) & table["limit"].isna()].copy()
    ok["ci_low"] = ok["value"] - Z95 * ok["stderr"]
    ok["ci_high"] = ok["value"] + Z95 * ok["stderr"]
    columns = ["model", "task", "metric", "value", "stderr", "ci_low", "ci_high", "n", "n_docs", "num_fewshot",
               *PROVENANCE]
    return ok.reindex(columns=columns).sort_values(["model", "task", "metric"], ignore_index=True)


def our_number(ours: pd.DataFrame, model: str, task: str, metric: str) -> tuple[float, float, int] | None:
    """(value, stderr, n) of ours for a published (model, task, metric); a DERIVED task (interp.evals.published) is
    formed from its parts as derived_number forms it; None when not measured."""
    from interp.evals.published import DERIVED, derived_number

    parts = DERIVED.get(task, (task,))
    found = [ours[(ours["model"] == model) & (ours["task"] == t) & (ours["metric"] == metric)] for t in parts]
    if any(len(f) != 1 for f in found):
        return None
    numbers = [(float(f["value"].iloc[0]), float(f["stderr"].iloc[0]), int(f["n"].iloc[0])) for f in found]
    return numbers[0] if len(numbers) == 1 else derived_number(numbers)


def comparable(shots: int) -> bool:
    """Whether a published number's setup is ours (0-shot): RULE's "not comparable" otherwise."""
    return int(shots) == 0


def verdict(z: float, comparable: bool) -> str:
    """RULE, as a word."""
    if not comparable:
        return "not comparable"
    if not math.isfinite(z):
        return "not measured"
    return "consistent" if abs(z) <= Z95 else "differs"


def comparison(ours: pd.DataFrame, planned: dict[str, list[str]]) -> pd.DataFrame:
    """One row per published number of a planned model: ours in the same metric, delta, z and the verdict."""
    from interp.evals.published import PUBLISHED

    rows = []
    for p in PUBLISHED:
        if p.model not in planned:
            continue
        got = our_number(ours, p.model, p.task, p.metric)
        value, stderr, n = got if got else (math.nan, math.nan, 0)
        delta = value - p.value
        z = delta / stderr if got and stderr > 0 else math.nan
        same_setup = comparable(p.shots)
        done = all(t in set(ours.loc[ours["model"] == p.model, "task"]) for t in planned[p.model])
        rows.append({"model": p.model, "task": p.task, "metric": p.metric, "ours": value, "stderr": stderr,
                     "ci_low": value - Z95 * stderr, "ci_high": value + Z95 * stderr, "n": n,
                     "published": p.value, "delta": delta, "z": z, "verdict": verdict(z, same_setup),
                     "published_setup": p.setup, "published_shots": p.shots, "ours_setup": "lm-eval 0.4.13 task definitions, 0-shot, every document",
                     "reference": p.reference, "complete": done})
    return pd.DataFrame(rows)


def compute(cfg: Config, figures_dir: Path) -> None:
    from interp.evals import run_eval
    from interp.evals.run import finished

    plan = parse_plan(cfg.plan)
    out = str(resolve_root(cfg.out))
    if cfg.evaluate:
        for model, tasks in plan:
            result = run_eval(models=[model], tasks=",".join(tasks), limit=None, out=out, threads=cfg.threads)
            for name, task, error in result.failed:
                print(f"[{NAME}] {name} / {task} failed: {error}", flush=True)
    table = finished(out)   # read-only: the rows of a run still going on are tabulated as its pairs finish
    ours = ours_rows(table)
    planned = {model: tasks for model, tasks in plan}
    ours = ours[[t in planned.get(m, ()) for m, t in zip(ours["model"], ours["task"])]].reset_index(drop=True)
    write_table(ours, figures_dir, TABLE, cfg, NAME)
    write_table(comparison(ours, planned), figures_dir, COMPARISON, cfg, NAME)


def comparison_markdown(ours: pd.DataFrame, df: pd.DataFrame) -> str:
    """The two tables as figures/README.md shows them (a test checks the README holds exactly this): every full-set
    number of ours, then every published number beside ours with z and the verdict."""
    lines = ["| model | task | metric | ours [95% CI] | n |", "|---|---|---|---|---|"]
    lines += [f"| {r.model} | {r.task} | {r.metric} | {r.value:.4f} [{r.ci_low:.4f}, {r.ci_high:.4f}] | {r.n} |"
              for r in ours.itertuples()]
    lines += ["", "| model | task (metric) | ours [95% CI] | published | z | verdict | published setup |",
              "|---|---|---|---|---|---|---|"]
    for r in df.itertuples():
        mine = f"{r.ours:.4f} [{r.ci_low:.4f}, {r.ci_high:.4f}]" if math.isfinite(r.ours) else "not yet"
        z = f"{r.z:+.2f}" if math.isfinite(r.z) else "-"
        lines.append(f"| {r.model} | {r.task} ({r.metric}) | {mine} | {r.published:.4g} | {z} | {r.verdict} | "
                     f"{r.published_setup} |")
    return "\n".join(lines)


def plot_comparison(df: pd.DataFrame):
    """One row of points per published number: ours with its 95% CI (o), the published number (x); grey where the
    setups differ."""
    import matplotlib
    from matplotlib.figure import Figure

    from interp.plots.style import STYLE

    df = df.reset_index(drop=True)
    source = df["published_setup"].str.split(r"[:,]", regex=True).str[0]    # "model card", "third-party lm-eval"
    labels = [f"{m} {t} {k}, {s}" for m, t, k, s in zip(df["model"], df["task"], df["metric"], source)]
    colors = {"consistent": "#1f77b4", "differs": "#d62728", "not comparable": "#999999", "not measured": "#999999"}
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(7.5, 0.38 * len(df) + 1.4), layout="constrained")
        ax = fig.subplots()
        for i, row in df.iterrows():
            color = colors[row["verdict"]]
            if math.isfinite(row["ours"]):
                ax.errorbar([row["ours"]], [i], xerr=[[row["ours"] - row["ci_low"]], [row["ci_high"] - row["ours"]]],
                            fmt="o", color=color, capsize=3)
            ax.plot([row["published"]], [i], "x", color="black", markersize=7)
        ax.set_yticks(range(len(df)), [f"{lab}  ({v})" for lab, v in zip(labels, df["verdict"])])
        ax.invert_yaxis()
        ax.set_xlabel("accuracy (o: ours on every document, 95% CI; x: published)")
        fig.suptitle("Full-set evaluations vs published numbers (0-shot, lm-eval 0.4.13)")
    return fig


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure

    df = read_table(figures_dir, COMPARISON, NAME)
    return [save_figure(plot_comparison(df), Path(figures_dir) / FIGURE)]
