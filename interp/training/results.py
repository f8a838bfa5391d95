"""Run directories -> tables: read finished (or failed, or running) runs back, and summarise them over seeds.

The run directories are the only state an experiment has (interp.training.experiments writes them), so
every table is rebuilt from them: `collect(root)` one row per run, `experiment_runs(exp)` the runs of one
Experiment (stale ones marked; runs finished elsewhere read from their committed records, `save_records`),
`summarize(runs)` per variant mean and Student-t CI over seeds and the difference from the baseline paired
by seed. Reads only config.json / result.json / error.txt: instant, and safe while runs train.

Statistics over seeds use Student-t intervals (interp.stats.mean_ci): with 3 seeds the normal 1.96 would
understate the interval by a factor of 2.2 (t_{0.975, 2} = 4.303). scipy is not a dependency, so
interp.stats.t_quantile inverts the t CDF itself; tests check it against a printed t-table.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from interp._util.errors import InputError
from interp._util.io import atomic_write, read_json
from interp._util.paths import CONFIG_FILE, RESULT_FILE
from interp._util.states import DONE, FAILED
from interp.training.config import TrainConfig, config_diff

if TYPE_CHECKING:
    from interp.training.experiments import Experiment, Variant

ERROR_FILE = "error.txt"
BASELINE = "uniform"
SEED_DIR = re.compile(r"seed(\d+)")
# A run's status in collect()'s rows: done, failed, or its result.json's own (interrupted), else "incomplete"
# (training now, or killed); experiment_runs adds "stale". The states' words are interp._util.states'.
# result.json fields the tables compute with
RESULT_NUMBERS = ("step", "tokens", "params", "val_loss", "val_ppl", "train_loss", "elapsed_s", "tokens_per_s")


def _read(path: Path) -> dict | None:
    """A run's JSON file; None when missing or torn (a killed process): the run counts as unfinished.
    Valid JSON that is not an object was not written by us: InputError naming the file, never a traceback."""
    doc = read_json(path, missing_ok=True, torn_ok=True)
    if doc is not None and not isinstance(doc, dict):
        raise InputError(f"expected a JSON object, got {type(doc).__name__}", path=path,
                         fix="delete the file to retrain this run, or restore it")
    return doc


def _numbers(result: dict, path: Path) -> dict:
    """`result` with its RESULT_NUMBERS checked: each a number or null (NaN allowed: a diverged run)."""
    bad = {k: result[k] for k in RESULT_NUMBERS
           if result.get(k) is not None and (isinstance(result[k], bool) or not isinstance(result[k], int | float))}
    if bad:
        raise InputError(f"fields {bad} must be numbers", path=path, fix="delete the file to retrain this run")
    return result


def is_done(run_dir: Path, cfg: TrainConfig) -> bool:
    """True if run_dir holds a finished run of exactly this config (runtime fields aside).

    A finished run of a *different* config is not done: the Trainer then refuses it with a message
    naming the differing fields, and the run is reported as failed rather than silently reused.
    """
    result, config = _read(run_dir / RESULT_FILE), _read(run_dir / CONFIG_FILE)
    return bool(result and config and result.get("status") == DONE
                and not config_diff(_object(config, "train", run_dir), cfg))


# ------------------------------------------------------------------------------------------- collect

RUN_COLUMNS = ["experiment", "variant", "label", "seed", "status", "schedule", "start", "end", "profile",
               "widths", "params", "steps", "tokens", "val_loss", "val_ppl", "train_loss", "elapsed_s",
               "tokens_per_s", "device", "dtype", "hardware", "world_size", "preset", "source", "tokenizer", "tokenizer_hash",
               "source_hash", "versions", "git_commit", "run_dir", "weights_sha256", "error"]


def find_run_dirs(root: Path) -> list[Path]:
    """Directories named seed<k> under root (or root itself) holding a config, result or error file."""
    root = Path(root)
    candidates = [root, *root.rglob("seed*")] if root.is_dir() else []
    return sorted(p for p in candidates if p.is_dir() and SEED_DIR.fullmatch(p.name)
                  and any((p / f).is_file() for f in (CONFIG_FILE, RESULT_FILE, ERROR_FILE)))


def read_run(run_dir: Path) -> dict:
    """One run directory -> one row of RUN_COLUMNS (status "incomplete" while it trains or was killed)."""
    run_dir = Path(run_dir)
    config = _read(run_dir / CONFIG_FILE) or {}
    result = _numbers(_read(run_dir / RESULT_FILE) or {}, run_dir / RESULT_FILE)
    train, data = _object(config, "train", run_dir), _object(config, "data", run_dir)
    width = _object(train, "width", run_dir)
    error_path = run_dir / ERROR_FILE
    if result.get("status") == DONE:
        status = DONE
    elif error_path.is_file():
        status = FAILED
    else:
        status = result.get("status") or "incomplete"
    error = ""
    if status == FAILED:
        lines = [ln for ln in error_path.read_text(errors="replace").splitlines() if ln.strip()]
        error = lines[-1] if lines else "see error.txt"
    packages = config.get("provenance", {}).get("packages", {})
    widths = result.get("widths") or config.get("widths")
    params = result.get("params", config.get("params", {}).get("total"))
    return {
        "experiment": run_dir.parent.parent.name, "variant": run_dir.parent.name,
        "label": result.get("label") or config.get("label") or run_dir.parent.name,
        "seed": _seed(train, run_dir), "status": status,
        "schedule": width.get("schedule"), "start": width.get("start"), "end": width.get("end"),
        "profile": width.get("profile"), "widths": "/".join(map(str, widths)) if widths else None,
        "params": params, "steps": result.get("step", train.get("steps")), "tokens": result.get("tokens"),
        "val_loss": result.get("val_loss"), "val_ppl": result.get("val_ppl"),
        "train_loss": result.get("train_loss"), "elapsed_s": result.get("elapsed_s"),
        "tokens_per_s": result.get("tokens_per_s"), "device": result.get("device"), "dtype": result.get("dtype"),
        "hardware": hardware_label(config),
        "world_size": result.get("world_size"), "preset": train.get("preset"),
        "source": train.get("source") or data.get("source"),   # train's: absolute for a path
        "tokenizer": data.get("tokenizer"), "tokenizer_hash": data.get("tokenizer_hash"),
        "source_hash": data.get("source_hash"),
        "versions": ";".join(f"{k}={v}" for k, v in packages.items()) or None,
        "git_commit": config.get("provenance", {}).get("git_commit"), "run_dir": str(run_dir),
        "weights_sha256": result.get("weights_sha256"),   # the final model.safetensors (runs since 2026-12-03)
        "error": error,
    }


def _seed(train: dict, run_dir: Path) -> int | None:
    """The run's seed: its config's, else its seed<k> directory name's; None for a run that has neither."""
    if train.get("seed") is not None:
        return int(train["seed"])
    match = SEED_DIR.fullmatch(run_dir.name)
    return int(match.group(1)) if match else None


