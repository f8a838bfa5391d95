"""lm-eval results -> the tidy table: one row per model x task x metric (x context length x needle depth for
the needle-in-a-haystack tasks), with stderr, n, provenance; the paper's 8-task average; merging parts.

Columns (TABLE_COLUMNS): model, checkpoint, run, label (our checkpoints' config.json label, e.g. "uniform"),
step, revision and commit (a hub model's revision and the commit it resolved to; "" otherwise), kind, task, metric, value, stderr, n, n_docs,
num_fewshot, limit, context_length, depth, status, error, task_version, data_source, data_sha256,
lm_eval_version, versions, device (cpu, cuda:N: where the model ran), dtype (of the model's weights as
evaluated; "" when it failed to load), batch_size (requests per forward: padding moves a score's last bits),
hardware (JSON of this machine's CPU and GPU), git_commit, key, then the model's identity that the probe batch and
ablation tables carry too (weights_sha256, model_key, model_spec: interp.jobs.keys.IDENTITY_COLUMNS), elapsed_s.
Parts written before dtype and batch_size existed have them empty, before weights_sha256 and model_spec "".
status is "ok", "failed" (error says why; the pair is retried by a rerun) or "skipped" (a needle length
beyond the model's context: error says so; nothing is truncated).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp.evals.tasks import PAPER_AVERAGE, PAPER_METRICS
from interp.jobs.parts import merge_table

if TYPE_CHECKING:
    import pandas as pd

TABLE_COLUMNS = ("model", "checkpoint", "run", "label", "step", "revision", "commit", "kind", "task", "metric", "value", "stderr", "n",
                 "n_docs", "num_fewshot", "limit", "context_length", "depth", "status", "error", "task_version",
                 "data_source", "data_sha256", "lm_eval_version", "versions", "device", "dtype", "batch_size", "hardware",
                 "git_commit", "key", "weights_sha256", "model_key", "model_spec", "elapsed_s")
SORT_COLUMNS = ("run", "model", "step", "checkpoint", "task", "metric", "context_length", "depth")
NIAH_METRIC = "string_match_all"


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan   # lm-eval writes "N/A" for a stderr it did not compute


def metric_rows(results: dict[str, Any], task: str) -> list[dict[str, Any]]:
    """{metric, value, stderr, n, n_docs, task_version, num_fewshot} per metric lm-eval reports for `task`
    (its "<metric>,<filter>" keys; only the "none" filter exists in our tasks)."""
    scores = results["results"][task]
    counts = results.get("n-samples", {}).get(task, {})
    rows = []
    for key, value in scores.items():
        metric, sep, filt = key.partition(",")
        if not sep or metric.endswith("_stderr"):
            continue
        name = metric if filt == "none" else f"{metric},{filt}"
        rows.append({"metric": name, "value": _float(value), "stderr": _float(scores.get(f"{metric}_stderr,{filt}")),
                     "n": int(counts.get("effective", 0)), "n_docs": int(counts.get("original", 0)),
                     "task_version": str(results.get("versions", {}).get(task, "")),
                     "num_fewshot": int(results.get("n-shot", {}).get(task, 0) or 0)})
    return rows


def _mean_row(scores: list[float]) -> dict[str, Any]:
    n = len(scores)
    mean = sum(scores) / n
    std = math.sqrt(sum((s - mean) ** 2 for s in scores) / (n - 1)) if n > 1 else math.nan
    return {"value": mean, "stderr": std / math.sqrt(n), "n": n}   # lm-eval's mean_stderr


def niah_rows(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """string_match_all per context length, and per (length, needle depth), from lm-eval's logged samples."""
    by_length: dict[int, list[tuple[float, float]]] = {}
    for sample in samples:
        doc = sample["doc"]
        by_length.setdefault(int(doc["max_length"]), []).append((float(doc["depth"]), float(sample[NIAH_METRIC])))
    rows = []
    for length, scored in sorted(by_length.items()):
        rows.append({"metric": NIAH_METRIC, "context_length": length, **_mean_row([s for _, s in scored])})
        for depth in sorted({d for d, _ in scored}):
            rows.append({"metric": NIAH_METRIC, "context_length": length, "depth": depth,
                         **_mean_row([s for d, s in scored if d == depth])})
    return rows


