"""Which cheap measure predicts the ACCURACY lost when a block is removed? (issue #34 item 2, its lm-eval half)

importance_measures answers the question with the loss; this answers it with the field's measure of damage. Per
model, task and removed block (the layer returns its input, interp.ablations.layers' skip_block): lm-eval's
per-document accuracy (the paper's convention: acc_norm for HellaSwag, acc for PIQA and ARC-Easy; the parts keep
both) on the same `limit` documents as the clean model, paired per document, the mean
change with a t-CI over documents. Then, across layers, the Spearman rho of each correlational measure (a plain
probe of the model: rho_mlp, rho_block, block_influence, angular_distance, norm_ratio, logit-lens KL) with the
accuracy drop, per task and over all the tasks' documents pooled, with a percentile bootstrap CI over documents
(interp.stats.bootstrap_spearman; the measure profile is held fixed, so the CI is the documents' spread only).

Resumable: each (model, task, condition) writes its per-document scores, with the hardware, dtype and package
versions (lm-eval's among them) that produced them, to parts_root/<model>/<task>/<condition>.json (condition:
clean or layerNN; committed under figures/records/, a few kB each) and a rerun skips what is there; after every
condition the table is rewritten from the parts done so far, so a partial table (some layers) can be committed
and the run continued on another day or machine. A model's conditions are paired per document, so they must come
from one kind of hardware: a resume on another CPU (or GPU) refuses, naming the part. The correlations of a task
need all its layers and are written once they are there (pooled: once every task is). Rows of models outside this
run's `models` are kept from the tables already in figures_dir, so one model can be added
(`--set 'models=["gemma3-270m"]'`) without recomputing the others.

Cost (measured, figures/README.md): one condition of SmolLM2 on PIQA + ARC-Easy + HellaSwag at 200 documents is
minutes on 2 CPU cores; its 31 conditions are hours, Gemma-3's 19 more. HEAVY: `interp figures --recompute --all
--only removal_accuracy` (in the background; it resumes), a plain --recompute re-renders.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from analyses import novelty_pretrained, outputs, read_table, resolve_root, write_table
from analyses.importance_measures import MEASURES
from interp._util.io import write_text_atomic
from interp._util.provenance import hardware_label
from interp.probes.config import ProbeConfig

NAME = "removal_accuracy"
HEAVY = True  # hours: 1 + n_layers lm-eval runs of every task per model (module docstring)
TABLE = "removal_accuracy.csv"                    # per model, task and removed layer: the accuracy change
CORRELATIONS_TABLE = "removal_accuracy_vs_measures.csv"  # per model, task (or "pooled") and measure: Spearman rho
FIGURE = "removal_accuracy.png"
OUTPUTS = outputs(TABLE, CORRELATIONS_TABLE, FIGURE)
POOLED = "pooled"
CORRELATION_COLUMNS = ("model", "task", "measure", "causal", "spearman_rho", "ci_low", "ci_high", "n_layers", "n_docs",
                       "n_boot", "confidence", "text_sha256", "n_tokens", "dtype", "hardware")
PART_PROVENANCE = ("hardware", "dtype", "versions")   # what each part records of the process that evaluated it
DROP_COLUMNS = ("model", "task", "metric", "layer", "acc_clean", "acc_removed", "d_acc", "d_acc_ci_low",
                "d_acc_ci_high", "n_docs", "limit", *PART_PROVENANCE)


@dataclass
class Config:
    models: tuple[str, ...] = ("smollm2-135m", "gemma3-270m")   # registry names (one not installed is skipped),
    #                                                            HF dirs, .gguf files or our checkpoints
    tasks: tuple[str, ...] = ("piqa", "arc_easy", "hellaswag")
    limit: int = 200                       # the first `limit` documents of each task, the same in every condition
    layers: tuple[int, ...] | None = None  # the blocks to remove, one at a time (None: every block; a subset
    #                                        gives table rows, the correlations need them all)
    batch_size: int = 8
    model_dtype: str = "float32"           # the dtype lm-eval's forwards run in (recorded in every part)
    parts_root: str = "repo:figures/records/removal_accuracy"   # per-document scores of each condition (resumable)
    probe: ProbeConfig = field(default_factory=lambda: ProbeConfig(
        tokens=2048, seq_len=128, batch_size=8, positions="skip_first", metrics=MEASURES))
    n_boot: int = 2000
    confidence: float = 0.95
    seed: int = 0


def _models(cfg: Config) -> list[str]:
    """The configured models that can be loaded here: paths as given, registry names when installed."""
    registry = [m for m in cfg.models if not Path(m).exists()]
    installed = set(novelty_pretrained.installed_models(novelty_pretrained.Config(models=tuple(registry))))
    return [m for m in cfg.models if Path(m).exists() or m in installed]


def _key(spec: str) -> str:
    """A folder name for a model: a registry name as is, a path by its last two parts."""
    return spec if not Path(spec).exists() else "_".join(Path(spec).resolve().parts[-2:])


def part_path(root: Path, spec: str, task: str, layer: int | None) -> Path:
    """Where one condition's per-document scores go (layer None: the clean model)."""
    return root / _key(spec) / task / ("clean.json" if layer is None else f"layer{layer:02d}.json")


