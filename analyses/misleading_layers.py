"""Where a cheap measure misleads: per model, measure and removal cost, the layers whose rank by the measure and by
the real cost of removing them differ most, both ranks with 95% intervals (issue #49; the critique 2605.14075 is
about exactly these layers, which a Spearman rho over all layers hides).

Reads committed tables only (no model; seconds):
- the per-layer profiles, novelty_vs_causal_layers.csv: one causal probe per pretrained model, the mean and the
  sequence-level standard error per layer of rho_mlp, rho_block, block_influence and norm_ratio, and of the loss
  increase when the block is removed or its MLP skipped. importance_measures and removal_accuracy probe with the
  same settings but store only their correlations, so each rho they committed is recomputed here from these
  profiles and must agree to 1e-9 before a row is written (the ranks are of the profiles the rho was computed
  from). angular_distance and logit_lens_kl have no committed per-layer profile: skipped, said so.
- the accuracy cost, removal_accuracy.csv: per model, task and removed block, the mean per-document accuracy change
  with its t-CI; and, where they are committed, its per-document parts (figures/records/removal_accuracy/).
- the Spearman rho printed beside each: importance_measures.csv and removal_accuracy_vs_measures.csv, as committed.

Ranks: 1 = the layer the measure calls most important, read as its source reads it (READING: ShortGPT removes the
blocks of lowest Block Influence; the paper reads a high rho as a reinforcing, dispensable MLP) and the costliest
removal (the largest loss increase, the most negative accuracy change); ties share their average rank (interp.stats.
rankdata's rule). Intervals: the ranking repeated over n_draws redraws of both profiles, the (1 -+ confidence) / 2
percentiles; the rank difference (measure - cost; positive: the measure underrates the layer) from the same draws.
A redraw resamples the documents (every layer of a document together, as removal_accuracy pairs them) where the
per-document parts are committed; elsewhere the tables hold one mean and standard error per layer, not the
per-sequence values, so a layer is redrawn as mean + sem * T(n - 1), independently of the other layers
(`rank_ci` column: "measure t, cost documents" or "measure t, cost t"). The misleading layers of a (model,
measure, cost) are the `top` layers of largest rank difference as far as its interval can tell (the end of the
interval nearest zero, 0 when it spans zero; ties by the difference itself): a large difference between two ranks
the data cannot fix is not listed first.
"""

from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analyses import (
    importance_measures,
    meta_name,
    novelty_vs_causal,
    outputs,
    read_table,
    removal_accuracy,
    resolve_root,
    write_table,
)
from interp._util.config import option
from interp._util.io import read_json

NAME = "misleading_layers"
TABLE = "misleading_layers.csv"   # one row per model, measure, cost and layer (the misleading ones numbered)
FIGURE = "misleading_layers.png"
OUTPUTS = outputs(TABLE, FIGURE)
PROFILES = novelty_vs_causal.LAYERS_TABLE
LOSS_RHO = importance_measures.TABLE
ACC_COST = removal_accuracy.TABLE
ACC_RHO = removal_accuracy.CORRELATIONS_TABLE
ACC_CAUSAL = "d_acc_skip_block"
POOLED = removal_accuracy.POOLED
# how each measure's source reads it: +1 the larger value marks the more important layer, -1 the smaller
READING = {"block_influence": +1, "angular_distance": +1, "norm_ratio": +1,
           "rho_mlp": -1, "rho_block": -1,   # the paper: a reinforcing (high rho) layer is worth less
           "logit_lens_kl": +1}              # no source proposes a reading; as tabulated (none is committed yet)
LOSS_COSTS = ("delta_loss_skip_block", "delta_loss_skip_mlp", "delta_loss_mean_mlp", "delta_loss_skip_attn")
FIGURE_COSTS = (("delta_loss_skip_block", ""), (ACC_CAUSAL, POOLED))   # (cost, task) of the figure's columns
RANK_CI = ("auto", "t")
COLUMNS = ("model", "measure", "reading", "cost", "task", "layer", "n_layers", "measure_value", "cost_value",
           "rank_measure", "rank_measure_low", "rank_measure_high", "rank_cost", "rank_cost_low", "rank_cost_high",
           "rank_diff", "rank_diff_low", "rank_diff_high", "resolved", "misleading", "spearman_rho", "rho_ci_low",
           "rho_ci_high", "rho_table", "rank_ci", "n_draws", "confidence", "n_sequences", "n_docs", "text_sha256",
           "n_tokens", "dtype", "hardware", "versions")


