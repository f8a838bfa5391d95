"""Many checkpoints -> one tidy table of novelty probes: one model in memory at a time, resumable, split over
processes, torchrun ranks or Slurm array tasks, and tolerant of broken checkpoints.

Why a separate module: interp.probes analyses ONE model. What is particular to probing many is here: the probe
settings that key a checkpoint's rows, the seq_len that fits every model, the columns that say which checkpoint a
row is, and which parts of older versions are still current. The bookkeeping shared with `interp eval` and
`interp ablate` (PATH expansion, content keys, parts, merging, executors, status) is interp.jobs.

PATH expansion (interp.jobs.targets.expand_paths): checkpoint dirs, run dirs (their step checkpoints, then the
final model), HF model dirs, .gguf files, registry names, hub ids (at a revision or a series), and folders searched
for all of those; symlinks are visited once and not followed out of the PATH given unless follow_symlinks=True.

Resuming: every checkpoint's rows are written atomically to OUT.parts/<key>.parquet (OUT = results/batch.parquet ->
results/batch.parts/), key = the model's content key with this module's settings() hash (interp.jobs.keys
.model_part_key, the key `interp eval` and `interp ablate` name their parts by: the weights' sha256 and the other
files that define the model; a hub revision's commit, known without a download), and every row carries the model's
identity (weights_sha256, model_key, model_spec), which the eval and ablation tables carry too. A key whose part
exists is skipped, so a killed batch resumes where it stopped, and identical models at two paths (a copied
checkpoint) are analysed once: the table keeps the first path. A part under the key batch parts had before
(<weights>-<settings>-<definition>, a hub revision's <commit>-<settings>-hub) counts as done, and is replaced when
recomputed; parts written before the key covered the definition (<weights>-<settings>) are recomputed once and
the old part of the same path is removed (superseded); parts without today's PART_FORMAT columns are recomputed
too.
The settings hash covers everything that changes the numbers: every ProbeConfig field (the text by its content),
not package versions (those are a column). OUT is always rebuilt from the parts (merge_parts).

Failures: a checkpoint that cannot be hashed, loaded or probed (missing/truncated weights, corrupt config, wrong
tokenizer, too little text) gives one row with status="failed" and the error, in OUT.parts/failed-<path
hash>.parquet, and a line on stderr; the batch goes on and BatchResult.failed lists it (the CLI exits 1). A later
success of the same path removes its failure row.

Executors (interp.jobs.executors, BatchConfig.execution): local --jobs N processes, torchrun ranks (RANK /
WORLD_SIZE; rank 0 merges after a barrier when there is a process group, else `interp jobs merge OUT`), or Slurm
array tasks. Each task holds OUT.parts/.rank<i>.lock while it runs, so a second batch on the same OUT fails at once
naming the holder's pid. OUT, its parts folder and OUT.csv are checked writable before anything is computed.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp._util.config import reject_unknown_keys
from interp._util.dist import Distributed, check_env, env_rank, env_world_size
from interp._util.errors import InputError, one_line
from interp._util.io import check_output as check_output_path
from interp._util.io import text_sha256
from interp.jobs.executors import ExecutorConfig, JobsResult, execute
from interp.jobs.keys import (
    HUB_KEY,
    definition_sha256,
    identity,
    model_part_key,
    part_key,
    settings_hash,
    tokenizer_sha256,
    weights_sha256,
)
from interp.jobs.parts import (
    claim_parts,
    failed_part,
    lock_task,
    merge_table,
    part_files,
    parts_dir,
    read_part,
    sort_rows,
    write_part,
)
from interp.jobs.runner import Outcome
from interp.jobs.targets import Target, expand_paths, parse_checkpoints, select_checkpoints
from interp.probes.config import DEFAULT_CAUSAL_TOKENS, ProbeConfig
from interp.probes.outputs import check_output

# Importing this module imports no torch (the CLI builds `interp batch --help` from BatchConfig's
# defaults); the probe itself and the model resolver are imported where they run.

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["BATCH_COLUMNS", "BatchConfig", "BatchResult", "BatchRunner", "merge_only", "merge_parts", "run_batch"]

# Columns the batch puts in front of the probe table's own (interp.probes.TABLE_COLUMNS).
BATCH_COLUMNS = ("path", "kind", "run", "label", "step", "status", "error", "key", "weights_sha256", "model_key",
                 "model_spec", "settings_hash")
SORT_COLUMNS = ("run", "step", "path", "metric", "layer")


# --------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------

# The batch's defaults differ from probe()'s: the paper's 2,048 tokens at a sequence length every model we
# train can take (the tiny preset's n_ctx is 256).
PROBE_DEFAULTS = {"tokens": 2048}
BATCH_SEQ_LEN = 256   # an unset --seq-len: this, or the shortest context among the batch's models (fit_seq_len)
# ProbeConfig fields added after batch tables were first written: they enter the settings hash only when
# set, so the parts of earlier tables keep their keys (and are still skipped).
LATER_SETTINGS = {"reference": "raw", "exclude_massive_dims": None, "causal": False, "device": "cpu",
                  "model_dtype": "float32", "device_map": None, "causal_tokens": DEFAULT_CAUSAL_TOKENS,
                  "causal_method": "exact"}
# Columns whose absence marks a part written before its rows' numbers changed meaning: ci_method came with the
# sequence-level CIs (2026-12-03; before, ci_low/ci_high and sem were per-token). Such a part is recomputed.
PART_FORMAT = ("ci_method",)


def default_probe_config() -> ProbeConfig:
    return ProbeConfig(**PROBE_DEFAULTS)


@dataclass
class BatchConfig:
    """One batch job: which PATHs, where the table goes, and the probe settings (a ProbeConfig, every
    option interp.probes.probe takes) used for every checkpoint."""

    paths: list[str] = field(default_factory=list)
    out: str = "results/batch.parquet"
    probe: ProbeConfig = field(default_factory=default_probe_config)
    csv: bool = False                     # also write OUT with a .csv suffix when merging
    progress: bool = True                 # one line per checkpoint on stderr, with an ETA
    threads: int = 0                      # torch.set_num_threads; 0 leaves torch's default
    rank: int | None = None               # default: $RANK (0)
    world_size: int | None = None         # default: $WORLD_SIZE (1)
    follow_symlinks: bool = False         # follow symlinks out of a PATH's tree (each directory once anyway)
    checkpoints: str = "all"              # which checkpoints of each run (interp.jobs.targets.CHECKPOINTS_HELP)
    trust_remote_code: bool = False       # let HF dirs with an auto_map run their own code (a loader option)
    revision: str | None = None           # the revision of every hub id among the paths (else MODEL@REV, or main)
    revisions: str | None = None          # a checkpoint series of each hub id: "a,b", "step0..step3000:1000", "all"
    revision_pattern: str | None = None   # a regex with groups step / tokens reading the revision names of a series
    #                                       no built-in scheme knows (interp.hf.hub.compile_revision_pattern)
    execution: ExecutorConfig = field(default_factory=ExecutorConfig)   # where the tasks run (not in any key)

    def __post_init__(self) -> None:
        self.paths = [str(p) for p in self.paths]
        if isinstance(self.probe, dict):
            self.probe = ProbeConfig.from_dict(self.probe)
        if isinstance(self.execution, dict):
            self.execution = ExecutorConfig(**self.execution)

    @classmethod
    def build(cls, **kwargs: Any) -> BatchConfig:
        """BatchConfig from flat keywords: run_batch(paths=[...], out=..., tokens=64, reference="normed", jobs=2);
        ProbeConfig fields go to `probe` (on top of the batch's defaults), ExecutorConfig fields to `execution`."""
        probe_fields = {f.name for f in dataclasses.fields(ProbeConfig)}
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in probe_fields}
        executor_fields = {f.name for f in dataclasses.fields(ExecutorConfig)}
        execution = {k: kwargs.pop(k) for k in list(kwargs) if k in executor_fields}
        if execution:
            kwargs["execution"] = dataclasses.replace(kwargs.get("execution") or ExecutorConfig(), **execution)
        probe = kwargs.pop("probe", None) or default_probe_config()
        return cls(**kwargs, probe=ProbeConfig.build(probe, **options))

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["probe"] = self.probe.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BatchConfig:
        reject_unknown_keys(cls, d)
        return cls(**d)

    def validate(self) -> None:
        """Cheap checks before anything is computed (ValueError naming the field): the options, and that OUT,
        its parts folder and OUT.csv can be written (check_outputs)."""
        try:
            self.probe.validate()
        except ValueError as err:
            raise ValueError(f"BatchConfig.probe: {err}") from None
        from interp._util.devices import resolve_device

        resolve_device(self.probe.device)  # a missing GPU fails once, here, not once per checkpoint
        if not str(self.out).endswith(".parquet"):
            raise ValueError(f"BatchConfig.out={self.out!r}: the merged table is parquet; use a path ending "
                             "in .parquet (csv=True adds a CSV beside it)")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 0:
            raise ValueError(f"BatchConfig.threads={self.threads!r}: give a number of threads >= 1, or 0 for "
                             "torch's default")
        try:
            parse_checkpoints(self.checkpoints)
        except ValueError as err:
            raise ValueError(f"BatchConfig.{err}") from None
        if self.rank is None or self.world_size is None:
            check_env()   # RANK / WORLD_SIZE / LOCAL_RANK set wrong by hand: one line, before any path is read
        rank = self.rank if self.rank is not None else env_rank()
        world = self.world_size if self.world_size is not None else env_world_size()
        if not 0 <= rank < world:
            raise ValueError(f"BatchConfig.rank={rank}: must be in [0, world_size={world})")
        if self.revision_pattern is not None:
            from interp.hf.hub import compile_revision_pattern

            compile_revision_pattern(self.revision_pattern)   # one line naming --revision-pattern, before any work
        self.execution.validate()
        check_outputs(self.out, self.csv)

    def settings(self, text_sha256: str, tokenizer_sha256: str = "") -> dict[str, Any]:
        """Everything that changes the numbers of one checkpoint's rows (the skip key hashes this): every
        ProbeConfig field, the text by content, not by name (the same text at another path is the same
        setting); LATER_SETTINGS only when they differ from their defaults; a --tokenizer given as a file or
        folder also by its content (tokenizer_sha256, only then)."""
        settings = {"text_sha256": text_sha256, **self.probe.to_dict()}
        del settings["text"]
        for name, default in LATER_SETTINGS.items():
            if settings[name] == default:
                del settings[name]
        if tokenizer_sha256:
            settings["tokenizer_sha256"] = tokenizer_sha256
        return settings


