"""One module per experiment/figure, and the ordered registry `interp figures` walks.

Each analysis module exposes:
    NAME: str                        its registry name (= module name)
    OUTPUTS: list[str]               files it writes under figures/ (tables *.csv, sidecars, *.png)
    @dataclass Config                quick defaults: what `make figures` runs
    compute(cfg, figures_dir)        runs the experiment; writes small tables under figures/
                                     (heavy artifacts go under runs/, which git ignores)
    render(figures_dir) -> [Path]    reads the stored tables, writes the PNGs; seconds, no model
    HEAVY: bool (optional)           True for experiments that take tens of minutes to hours on 2 CPU
                                     cores (many training runs): `interp figures --recompute` re-renders
                                     them from their stored tables instead of retraining, unless they are
                                     named with --only or --all is given

Adding an analysis is one line: append its module name to ANALYSES. An experiment made of training runs (or an
evaluation over one) is also listed in EXPERIMENTS, which gives it its `interp experiment NAME` command (flags from
its Config; interp/cli/experiment.py).

Layering: an analysis module is config + compute + render and never imports interp.cli; the command
line (interp/cli/) is the only layer that imports analyses, and builds its flags from their Configs.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd

from interp._util.children import raise_if_stopped
from interp._util.io import atomic_write
from interp._util.paths import REPO_ROOT
from interp._util.provenance import provenance

# Order = the order `interp figures` runs and lists them (cheap first).
ANALYSES: list[str] = [
    "schedules",
    "train_comparison",
    "novelty_tapered",
    "novelty_over_training",
    "novelty_pretrained",
    "group_ablation",
    "schedule_sweep",
    "pretrained_ablation",
    "architectures",
    "derived_taper",
    "novelty_vs_causal",
    "layer_removal",
    "importance_measures",
    "attribution_vs_exact",
    "removal_accuracy",
    "misleading_layers",
    "downstream",
    "full_set_evals",
    "downstream_groups",
    "downstream_architectures",
    "niah",
    "gain_vs_tokens",
    "rival_profiles",
    "novelty_block_styles",
    "gpu_study",
    "novelty_gpt2",
    "pythia_over_training",
    "engine_validation",
]

# The experiments made of training runs, and the evaluation over one, by their `interp experiment` name:
# name -> (analysis module above, the one line `interp experiment --help` shows).
EXPERIMENTS: dict[str, tuple[str, str]] = {
    "groups": ("group_ablation", "uniform vs wider-early/-middle/-late at equal parameters (paper Fig. 2)"),
    "sweep": ("schedule_sweep", "schedule x ratio sweep, 16 variants (paper Table 1)"),
    "rivals": ("rival_profiles", "the paper's taper vs the reverse taper, middle-heavy and x-shaped profiles"),
    "architectures": ("architectures", "uniform vs cosine 1.5->0.5 for each token mixer"),
    "gain-vs-tokens": ("gain_vs_tokens", "does the taper's gain shrink or grow with training length? (wsd branches)"),
    "derived-taper": ("derived_taper", "a taper derived from a measured skip-MLP profile vs cosine 1.5->0.5"),
    "eval": ("downstream_groups", "the paper's tasks on every run of an experiment, per variant over seeds"),
}

REQUIRED_ATTRIBUTES = ("NAME", "OUTPUTS", "Config", "compute", "render")
TABLE_SUFFIX = ".csv"
META_SUFFIX = ".meta.json"


def meta_name(table: str) -> str:
    """The sidecar write_table writes beside `table`: "x.csv" -> "x.meta.json"."""
    return Path(table).stem + META_SUFFIX


def outputs(*files: str) -> list[str]:
    """An analysis's OUTPUTS: the files in order, each CSV table followed by its write_table sidecar."""
    return [f for file in files for f in ((file, meta_name(file)) if file.endswith(TABLE_SUFFIX) else (file,))]


def get(name: str) -> ModuleType:
    """The analysis module registered as `name`; ValueError listing the known names otherwise."""
    if name not in ANALYSES:
        raise ValueError(f"unknown analysis {name!r}; registered analyses (analyses.ANALYSES): {', '.join(ANALYSES)}")
    return _checked(name)


def _checked(module_name: str) -> ModuleType:
    """analyses.<module_name>, imported and checked against the contract."""
    module = importlib.import_module(f"{__name__}.{module_name}")
    check_module(module)
    return module


def check_module(module: ModuleType) -> None:
    """Fail early, naming what is missing, if a module does not follow the analysis contract."""
    missing = [a for a in REQUIRED_ATTRIBUTES if not hasattr(module, a)]
    if missing:
        raise TypeError(f"analysis module {module.__name__} lacks {missing}; see analyses/__init__.py for the contract")
    if not dataclasses.is_dataclass(module.Config):
        raise TypeError(f"{module.__name__}.Config must be a @dataclass")
    if not module.OUTPUTS or not all(isinstance(o, str) for o in module.OUTPUTS):
        raise TypeError(f"{module.__name__}.OUTPUTS must be a non-empty list of file names under figures/")