@dataclass
class Config:
    models: tuple[str, ...] = option(("smollm2-135m", "gemma3-270m"),
                                     "models (labels of the committed tables); one without a per-layer profile is "
                                     "skipped, said so")
    measures: tuple[str, ...] = option(importance_measures.MEASURES, "measures to rank (READING says how each is "
                                       "read); one without a committed per-layer profile is skipped, said so")
    loss_costs: tuple[str, ...] = option(("delta_loss_skip_block", "delta_loss_skip_mlp"),
                                         f"loss-based removal costs of the probe table ({', '.join(LOSS_COSTS)})")
    accuracy: bool = option(True, "also the accuracy change of removal_accuracy, per task and pooled")
    top: int = option(3, "misleading layers listed per model, measure and cost")
    n_draws: int = option(2000, "redraws of both profiles for the rank intervals")
    confidence: float = option(0.95, "level of the rank intervals")
    rank_ci: str = option("auto", "auto: resample documents where removal_accuracy's per-document parts are "
                                  "committed, else t draws from each layer's mean and sem; t: t draws everywhere",
                          choices=RANK_CI)
    parts_root: str = option(removal_accuracy.Config().parts_root, "removal_accuracy's per-document parts")
    seed: int = option(0, "seed of the redraws")

    def __post_init__(self) -> None:
        unknown = [m for m in self.measures if m not in READING]
        if unknown:
            raise ValueError(f"{NAME}: field 'measures' holds {unknown}; choose from {sorted(READING)}")
        wrong = [c for c in self.loss_costs if c not in LOSS_COSTS]
        if wrong:
            raise ValueError(f"{NAME}: field 'loss_costs' holds {wrong}; choose from {list(LOSS_COSTS)}")
        if self.top < 1 or self.n_draws < 1:
            raise ValueError(f"{NAME}: fields 'top' ({self.top}) and 'n_draws' ({self.n_draws}) must be >= 1")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"{NAME}: field 'confidence' is {self.confidence}; give a level in (0, 1), e.g. 0.95")
        if self.rank_ci not in RANK_CI:
            raise ValueError(f"{NAME}: field 'rank_ci' is {self.rank_ci!r}; choose one of {RANK_CI}")


@dataclass(frozen=True)
class Profile:
    """One per-layer profile and its redraws: point [n_layers], draws [n_draws, n_layers]."""
    point: np.ndarray
    draws: np.ndarray
    method: str                  # "t" or "documents"
    provenance: dict[str, object]


def importance_ranks(values: np.ndarray, reading: int) -> np.ndarray:
    """[..., n_layers] -> ranks along the last axis, 1 = the most important layer under `reading` (+1: the largest
    value), ties given their average rank (the rule of interp.stats.rankdata, vectorised over the draws)."""
    x = -reading * np.asarray(values, dtype=float)
    less = (x[..., None, :] < x[..., :, None]).sum(-1)
    equal = (x[..., None, :] == x[..., :, None]).sum(-1)
    return less + (equal + 1) / 2


def t_draws(mean: np.ndarray, sem: np.ndarray, df: np.ndarray | float, n_draws: int,
            rng: np.random.Generator) -> np.ndarray:
    """[n_draws, n_layers]: each layer's mean + sem * T(df), independently (all the tables keep of its spread)."""
    mean, sem, df = (np.broadcast_to(np.asarray(a, dtype=float), np.shape(mean)) for a in (mean, sem, df))
    return mean + sem * rng.standard_t(df, size=(n_draws, mean.size))


def rng_for(cfg: Config, *key: str) -> np.random.Generator:
    """A generator per profile, from the seed and the profile's name: the same draws whatever else is computed."""
    return np.random.default_rng([cfg.seed, *(zlib.crc32(k.encode()) for k in key)])


def probe_rows(layers: pd.DataFrame, model: str, metric: str) -> pd.DataFrame:
    """The probe table's rows of one model and metric, by layer ([] when absent)."""
    rows = layers[(layers["label"] == model) & (layers["metric"] == metric)].sort_values("layer")
    if len(rows) and rows["layer"].tolist() != list(range(len(rows))):
        raise ValueError(f"{PROFILES}: {model} / {metric} holds layers {rows['layer'].tolist()}, not 0..n-1 once "
                         f"each: recompute it (`interp figures --only {novelty_vs_causal.NAME} --recompute`)")
    return rows


