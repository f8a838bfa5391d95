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
already holds complete paired comparisons. A run that raises writes its traceback to error.txt and
the others go on (the token data is prepared outside that net: a missing or bad corpus would fail every
run alike, so it stops the experiment with its own message); a SIGINT/SIGTERM (the Trainer saves and returns
"interrupted") stops the whole experiment, because the user asked to stop: run_experiment prints its report and
raises Interrupted, so nothing after it (a table of the interrupted runs, the next experiment) runs.

A run is stated as what it is, before it trains and in the report: failed (with its error; error.txt), interrupted
(its state saved: resumable), abandoned (a saved state that no live process holds: its runner was killed;
resumable), running elsewhere (another live process holds its lock, <run>/.lock: never written to, not failed).

Under torchrun every rank runs the same loop and each run is a DDP run; only rank 0 writes files and
prints. A run that raises on one rank only would leave the others waiting in a collective: the
failure handling here is meant for the single-process case and for errors every rank hits alike
(a bad config, missing data).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from interp._util.config import check_path_component
from interp._util.dist import Distributed
from interp._util.children import Interrupted, stop_requested
from interp._util.io import LockHeld, exclusive_lock, write_text_atomic
from interp._util.paths import RESULT_FILE
from interp.schedules import LAYOUTS, PROFILES, WidthSpec
from interp.training.config import TrainConfig, fit_to_steps
from interp.training.results import (
    BASELINE,
    DONE,
    ERROR_FILE,
    FAILED,
    INTERRUPTED,
    NOT_RUN,
    RUN_LOCK,
    RUNNING_ELSEWHERE,
    SEED_DIR,
    SKIPPED,
    _read,
    finished_dir,
    lock_holder,
    run_state,
    trained_on,
)

if TYPE_CHECKING:  # imported lazily at run time: the Trainer, the data and the workers load torch
    from interp.data import TokenData
    from interp.training.workers import Outcome

# Paper Table 1: the five start->end pairs (each sums to 2, so the mean width is the baseline's).
SWEEP_SCHEDULES = ("cosine", "linear", "sigmoid")
SWEEP_PAIRS = ((1.25, 0.75), (1.375, 0.625), (1.5, 0.5), (1.625, 0.375), (1.75, 0.25))

# Always set by the experiment per run, so never allowed in Experiment.overrides; neither is any field a
# variant sets (a variant's width reserves the WidthSpec shape fields; `multiple` and `k` stay shared).
RESERVED_OVERRIDES = {"seed", "out_dir", "resume", "preset"}
WIDTH_SHAPE_FIELDS = {"width", "schedule", "start", "end", "profile"}
SHARED_WIDTH_FIELDS = ("multiple", "k")
LOCK_FILE = ".experiment.lock"  # in <root>/<experiment>/: held by the runner while it trains

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
    """Paper Figure 2: uniform, wider-early, wider-middle, wider-late (interp.schedules.PROFILES)."""
    return [variant(WidthSpec() if name == BASELINE else WidthSpec("profile", profile=name)) for name in PROFILES]


def sweep_variants() -> list[Variant]:
    """Paper Table 1: uniform plus cosine, linear, sigmoid x the five start->end pairs (16 variants)."""
    return [variant(WidthSpec())] + [variant(WidthSpec(schedule, start, end))
                                     for schedule in SWEEP_SCHEDULES for start, end in SWEEP_PAIRS]


def rival_variants() -> list[Variant]:
    """Issue 14 section 4, the rival depth profiles at the same budget: uniform; the paper's cosine 1.5->0.5
    (wide early); the reverse taper cosine 0.5->1.5 (growing with depth: OpenELM, DeLighT); middle-heavy
    0.5->1.5->0.5 (capacity in the middle layers: Ikeda/Lee et al. 2025); x-shaped 1.5->0.5->1.5 (wide early
    and late: the d_ff analogue of Variable-Width Transformers); interp.schedules_shapes.

    Every non-uniform profile spans the same 0.5..1.5 x d_ff (widest layer 3x the narrowest) with mean 1,
    the paper's best taper's magnitudes, so the arms differ in *where* depth gets the width, not in how
    unequal the widths are: a steeper profile wins at this scale (the sweep, derived_taper), and a rival run
    at other magnitudes would confound placement with steepness."""
    return [variant(w) for w in (WidthSpec(), WidthSpec("cosine", 1.5, 0.5), WidthSpec("cosine", 0.5, 1.5),
                                 WidthSpec("middle-heavy", 0.5, 1.5), WidthSpec("x-shaped", 1.5, 0.5))]


