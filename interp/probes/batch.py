"""Many checkpoints -> one tidy table of novelty probes: one model in memory at a time, resumable,
shardable over processes, and tolerant of broken checkpoints.

Why a separate module: interp.probes analyses ONE model; studying how novelty develops over training
(or across a zoo of models) needs bookkeeping that has nothing to do with the metrics: which paths to
visit, what is already done, what failed, and how shards combine.

PATH expansion (expand_paths, interp.probes.expand): checkpoint dirs, run dirs (their step checkpoints,
then the final model), HF model dirs, .gguf files, registry names, and folders searched for all of those;
symlinks are visited once and not followed out of the PATH given unless follow_symlinks=True.

Resuming: every checkpoint's rows are written atomically to OUT.parts/<key>.parquet (OUT =
results/batch.parquet -> results/batch.parts/), where key = <sha256 of the weights>-<settings hash>-<sha256
of the other files that define the model> (expand.definition_sha256: a checkpoint's config.json and
tokenizer, an HF directory's config, tokenizer and code files; a GGUF file has none, so its key has two
parts; a hub revision's key is <its commit sha>-<settings hash>-hub, known without a download). A key whose part
exists is skipped, so a killed batch resumes where it stopped, and identical models
at two paths (a copied checkpoint) are analysed once: the table keeps the first path; a checkpoint whose
config.json differs from an analysed one with the same weights is another model, analysed (or reported
failed) on its own. Parts written before the key covered the definition (<weights>-<settings> for a
checkpoint or HF dir) are recomputed once and the old part of the same path is removed (superseded).
Hashes are streamed and cached by (path, size, mtime) under cache_dir("hashes"). The settings hash covers
everything that changes the numbers: every ProbeConfig field (the text by its content), not package
versions (those are a column).
The table OUT is always rebuilt from the parts (merge_parts), so a batch adds to it and never loses rows.

Failures: a checkpoint that cannot be hashed, loaded or probed (missing/truncated weights, corrupt
config, wrong tokenizer, too little text) gives one row with status="failed" and the error, written to
OUT.parts/failed-<path hash>.parquet and printed on stderr; the batch goes on and BatchResult.failed
lists it (the CLI exits 1). A later success of the same path removes its failure row.

Ownership: each rank holds an exclusive lock on OUT.parts/.rank<r>.lock while it runs (and --merge-only on
rank 0's), so a second batch on the same OUT fails at once naming the holder's pid instead of
interleaving with the first; the ranks of one torchrun job hold different locks. OUT, its parts folder and
OUT.csv are checked writable before anything is computed.

Sharding: with RANK / WORLD_SIZE set (torchrun, or by hand), rank r takes checkpoints r, r + W, ... and
writes its own parts. With a torch.distributed process group (torchrun sets MASTER_ADDR; we join one),
rank 0 merges after a barrier; without one, run `interp batch --merge-only --out OUT` after all ranks end.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp._util.config import reject_unknown_keys
from interp._util.dist import Distributed, check_env, env_rank, env_world_size, shard  # noqa: F401 (shard re-exported)
from interp._util.errors import InputError, one_line
from interp._util.io import atomic_write, claim_parts, exclusive_lock, json_sha256, text_sha256
from interp._util.io import check_output as check_output_path
from interp.probes.config import ProbeConfig
from interp.probes.expand import (  # noqa: F401 (re-exported: the batch's public names)
    GGUF_SUFFIX,
    HF_WEIGHT_PATTERNS,
    KINDS,
    PARTS_SUFFIX,
    STEP_DIR,
    Target,
    definition_sha256,
    expand_paths,
    file_sha256,
    parse_checkpoints,
    select_checkpoints,
    weights_sha256,
)
from interp.probes.outputs import check_output

# Importing this module imports no torch (the CLI builds `interp batch --help` from BatchConfig's
# defaults); the probe itself and the model resolver are imported where they run.

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["BatchConfig", "Target", "BatchResult", "BatchRunner", "run_batch", "expand_paths", "file_sha256",
           "weights_sha256", "definition_sha256", "parts_dir", "merge_parts", "shard", "BATCH_COLUMNS", "KINDS"]

FAILED_PREFIX = "failed-"
HUB_KEY = "hub"   # the third part of a hub revision's key, <commit>-<settings>-hub: its commit defines every file
# Columns the batch puts in front of the probe table's own (interp.probes.TABLE_COLUMNS).
BATCH_COLUMNS = ("path", "kind", "run", "label", "step", "status", "error", "key", "weights_sha256",
                 "settings_hash")
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
                  "model_dtype": "float32", "device_map": None}
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
    progress: bool = True                 # tqdm bar on stderr
    threads: int = 0                      # torch.set_num_threads; 0 leaves torch's default
    rank: int | None = None               # default: $RANK (0)
    world_size: int | None = None         # default: $WORLD_SIZE (1)
    follow_symlinks: bool = False         # follow symlinks out of a PATH's tree (each directory once anyway)
    checkpoints: str = "all"              # which checkpoints of each run (interp.probes.expand.CHECKPOINTS_HELP)
    trust_remote_code: bool = False       # let HF dirs with an auto_map run their own code (a loader option)
    revision: str | None = None           # the revision of every hub id among the paths (else MODEL@REV, or main)
    revisions: str | None = None          # a checkpoint series of each hub id: "a,b", "step0..step3000:1000", "all"

    def __post_init__(self) -> None:
        self.paths = [str(p) for p in self.paths]
        if isinstance(self.probe, dict):
            self.probe = ProbeConfig.from_dict(self.probe)

    @classmethod
    def build(cls, **kwargs: Any) -> BatchConfig:
        """BatchConfig from flat keywords: run_batch(paths=[...], out=..., tokens=64, reference="normed");
        ProbeConfig fields go to `probe` (on top of the batch's defaults)."""
        probe_fields = {f.name for f in dataclasses.fields(ProbeConfig)}
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in probe_fields}
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
    if target.kind not in ("checkpoint", "hf_dir"):
        return None
    from interp.hf.resolve import resolve_model

    try:
        return resolve_model(str(target.path)).context_length()
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