def metric_of(task: str) -> str:
    """The accuracy the table reports for `task`: the paper's convention (interp.evals.tasks.PAPER_METRICS:
    acc_norm for HellaSwag and ARC-Challenge, acc for the rest); the parts keep both."""
    from interp.evals.tasks import PAPER_METRICS

    return PAPER_METRICS.get(task, "acc")


def read_part_files(root: Path, spec: str, task: str) -> dict[int | None, dict]:
    """condition (None: clean) -> the part as written, of every part of (spec, task) so far."""
    found = {}
    for path in sorted((root / _key(spec) / task).glob("*.json")):
        part = json.loads(path.read_text())
        found[part["layer"]] = part
    return found


def read_parts(root: Path, spec: str, task: str) -> dict[int | None, list[float]]:
    """condition -> per-document accuracy (metric_of(task), doc_id order) of every part written so far."""
    return {layer: part[metric_of(task)] for layer, part in read_part_files(root, spec, task).items()}


def check_same_hardware(root: Path, spec: str, tasks: tuple[str, ...], here: str) -> None:
    """Refuse to add parts to a model whose parts came from other hardware: its conditions are paired per
    document, and float results differ between CPU kinds (the guide: keep a paired study on one kind)."""
    for task in tasks:
        for layer, part in read_part_files(root, spec, task).items():
            if part.get("hardware", here) != here:
                path = part_path(root, spec, task, layer)
                raise RuntimeError(
                    f"{path}: field 'hardware' is {part['hardware']!r}, this machine is {here!r}; the conditions of "
                    f"{spec} are paired per document and must come from one kind of hardware. Finish the run on "
                    f"that hardware, or start it again here with another parts_root (--set parts_root=DIR); "
                    f"nothing was changed")


def removed_layers(layers: tuple[int, ...] | None, n_layers: int, spec: str) -> list[int]:
    """The layers to remove from a model of n_layers: `layers` (Config.layers, checked against the model) or all."""
    if layers is None:
        return list(range(n_layers))
    wrong = [layer for layer in layers if not 0 <= layer < n_layers]
    if wrong:
        raise ValueError(f"removal_accuracy: field 'layers' holds {wrong}, but {spec} has layers 0..{n_layers - 1}; "
                         f"give indices in that range, or layers=null for all")
    return sorted(set(layers))


def complete_layers(cfg: Config, spec: str, root: Path) -> int | None:
    """The model's layer count when every task has all the parts this run asks for (a rerun then loads nothing)."""
    counts = {task_layers(root, spec, task, cfg.layers) for task in cfg.tasks}
    return counts.pop() if len(counts) == 1 and None not in counts else None