def target_context(target: Target) -> int | None:
    """A target's context from its config alone (no weights read); None where only a load can tell (a .gguf, a
    hub revision not yet downloaded)."""
    try:
        return target.source.context_length()
    except (OSError, ValueError):   # an unreadable target fails in its own row later, as before
        return None


def fit_seq_len(probe: ProbeConfig, targets: list[Target]) -> ProbeConfig:
    """The batch's probe settings with seq_len fitted once, before any model loads: an unset seq_len becomes
    min(BATCH_SEQ_LEN, the shortest context among the targets), said on stderr when shorter; a given one that
    exceeds a target's context is an InputError naming them (rather than a failed row after each load)."""
    contexts = [(t, c) for t in targets if (c := target_context(t))]
    shortest = min((c for _, c in contexts), default=None)
    if probe.seq_len is None:
        fitted = probe.for_context(shortest, default=BATCH_SEQ_LEN)
        if fitted.seq_len < BATCH_SEQ_LEN:
            names = [str(t.path) for t, c in contexts if c == shortest]
            print(f"[batch] seq_len {fitted.seq_len}: the shortest context among the models ({names[0]}"
                  f"{f' and {len(names) - 1} more' if len(names) > 1 else ''}; default {BATCH_SEQ_LEN})",
                  file=sys.stderr)
        return fitted
    over = [(t, c) for t, c in contexts if probe.seq_len > c]   # seq_len counts a prepended BOS
    if over:
        listed = ", ".join(f"{t.path} ({c} positions)" for t, c in over[:3]) + (f" and {len(over) - 3} more"
                                                                               if len(over) > 3 else "")
        raise InputError(f"{probe.seq_len} tokens per sequence exceed the context of {listed}", field="--seq-len",
                         fix=f"use --seq-len <= {min(c for _, c in over)}, or leave it unset "
                             "(it then fits the shortest context)")
    return probe