def settings_hash(settings: dict[str, Any]) -> str:
    return json_sha256(settings)[:16]


def _tokenizer_sha256(name: str | None) -> str:
    """Content hash of a --tokenizer that is a file or folder ("" for a name such as bpe, or None)."""
    path = Path(name).expanduser() if name else None
    if path is None or not path.exists():
        return ""
    files = [path] if path.is_file() else sorted(f for f in path.iterdir() if f.is_file())
    return json_sha256([[f.name, file_sha256(f)] for f in files])


def part_key(weights: str, settings: str, definition: str) -> str:
    """<weights>-<settings>-<definition> (16 hex each); two parts when nothing but the weights defines the
    model (a GGUF file), which is also the key every part had before the definition entered it."""
    return f"{weights[:16]}-{settings}" + (f"-{definition[:16]}" if definition else "")


# --------------------------------------------------------------------------------------------------
# Parts and the merged table
# --------------------------------------------------------------------------------------------------

def parts_dir(out: str | Path) -> Path:
    """results/batch.parquet -> results/batch.parts/"""
    out = Path(out)
    return out.with_name(out.stem + PARTS_SUFFIX)


def _failed_part(parts: Path, path: Path) -> Path:
    return parts / f"{FAILED_PREFIX}{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]}.parquet"


def _current(part: Path) -> bool:
    """Whether a part has every column of today's probe rows that changes what its numbers mean (PART_FORMAT):
    an older part is probed again and replaced under the same key, so one table never mixes the two."""
    import pyarrow.parquet as pq

    return set(PART_FORMAT) <= set(pq.read_schema(part).names)


def _write_parquet_atomic(df: pd.DataFrame, path: Path) -> None:
    atomic_write(path.parent, {path.name: lambda p: df.to_parquet(p, index=False)})


def _order(df: pd.DataFrame) -> pd.DataFrame:
    """BATCH_COLUMNS first, rows in (run, step, path, metric, layer) order: a table that does not depend
    on which rank or which invocation wrote which part."""
    first = [c for c in BATCH_COLUMNS if c in df.columns]
    df = df[first + [c for c in df.columns if c not in first]]
    by = [c for c in SORT_COLUMNS if c in df.columns]
    return df.sort_values(by, na_position="last", kind="stable").reset_index(drop=True) if by else df


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