def probe_profile(rows: pd.DataFrame, cfg: Config, key: tuple[str, ...]) -> Profile:
    """A probe table's per-layer mean, redrawn from its sequence-level sem with n_sequences - 1 degrees of freedom."""
    first = rows.iloc[0]
    draws = t_draws(rows["mean"].to_numpy(), rows["sem"].to_numpy(), rows["n_sequences"].to_numpy() - 1,
                    cfg.n_draws, rng_for(cfg, *key))
    prov = {k: first[k] for k in ("text_sha256", "n_tokens", "n_sequences", "dtype", "hardware", "versions")}
    return Profile(rows["mean"].to_numpy(dtype=float), draws, "t", prov)


def document_counts(rows: pd.DataFrame) -> np.ndarray:
    """Per layer, the summed per-document accuracy change: an integer (each document's change is -1, 0 or +1),
    so tied layers stay exactly tied, as in removal_accuracy's own per-document means."""
    total = rows["d_acc"].to_numpy(dtype=float) * rows["n_docs"].to_numpy()
    counts = np.round(total)
    if np.abs(total - counts).max(initial=0.0) > 1e-6:
        raise ValueError(f"{ACC_COST}: d_acc x n_docs is not a whole number of documents for {rows['model'].iloc[0]} "
                         f"/ {sorted(set(rows['task']))}: not a table of 0/1 accuracies; recompute it "
                         f"(`interp figures --recompute --all --only {removal_accuracy.NAME}`)")
    return counts


def accuracy_profile(drops: pd.DataFrame, model: str, tasks: tuple[str, ...], cfg: Config, table_confidence: float,
                     n_layers: int) -> Profile:
    """The accuracy change per removed layer over `tasks`' documents (one task, or all pooled). Redraws: the
    documents resampled where the per-document parts are committed (and agree with the table), else t draws from
    the table's CIs (pooled_sem)."""
    rows = drops[(drops["model"] == model) & drops["task"].isin(tasks)].sort_values(["task", "layer"])
    per_task = {t: g.sort_values("layer") for t, g in rows.groupby("task", sort=False)}
    if set(per_task) != set(tasks) or any(g["layer"].tolist() != list(range(n_layers)) for g in per_task.values()):
        raise ValueError(f"{ACC_COST}: {model} lacks layers of {list(tasks)} (it needs 0..{n_layers - 1} each); "
                         f"finish it: `interp figures --recompute --all --only {removal_accuracy.NAME}`")
    n = sum(int(g["n_docs"].iloc[0]) for g in per_task.values())
    counts = sum(document_counts(g) for g in per_task.values())
    point = counts / n
    prov = {"n_docs": n, "dtype": ", ".join(sorted(set(rows["dtype"].astype(str)))),
            "hardware": ", ".join(sorted(set(rows["hardware"].astype(str)))),
            "versions": " | ".join(sorted(set(rows["versions"].astype(str))))}
    rng = rng_for(cfg, model, ACC_CAUSAL, *tasks)
    root = resolve_root(cfg.parts_root)
    if cfg.rank_ci == "auto" and all(removal_accuracy.task_layers(root, model, t) == n_layers for t in tasks):
        y = removal_accuracy.per_document(removal_accuracy.Config(), model, root, tasks, n_layers)  # [docs, layers]
        if y.shape[0] != n or not np.array_equal(y.sum(0), counts):
            raise ValueError(f"{root / model}: the per-document parts of {list(tasks)} do not give {ACC_COST}'s "
                             f"changes: the table is stale; rewrite it from the parts "
                             f"(`interp figures --recompute --all --only {removal_accuracy.NAME}`)")
        weights = rng.multinomial(n, np.full(n, 1.0 / n), size=cfg.n_draws)     # [n_draws, docs]
        return Profile(point, weights @ y / n, "documents", prov)
    sem = pooled_sem(list(per_task.values()), point, table_confidence)
    return Profile(point, t_draws(point, sem, n - 1, cfg.n_draws, rng), "t", prov)