# --------------------------------------------------------------------------------------------------
# Parts and the merged table (interp.jobs.parts) in the batch's format
# --------------------------------------------------------------------------------------------------

def _failed_part(parts: Path, path: Path) -> Path:
    return failed_part(parts, str(path.resolve()))


def _model_key(target: Target) -> str:
    """The target's content key ("" for a failure row of a model whose files cannot be read)."""
    try:
        return target.source.content_key()
    except (OSError, ValueError):
        return ""


def _current(part: Path) -> bool:
    """Whether a part has every column of today's probe rows that changes what its numbers mean (PART_FORMAT):
    an older part is probed again and replaced under the same key, so one table never mixes the two."""
    import pyarrow.parquet as pq

    return set(PART_FORMAT) <= set(pq.read_schema(part).names)


def _order(df: pd.DataFrame) -> pd.DataFrame:
    """BATCH_COLUMNS first, rows in (run, step, path, metric, layer) order: a table that does not depend
    on which task or which invocation wrote which part."""
    first = [c for c in BATCH_COLUMNS if c in df.columns]
    return sort_rows(df[first + [c for c in df.columns if c not in first]], SORT_COLUMNS)


def check_outputs(out: str | Path, csv: bool = False) -> None:
    """InputError before any work when OUT, OUT.parts/ or OUT.csv cannot be written, or OUT exists and is
    not a batch table (its rows are merged into the new table, so it must be one)."""
    out = check_output(out, (".parquet",))
    parts = parts_dir(out)
    if parts.exists() and not parts.is_dir():
        raise InputError(f"the parts folder {parts} is a file; move it away or choose another --out", path=out,
                         field="--out")
    check_output_path(out, "--out", folder=False)     # a link there, a read-only file
    check_output_path(parts, "--out", folder=True)    # the parts folder a link (its parts would land elsewhere)
    if csv:
        check_output(out.with_suffix(".csv"), (".csv",), flag="--csv")
        check_output_path(out.with_suffix(".csv"), "--csv", folder=False)
    if out.is_file():
        import pyarrow.parquet as pq

        try:
            names = pq.read_schema(out).names
        except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
            raise InputError(f"exists and is not a parquet table ({one_line(err)}); choose another --out or "
                             "move the file away", path=out, field="--out") from err
        if "key" not in names or "status" not in names:
            raise InputError("exists and is not a batch table (no key/status columns); choose another --out",
                             path=out, field="--out")