def layout_variants() -> list[Variant]:
    """Issue #34 item 5, the literature's layouts that leave layers WITHOUT an MLP, at the same budget
    (interp.schedules.LAYOUTS): middle-ffn (no FFN in the first and last ~15% of layers, Ikeda/Lee et al. 2025)
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


def describe(exp: Experiment) -> str:
    """The plan of `exp` as text (what `--dry-run` prints): one line per run, done or to train."""
    from interp.model import param_counts

    configs, notes = exp.plan()
    params = check_equal_params((cfg for _, _, cfg in configs), exp.equal_params_within)
    shapes = {(c.steps, c.batch_size, c.n_ctx) for _, _, c in configs}
    head = f"{exp.name}: {len(configs)} runs ({len(exp.variants)} variants x {len(exp.seeds)} seeds)"
    if params is not None:
        head += f", {params:,} params each"
    if len(shapes) == 1:
        steps, batch, n_ctx = shapes.pop()
        head += f", {steps} steps x {batch} x {n_ctx} = {steps * batch * n_ctx:,} tokens per run"
    lines = [head, *(f"  note: {note}" for note in notes)]
    width = max(20, *(len(v.name) for v in exp.variants))
    for v, seed, cfg in configs:
        found = finished_dir(exp, v, seed, cfg)
        state = "to train" if found is None else ("done" if found == Path(cfg.out_dir) else "recorded")
        before = run_state(Path(cfg.out_dir)) if found is None else ""   # what an unfinished run's folder holds
        if before:
            state = (RUNNING_ELSEWHERE if before.startswith(RUNNING_ELSEWHERE) else
                     "to retry" if before.startswith("failed") else "to resume")
        extra = "" if params is not None else f"  {param_counts(cfg.model_config(cfg.vocab_size))['total']:,} params"
        lines.append(f"  {v.name:<{width}} seed{seed}  {state:<8}  widths {cfg.width.widths(cfg.n_layers, cfg.d_ff)}"
                     f"{extra}  {cfg.out_dir}" + (f"  [{before}]" if before else ""))
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------- running

@dataclass
class RunStatus:
    variant: str
    seed: int
    run_dir: Path
    status: str                 # done | skipped | failed | interrupted | not run | running elsewhere
    seconds: float = 0.0
    error: str | None = None


@dataclass
class Report:
    """What one `run_experiment` call did; `exit_code` is what a CLI should return."""

    experiment: str
    params: int | None          # per run when equal in all (from result.json once a run has one), else None
    runs: list[RunStatus]

    @property
    def failed(self) -> list[RunStatus]:
        return [r for r in self.runs if r.status == FAILED]

    @property
    def interrupted(self) -> bool:
        return any(r.status == INTERRUPTED for r in self.runs)

    @property
    def exit_code(self) -> int:
        """128 + the signal that interrupted it (130 SIGINT, 143 SIGTERM), 1 a run failed or is running elsewhere,
        else 0."""
        if self.interrupted:
            return 128 + (stop_requested() or signal.SIGINT)
        return 1 if self.failed or any(r.status == RUNNING_ELSEWHERE for r in self.runs) else 0

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([{"variant": r.variant, "seed": r.seed, "status": r.status,
                              "seconds": round(r.seconds, 1), "error": r.error or ""} for r in self.runs])

    def summary(self) -> str:
        counts = self.table()["status"].value_counts().to_dict()
        each = f", {self.params:,} params each" if self.params is not None else ""
        lines = [f"[{self.experiment}] {len(self.runs)} runs{each}: "
                 + ", ".join(f"{n} {s}" for s, n in counts.items())]
        lines += [f"  FAILED {r.variant} seed{r.seed}: {r.error} (traceback: {r.run_dir / ERROR_FILE})"
                  for r in self.failed]
        lines += [f"  {RUNNING_ELSEWHERE} {r.variant} seed{r.seed}: another live process holds {r.run_dir} "
                  f"({r.error}); not touched (rerun when it has finished)"
                  for r in self.runs if r.status == RUNNING_ELSEWHERE]
        lines += [f"  interrupted {r.variant} seed{r.seed} ({r.error}): resumable, its state is saved in {r.run_dir}"
                  for r in self.runs if r.status == INTERRUPTED]
        if self.interrupted:
            lines.append("  interrupted (resumable): rerun the same command to resume from the saved steps")
        if any(r.status == NOT_RUN for r in self.runs):
            lines.append("  not run: never started (the experiment stopped first); a rerun trains them")
        return "\n".join(lines)


class DataCache:
    """Token data per (source, tokenizer, vocab_size, val_fraction), loaded on first need: every run of an
    experiment shares one TokenData, and an all-skipped rerun never touches the corpus."""

    def __init__(self, data: TokenData | None = None):
        self.fixed, self.loaded = data, {}

    def __call__(self, cfg: TrainConfig) -> TokenData:
        if self.fixed is not None:
            return self.fixed
        key = (cfg.source, cfg.tokenizer, cfg.vocab_size, cfg.val_fraction)
        if key not in self.loaded:
            from interp.data import prepare_tokens

            self.loaded[key] = prepare_tokens(*key)
        return self.loaded[key]


def run_experiment(exp: Experiment, data: TokenData | None = None, log: Callable[[str], None] | None = print,
                   jobs: int = 1) -> Report:
    """Train every run of `exp` that is not finished yet, seed-major; never raises for a single run's failure.

    jobs > 1: that many runs at once, one spawned process each (interp.training.workers; each gets
    cores // jobs threads unless the run sets `threads`), same results as one after another. Not under torchrun.

    `data` (an interp.data.TokenData) is passed to every Trainer when given (tests, notebooks);
    otherwise it is prepared once from the runs' config. A SIGINT/SIGTERM: the report is printed, then Interrupted
    is raised (interp.cli.main: exit 130 / 143). The experiment directory is locked while it runs
    (interp._util.io.exclusive_lock): a second runner of the same experiment fails at once with LockHeld
    naming the first one's pid, instead of training the same runs into the same directories.
    """
    if jobs < 1 or (jobs > 1 and Distributed.from_env(join=False).world_size > 1):
        raise ValueError(f"run_experiment(jobs={jobs}): jobs is the number of single-process runs trained at once, "
                         "at least 1, and must be 1 under torchrun (there every rank trains the same run)")
    configs, notes = exp.plan()
    # pre-flight, at the configured vocabulary
    params = check_equal_params((cfg for _, _, cfg in configs), exp.equal_params_within)
    main = Distributed.from_env(join=False).primary
    say = log if (log and main) else (lambda _msg: None)
    if log and main:
        for note in notes:  # the same rule and the same words as `interp train`
            print(f"[{exp.name}] {note}", file=sys.stderr)
    # only rank 0 under torchrun: the other ranks run the same loop in step with it
    lock = (exclusive_lock(exp.dir / LOCK_FILE, f"experiment {exp.dir} (--root/--name)") if main
            else contextlib.nullcontext())
    with lock:
        if jobs > 1:
            report = _train_runs_at_once(exp, configs, params, data, say, jobs)
        else:
            report = _train_runs(exp, configs, params, DataCache(data), say, main)
    if stop_requested() is not None:   # SIGINT/SIGTERM: the runs saved; stop the caller too (no table, no next step)
        say(report.summary())
        raise Interrupted(stop_requested())
    return report


def _train_runs(exp: Experiment, configs: list[tuple[Variant, int, TrainConfig]], params: int | None,
                get_data: DataCache, say: Callable[[str], None], main: bool) -> Report:
    """run_experiment's loop: skip the finished runs, train the others, stop at an interrupt."""
    statuses: list[RunStatus] = []
    for i, (v, seed, cfg) in enumerate(configs, 1):
        if statuses and statuses[-1].status in (INTERRUPTED, NOT_RUN):
            statuses.append(RunStatus(v.name, seed, Path(cfg.out_dir), NOT_RUN))
            continue
        statuses.append(train_run(exp, v, seed, cfg, get_data, say, f" {i}/{len(configs)}", main))
        params = _params_of(finished_dir(exp, v, seed, cfg) or Path(cfg.out_dir), params)
    return Report(exp.name, params, statuses)


def train_run(exp: Experiment, v: Variant, seed: int, cfg: TrainConfig, get_data: Callable[[TrainConfig], TokenData],
              say: Callable[[str], None], where: str = "", main: bool = True) -> RunStatus:
    """One run of `exp` as every runner takes it: skipped when finished (its directory or its record), left alone
    when another live process trains it, else trained (resuming its saved state) with a failure kept in error.txt.
    Shared by run_experiment's loop and the jobs layer's training job (interp.jobs.training: one Slurm task per
    run); `where` follows the experiment's name in its lines (" 3/8")."""
    from interp.training.trainer import Trainer
    from interp.training.workers import Outcome

    run_dir = Path(cfg.out_dir)
    if _skip_if_done(exp, where, v, seed, cfg, say, main) is not None:
        return RunStatus(v.name, seed, run_dir, SKIPPED)
    # under torchrun the ranks must agree on training it: there the Trainer's own lock check decides (LockHeld)
    before = run_state(run_dir) if Distributed.from_env(join=False).world_size == 1 else ""
    if before.startswith(RUNNING_ELSEWHERE):
        return _elsewhere(exp, where, v, seed, run_dir, before, say)
    say(f"[{exp.name}{where}] {v.name} seed{seed}: training -> {run_dir}" + (f" ({before})" if before else ""))
    t0 = time.perf_counter()
    data = get_data(cfg)  # outside the try: a missing or bad corpus fails every run alike, so it stops here
    try:
        result = Trainer(cfg, data=data).run()
    except Exception as err:  # noqa: BLE001 - one failed run must not stop the others
        outcome = Outcome(None, time.perf_counter() - t0, f"{type(err).__name__}: {err}", traceback.format_exc())
    else:
        outcome = Outcome(result, time.perf_counter() - t0)
    return _record(exp, v, seed, run_dir, outcome, say, main)


def _skip_if_done(exp: Experiment, where: str, v: Variant, seed: int, cfg: TrainConfig,
                  say: Callable[[str], None], main: bool) -> Path | None:
    """Where the run is finished (its directory or its record), saying so; None: it is to train."""
    run_dir = Path(cfg.out_dir)
    found = finished_dir(exp, v, seed, cfg)
    if found is None:
        return None
    if main and found == run_dir:
        (run_dir / ERROR_FILE).unlink(missing_ok=True)  # left by a rerun with another config
    recorded = "" if found == run_dir else f" (recorded in {found}, trained on {trained_on(found)})"
    say(f"[{exp.name}{where}] {v.name} seed{seed}: done already{recorded}, skipped")
    return found


def _params_of(run_dir: Path, params: int | None) -> int | None:
    """The real parameter count (at the tokenizer's vocabulary) once a run has a result.json."""
    return params if params is None else (_read(run_dir / RESULT_FILE) or {}).get("params", params)


def _elsewhere(exp: Experiment, where: str, v: Variant, seed: int, run_dir: Path, state: str,
               say: Callable[[str], None]) -> RunStatus:
    """A run another live process trains (its lock is held): neither trained nor written to, nor failed."""
    say(f"[{exp.name}{where}] {v.name} seed{seed}: {state}: not touched")
    return RunStatus(v.name, seed, run_dir, RUNNING_ELSEWHERE, 0.0, state.partition(": ")[2])


def _record(exp: Experiment, v: Variant, seed: int, run_dir: Path, outcome: Outcome, say: Callable[[str], None],
            main: bool) -> RunStatus:
    """One trained (or failed) run's status; its error.txt written (a failure) or cleared (fixed now)."""
    if outcome.result is None:
        holder = lock_holder(run_dir) if main else None
        if holder is not None or (outcome.error or "").startswith(f"{LockHeld.__name__}:"):
            # another live process holds the run's lock (an orphan of a killed runner, a second command): its
            # folder is not ours to write an error into, and the run has not failed
            why = (f"pid {holder} holds {run_dir / RUN_LOCK}" if holder is not None
                   else (outcome.error or "").partition(": ")[2])
            say(f"[{exp.name}] {v.name} seed{seed}: {RUNNING_ELSEWHERE}: {why}")
            return RunStatus(v.name, seed, run_dir, RUNNING_ELSEWHERE, outcome.seconds, why)
        if main:
            run_dir.mkdir(parents=True, exist_ok=True)
            write_text_atomic(run_dir / ERROR_FILE, outcome.traceback or outcome.error or "")
        say(f"[{exp.name}] FAILED {v.name} seed{seed}: {outcome.error}")
        return RunStatus(v.name, seed, run_dir, FAILED, outcome.seconds, outcome.error)
    result = outcome.result
    status = DONE if result.get("status") == DONE else INTERRUPTED
    if main:
        (run_dir / ERROR_FILE).unlink(missing_ok=True)  # an earlier failure is fixed now
    say(f"[{exp.name}] {v.name} seed{seed}: {status}, val_ppl {result.get('val_ppl')}")
    return RunStatus(v.name, seed, run_dir, status, outcome.seconds, result.get("reason"))


def _train_runs_at_once(exp: Experiment, configs: list[tuple[Variant, int, TrainConfig]], params: int | None,
                        data: TokenData | None, say: Callable[[str], None], jobs: int) -> Report:
    """_train_runs with `jobs` runs at a time in child processes; the same statuses, in the same order."""
    from interp.training.workers import train_in_processes

    statuses: dict[int, RunStatus] = {}
    todo: list[int] = []
    before: dict[int, str] = {}   # what each unfinished run's folder holds, read before any child takes it
    for i, (v, seed, cfg) in enumerate(configs):
        if _skip_if_done(exp, f" {i + 1}/{len(configs)}", v, seed, cfg, say, True) is not None:
            statuses[i] = RunStatus(v.name, seed, Path(cfg.out_dir), SKIPPED)
            continue
        before[i] = run_state(Path(cfg.out_dir))
        if before[i].startswith(RUNNING_ELSEWHERE):
            statuses[i] = _elsewhere(exp, f" {i + 1}/{len(configs)}", v, seed, Path(cfg.out_dir), before[i], say)
        else:
            todo.append(i)
    if todo and data is None:  # once here, so a missing or bad corpus stops the experiment before any child
        DataCache()(configs[todo[0]][2])

    def start(k: int) -> None:
        v, seed, cfg = configs[todo[k]]
        say(f"[{exp.name} {todo[k] + 1}/{len(configs)}] {v.name} seed{seed}: training -> {cfg.out_dir}"
            + (f" ({before[todo[k]]})" if before[todo[k]] else ""))

    def end(k: int, outcome: Outcome) -> None:
        v, seed, cfg = configs[todo[k]]
        statuses[todo[k]] = _record(exp, v, seed, Path(cfg.out_dir), outcome, say, True)

    train_in_processes([configs[i][2] for i in todo], jobs, data, start, end)
    for i, (v, seed, cfg) in enumerate(configs):
        statuses.setdefault(i, RunStatus(v.name, seed, Path(cfg.out_dir), NOT_RUN))
        params = _params_of(finished_dir(exp, v, seed, cfg) or Path(cfg.out_dir), params)
    return Report(exp.name, params, [statuses[i] for i in range(len(configs))])


class ExperimentFailed(RuntimeError):
    """Raised after an experiment's tables were written, if some of its runs failed; carries the Report and
    the summary table it computed (None: read it back from where it was written)."""

    def __init__(self, report: Report, summary: pd.DataFrame | None = None):
        super().__init__(report.summary())
        self.report, self.summary = report, summary


__all__ = ["Variant", "Experiment", "Report", "RunStatus", "ExperimentFailed", "variant", "slug", "group_variants",
           "sweep_variants", "rival_variants", "layout_variants", "select_variants", "VARIANT_SETS", "SWEEP_SCHEDULES", "SWEEP_PAIRS",
           "check_equal_params", "describe", "run_experiment", "train_run", "DataCache"]