def measure_conditions(cfg: Config, spec: str, root: Path, on_part: Callable[[], None] | None = None) -> int:
    """Run lm-eval on every (task, condition) of `spec` without a part file; returns the model's layer count.
    on_part() is called after each new part (the tables are rewritten there)."""
    from contextlib import nullcontext

    from interp.ablations.layers import layer_ablated
    from interp.evals.run import eval_versions, expand_targets, lm_evaluate, load_lm
    from interp.hf import layer_modules

    if (done := complete_layers(cfg, spec, root)) is not None:
        return done
    lm, _ = load_lm(expand_targets([spec], checkpoints="final")[0], batch_size=cfg.batch_size,
                    model_dtype=cfg.model_dtype)
    dtype = str(next(lm.model.parameters()).dtype).removeprefix("torch.")
    here = hardware_label(next(lm.model.parameters()).device, dtype=dtype)
    check_same_hardware(root, spec, cfg.tasks, here)
    n_layers = len(layer_modules(lm.model))
    for task in cfg.tasks:
        for layer in [None, *removed_layers(cfg.layers, n_layers, spec)]:
            path = part_path(root, spec, task, layer)
            if path.is_file():
                continue
            with layer_ablated(lm.model, "skip_block", layer) if layer is not None else nullcontext():
                samples = lm_evaluate(lm, task, {}, limit=cfg.limit, log_samples=True,
                                      bootstrap_iters=0)["samples"][task]
            samples = sorted(samples, key=lambda s: s["doc_id"])
            scores = {m: [float(s[m]) for s in samples] for m in ("acc", "acc_norm") if m in samples[0]}
            path.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(path, json.dumps({"model": spec, "task": task, "layer": layer, "n_layers": n_layers,
                                                "limit": cfg.limit, "hardware": here, "dtype": dtype,
                                                "versions": eval_versions(), **scores}))
            acc = scores[metric_of(task)]
            print(f"[{NAME}] {spec} {task} {'clean' if layer is None else f'without layer {layer}'}: "
                  f"{metric_of(task)} {sum(acc) / len(acc):.3f} over {len(acc)} documents", flush=True)
            if on_part is not None:
                on_part()
    return n_layers


def drop_rows(cfg: Config, specs: list[str], root: Path) -> pd.DataFrame:
    """Per model, task and removed layer with a part (and the clean part): the mean per-document change in
    accuracy, t-CI over the documents."""
    from interp.stats_intervals import mean_ci

    rows = []
    for spec in specs:
        for task in cfg.tasks:
            parts = read_part_files(root, spec, task)
            if None not in parts:
                continue
            clean = parts[None][metric_of(task)]
            for layer in sorted(k for k in parts if k is not None):
                removed = parts[layer][metric_of(task)]
                mean, low, high = mean_ci([r - c for r, c in zip(removed, clean, strict=True)], cfg.confidence)
                rows.append({"model": spec, "task": task, "metric": metric_of(task), "layer": layer,
                             "acc_clean": float(np.mean(clean)),
                             "acc_removed": float(np.mean(removed)), "d_acc": mean, "d_acc_ci_low": low,
                             "d_acc_ci_high": high, "n_docs": len(clean), "limit": cfg.limit,
                             **{k: parts[layer].get(k, "") for k in PART_PROVENANCE}})
    return pd.DataFrame(rows, columns=list(DROP_COLUMNS))


def hardware_of(root: Path, spec: str, tasks: tuple[str, ...]) -> str:
    """The hardware that evaluated the parts of `spec` (one kind: check_same_hardware)."""
    labels = {part.get("hardware", "") for task in tasks for part in read_part_files(root, spec, task).values()}
    return ", ".join(sorted(labels))


def per_document(cfg: Config, spec: str, root: Path, tasks: tuple[str, ...], n_layers: int) -> np.ndarray:
    """[documents of `tasks`, n_layers]: each document's accuracy change when each layer is removed."""
    blocks = []
    for task in tasks:
        parts = read_parts(root, spec, task)
        clean = np.asarray(parts[None])
        blocks.append(np.stack([np.asarray(parts[layer]) - clean for layer in range(n_layers)], axis=1))
    return np.concatenate(blocks)


def task_layers(root: Path, spec: str, task: str, layers: tuple[int, ...] | None = None) -> int | None:
    """The model's layer count when `task` has its clean part and one for each layer to remove (`layers`, default
    all); the count is the one the clean part recorded, so `layers` is checked against it as against the model."""
    clean = part_path(root, spec, task, None)
    if not clean.is_file():
        return None
    n_layers = int(json.loads(clean.read_text())["n_layers"])
    done = all(part_path(root, spec, task, layer).is_file() for layer in removed_layers(layers, n_layers, spec))
    return n_layers if done else None


