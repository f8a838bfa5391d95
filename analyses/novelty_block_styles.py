"""Section 4 on our own block styles: rho_mlp and rho_block per layer of the longest-trained GPT-2-style and
Transformer++ models, uniform and tapered, with the paper's GPT-2 range beside them (issue 14 §4).

The models are the gain_vs_tokens study's (analyses/gain_vs_tokens.py: 6 layers x d_model 128, mean d_ff 512,
`english`, fp32, wsd, 5 seeds per variant and block style): by default each main run's final checkpoint (the
longest length, 2.1M tokens), or with `length` one of its cooldown branches (every branch is a checkpoint, and a
length cooled down the same way as the main run's end). Every finished checkpoint goes through interp.probes.batch
(resumable, keyed by weights + settings: a rerun probes only what is new) over the held-out text of the run's own
source, its val split at the run's own val_fraction (written once to <root>/novelty-block-styles/heldout-*.txt,
after checking the corpus still has the documents hash the run trained on), tokenized by the run's own tokenizer
(probe() reads it from the checkpoint). Runs that are not finished are skipped with a line naming the command that
trains them; none finished is a FileNotFoundError naming it.

    interp figures --only novelty_block_styles --recompute    # HEAVY only through its inputs: see below

Tables: figures/novelty_block_styles.csv, per (block style, variant, metric, layer): the mean over seeds of the
per-token mean rho with a 95% t-CI over seeds, n_seeds and d_mlp, and per (block style, variant, metric) the
Pearson and Spearman r of the per-layer curve with the layer index (one r per seed, mean and t-CI over seeds; and
the r of the seed-mean curve), beside the paper's range for pretrained GPT-2 (interp.plots.novelty.PAPER_DEPTH_R,
from /work/shared/paper-notes.md: only r ranges and a shape in words are published, no per-layer rho).
figures/novelty_block_styles_runs.csv: every run x metric x layer as probed, with its checkpoint, step, tokens,
training dtype and CPU, the text's hash and the CPU that probed it.

Cost (one thread, CPU seconds measured on the loaded 2-core machine): ~0.2 s per micro checkpoint; for one of the
study's, 16,384 tokens through the 6 layers take ~2 s (1.6 s gpt2, 2.1 s llama) plus ~1 s of loading, so the 20
take ~1 min on a free core (~20 s each in wall time while the study trains beside it). Its inputs take ~2.5 h to
train, hence HEAVY: a plain `interp figures --recompute` re-renders the stored table instead.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analyses import gain_vs_tokens as gvt
from analyses import in_study_order, outputs, read_table, recompute_command, resolve_root, write_table
from analyses.group_ablation import experiment_files
from interp._util.config import option
from interp.probes.config import ProbeConfig

NAME = "novelty_block_styles"
HEAVY = True  # its inputs are the gain_vs_tokens runs (HEAVY); the probe itself is ~1 min for all 20
TABLE, RUNS_TABLE, FIGURE = experiment_files(NAME)
OUTPUTS = outputs(TABLE, RUNS_TABLE, FIGURE)
WORK_DIR = "novelty-block-styles"  # under root: the batch table with its parts, the held-out texts
BLOCK_STYLES = {"llama": "Transformer++", "gpt2": "GPT-2-style"}
METRICS = ("rho_mlp", "rho_block", "rho_attn")
FIGURE_METRICS = ("rho_mlp", "rho_block")
CHARS_PER_TOKEN = 8  # held-out text kept per probe token: 2x what any tokenizer needs on English (BPE-8k: ~3.6)
TEXT_KEYS = ["source", "val_fraction", "source_hash"]  # runs that share these share one held-out text


def _default_probe() -> ProbeConfig:
    # 16,384 tokens in sequences of the runs' n_ctx (256); position 0 left out; reference="normed": also
    # rho_mlp_normed (vs the MLP's normalised input: RMSNorm in Transformer++, LayerNorm in GPT-2), same pass
    return ProbeConfig(tokens=16384, seq_len=256, batch_size=8, backend="hookpoints", metrics=METRICS,
                       reference="normed")


@dataclass
class Config:
    root: str = option("repo:runs", "run root: where the gain-vs-tokens runs are (it replaces gain.root) and where the "
                       "probe's parts and held-out texts are kept, under ROOT/novelty-block-styles/")
    # the study whose runs are probed (gvt.experiment): uniform and the taper, the two its table compares
    gain: gvt.Config = field(default_factory=lambda: gvt.Config(arms=()))
    length: int = option(0, "which checkpoint: 0 = each main run's final (the longest length); one of "
                         "gain.lengths = that cooldown branch")
    probe: ProbeConfig = field(default_factory=_default_probe)  # text None = each run's own source, val split


def gain_config(cfg: Config) -> gvt.Config:
    """cfg.gain with root = cfg.root (one field says where the runs are)."""
    if cfg.gain.root not in (gvt.Config().root, cfg.root):
        raise ValueError(f"{NAME}.Config: gain.root={cfg.gain.root!r} differs from root={cfg.root!r}; set root "
                         "(the run root this analysis reads), not gain.root")
    return dataclasses.replace(cfg.gain, root=cfg.root)


def checkpoint_length(cfg: Config, gain: gvt.Config) -> int:
    """The length in steps whose checkpoints are probed: the main runs' own (0 or the longest) or a branch's."""
    longest = max(gain.lengths)
    if cfg.length in (0, longest):
        return longest
    if cfg.length not in gain.lengths:
        raise ValueError(f"{NAME}.Config.length={cfg.length}: choose 0 (the main runs' final checkpoint) or one "
                         f"of gain.lengths {sorted(gain.lengths)}")
    return cfg.length


def checkpoints(cfg: Config) -> pd.DataFrame:
    """One row per run whose checkpoint at the chosen length is finished (gvt.length_runs: status "done"), with
    the run's provenance columns and the fields of its config.json the probe needs; a skip line for each other
    run. FileNotFoundError naming the command that trains them when there is none."""
    from interp.training import cooldown
    from interp.training.checkpoints import read_config

    gain = gain_config(cfg)
    length = checkpoint_length(cfg, gain)
    main = length == max(gain.lengths)
    found, skipped = [], []
    for arch in gain.archs:
        exp = gvt.experiment(gain, arch)
        runs = gvt.length_runs(exp, arch, "wsd") if exp.dir.is_dir() else pd.DataFrame(columns=["kind", "steps"])
        runs = runs[(runs["kind"] == "run") if main else ((runs["kind"] == "cooldown") & (runs["steps"] == length))]
        by_dir = {r["run_dir"]: r for r in runs.to_dict("records")}
        for variant, seed, _ in exp.configs():
            run_dir = exp.run_dir(variant, seed)
            row = by_dir.get(str(run_dir))
            status = "not started" if row is None else row["status"]
            if status != "done":
                skipped.append(f"{arch}/{variant.name}/seed{seed} ({status})")
                continue
            path = run_dir if main else cooldown.branch_dir(run_dir, length)
            config = read_config(path)
            found.append({**row, "block_style": BLOCK_STYLES[arch], "checkpoint": str(path),
                          "checkpoint_kind": "final" if main else f"cooldown branch at {length} steps",
                          "val_fraction": config["data"]["val_fraction"], "d_mlp": list(config["model"]["d_mlp"])})
    trains = f"`{recompute_command(gvt.NAME)}` trains them"
    if skipped:
        print(f"[{NAME}] skip {len(skipped)} run(s) without a finished checkpoint at {length} steps: "
              f"{', '.join(skipped)}; {trains}", flush=True)
    if not found:
        raise FileNotFoundError(f"no finished gain-vs-tokens checkpoint at {length} steps under "
                                f"{resolve_root(gain.root)} (archs {list(gain.archs)}): {trains}")
    return pd.DataFrame(found)


def heldout_file(work: Path, source: str, val_fraction: float, source_hash: str, tokens: int) -> Path:
    """The val split of the runs' own source at their val_fraction, as a text file for the batch (its settings
    hash names it by content); InputError when the source is no longer the one the runs trained on.

    The probe reads the first `tokens` tokens of its text, but tokenizes all of it, once per checkpoint (16 s for
    the 1.6M characters of `english`'s val split, under load): so the file is the split cut at the first
    paragraph break after CHARS_PER_TOKEN characters per token, whose first `tokens` tokens are the split's own."""
    from interp import data
    from interp._util.errors import InputError, one_line
    from interp._util.io import text_sha256, write_text_atomic

    fix = "set probe.text to a text file or corpus name to probe on"
    try:
        docs = data.load_documents(source)
    except (OSError, ValueError) as err:
        raise InputError(f"the runs' source {source!r} cannot be read as documents ({one_line(err)})",
                         field="probe.text", fix=fix) from err
    if data.documents_hash(docs) != source_hash:
        raise InputError(f"the documents of the runs' source {source!r} changed since they trained (hash "
                         f"{data.documents_hash(docs)[:16]}, the runs' data.source_hash {str(source_hash)[:16]})",
                         field="probe.text", fix=fix)
    text = data.heldout_text(source, "val", val_fraction)
    cut = text.find("\n\n", CHARS_PER_TOKEN * tokens)
    text = text if cut < 0 else text[:cut]
    path = work / f"heldout-{data.source_label(source)}-{text_sha256(text)[:16]}.txt"
    if not path.is_file():
        write_text_atomic(path, text)
    return path


def _resolved(path: str | Path) -> str:
    return str(Path(path).resolve())


def probe_runs(cfg: Config, found: pd.DataFrame) -> pd.DataFrame:
    """interp.probes.batch over the checkpoints (one batch per held-out text; parts under ROOT/novelty-block-
    styles/); the probe rows of exactly these checkpoints and settings, joined to the run columns."""
    from interp._util.io import read_json, write_json_atomic
    from interp._util.provenance import cpu_info
    from interp.probes.batch import BatchConfig, run_batch

    work = resolve_root(cfg.root) / WORK_DIR
    hardware_file = work / "probe_hardware.json"  # part key -> the CPU that probed it (parts are reused later)
    frames = []
    for (source, val_fraction, source_hash), group in found.groupby(TEXT_KEYS, dropna=False):
        text = cfg.probe.text if cfg.probe.text is not None else str(
            heldout_file(work, source, val_fraction, source_hash, cfg.probe.tokens))
        paths = {_resolved(p): p for p in group["checkpoint"]}
        result = run_batch(BatchConfig(paths=list(paths.values()), out=str(work / "batch.parquet"),
                                       probe=dataclasses.replace(cfg.probe, text=text)))
        if result.failed:
            raise RuntimeError(f"{len(result.failed)} checkpoint(s) failed to probe: {result.failed[0]}")
        df = result.table.assign(resolved=result.table["path"].map(_resolved))
        df = df[(df["status"] == "ok") & (df["settings_hash"] == result.settings_hash) & df["resolved"].isin(paths)]
        missing = sorted(set(paths) - set(df["resolved"]))
        if missing:  # the batch keeps one path per identical model: a copied checkpoint is not probed twice
            raise RuntimeError(f"no probe rows for {missing[0]} in {work / 'batch.parquet'} (a byte-identical "
                               "checkpoint at another path?); probe it with `interp probe`")
        analysed = {_resolved(p) for p in result.analysed}
        now = df["resolved"].isin(analysed)
        hardware = read_json(hardware_file, missing_ok=True) or {}
        hardware.update(dict.fromkeys(set(df.loc[now, "key"]), cpu_info()["cpu"]))
        write_json_atomic(hardware_file, hardware)
        df = df.assign(probe_cpu=df["key"].map(hardware), probed_now=now)
        runs = group.assign(resolved=group["checkpoint"].map(_resolved))
        frames.append(df.merge(runs, on="resolved", suffixes=("", "_run")))
    return pd.concat(frames, ignore_index=True)


RUN_TABLE_COLUMNS = ["arch", "block_style", "variant", "label", "seed", "metric", "layer", "n_layers", "depth",
                     "d_mlp", "mean", "ci_low", "ci_high", "ci_method", "n_tokens", "checkpoint", "checkpoint_kind", "steps",
                     "tokens", "dtype_train", "train_cpu", "source", "val_fraction", "text_source", "text_sha256",
                     "dtype", "backend", "positions", "seq_len", "weights_sha256", "settings_hash", "probe_cpu",
                     "probed_now", "versions", "git_commit"]
_RANKS = {"arch": list(gvt.ARCHS), "variant": [gvt.BASELINE, gvt.TAPER], "metric": [*METRICS, "rho_mlp_normed"]}


def ordered(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Rows sorted by `by`, archs, variants and metrics in the study's order (others after them)."""
    return in_study_order(df, by, _RANKS)


def run_table(probed: pd.DataFrame) -> pd.DataFrame:
    """The per run x metric x layer table: the probe's per-token mean and CI, with provenance (dtype_train: the
    run's training dtype, train_cpu its CPU; dtype: the probe's metric math)."""
    df = probed.rename(columns={"dtype_run": "dtype_train", "cpu": "train_cpu"})
    df["d_mlp"] = [widths[int(layer)] for widths, layer in zip(df["d_mlp"], df["layer"])]
    if "ci_method" not in df.columns:  # batch parts probed before 2026-12-03: a per-token normal CI
        df["ci_method"] = None
    return ordered(df, ["arch", "variant", "seed", "metric", "layer"])[RUN_TABLE_COLUMNS]


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (arch, variant, metric, layer): the mean over seeds of each run's per-token mean with a 95% t-CI,
    n_seeds, d_mlp; per (arch, variant, metric), repeated on its layers: the Pearson and Spearman r of each seed's
    curve with the layer index (mean, t-CI over seeds), the r of the seed-mean curve, and the paper's GPT-2 range."""
    from interp.plots.novelty import PAPER_DEPTH_R, PAPER_MODELS, PAPER_SHAPE
    from interp.stats import mean_ci, pearson_r, spearman_r

    rows = []
    for (arch, variant, metric), g in runs.groupby(["arch", "variant", "metric"], sort=False):
        curves = g.pivot_table(index="seed", columns="layer", values="mean").dropna()  # seeds x layers
        layers = curves.columns.to_numpy(dtype=float)
        per_seed = {"pearson_r": [pearson_r(layers, c) for c in curves.to_numpy()],
                    "spearman_r": [spearman_r(layers, c) for c in curves.to_numpy()]}
        mean_curve = curves.mean(axis=0).to_numpy()
        corr = {}
        for name, values in per_seed.items():
            corr.update(zip((f"{name}_mean", f"{name}_ci_low", f"{name}_ci_high"), mean_ci(values)))
        paper = PAPER_DEPTH_R.get(metric, (math.nan, math.nan))
        corr.update({"pearson_r_of_mean": pearson_r(layers, mean_curve),
                     "spearman_r_of_mean": spearman_r(layers, mean_curve),
                     "paper_pearson_r_low": paper[0], "paper_pearson_r_high": paper[1],
                     "paper_note": f"paper section 4, {PAPER_MODELS}: {PAPER_SHAPE}" if metric in PAPER_DEPTH_R
                     else ""})
        first = g.iloc[0]
        for layer, at in g.groupby("layer"):
            widths = set(at["d_mlp"])
            if len(widths) != 1:
                raise ValueError(f"{NAME}: {arch}/{variant} layer {layer} has MLP widths {sorted(widths)} over "
                                 "seeds; a variant's runs must share one width profile")
            mean, low, high = mean_ci(curves[layer]) if layer in curves else (math.nan,) * 3
            rows.append({"arch": arch, "block_style": first["block_style"], "variant": variant,
                         "label": first["label"], "metric": metric, "layer": int(layer),
                         "n_layers": int(first["n_layers"]), "depth": float(at["depth"].iloc[0]),
                         "d_mlp": int(widths.pop()), "mean": mean, "ci_low": low, "ci_high": high,
                         "n_seeds": len(curves), "checkpoint_kind": first["checkpoint_kind"],
                         "steps": int(first["steps"]), "tokens": int(first["tokens"]), **corr})
    return pd.DataFrame(rows)


def compute(cfg: Config, figures_dir: Path) -> pd.DataFrame:
    """Probe every finished checkpoint of the chosen length, write both tables; returns the summary."""
    from interp.plots.novelty import PAPER_DEPTH_R, PAPER_MODELS, PAPER_SHAPE

    found = checkpoints(cfg)
    runs = run_table(probe_runs(cfg, found))
    summary = summarize(runs)
    meta = {**dataclasses.asdict(cfg), "paper": {"source": "paper section 4 (/work/shared/paper-notes.md)",
                                                 "models": PAPER_MODELS, "pearson_r_with_layer": PAPER_DEPTH_R,
                                                 "shape": PAPER_SHAPE}}
    write_table(runs, figures_dir, RUNS_TABLE, meta, NAME)
    write_table(summary, figures_dir, TABLE, meta, NAME)
    corr = summary.drop_duplicates(["arch", "variant", "metric"])
    print(corr[["block_style", "variant", "metric", "n_seeds", "pearson_r_mean", "pearson_r_ci_low",
                "pearson_r_ci_high", "paper_pearson_r_low", "paper_pearson_r_high"]]
          .to_string(index=False, float_format=lambda v: f"{v:+.3f}"), flush=True)
    return summary


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure
    from interp.plots.block_styles import plot_novelty_block_styles

    summary = read_table(figures_dir, TABLE, NAME)
    return [save_figure(plot_novelty_block_styles(summary, FIGURE_METRICS), Path(figures_dir) / FIGURE)]