def pooled_sem(per_task: list[pd.DataFrame], point: np.ndarray, confidence: float) -> np.ndarray:
    """[n_layers]: the standard error of the mean change over every document of the tasks, from each task's mean and
    t-CI (its standard deviation: half-width * sqrt(n) / t(confidence, n - 1)) and the pooled mean `point`: the
    within- and between-task sums of squares, as np.std(ddof=1) / sqrt(N) of the documents themselves would give."""
    from interp.stats_intervals import t_quantile

    ss, n = np.zeros(point.size), 0
    for g in per_task:
        k = int(g["n_docs"].iloc[0])
        half = (g["d_acc_ci_high"] - g["d_acc_ci_low"]).to_numpy() / 2
        sd = half * np.sqrt(k) / t_quantile(0.5 + confidence / 2, k - 1)
        ss += (k - 1) * sd ** 2 + k * (document_counts(g) / k - point) ** 2
        n += k
    return np.sqrt(ss / (n - 1) / n)


def rank_rows(measure: Profile, cost: Profile, reading: int, cost_reading: int, cfg: Config) -> pd.DataFrame:
    """Per layer: both ranks and their intervals, the difference with its interval, and the misleading order."""
    q = [100 * (1 - cfg.confidence) / 2, 100 * (1 + cfg.confidence) / 2]
    rank_m, rank_c = importance_ranks(measure.point, reading), importance_ranks(cost.point, cost_reading)
    draws_m, draws_c = importance_ranks(measure.draws, reading), importance_ranks(cost.draws, cost_reading)
    (m_low, m_high), (c_low, c_high) = np.percentile(draws_m, q, axis=0), np.percentile(draws_c, q, axis=0)
    d_low, d_high = np.percentile(draws_m - draws_c, q, axis=0)
    sure = np.where((d_low > 0) | (d_high < 0), np.minimum(np.abs(d_low), np.abs(d_high)), 0.0)
    diff = rank_m - rank_c
    order = np.lexsort((-np.abs(diff), -sure))    # by the sure part of the difference, then by the difference
    misleading = np.zeros(diff.size, dtype=int)
    misleading[order[:cfg.top]] = np.arange(1, min(cfg.top, diff.size) + 1)
    return pd.DataFrame({"layer": np.arange(diff.size), "n_layers": diff.size, "measure_value": measure.point,
                         "cost_value": cost.point, "rank_measure": rank_m, "rank_measure_low": m_low,
                         "rank_measure_high": m_high, "rank_cost": rank_c, "rank_cost_low": c_low,
                         "rank_cost_high": c_high, "rank_diff": diff, "rank_diff_low": d_low,
                         "rank_diff_high": d_high, "resolved": sure > 0, "misleading": misleading})


def committed_rho(table: pd.DataFrame, where: dict[str, str], filename: str) -> pd.Series | None:
    """The one committed correlation row matching `where` (None when there is none)."""
    rows = table[np.logical_and.reduce([table[k] == v for k, v in where.items()])]
    if len(rows) > 1:
        raise ValueError(f"{filename}: {len(rows)} rows for {where}; expected one: recompute it")
    return rows.iloc[0] if len(rows) else None


def check_rho(measure: Profile, cost: Profile, row: pd.Series, what: str, filename: str) -> None:
    """The committed rho must be the Spearman rho of these two profiles: else the tables come from different
    probes, and the ranks here would not be those the rho summarises."""
    from interp.stats import spearman_r

    rho = spearman_r(measure.point, cost.point)
    if not abs(rho - float(row["spearman_rho"])) < 1e-9:
        raise ValueError(f"{filename}: spearman_rho of {what} is {row['spearman_rho']:.6f}, but the per-layer profiles "
                         f"of {PROFILES} and {ACC_COST} give {rho:.6f}: the tables come from different probes or "
                         f"documents; recompute them with one setting (`interp figures --only NAME --recompute`)")


