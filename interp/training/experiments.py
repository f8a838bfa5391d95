"""Multi-run training experiments (the paper's Figure 2 and Table 1) as single resumable commands.

An `Experiment` is a set of variants x seeds trained from one preset with the same data, steps and
everything else. A variant is a name plus TrainConfig overrides, any fields: a width (the group
ablation, the schedule sweep), or a mixer and a width (the architecture comparison, whose variant
names "attention/uniform" nest one directory per mixer). Each run lives in its own directory, which
is the only state there is:

    <root>/<experiment>/<variant>/seed<k>/   config.json, log.jsonl, model.safetensors,
                                             train_state.pt, result.json (interp.training), error.txt (here)

Why directories and no database: rerunning the command skips runs whose result.json says "done"
(without even constructing a Trainer), resumes interrupted ones (TrainConfig.resume=True), and
retries failed ones; the summary tables are rebuilt from the directories (interp.training.results:
collect, experiment_runs, summarize), so a table can never disagree with the runs it describes, and runs
from several machines can be merged by copying directories.

Run records (`Experiment.records`): runs/ holds gigabytes of weights and is never committed, so a fresh
machine would retrain everything. A record is a finished run's config.json and result.json, a few KB,
copied to <records>/<variant>/seed<k>/ (results.save_records; the analyses keep them under
figures/records/<experiment>/ and commit them). A run whose record holds a finished run of the same config
(config_diff, as for a run directory) counts as done: it is skipped and its row comes from the record,
with the hardware it was trained on. Its weights are not there: anything that needs them retrains it.

Runs go seed-major (every variant of seed 0, then seed 1, ...), so an experiment stopped half-way
already holds complete paired comparisons. This module says what the runs are (their configs, in that
order); running them is interp.jobs' (interp.jobs.training: the plan, one task per run locally, under
torchrun or on Slurm, their locks and the report; interp.jobs.runs: one run trained, skipped or failed and
stated in the words of interp._util.states), since interp.training sits below interp.jobs.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from interp._util.config import check_path_component
from interp.training.config import TrainConfig, fit_to_steps
from interp.training.results import BASELINE, SEED_DIR
from interp.widths.schedules import LAYOUTS, PROFILES, WidthSpec

# Paper Table 1: the five start->end pairs (each sums to 2, so the mean width is the baseline's).
SWEEP_SCHEDULES = ("cosine", "linear", "sigmoid")
SWEEP_PAIRS = ((1.25, 0.75), (1.375, 0.625), (1.5, 0.5), (1.625, 0.375), (1.75, 0.25))

# Always set by the experiment per run, so never allowed in Experiment.overrides; neither is any field a
# variant sets (a variant's width reserves the WidthSpec shape fields; `multiple` and `k` stay shared).
RESERVED_OVERRIDES = {"seed", "out_dir", "resume", "preset"}
WIDTH_SHAPE_FIELDS = {"width", "schedule", "start", "end", "profile"}
SHARED_WIDTH_FIELDS = ("multiple", "k")

# ------------------------------------------------------------------------------------------ variants

@dataclass(frozen=True)
class Variant:
    """One arm of an experiment: `name` is its directory under the experiment (nested with "/", e.g.
    "titans/cosine-1.5-0.5") and its key in tables; `overrides` are the TrainConfig fields it sets (any
    field; `width` as a WidthSpec, or its fields schedule/start/end/profile)."""

    name: str
    overrides: Mapping[str, Any] = field(default_factory=dict)

    @property
    def width(self) -> WidthSpec:
        """The WidthSpec this variant trains (the default, uniform, when it sets none)."""
        return TrainConfig().with_overrides(**self._width_overrides()).width

    @property
    def label(self) -> str:
        """The width's label ("cosine 1.5->0.5") when the variant sets a width, else its name."""
        return self.width.label if self._width_overrides() else self.name

    def _width_overrides(self) -> dict[str, Any]:
        return {k: v for k, v in self.overrides.items() if k in WIDTH_SHAPE_FIELDS}


def _is_component(part: str) -> bool:
    try:
        check_path_component(part, "part")
    except ValueError:
        return False
    return True


def slug(label: str) -> str:
    """Directory-safe form of a WidthSpec label: "cosine 1.5->0.5" -> "cosine-1.5-0.5"."""
    return re.sub(r"[^a-z0-9.]+", "-", label.lower()).strip("-")


def variant(width: WidthSpec, **overrides: Any) -> Variant:
    """The variant training `width` (plus any other TrainConfig overrides), named by the width's slug."""
    return Variant(slug(width.label), {"width": width, **overrides})