def rank_lock(out: str | Path, rank: int) -> Path:
    """The lock file rank `rank` holds while it writes parts of OUT (merging is rank 0's)."""
    return parts_dir(out) / f".rank{rank}.lock"


def _read_part(path: Path) -> pd.DataFrame:
    import pandas as pd

    try:
        return pd.read_parquet(path)
    except (OSError, ValueError) as err:
        raise InputError(f"unreadable part ({one_line(err)}); delete it and rerun the batch, which recomputes "
                         "it", path=path) from err


def merge_parts(out: str | Path, csv: bool = False) -> pd.DataFrame:
    """Rebuild the table OUT from every part under OUT.parts/ and write it atomically (and OUT.csv)."""
    import pandas as pd

    out = Path(out)
    parts = parts_dir(out)
    files = sorted(parts.glob("*.parquet")) if parts.is_dir() else []
    if not files:
        raise FileNotFoundError(f"{parts}: no parts to merge; run `interp batch PATH... --out {out}` first")
    frames = [_read_part(f) for f in files]
    df = _order(pd.concat([f for f in frames if len(f)], ignore_index=True))
    _write_parquet_atomic(df, out)
    if csv:
        atomic_write(out.parent, {out.with_suffix(".csv").name: lambda p: df.to_csv(p, index=False)})
    return df


def merge_only(out: str | Path, csv: bool = False) -> pd.DataFrame:
    """`interp batch --merge-only`: check the outputs, then merge_parts under rank 0's lock (a batch still
    writing OUT makes this fail at once instead of racing it)."""
    check_outputs(out, csv)
    if not any(parts_dir(out).glob("*.parquet")):
        return merge_parts(out, csv)  # FileNotFoundError with the fix; nothing created
    claim_parts(parts_dir(out), "probe batch", out, mark=False)   # merging writes no part: no marker either
    with exclusive_lock(rank_lock(out, 0), f"batch output {out}"):
        return merge_parts(out, csv)


def _seed_parts(out: Path) -> int:
    """A table whose parts folder was deleted: split it back into parts so rebuilding loses nothing."""
    import pandas as pd

    parts = parts_dir(out)
    if not out.is_file() or (parts.is_dir() and any(parts.glob("*.parquet"))):
        return 0
    df = pd.read_parquet(out)
    if "key" not in df.columns or "status" not in df.columns:
        raise ValueError(f"{out} is not a batch table (no key/status columns): choose another --out")
    for key, rows in df[df["status"] == "ok"].groupby("key"):
        _write_parquet_atomic(rows, parts / f"{key}.parquet")
    for path, rows in df[df["status"] != "ok"].groupby("path"):
        _write_parquet_atomic(rows, _failed_part(parts, Path(path)))
    return len(df)


# --------------------------------------------------------------------------------------------------
# Sharding
# --------------------------------------------------------------------------------------------------

def _distributed(cfg: BatchConfig) -> Distributed:
    """This rank: BatchConfig.rank / world_size when set (no process group is joined), else the environment,
    joining torchrun's process group when MASTER_ADDR is set (interp._util.dist.Distributed)."""
    if cfg.rank is None and cfg.world_size is None:
        return Distributed.from_env(join="MASTER_ADDR" in os.environ)
    return Distributed(rank=cfg.rank if cfg.rank is not None else env_rank(),
                       world_size=cfg.world_size if cfg.world_size is not None else env_world_size())


# --------------------------------------------------------------------------------------------------
# The runner
# --------------------------------------------------------------------------------------------------

@dataclass
class BatchResult:
    """What one invocation (one rank) did. `table` is the merged table when this process merged."""

    analysed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)   # (path, error)
    rank: int = 0
    world_size: int = 1
    out: Path | None = None
    table: pd.DataFrame | None = None
    positions_per_s: float = math.nan
    probe_s: float = 0.0             # seconds inside the probes (loads and downloads excluded)
    elapsed_s: float = 0.0           # seconds of this rank's loop over its targets (hashing, loading, probing)
    settings_hash: str = ""          # of this invocation's settings: select its rows from a shared table
    targets: list[Target] = field(default_factory=list)   # every expanded target (all ranks)

    @property
    def ok(self) -> bool:
        return not self.failed