def model_rows(cfg: Config, model: str, tables: dict[str, pd.DataFrame], table_confidence: float) -> list[pd.DataFrame]:
    """Every (measure, cost) frame of one model; prints what it skips and why."""
    layers, drops, frames = tables[PROFILES], tables[ACC_COST], []
    # (cost, task, its profile, the table of its committed rho, that table's row keys but the measure)
    costs: list[tuple[str, str, Profile, str, dict[str, str]]] = []
    for causal in cfg.loss_costs:
        if len(rows := probe_rows(layers, model, causal)):
            costs.append((causal, "", probe_profile(rows, cfg, (model, causal)), LOSS_RHO,
                          {"label": model, "causal": causal}))
    if cfg.accuracy and model in set(drops["model"]):
        n_layers = int(drops.loc[drops["model"] == model, "layer"].max()) + 1
        tasks = tuple(dict.fromkeys(drops.loc[drops["model"] == model, "task"]))
        for task, pool in [(t, (t,)) for t in tasks] + [(POOLED, tasks)]:
            rho = tables[ACC_RHO]
            if not ((rho["model"] == model) & (rho["task"] == task)).any():
                print(f"[{NAME}] {model} / {task}: no committed correlation in {ACC_RHO} yet: skipped", flush=True)
                continue
            costs.append((ACC_CAUSAL, task, accuracy_profile(drops, model, pool, cfg, table_confidence, n_layers),
                          ACC_RHO, {"model": model, "task": task}))
    for measure in cfg.measures:
        rows = probe_rows(layers, model, measure)
        if rows.empty:
            print(f"[{NAME}] {model} / {measure}: no per-layer profile in {PROFILES}: skipped", flush=True)
            continue
        profile = probe_profile(rows, cfg, (model, measure))
        for causal, task, cost, filename, where in costs:
            what = f"{model} / {measure} / {causal} {task}".strip()
            row = committed_rho(tables[filename], {**where, "measure": measure}, filename)
            if row is None:
                print(f"[{NAME}] {what}: no committed rho in {filename}: skipped", flush=True)
                continue
            check_rho(profile, cost, row, what, filename)
            frame = rank_rows(profile, cost, READING[measure], -1 if causal == ACC_CAUSAL else +1, cfg)
            frames.append(frame.assign(
                model=model, measure=measure, reading=READING[measure], cost=causal, task=task,
                spearman_rho=float(row["spearman_rho"]), rho_ci_low=float(row["ci_low"]),
                rho_ci_high=float(row["ci_high"]), rho_table=filename,
                rank_ci=f"measure {profile.method}, cost {cost.method}", n_draws=cfg.n_draws,
                confidence=cfg.confidence, n_sequences=int(profile.provenance["n_sequences"]),
                n_docs=cost.provenance.get("n_docs", np.nan), text_sha256=profile.provenance["text_sha256"],
                n_tokens=int(profile.provenance["n_tokens"]),
                dtype=joined(profile.provenance["dtype"], cost.provenance["dtype"]),
                hardware=joined(profile.provenance["hardware"], cost.provenance["hardware"]),
                versions=joined(profile.provenance["versions"], cost.provenance["versions"], sep=" | ")))
    return frames


def joined(*values: object, sep: str = ", ") -> str:
    """The distinct values, in order: one provenance cell for a row made from two tables."""
    return sep.join(dict.fromkeys(str(v) for v in values))


def drops_confidence(figures_dir: Path) -> float:
    """The level of removal_accuracy.csv's t-CIs, from its sidecar's config (the standard errors are read back
    from those CIs)."""
    path = Path(figures_dir) / meta_name(ACC_COST)
    level = ((read_json(path, missing_ok=True) or {}).get("config") or {}).get("confidence")
    if not isinstance(level, (int, float)) or not 0.0 < level < 1.0:
        raise ValueError(f"{path}: field 'config.confidence' (the level of {ACC_COST}'s t-CIs) is {level!r}: the "
                         f"sidecar is missing or not removal_accuracy's; rewrite both "
                         f"(`interp figures --recompute --all --only {removal_accuracy.NAME}`)")
    return float(level)


def misleading_table(cfg: Config, figures_dir: Path) -> pd.DataFrame:
    """The table of the module docstring, from the committed tables under figures_dir."""
    tables = {name: read_table(figures_dir, name, analysis) for name, analysis in (
        (PROFILES, novelty_vs_causal.NAME), (LOSS_RHO, importance_measures.NAME), (ACC_COST, removal_accuracy.NAME),
        (ACC_RHO, removal_accuracy.NAME))}
    table_confidence = drops_confidence(figures_dir) if cfg.accuracy else 0.95
    frames = []
    for model in cfg.models:
        if not (tables[PROFILES]["label"] == model).any():
            print(f"[{NAME}] {model}: no per-layer profile in {PROFILES}: skipped", flush=True)
            continue
        frames += model_rows(cfg, model, tables, table_confidence)
    if not frames:
        return pd.DataFrame(columns=list(COLUMNS))
    return pd.concat(frames, ignore_index=True)[list(COLUMNS)]