def hardware_label(config: dict) -> str | None:
    """What a run started on, from its config.json provenance: the CUDA device, else the CPU model, cores and
    native bf16 (fp32 and bf16 numbers differ between CPU kinds); None for runs saved before it was recorded."""
    hw = (config.get("provenance") or {}).get("hardware") if isinstance(config, dict) else None
    if not isinstance(hw, dict):
        return None
    from interp._util.provenance import hardware_label as label

    return label("cuda" if hw.get("cuda") else "cpu", hw)


def _object(doc: dict, key: str, run_dir: Path) -> dict:
    """doc[key] as a dict ({} when absent); InputError naming the run's config.json when it is something else."""
    value = doc.get(key) or {}
    if not isinstance(value, dict):
        raise InputError(f"{key!r} must be a JSON object, got {type(value).__name__}", path=run_dir / CONFIG_FILE,
                         fix="delete the run directory to retrain it, or restore the file")
    return value


def collect(root: str | Path) -> pd.DataFrame:
    """Every run under root as one row (RUN_COLUMNS), sorted by experiment, variant, seed.

    Reads only config.json / result.json / error.txt, so it is instant and works while runs train.
    """
    rows = [read_run(d) for d in find_run_dirs(Path(root))]
    df = pd.DataFrame(rows, columns=RUN_COLUMNS)
    return df.sort_values(["experiment", "variant", "seed"], ignore_index=True)


def experiment_runs(exp: Experiment) -> pd.DataFrame:
    """One row per run of `exp` that has started (RUN_COLUMNS), in exp's variant order, then seed.

    `experiment` and `variant` are exp's name and the variant's full name (for nested names such as
    "titans/uniform" the directory parts read_run() reads would be "titans" and "uniform").
    A run not finished in its directory but recorded (exp.records, same config) is read from its record:
    its `run_dir` is the record's. A finished run whose stored config differs from what `exp` would train
    now (e.g. other --steps into the same directory) is marked "stale" so it never enters the statistics.
    """
    rows = []
    for v, seed, cfg in exp.configs():
        found = finished_dir(exp, v, seed, cfg)
        source = found or exp.run_dir(v, seed)
        if not any((source / f).is_file() for f in (CONFIG_FILE, RESULT_FILE, ERROR_FILE)):
            continue  # not started
        row = read_run(source)
        row.update(experiment=exp.name, variant=v.name)
        if row["status"] == DONE and found is None:
            row["status"] = "stale"
        rows.append(row)
    order = {v.name: i for i, v in enumerate(exp.variants)}
    df = pd.DataFrame(rows, columns=RUN_COLUMNS)
    return df.sort_values(["variant", "seed"], key=lambda c: c.map(order) if c.name == "variant" else c,
                          ignore_index=True)