def experiment_analysis(name: str) -> ModuleType:
    """The analysis module of the experiment `name` (EXPERIMENTS); ValueError listing the known names otherwise."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; experiments (analyses.EXPERIMENTS): {', '.join(EXPERIMENTS)}")
    return _checked(EXPERIMENTS[name][0])   # not via get(): a test's stand-in ANALYSES leaves the experiments alone


def is_heavy(module: ModuleType) -> bool:
    """Whether a plain `--recompute` should leave this analysis's stored tables alone (see HEAVY)."""
    return bool(getattr(module, "HEAVY", False))


def tables(module: ModuleType) -> list[str]:
    """The outputs that render() reads: the CSV tables compute() stores."""
    return [o for o in module.OUTPUTS if o.endswith(TABLE_SUFFIX)]


def missing_tables(module: ModuleType, figures_dir: Path) -> list[Path]:
    return [Path(figures_dir) / t for t in tables(module) if not (Path(figures_dir) / t).is_file()]


def recompute_command(name: str) -> str:
    """The shell command that (re)creates an analysis's tables; quoted in skip and error messages."""
    return f"interp figures --only {name} --recompute"


REPO_PREFIX = "repo:"   # a Config default that lives in the repository: "repo:runs" = <repository>/runs


def resolve_root(root: str | Path) -> Path:
    """A run root or table path from a Config. "repo:PATH" (the analyses' own defaults: `make figures` finds its
    runs wherever it is started) is under the repository; any other relative path is under the working
    directory, as every command-line tool reads a path (`interp experiment groups --root R` from a scratch folder
    writes there, never into the repository)."""
    text = str(root)
    if text.startswith(REPO_PREFIX):
        return REPO_ROOT / text[len(REPO_PREFIX):]
    path = Path(text).expanduser()
    return path if path.is_absolute() else Path.cwd() / path


def repo_relative(path: str | Path) -> str:
    """An absolute `path` below the repository root as relative to it (committed tables name no machine and read
    the same on every clone); anything else as given: a relative path, a registry name, "" (no checkpoint)."""
    if not Path(str(path)).is_absolute():
        return str(path)
    resolved = Path(path).resolve()
    return str(resolved.relative_to(REPO_ROOT)) if resolved.is_relative_to(REPO_ROOT) else str(resolved)


def write_table(df: pd.DataFrame, figures_dir: Path, filename: str, config: Any, analysis: str) -> Path:
    """Write a result table as CSV plus a `<stem>.meta.json` sidecar (config + provenance + columns), atomically.

    The sidecar says what produced the numbers, so a table under figures/ is never anonymous; both files
    are written before either replaces its old version (interp._util.io.atomic_write), so a killed
    `interp figures` leaves the previous table and sidecar, never a torn or mismatched pair.
    """
    raise_if_stopped()   # a table from runs a SIGINT/SIGTERM interrupted is not a result: write nothing
    figures_dir = Path(figures_dir)
    path = figures_dir / filename
    meta = {
        "analysis": analysis,
        "table": filename,
        "rows": len(df),
        "columns": list(df.columns),
        "config": dataclasses.asdict(config) if dataclasses.is_dataclass(config) else config,
        "provenance": provenance(),
        # rows reused from earlier work (finished runs, resumed eval/batch parts) may come from other commits and
        # machines: their own provenance columns (git_commit, hardware, versions) say so, where the table has them
        "provenance_of": "the process that wrote this table",
    }
    meta_text = json.dumps(meta, indent=2, default=str) + "\n"
    atomic_write(figures_dir, {filename: lambda p: df.to_csv(p, index=False),
                               meta_name(filename): lambda p: p.write_text(meta_text)})
    return path


def in_study_order(df: pd.DataFrame, by: list[str], ranks: dict[str, Any]) -> pd.DataFrame:
    """Rows sorted by `by` (stable), the columns named in `ranks` by the order of their values there (values not
    listed after the listed ones), the others by value: tables read in the study's order, not alphabetically."""
    def key(column: pd.Series) -> pd.Series:
        if column.name not in ranks:
            return column
        rank = {name: i for i, name in enumerate(ranks[column.name])}
        return column.map(rank).fillna(len(rank))
    return df.sort_values(by, key=key, kind="stable").reset_index(drop=True)


def read_table(figures_dir: Path, filename: str, analysis: str) -> pd.DataFrame:
    """Read a stored table, or say which command creates it."""
    path = Path(figures_dir) / filename
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: run `{recompute_command(analysis)}` to create it")
    return pd.read_csv(path)