def group_variants() -> list[Variant]:
    """Paper Figure 2: uniform, wider-early, wider-middle, wider-late (interp.widths.schedules.PROFILES)."""
    return [variant(WidthSpec() if name == BASELINE else WidthSpec("profile", profile=name)) for name in PROFILES]


def sweep_variants() -> list[Variant]:
    """Paper Table 1: uniform plus cosine, linear, sigmoid x the five start->end pairs (16 variants)."""
    return [variant(WidthSpec())] + [variant(WidthSpec(schedule, start, end))
                                     for schedule in SWEEP_SCHEDULES for start, end in SWEEP_PAIRS]


def rival_variants() -> list[Variant]:
    """Issue 14 section 4, the rival depth profiles at the same budget: uniform; the paper's cosine 1.5->0.5
    (wide early); the reverse taper cosine 0.5->1.5 (growing with depth: OpenELM, DeLighT); middle-heavy
    0.5->1.5->0.5 (capacity in the middle layers: Ikeda/Lee et al. 2025); x-shaped 1.5->0.5->1.5 (wide early
    and late: the d_ff analogue of Variable-Width Transformers); interp.widths.shapes.

    Every non-uniform profile spans the same 0.5..1.5 x d_ff (widest layer 3x the narrowest) with mean 1,
    the paper's best taper's magnitudes, so the arms differ in *where* depth gets the width, not in how
    unequal the widths are: a steeper profile wins at this scale (the sweep, derived_taper), and a rival run
    at other magnitudes would confound placement with steepness."""
    return [variant(w) for w in (WidthSpec(), WidthSpec("cosine", 1.5, 0.5), WidthSpec("cosine", 0.5, 1.5),
                                 WidthSpec("middle-heavy", 0.5, 1.5), WidthSpec("x-shaped", 1.5, 0.5))]


def layout_variants() -> list[Variant]:
    """Issue #34 item 5, the literature's layouts that leave layers WITHOUT an MLP, at the same budget
    (interp.widths.schedules.LAYOUTS): middle-ffn (no FFN in the first and last ~15% of layers, Ikeda/Lee et al. 2025)
    and no-first-mlp (modded-nanogpt). Added to the rival study with its `layouts` option, paired by seed with
    its runs. In the llama style their parameter counts equal uniform's (each layer keeps its ln2 gain); in the
    gpt2 style a layer without an MLP also has no output bias, so check_equal_params refuses them there."""
    return [variant(WidthSpec("profile", profile=name)) for name in LAYOUTS]


VARIANT_SETS: dict[str, Callable[[], list[Variant]]] = {"groups": group_variants, "sweep": sweep_variants,
                                                        "rivals": rival_variants}


def select_variants(variants: Sequence[Variant], only: Iterable[str] = (), where: str = "only") -> list[Variant]:
    """The variants named in `only` (all when empty), in their own order; ValueError naming unknown names."""
    only = tuple(only)
    if not only:
        return list(variants)
    known = [v.name for v in variants]
    unknown = sorted(set(only) - set(known))
    if unknown:
        raise ValueError(f"{where}={unknown}: unknown variant(s); choose from {', '.join(known)}")
    return [v for v in variants if v.name in only]


# ---------------------------------------------------------------------------------------- experiment