def compute(cfg: Config, figures_dir: Path) -> None:
    table = misleading_table(cfg, figures_dir)
    write_table(table, figures_dir, TABLE, cfg, NAME)
    for line in report_lines(table):
        print(line, flush=True)
    if (table["rank_ci"].str.endswith("documents")).any():
        print(f"[{NAME}] t draws instead of the documents: {rank_ci_comparison(cfg, figures_dir, table)}", flush=True)


def rank_ci_comparison(cfg: Config, figures_dir: Path, table: pd.DataFrame) -> str:
    """How the independent t draws compare with the documents bootstrap where both can be formed (the accuracy
    costs with committed per-document parts): the median width of the cost-rank intervals under each, and how many
    of the misleading layers the two pick alike (figures/README.md quotes this text; a test checks it)."""
    docs = table[table["rank_ci"].str.endswith("documents")]
    models = tuple(dict.fromkeys(docs["model"]))
    t = misleading_table(dataclasses.replace(cfg, models=models, loss_costs=(), rank_ci="t"), figures_dir)
    key = ["model", "measure", "cost", "task", "layer"]
    both = docs.assign(task=docs["task"].fillna("")).merge(t.assign(task=t["task"].fillna("")), on=key,
                                                           suffixes=("", "_t"))
    costs = both.drop_duplicates(["model", "task", "layer"])
    width, width_t = (costs[f"rank_cost_high{s}"] - costs[f"rank_cost_low{s}"] for s in ("", "_t"))
    picked = both["misleading"] > 0
    return (f"cost-rank intervals of median width {fmt_rank(width_t.median())} (t) against {fmt_rank(width.median())} "
            f"(documents) over the {len(costs)} task x layer costs of {', '.join(models)}, and "
            f"{int((picked & (both['misleading_t'] > 0)).sum())} of the same {int(picked.sum())} misleading layers")


# ------------------------------------------------------------------------------ what a reader reads