def merge_parts(out: str | Path, csv: bool = False) -> pd.DataFrame:
    """Rebuild the table OUT from every part under OUT.parts/ and write it atomically (and OUT.csv)."""
    if not part_files(out):
        raise FileNotFoundError(f"{parts_dir(out)}: no parts to merge; run `interp batch PATH... --out {out}` first")
    return merge_table(out, _order, csv)


def merge_only(out: str | Path, csv: bool = False) -> pd.DataFrame:
    """`interp jobs merge OUT` (`interp batch --merge-only`): check the outputs, then merge_parts under task 0's
    lock (a batch still writing OUT makes this fail at once instead of racing it)."""
    check_outputs(out, csv)
    if not part_files(out):
        return merge_parts(out, csv)  # FileNotFoundError with the fix; nothing created
    claim_parts(parts_dir(out), BatchRunner.kind, out, mark=False)   # merging writes no part: no marker either
    with lock_task(out, 0, f"batch output {out}"):
        return merge_parts(out, csv)


def _seed_parts(out: Path) -> int:
    """A table whose parts folder was deleted: split it back into parts so rebuilding loses nothing."""
    import pandas as pd

    parts = parts_dir(out)
    if not out.is_file() or part_files(out):
        return 0
    df = pd.read_parquet(out)
    if "key" not in df.columns or "status" not in df.columns:
        raise ValueError(f"{out} is not a batch table (no key/status columns): choose another --out")
    for key, rows in df[df["status"] == "ok"].groupby("key"):
        write_part(rows, parts / f"{key}.parquet")
    for path, rows in df[df["status"] != "ok"].groupby("path"):
        write_part(rows, _failed_part(parts, Path(path)))
    return len(df)


# --------------------------------------------------------------------------------------------------
# The job
# --------------------------------------------------------------------------------------------------

@dataclass
class BatchResult:
    """What one invocation did (all its tasks; under torchrun, this rank's). `table` is the merged table when
    this process merged."""

    analysed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)   # (path, error)
    rank: int = 0
    world_size: int = 1
    out: Path | None = None
    table: pd.DataFrame | None = None
    positions_per_s: float = math.nan
    probe_s: float = 0.0             # seconds inside the probes (loads and downloads excluded)
    elapsed_s: float = 0.0           # seconds of the longest task's loop over its targets (hashing, loading, probing)
    settings_hash: str = ""          # of this invocation's settings: select its rows from a shared table
    targets: list[Target] = field(default_factory=list)   # every expanded target (all tasks)
    jobs: JobsResult | None = None   # what each task did, the Slurm job ids, tasks that died

    @property
    def ok(self) -> bool:
        return not self.failed and not (self.jobs and self.jobs.failed_tasks)