class BatchRunner:
    """BatchRunner(cfg).run(): analyse this rank's share of the expanded PATHs, then merge."""

    def __init__(self, cfg: BatchConfig):
        cfg.validate()
        self.cfg = cfg
        self.out = Path(cfg.out)
        self.parts = parts_dir(self.out)

    def _tokenizer(self) -> Any:
        """The --tokenizer override, built once for every checkpoint; None: each model's own."""
        if self.cfg.probe.tokenizer is None:
            return None
        from interp import data

        return data.get_tokenizer(self.cfg.probe.tokenizer)

    def _rows(self, target: Target, key: str, weights: str, settings: str, status: str = "ok",
              error: str = "", probe_df: pd.DataFrame | None = None) -> pd.DataFrame:
        import pandas as pd

        columns = {"path": str(target.path), "kind": target.kind, "run": target.run, "label": target.label,
                   "step": target.step, "status": status, "error": error, "key": key,
                   "weights_sha256": weights, "settings_hash": settings}
        if target.kind == "hub":   # the revision, the commit it resolved to, and the tokens its name carries
            columns.update(revision=target.revision, commit=target.commit, tokens=target.tokens)
        df = probe_df.copy() if probe_df is not None else pd.DataFrame(index=[0])
        for name, value in columns.items():
            df[name] = value
        return _order(df)

    def _analyse(self, target: Target, key: str, weights: str, settings: str, tokenizer: Any) -> pd.DataFrame:
        from interp.probes import run as probe_run  # by module: a test can stand in for probe_run.probe

        options = {"tokenizer": tokenizer} if tokenizer is not None else {}
        if self.cfg.trust_remote_code:
            options["trust_remote_code"] = True
        if target.kind == "hub":   # fetched (downloaded where missing) at its revision; weights hashed once there
            df = probe_run.probe(target.hub_id, config=self.cfg.probe, revision=target.revision, **options)
            weights = str(df["weights_sha256"].iloc[0])
        else:
            df = probe_run.probe(str(target.path), config=self.cfg.probe, **options)
        timing = df.attrs.get("timing", {})
        rows = self._rows(target, key, weights, settings, probe_df=df)
        rows.attrs["timing"] = timing
        return rows

    def run(self) -> BatchResult:
        cfg = self.cfg
        if cfg.threads:
            import torch

            torch.set_num_threads(cfg.threads)
        from interp.probes.text import load_text

        targets = select_checkpoints(expand_paths(cfg.paths, follow_symlinks=cfg.follow_symlinks,  # a bad PATH
                                                  revision=cfg.revision, revisions=cfg.revisions),  # fails first
                                     cfg.checkpoints)
        self.cfg = cfg = dataclasses.replace(cfg, probe=fit_seq_len(cfg.probe, targets))   # before any load
        text, _ = load_text(cfg.probe.text)
        settings = settings_hash(cfg.settings(text_sha256(text), _tokenizer_sha256(cfg.probe.tokenizer)))
        del text
        dist = _distributed(cfg)
        claim_parts(parts_dir(self.out), "probe batch", self.out, mark=False)   # refused before any lock file
        with exclusive_lock(rank_lock(self.out, dist.rank), f"batch output {self.out}"):
            claim_parts(parts_dir(self.out), "probe batch", self.out)
            return self._run(dist, targets, settings)

    def _run(self, dist: Distributed, targets: list[Target], settings: str) -> BatchResult:
        """run() with this rank's lock held."""
        rank, world = dist.rank, dist.world_size
        mine = dist.shard(targets)
        result = BatchResult(rank=rank, world_size=world, settings_hash=settings, targets=targets)
        if dist.primary:
            _seed_parts(self.out)
        self.parts.mkdir(parents=True, exist_ok=True)
        tokenizer = self._tokenizer()
        try:
            self._loop(mine, settings, tokenizer, result)
        except KeyboardInterrupt:
            print(f"[batch] interrupted: {len(result.analysed)} analysed this time; parts kept in {self.parts}; "
                  "rerun the same command to continue", file=sys.stderr, flush=True)
            if world == 1:
                self._merge(result)
            raise
        if world == 1:
            self._merge(result)
        if dist.group:
            dist.barrier()
            if dist.primary:
                self._merge(result)
            dist.barrier()  # nobody leaves (and tears the group down) before the merge is written
            dist.close()
        elif world > 1:
            print(f"[batch] rank {rank}/{world}: parts written to {self.parts}; when every rank has finished, "
                  f"build the table with `interp batch --merge-only --out {self.out}`", file=sys.stderr, flush=True)
        return result

    def _merge(self, result: BatchResult) -> None:
        if any(self.parts.glob("*.parquet")):
            result.table, result.out = merge_parts(self.out, self.cfg.csv), self.out

    def _loop(self, mine: list[Target], settings: str, tokenizer: Any, result: BatchResult) -> None:
        from tqdm.auto import tqdm

        cfg = self.cfg
        positions, probe_s, started = 0, 0.0, time.perf_counter()
        bar = tqdm(total=len(mine), unit="ckpt", dynamic_ncols=True, file=sys.stderr, disable=not cfg.progress,
                   desc=f"batch{f' rank {result.rank}/{result.world_size}' if result.world_size > 1 else ''}")
        try:
            for target in mine:
                weights, key = "", ""
                try:
                    if target.kind == "hub":   # keyed by its commit: known before anything is downloaded
                        definition = ""
                        key = part_key(target.commit, settings, HUB_KEY)
                    else:
                        weights = weights_sha256(target)
                        definition = definition_sha256(target)
                        key = part_key(weights, settings, definition)
                    part = self.parts / f"{key}.parquet"
                    if part.is_file() and _current(part):
                        result.skipped.append(str(target.path))
                    else:
                        rows = self._analyse(target, key, weights, settings, tokenizer)
                        timing = rows.attrs.pop("timing", {})  # run-to-run noise: kept out of the part
                        _write_parquet_atomic(rows, part)
                        result.analysed.append(str(target.path))
                        positions += timing.get("positions", 0)
                        probe_s += timing.get("probe_s", 0.0)
                    if definition:
                        self._drop_superseded(self.parts / f"{part_key(weights, settings, '')}.parquet", target)
                    _failed_part(self.parts, target.path).unlink(missing_ok=True)
                except Exception as err:  # one broken checkpoint must not stop the batch
                    message = f"{type(err).__name__}: {one_line(err)}"
                    _write_parquet_atomic(self._rows(target, key, weights, settings, "failed", message),
                                          _failed_part(self.parts, target.path))
                    result.failed.append((str(target.path), message))
                    bar.write(f"[batch] FAILED {target.path}: {message}", file=sys.stderr)
                bar.update(1)
                if probe_s:
                    bar.set_postfix(tok_s=f"{positions / probe_s:,.0f}", failed=len(result.failed))
        finally:
            bar.close()
        result.positions_per_s = positions / probe_s if probe_s else math.nan
        result.probe_s, result.elapsed_s = probe_s, time.perf_counter() - started


    @staticmethod
    def _drop_superseded(legacy: Path, target: Target) -> None:
        """Remove the part an earlier version keyed by the weights alone, once this path's part under the
        full key exists (the same weights and settings, recomputed): otherwise its rows would appear twice."""
        if not legacy.is_file():
            return
        paths = set(_read_part(legacy)["path"])
        if {Path(p).resolve() for p in paths} == {target.path.resolve()}:
            legacy.unlink(missing_ok=True)


def run_batch(cfg: BatchConfig | None = None, **kwargs: Any) -> BatchResult:
    """BatchRunner(cfg).run(); or build the config from flat keyword arguments (BatchConfig.build):
    run_batch(paths=[...], out=..., tokens=64, reference="normed")."""
    return BatchRunner(cfg if cfg is not None else BatchConfig.build(**kwargs)).run()