def fmt_rank(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")


def rank_text(row: pd.Series, side: str) -> str:
    """'19 [16, 22]': a rank and its interval."""
    return (f"{fmt_rank(row[f'rank_{side}'])} [{fmt_rank(row[f'rank_{side}_low'])}, "
            f"{fmt_rank(row[f'rank_{side}_high'])}]")


def cost_name(cost: str, task: str) -> str:
    """'loss, block removed' / 'accuracy (pooled), block removed': the cost in words."""
    if cost == ACC_CAUSAL:
        return f"accuracy ({task}), block removed"
    return "loss, " + {"delta_loss_skip_block": "block removed", "delta_loss_skip_mlp": "MLP skipped",
                       "delta_loss_mean_mlp": "MLP mean-ablated", "delta_loss_skip_attn": "attention skipped"}[cost]


def selected(table: pd.DataFrame, model: str, measure: str, cost: str, task: str = "") -> pd.DataFrame:
    """The rows of one (model, measure, cost, task), every layer."""
    task_col = table["task"].fillna("").astype(str)
    return table[(table["model"] == model) & (table["measure"] == measure) & (table["cost"] == cost)
                 & (task_col == task)]


def misleading_text(rows: pd.DataFrame) -> str:
    """'11: 19 [16, 22] vs 3 [3, 4]; ...': the misleading layers in order, rank by the measure vs by removal
    (* marks a difference whose interval excludes zero)."""
    picked = rows[rows["misleading"] > 0].sort_values("misleading")
    return "; ".join(f"{int(r['layer'])}: {rank_text(r, 'measure')} vs {rank_text(r, 'cost')}"
                     f"{'*' if bool(r['resolved']) else ''}" for _, r in picked.iterrows())


def misleading_line(table: pd.DataFrame, model: str, measure: str, cost: str, task: str = "") -> str:
    """One report-ready line (empty when the table has no such rows): the measure, the model, the cost, the
    Spearman rho with its CI, and the misleading layers with both ranks and their intervals."""
    rows = selected(table, model, measure, cost, task)
    if rows.empty:
        return ""
    first = rows.iloc[0]
    return (f"{measure}, {model}, {cost_name(cost, task)}: Spearman {first['spearman_rho']:+.2f} "
            f"[{first['rho_ci_low']:+.2f}, {first['rho_ci_high']:+.2f}] ({first['rho_table']}); layers it misleads "
            f"on (rank by {measure} vs by removal, 1 = most important, {first['confidence']:.0%} intervals; "
            f"* = difference resolved): {misleading_text(rows)}")


def report_lines(table: pd.DataFrame | Path) -> list[str]:
    """misleading_line of every (model, measure, cost, task) in the table (or in figures_dir's committed one)."""
    if not isinstance(table, pd.DataFrame):
        table = read_table(Path(table), TABLE, NAME)
    keys = table.assign(task=table["task"].fillna("").astype(str))[["model", "measure", "cost", "task"]]
    return [misleading_line(table, *key) for key in dict.fromkeys(map(tuple, keys.to_numpy()))]


def markdown_summary(table: pd.DataFrame) -> str:
    """The figure's cells as a markdown table (figures/README.md quotes it; a test checks it is this text)."""
    lines = [("| model | measure | cost | Spearman rho [95% CI] | misleading layers: rank by the measure vs by "
              "removal [95% intervals] |"), "|---|---|---|---|---|"]
    for model in dict.fromkeys(table["model"]):
        for measure in dict.fromkeys(table["measure"]):
            for cost, task in FIGURE_COSTS:
                rows = selected(table, model, measure, cost, task)
                if rows.empty:
                    continue
                r = rows.iloc[0]
                lines.append(f"| {model} | {measure} | {cost_name(cost, task)} | {r['spearman_rho']:+.2f} "
                             f"[{r['rho_ci_low']:+.2f}, {r['rho_ci_high']:+.2f}] | {misleading_text(rows)} |")
    return "\n".join(lines)


def plot_misleading_layers(table: pd.DataFrame):
    """Rows: measures; columns: (model, cost) of FIGURE_COSTS. Each panel: every layer's rank by the removal cost
    (x) against its rank by the measure (y), 1 = most important; the diagonal is agreement; the misleading
    layers are labelled, with both rank intervals."""
    import matplotlib
    from matplotlib.figure import Figure

    from interp.plots.style import STYLE

    table = table.assign(task=table["task"].fillna("").astype(str))
    measures = list(dict.fromkeys(table["measure"]))
    if not measures:
        with matplotlib.rc_context(STYLE):
            fig = Figure(figsize=(6, 2))
            fig.text(0.5, 0.5, "no per-layer profile in the committed tables: nothing ranked", ha="center")
        return fig
    columns = [(m, c, t) for m in dict.fromkeys(table["model"]) for c, t in FIGURE_COSTS
               if not selected(table, m, measures[0], c, t).empty]
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(3.3 * len(columns), 3.1 * len(measures)), layout="constrained")
        axes = fig.subplots(len(measures), len(columns), squeeze=False)
        for i, measure in enumerate(measures):
            for j, (model, cost, task) in enumerate(columns):
                ax, rows = axes[i, j], selected(table, model, measure, cost, task)
                if rows.empty:
                    ax.set_visible(False)
                    continue
                n = int(rows["n_layers"].iloc[0])
                ax.plot([1, n], [1, n], color="0.7", lw=0.8, zorder=0)
                ax.scatter(rows["rank_cost"], rows["rank_measure"], s=10, color="0.45")
                for _, r in rows[rows["misleading"] > 0].iterrows():
                    x, y = r["rank_cost"], r["rank_measure"]
                    ax.errorbar([x], [y], xerr=[[x - r["rank_cost_low"]], [r["rank_cost_high"] - x]],
                                yerr=[[y - r["rank_measure_low"]], [r["rank_measure_high"] - y]], fmt="o",
                                ms=4, color="#d62728" if r["resolved"] else "#ff9896", lw=0.9, capsize=2)
                    ax.annotate(str(int(r["layer"])), (x, y), xytext=(3, 3), textcoords="offset points", fontsize=8)
                ax.set_xlim(0, n + 1)
                ax.set_ylim(0, n + 1)
                r = rows.iloc[0]
                ax.set_title(f"{model}: {cost_name(cost, task)}\n{measure}: rho {r['spearman_rho']:+.2f} "
                             f"[{r['rho_ci_low']:+.2f}, {r['rho_ci_high']:+.2f}]", fontsize=8)
                if i == len(measures) - 1:
                    ax.set_xlabel("rank by removal cost")
                if j == 0:
                    ax.set_ylabel(f"rank by {measure}")
        fig.suptitle("Where a measure misleads: rank by the measure vs by the cost of removal (1 = most important); "
                     "red: the misleading layers with 95% rank intervals (dark: difference resolved)", fontsize=9)
    return fig


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure

    table = read_table(figures_dir, TABLE, NAME)
    return [save_figure(plot_misleading_layers(table), Path(figures_dir) / FIGURE)]