class BatchRunner:
    """The batch as a job of interp.jobs: plan() expands the PATHs, do() probes one checkpoint into its part.
    BatchRunner(cfg).run() runs it under cfg.execution's executor."""

    kind = "probe batch"
    prefix = "[batch]"
    what = "batch output"

    def __init__(self, cfg: BatchConfig, extra_rows: Callable[..., pd.DataFrame] | None = None):
        """extra_rows: joined to each checkpoint's probe rows (probes.run.probe's extra_rows): the causal rows of
        interp.causal, which sits above both probes and ablations (neither imports the other)."""
        cfg.validate()
        if cfg.probe.causal and extra_rows is None:   # refused here, not as a failed row per checkpoint
            raise InputError("the causal rows are joined by interp.causal (above probes and ablations), not by "
                             "interp.probes.batch", field="causal=True",
                             fix="call interp.causal.run_batch with the same arguments, or run `interp batch --causal`")
        self.cfg = cfg
        self.extra_rows = extra_rows
        self.out = Path(cfg.out)
        self.parts = parts_dir(self.out)
        self.progress = cfg.progress
        self.settings = ""
        self._tok: Any = None

    # ------------------------------------------------------------------ the job's parts
    def plan(self) -> list[Target]:
        cfg = self.cfg
        targets = select_checkpoints(expand_paths(cfg.paths, follow_symlinks=cfg.follow_symlinks,  # a bad PATH
                                                  revision=cfg.revision, revisions=cfg.revisions,  # fails first
                                                  revision_pattern=cfg.revision_pattern),
                                     cfg.checkpoints)
        self.cfg = dataclasses.replace(cfg, probe=fit_seq_len(cfg.probe, targets))   # before any load
        self.settings = self._settings_hash()
        if env_rank() == 0 and (self.cfg.rank or 0) == 0:
            claim_parts(self.parts, self.kind, self.out, mark=False)
            _seed_parts(self.out)
        return targets

    def _settings_hash(self) -> str:
        from interp.probes.text import load_text

        text, _ = load_text(self.cfg.probe.text)
        return settings_hash(self.cfg.settings(text_sha256(text), tokenizer_sha256(self.cfg.probe.tokenizer)))

    def prepare(self) -> None:
        if self.cfg.threads:
            import torch

            torch.set_num_threads(self.cfg.threads)
        if not self.settings:
            self.settings = self._settings_hash()
        if self.cfg.probe.tokenizer is not None:   # the --tokenizer override, built once for every checkpoint
            from interp import data

            self._tok = data.get_tokenizer(self.cfg.probe.tokenizer)

    def name(self, target: Target) -> str:
        return str(target.path)

    def merge(self) -> pd.DataFrame:
        return merge_parts(self.out, self.cfg.csv)

    def do(self, target: Target) -> Outcome:
        weights, key, settings = "", "", self.settings
        try:
            pinned = target.source.pinned_key()
            if pinned:   # a hub revision, keyed by its commit: known before anything is downloaded
                definition = ""
                old = part_key(pinned, settings, HUB_KEY)
            else:
                weights = weights_sha256(target)
                definition = definition_sha256(target)
                old = part_key(weights, settings, definition)
            key = model_part_key(target.source.content_key(), settings)
            part, old_part = self.parts / f"{key}.parquet", self.parts / f"{old}.parquet"
            stats: dict[str, float] = {}
            if any(p.is_file() and _current(p) for p in (part, old_part)):   # (old_part: its name before: done)
                state = "skipped"
            else:
                rows = self._analyse(target, key, weights, settings)
                timing = rows.attrs.pop("timing", {})  # run-to-run noise: kept out of the part
                write_part(rows, part)
                old_part.unlink(missing_ok=True)   # an older part of this model, recomputed under its key
                state = "done"
                stats = {"positions": timing.get("positions", 0), "probe_s": timing.get("probe_s", 0.0)}
            if definition:
                self._drop_superseded(self.parts / f"{part_key(weights, settings, '')}.parquet", target)
            _failed_part(self.parts, target.path).unlink(missing_ok=True)
            return Outcome(state, stats=stats)
        except Exception as err:  # noqa: BLE001 - one broken checkpoint must not stop the batch
            message = f"{type(err).__name__}: {one_line(err)}"
            write_part(self._rows(target, key, weights, settings, "failed", message),
                       _failed_part(self.parts, target.path))
            return Outcome("failed", message)

    # ------------------------------------------------------------------ one checkpoint's rows
    def _rows(self, target: Target, key: str, weights: str, settings: str, status: str = "ok",
              error: str = "", probe_df: pd.DataFrame | None = None) -> pd.DataFrame:
        import pandas as pd

        columns = {"path": str(target.path), "kind": target.kind, "run": target.run, "label": target.label,
                   "step": target.step, "status": status, "error": error, "key": key,
                   **identity(weights, _model_key(target), str(target.path)), "settings_hash": settings}
        load_columns = target.source.table_columns()
        if load_columns:   # a hub revision: the revision, the commit it resolved to, and the tokens its name carries
            columns.update(load_columns, tokens=target.tokens)
        df = probe_df.copy() if probe_df is not None else pd.DataFrame(index=[0])
        for name, value in columns.items():
            df[name] = value
        return _order(df)

    def _analyse(self, target: Target, key: str, weights: str, settings: str) -> pd.DataFrame:
        from interp.probes import run as probe_run  # by module: a test can stand in for probe_run.probe

        options: dict[str, Any] = {"tokenizer": self._tok} if self._tok is not None else {}
        if self.extra_rows is not None:
            options["extra_rows"] = self.extra_rows
        if target.source.pinned_key():   # fetched at the commit the plan resolved (the branch may have moved since)
            model: Any = dataclasses.replace(target.source, trust_remote_code=self.cfg.trust_remote_code)
        else:   # a path: resolved afresh, as the user's `interp probe PATH` would
            model = str(target.path)
            if self.cfg.trust_remote_code:
                options["trust_remote_code"] = True
        df = probe_run.probe(model, config=self.cfg.probe, **options)
        if not weights:   # a hub revision's: known once fetched
            weights = str(df["weights_sha256"].iloc[0])
        timing = df.attrs.get("timing", {})
        rows = self._rows(target, key, weights, settings, probe_df=df)
        rows.attrs["timing"] = timing
        return rows

    @staticmethod
    def _drop_superseded(legacy: Path, target: Target) -> None:
        """Remove the part an earlier version keyed by the weights alone, once this path's part under the
        full key exists (the same weights and settings, recomputed): otherwise its rows would appear twice."""
        if not legacy.is_file():
            return
        paths = set(read_part(legacy)["path"])
        if {Path(p).resolve() for p in paths} == {target.path.resolve()}:
            legacy.unlink(missing_ok=True)

    # ------------------------------------------------------------------ run
    def run(self) -> BatchResult:
        cfg = self.cfg
        dist = None
        if cfg.rank is not None or cfg.world_size is not None:   # a task given by hand: no process group joined
            dist = Distributed(rank=cfg.rank if cfg.rank is not None else env_rank(),
                               world_size=cfg.world_size if cfg.world_size is not None else env_world_size())
        factory = type(self) if self.extra_rows is None else functools.partial(type(self), extra_rows=self.extra_rows)
        jobs = execute(factory, cfg, cfg.execution, dist=dist, job=self)
        probe_s, positions = jobs.stat("probe_s"), jobs.stat("positions")
        return BatchResult(analysed=jobs.done, skipped=jobs.skipped, failed=jobs.failed, rank=jobs.rank,
                           world_size=jobs.world_size, out=jobs.out, table=jobs.table,
                           positions_per_s=positions / probe_s if probe_s else math.nan, probe_s=probe_s,
                           elapsed_s=jobs.elapsed_s, settings_hash=self.settings, targets=jobs.targets, jobs=jobs)


def run_batch(cfg: BatchConfig | None = None, **kwargs: Any) -> BatchResult:
    """BatchRunner(cfg).run(); or build the config from flat keyword arguments (BatchConfig.build):
    run_batch(paths=[...], out=..., tokens=64, reference="normed", executor="local", jobs=2)."""
    return BatchRunner(cfg if cfg is not None else BatchConfig.build(**kwargs)).run()