# ------------------------------------------------------------------------------------------- records

RECORD_FILES = (CONFIG_FILE, RESULT_FILE)  # what a record keeps of a finished run: a few KB, no weights


def finished_dir(exp: Experiment, v: Variant, seed: int, cfg: TrainConfig) -> Path | None:
    """Where the finished run (v, seed) of exactly `cfg` is: its run directory, else its record
    (exp.records), else None (to train)."""
    for d in (exp.run_dir(v, seed), exp.record_dir(v, seed)):
        if d is not None and is_done(d, cfg):
            return d
    return None


def trained_on(run_dir: Path) -> str | None:
    """The hardware label of the run in run_dir (a run directory or a record)."""
    return hardware_label(_read(Path(run_dir) / CONFIG_FILE) or {})


def save_records(exp: Experiment) -> list[Path]:
    """Copy config.json and result.json of every run of `exp` finished in its run directory to its record
    (exp.records/<variant>/seed<k>/), atomically; a record already equal is left alone. Returns the records
    written. A run finished only in its record keeps it; a record of another config is replaced by the run
    finished now (as the tables are)."""
    written = []
    if exp.records is None:
        return written
    for v, seed, cfg in exp.configs():
        run_dir, record = exp.run_dir(v, seed), exp.record_dir(v, seed)
        if not is_done(run_dir, cfg):
            continue
        texts = {name: (run_dir / name).read_text() for name in RECORD_FILES}
        if all((record / n).is_file() and (record / n).read_text() == t for n, t in texts.items()):
            continue
        atomic_write(record, {n: (lambda p, t=t: p.write_text(t)) for n, t in texts.items()})
        written.append(record)
    return written


# ---------------------------------------------------------------------------------------- statistics

def summarize(runs: pd.DataFrame, baseline: str = BASELINE, order: Sequence[str] | None = None,
              level: float = 0.95) -> pd.DataFrame:
    """One row per variant of the finished runs: mean and t-CI of val loss and perplexity, and the
    difference from `baseline` paired by seed (only seeds both finished), with its t-CI.

    Pairing by seed removes the seed-to-seed spread both variants share (same data order, same init
    of every matrix whose shape agrees), so the paired CI is the one that says whether a variant differs.
    Columns d_* are variant minus baseline; rel_val_ppl_pct is 100 * (ppl / ppl_baseline - 1) per seed.
    Raises ValueError if the finished runs differ in parameter count.
    """
    from interp.stats import mean_ci  # imports torch: not at module level (`interp --help` imports this module)

    stats = ("val_loss", "val_ppl", "d_val_loss", "d_val_ppl", "rel_val_ppl_pct")
    columns = ["variant", "label", "n_seeds", "params", "seeds", "schedule", "start", "end", "widths", "steps",
               "tokens", "n_pairs"] + [f"{c}_{s}" for c in stats for s in ("mean", "ci_low", "ci_high")]
    done = runs[runs["status"] == DONE]
    params = done.groupby("variant")["params"].first()
    if params.nunique() > 1:
        raise ValueError(f"finished runs differ in parameter count {params.to_dict()}: the comparison is not "
                         "like-for-like (were runs from different presets collected together?)")
    names = [n for n in (order or sorted(done["variant"].unique())) if n in set(done["variant"])]
    base = done[done["variant"] == baseline].set_index("seed")
    rows = []
    for name in names:
        g = done[done["variant"] == name]
        row = {"variant": name, "label": g["label"].iloc[0], "n_seeds": len(g), "params": int(g["params"].iloc[0]),
               "seeds": ",".join(str(s) for s in sorted(g["seed"]))}
        for col in ("schedule", "start", "end", "widths", "steps", "tokens"):
            row[col] = g[col].iloc[0]
        for col in ("val_loss", "val_ppl"):
            row[f"{col}_mean"], row[f"{col}_ci_low"], row[f"{col}_ci_high"] = mean_ci(g[col], level)
        paired = g.set_index("seed").join(base[["val_loss", "val_ppl"]], rsuffix="_base", how="inner")
        row["n_pairs"] = len(paired)
        diffs = {"d_val_loss": paired["val_loss"] - paired["val_loss_base"],
                 "d_val_ppl": paired["val_ppl"] - paired["val_ppl_base"],
                 "rel_val_ppl_pct": 100.0 * (paired["val_ppl"] / paired["val_ppl_base"] - 1.0)}
        for col, d in diffs.items():
            row[f"{col}_mean"], row[f"{col}_ci_low"], row[f"{col}_ci_high"] = mean_ci(d, level)
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


__all__ = [
    "BASELINE",
    "ERROR_FILE",
    "RECORD_FILES",
    "RUN_COLUMNS",
    "collect",
    "experiment_runs",
    "find_run_dirs",
    "finished_dir",
    "is_done",
    "read_run",
    "save_records",
    "summarize",
    "trained_on",
]