def frame(rows: list[dict[str, Any]], common: dict[str, Any]) -> pd.DataFrame:
    """Rows + the columns every row of one model/task pair shares, in TABLE_COLUMNS order."""
    import pandas as pd

    df = pd.DataFrame([{**common, **r} for r in rows] or [common])
    for column in TABLE_COLUMNS:
        if column not in df.columns:
            df[column] = math.nan if column in ("value", "stderr", "context_length", "depth", "step") else ""
    for column in ("n", "n_docs", "num_fewshot"):
        df[column] = pd.to_numeric(df[column], errors="coerce").fillna(0).astype("int64")
    for column in ("limit", "batch_size"):
        df[column] = pd.to_numeric(df[column], errors="coerce").astype("float64")
    return df[list(TABLE_COLUMNS)]


def hardware_json(hardware: dict[str, Any]) -> str:
    return json.dumps(hardware, sort_keys=True)


def paper_average(df: pd.DataFrame, metrics: dict[str, str] = PAPER_METRICS) -> pd.DataFrame:
    """The paper's 8-task average per model/checkpoint: the mean of `metrics` (task -> metric) over its eight
    tasks, stderr sqrt(sum stderr^2) / 8 (tasks independent); only where all eight are present, ok, and
    scored with the same --limit and few-shot count."""
    import pandas as pd

    ok = df[(df["status"] == "ok") & df["context_length"].isna()]
    picked = pd.concat([ok[(ok["task"] == t) & (ok["metric"] == m)] for t, m in metrics.items()], ignore_index=True)
    rows = []
    for (model_key, limit, shots), group in picked.groupby(["model_key", "limit", "num_fewshot"], dropna=False):
        if sorted(group["task"]) != sorted(metrics):
            continue
        first = group.iloc[0].to_dict()
        first.update(task=PAPER_AVERAGE, metric="acc", value=float(group["value"].mean()),
                     stderr=float(math.sqrt((group["stderr"] ** 2).sum()) / len(group)), n=int(group["n"].sum()),
                     n_docs=int(group["n_docs"].sum()), key=f"{PAPER_AVERAGE}-{first['key']}", task_version="",
                     data_source=";".join(f"{t}:{m}" for t, m in metrics.items()), data_sha256="", elapsed_s=0.0)
        rows.append(first)
    return pd.DataFrame(rows, columns=df.columns)


def _finish(df: pd.DataFrame) -> pd.DataFrame:
    """The merged parts as the table: today's columns (parts of older tables reindexed), the paper averages added,
    rows in SORT_COLUMNS order."""
    import pandas as pd

    df = df[df["task"] != PAPER_AVERAGE].reindex(columns=list(TABLE_COLUMNS))   # parts of older tables
    for column in ("label", "revision", "commit", "weights_sha256", "model_spec"):   # absent in older parts
        df[column] = df[column].fillna("")
    average = paper_average(df)
    if len(average):
        df = pd.concat([df, average], ignore_index=True)
    return df.sort_values(list(SORT_COLUMNS), na_position="first", kind="stable").reset_index(drop=True)


def ordered(df: pd.DataFrame) -> pd.DataFrame:
    """Merged parts as merge() orders them (today's columns, the paper averages, sorted), without writing."""
    return _finish(df)


def merge(out: str | Path, csv: bool = False) -> pd.DataFrame:
    """Rebuild OUT from every part (plus the paper averages) and write it atomically (and OUT.csv)."""
    return merge_table(out, _finish, csv, empty=lambda: frame([], {}).iloc[:0])