def correlation_rows(cfg: Config, specs: list[str], root: Path, profiles: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Spearman rho across layers of each probe measure with the accuracy change, for every task whose layers
    are all measured, and pooled over the tasks once all are; bootstrap CI over documents. The probe's per-layer
    means are the fixed profile (one probe per model, kept in `profiles`)."""
    from interp.probes import probe

    frames = []
    for spec in specs:
        complete = {task: n for task in cfg.tasks if (n := task_layers(root, spec, task)) is not None}
        if not complete:
            continue
        if spec not in profiles:
            profiles[spec] = probe(spec, config=cfg.probe)
        table = profiles[spec]
        wide = table.pivot_table(index="layer", columns="metric", values="mean").sort_index()
        n_layers = next(iter(complete.values()))
        groups = [(t, (t,)) for t in complete] + ([(POOLED, cfg.tasks)] if len(complete) == len(cfg.tasks) else [])
        for task, tasks in groups:
            y = per_document(cfg, spec, root, tasks, n_layers)
            frames.append(spearman_rows(wide[list(cfg.probe.metrics)], y, cfg).assign(
                model=spec, task=task, text_sha256=table["text_sha256"].iloc[0],
                n_tokens=int(table["n_tokens"].iloc[0]), dtype=table["dtype"].iloc[0],
                hardware=hardware_of(root, spec, tasks)))
    if not frames:
        return pd.DataFrame(columns=CORRELATION_COLUMNS)
    return pd.concat(frames, ignore_index=True)[list(CORRELATION_COLUMNS)]


def spearman_rows(profiles: pd.DataFrame, y: np.ndarray, cfg: Config) -> pd.DataFrame:
    """profiles: [n_layers rows, one column per measure] (fixed); y: [documents, n_layers] accuracy changes.
    Per measure: Spearman rho of the profile with y's layer means, percentile bootstrap CI over documents."""
    from interp.stats import bootstrap_spearman

    rows = []
    for measure in profiles.columns:
        x = np.broadcast_to(profiles[measure].to_numpy(dtype=float), y.shape)
        rho, low, high = bootstrap_spearman(x, y, cfg.n_boot, cfg.confidence, cfg.seed)
        rows.append({"measure": measure, "causal": "d_acc_skip_block", "spearman_rho": rho, "ci_low": low,
                     "ci_high": high, "n_layers": y.shape[1], "n_docs": y.shape[0], "n_boot": cfg.n_boot,
                     "confidence": cfg.confidence})
    return pd.DataFrame(rows)


def save_progress(cfg: Config, specs: list[str], root: Path, profiles: dict[str, pd.DataFrame],
                  figures_dir: Path) -> None:
    """Both tables from what is done: the drops of every condition so far, the correlations of every complete
    task (none yet: the header alone, and the figure says "pending"); rows of models outside `specs` are kept
    from the tables already there (kept_rows)."""
    write_table(kept_rows(figures_dir, TABLE, specs, drop_rows(cfg, specs, root)), figures_dir, TABLE, cfg, NAME)
    write_table(kept_rows(figures_dir, CORRELATIONS_TABLE, specs, correlation_rows(cfg, specs, root, profiles)),
                figures_dir, CORRELATIONS_TABLE, cfg, NAME)


def kept_rows(figures_dir: Path, filename: str, specs: list[str], new: pd.DataFrame) -> pd.DataFrame:
    """`new` after the rows of the stored table whose model is not measured by this run (their provenance
    columns travel with them), so adding a model does not drop another's finished rows."""
    path = Path(figures_dir) / filename
    if not path.is_file() or path.stat().st_size == 0:
        return new
    old = pd.read_csv(path)
    old = old[~old["model"].isin(specs)]
    if old.empty:
        return new
    if new.empty:
        return old.reindex(columns=new.columns if len(new.columns) else old.columns)
    return pd.concat([old, new], ignore_index=True)


def compute(cfg: Config, figures_dir: Path) -> None:
    specs = _models(cfg)
    if not specs:
        print(f"[{NAME}] none of {list(cfg.models)} can be loaded here: nothing to measure", flush=True)
        return
    root = resolve_root(cfg.parts_root)
    profiles: dict[str, pd.DataFrame] = {}
    for spec in specs:
        measure_conditions(cfg, spec, root, on_part=lambda: save_progress(cfg, specs, root, profiles, figures_dir))
    save_progress(cfg, specs, root, profiles, figures_dir)


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure
    from interp.plots.importance import plot_removal_accuracy

    drops = read_table(figures_dir, TABLE, NAME)
    correlations = read_table(figures_dir, CORRELATIONS_TABLE, NAME)
    return [save_figure(plot_removal_accuracy(drops, correlations), Path(figures_dir) / FIGURE)]