@dataclass
class Experiment:
    """Variants x seeds from one preset; `overrides` are TrainConfig fields shared by every run.

    equal_params_within: TrainConfig fields whose values group the runs (e.g. ("mixer",)); parameter
    counts must be equal inside each group. Empty (the default): equal over the whole experiment.
    """

    name: str                                   # directory under root, e.g. "groups-tiny"
    preset: str
    variants: list[Variant]
    seeds: list[int]
    root: str | Path = "runs"
    overrides: dict = field(default_factory=dict)
    equal_params_within: tuple[str, ...] = ()
    records: str | Path | None = None           # committed run records (module docstring); None: none

    def __post_init__(self) -> None:
        if not self.variants or not self.seeds:
            raise ValueError(f"Experiment {self.name!r}: needs at least one variant and one seed "
                             f"(got {len(self.variants)} variants, seeds {self.seeds})")
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names) or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"Experiment {self.name!r}: variant names {names} and seeds {self.seeds} must be unique")
        check_path_component(self.name, f"Experiment {self.name!r}: name")  # one folder under root, never above
        bad = [n for n in names if not isinstance(n, str) or not all(_is_component(p) and not SEED_DIR.fullmatch(p)
                                                                     for p in n.split("/"))]
        if bad:
            raise ValueError(f"Experiment {self.name!r}: variant names {bad} must be relative directory names "
                             "(letters, digits, . _ -, nested with /; no '..' and no part named seed<k>)")
        reserved = sorted((RESERVED_OVERRIDES | self.variant_fields()) & set(self.overrides))
        if reserved:
            raise ValueError(f"Experiment.overrides may not set {reserved}: the experiment sets them per run "
                             "(width granularity and sigmoid steepness may be set: multiple, k)")

    def variant_fields(self) -> set[str]:
        """TrainConfig fields some variant sets (a width reserves all of WidthSpec's shape fields)."""
        fields = {k for v in self.variants for k in v.overrides}
        return (fields - WIDTH_SHAPE_FIELDS) | (WIDTH_SHAPE_FIELDS if fields & WIDTH_SHAPE_FIELDS else set())

    @property
    def dir(self) -> Path:
        return Path(self.root) / self.name

    def run_dir(self, v: Variant, seed: int) -> Path:
        return self.dir / v.name / f"seed{seed}"

    def record_dir(self, v: Variant, seed: int) -> Path | None:
        return None if self.records is None else Path(self.records) / v.name / f"seed{seed}"

    def configs(self) -> list[tuple[Variant, int, TrainConfig]]:
        """(variant, seed, TrainConfig) per run, seed-major, each validated and set to resume.

        `multiple` / `k` in overrides apply to every variant's WidthSpec (e.g. multiple=128 on a GPU). A run
        shorter than the preset's schedule is fitted as `interp train` fits one (fit_to_steps; see plan()).
        """
        return self.plan()[0]

    def plan(self) -> tuple[list[tuple[Variant, int, TrainConfig]], list[str]]:
        """configs(), and what fit_to_steps changed in them (a warm-up shortened to fit --steps, ...), once each."""
        width_kw = {k: v for k, v in self.overrides.items() if k in SHARED_WIDTH_FIELDS}
        runs, notes = [], []
        for seed in self.seeds:
            for v in self.variants:
                kw = {**self.overrides, **v.overrides}
                if v._width_overrides():  # the variant's own width, at the shared granularity
                    kw = {k: x for k, x in kw.items() if k not in WIDTH_SHAPE_FIELDS and k not in width_kw}
                    kw["width"] = dataclasses.replace(v.width, **width_kw)
                cfg = TrainConfig.from_preset(self.preset, **kw, seed=seed, out_dir=str(self.run_dir(v, seed)),
                                              resume=True)
                cfg, changed = fit_to_steps(cfg, given={**self.overrides, **v.overrides})
                notes += [n for n in changed if n not in notes]
                cfg.validate()
                try:  # the model too (mixer, mixer_options), so a bad option fails before any run trains
                    cfg.model_config(cfg.vocab_size).validate()
                except ValueError as err:
                    raise ValueError(f"variant {v.name!r}: {err}") from err
                runs.append((v, seed, cfg))
        return runs, notes


def check_equal_params(configs: Iterable[TrainConfig], within: Sequence[str] = ()) -> int | None:
    """Total parameters of every config's model (at its configured vocabulary); ValueError unless they are
    equal inside each group of equal `within` fields (e.g. ("mixer",)). Returns the count when there is one
    group, None when there are several (each has its own count).

    Only the MLP widths differ between the variants of a group, so this holds whatever vocabulary the
    tokenizer ends up with; `summarize` re-checks the counts the runs actually recorded.
    """
    from interp.model import param_counts

    groups: dict[tuple, list[tuple[str, int]]] = {}
    for cfg in configs:
        key = tuple(getattr(cfg, f) for f in within)
        groups.setdefault(key, []).append((cfg.width.label, param_counts(cfg.model_config(cfg.vocab_size))["total"]))
    for key, counts in groups.items():
        if len({n for _, n in counts}) != 1:
            where = f" (runs with {dict(zip(within, key))})" if within else ""
            raise ValueError(f"variants differ in parameter count {dict(counts)}{where}: a width variant must keep "
                             "the mean MLP width (check WidthSpec.multiple against d_ff and n_layers)")
    return next(iter(groups.values()))[0][1] if len(groups) == 1 else None


class ExperimentFailed(RuntimeError):
    """Raised after an experiment's tables were written, if some of its runs failed; carries the Report
    (interp.jobs.runs.Report: what the runner said) and the summary table it computed (None: read it back from
    where it was written)."""

    def __init__(self, report: Any, summary: pd.DataFrame | None = None):
        super().__init__(report.summary())
        self.report, self.summary = report, summary


__all__ = [
    "SWEEP_PAIRS",
    "SWEEP_SCHEDULES",
    "VARIANT_SETS",
    "Experiment",
    "ExperimentFailed",
    "Variant",
    "check_equal_params",
    "group_variants",
    "layout_variants",
    "rival_variants",
    "select_variants",
    "slug",
    "sweep_variants",
    "variant",
]
