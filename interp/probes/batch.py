"""Many checkpoints -> one tidy table of novelty probes: one model in memory at a time, resumable,
shardable over processes, and tolerant of broken checkpoints.

Why a separate module: interp.probes analyses ONE model; studying how novelty develops over training
(or across a zoo of models) needs bookkeeping that has nothing to do with the metrics: which paths to
visit, what is already done, what failed, and how shards combine.

PATH expansion (expand_paths), applied to each PATH in order:
  * a registry name (smollm2-135m, ...)    -> its .gguf file (label = the name)
  * a `.gguf` file                         -> itself
  * an HF model directory                  -> itself (config.json with `model_type` or `architectures`,
                                              as interp.hf.resolve.classify_dir decides; save_pretrained)
  * a run directory (has checkpoints/step_*/) -> its step checkpoints sorted by step number, then the
                                              final model (runs/NAME/model.safetensors) unless it is
                                              byte-identical to the last step checkpoint (a finished run
                                              writes both at its last step; the step one keeps its step)
  * one of our checkpoint directories      -> itself (model.safetensors + a config.json that says it is
                                              ours: interp.training.checkpoints.is_checkpoint_dir; a step
                                              checkpoint given directly keeps its run name and step)
  * any other folder                       -> every run / checkpoint / HF dir / .gguf below it, in sorted
                                              path order; a match is not searched further, hidden folders
                                              and `*.parts` folders are skipped
  A path reached twice is analysed once. A PATH that does not exist, or holds nothing to analyse, is an
  error before anything runs.

Resuming: every checkpoint's rows are written atomically to OUT.parts/<key>.parquet (OUT =
results/batch.parquet -> results/batch.parts/), where key = <sha256 of the weights>-<settings hash>.
A key whose part exists is skipped, so a killed batch resumes where it stopped, and identical weights
at two paths (a copied checkpoint) are analysed once: the table keeps the first path. Weight hashes
are streamed and cached by (path, size, mtime) under cache_dir("hashes"). The settings hash covers
everything that changes the numbers: every ProbeConfig field (the text by its content), not package
versions (those are a column).
The table OUT is always rebuilt from the parts (merge_parts), so a batch adds to it and never loses rows.

Failures: a checkpoint that cannot be hashed, loaded or probed (missing/truncated weights, corrupt
config, wrong tokenizer, too little text) gives one row with status="failed" and the error, written to
OUT.parts/failed-<path hash>.parquet and printed on stderr; the batch goes on and BatchResult.failed
lists it (the CLI exits 1). A later success of the same path removes its failure row.

Sharding: with RANK / WORLD_SIZE set (torchrun, or by hand), rank r takes checkpoints r, r + W, ... and
writes its own parts. With a torch.distributed process group (torchrun sets MASTER_ADDR; we join one),
rank 0 merges after a barrier; without one, run `interp batch --merge-only --out OUT` after all ranks end.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp._util.config import reject_unknown_keys
from interp._util.dist import Distributed, env_rank, env_world_size, shard  # noqa: F401 (shard re-exported)
from interp._util.io import atomic_write, json_sha256, read_json, text_sha256, write_json_atomic
from interp._util.paths import CONFIG_FILE, WEIGHTS_FILE, cache_dir
from interp.hf.registry import REGISTRY
from interp.hf.resolve import resolve_model
from interp.probes.config import ProbeConfig

# Importing this module imports no torch (the CLI builds `interp batch --help` from BatchConfig's
# defaults); the probe itself and the model resolver are imported where they run.

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["BatchConfig", "Target", "BatchResult", "BatchRunner", "run_batch", "expand_paths", "file_sha256",
           "weights_sha256", "parts_dir", "merge_parts", "shard", "BATCH_COLUMNS", "KINDS"]

KINDS = ("checkpoint", "hf_dir", "gguf")
GGUF_SUFFIX = ".gguf"
PARTS_SUFFIX = ".parts"
FAILED_PREFIX = "failed-"
STEP_DIR = re.compile(r"step_(\d+)")
HF_WEIGHT_PATTERNS = ("*.safetensors", "*.bin")
# Columns the batch puts in front of the probe table's own (interp.probes.TABLE_COLUMNS).
BATCH_COLUMNS = ("path", "kind", "run", "label", "step", "status", "error", "key", "weights_sha256",
                 "settings_hash")
SORT_COLUMNS = ("run", "step", "path", "metric", "layer")


# --------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------

# The batch's defaults differ from probe()'s: the paper's 2,048 tokens at a sequence length every model we
# train can take (the tiny preset's n_ctx is 256).
PROBE_DEFAULTS = {"tokens": 2048, "seq_len": 256}
# ProbeConfig fields added after batch tables were first written: they enter the settings hash only when
# set, so the parts of earlier tables keep their keys (and are still skipped).
LATER_SETTINGS = {"reference": "raw", "exclude_massive_dims": None, "causal": False}


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
        """Cheap argument checks, before any file is read (ValueError naming the field)."""
        try:
            self.probe.validate()
        except ValueError as err:
            raise ValueError(f"BatchConfig.probe: {err}") from None
        if not str(self.out).endswith(".parquet"):
            raise ValueError(f"BatchConfig.out={self.out!r}: the merged table is parquet; use a path ending "
                             "in .parquet (csv=True adds a CSV beside it)")

    def settings(self, text_sha256: str) -> dict[str, Any]:
        """Everything that changes the numbers of one checkpoint's rows (the skip key hashes this): every
        ProbeConfig field, the text by content, not by name (the same text at another path is the same
        setting); LATER_SETTINGS only when they differ from their defaults."""
        settings = {"text_sha256": text_sha256, **self.probe.to_dict()}
        del settings["text"]
        for name, default in LATER_SETTINGS.items():
            if settings[name] == default:
                del settings[name]
        return settings


def settings_hash(settings: dict[str, Any]) -> str:
    return json_sha256(settings)[:16]


# --------------------------------------------------------------------------------------------------
# PATH expansion
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """One model to analyse: where it is, what kind, and the run/step it belongs to."""

    path: Path
    kind: str            # one of KINDS
    run: str = ""        # run directory name (ours), "" for pretrained models
    step: float = math.nan   # config.json `step` of a step checkpoint, NaN otherwise
    label: str = ""      # config.json `label` of our checkpoints ("uniform", "cosine 1.5->0.5")

    def weights_files(self) -> list[Path]:
        if self.kind == "gguf":
            return [self.path]
        if self.kind == "checkpoint":
            return [self.path / WEIGHTS_FILE]
        files = sorted({f for pattern in HF_WEIGHT_PATTERNS for f in self.path.glob(pattern)})
        if not files:
            raise FileNotFoundError(f"{self.path}: no weight files ({', '.join(HF_WEIGHT_PATTERNS)}) in this "
                                    "HF model directory")
        return files


def _read_json(path: Path) -> Any:
    """The JSON at `path`, or None when it is missing or unreadable (reported later, when it is loaded)."""
    try:
        return read_json(path, missing_ok=True, torn_ok=True)
    except (OSError, ValueError):  # a directory, no permission, bytes that are not UTF-8
        return None


def _step_dirs(run_dir: Path) -> list[Path]:
    folder = run_dir / "checkpoints"
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.is_dir() and STEP_DIR.fullmatch(p.name)]
    return sorted(found, key=lambda p: int(STEP_DIR.fullmatch(p.name).group(1)))


def _classify(path: Path) -> str | None:
    """'run', 'checkpoint', 'hf_dir', 'gguf', or None (a plain folder or an unrelated file).

    What a directory holds is decided by the one model resolver (interp.hf.resolve: by what config.json
    says, never by file names alone), except that a folder without config.json is searched, not taken
    for a model: a .gguf inside it is found as a file."""
    from interp.hf.resolve import ModelResolutionError, classify_dir
    from interp.training.checkpoints import is_checkpoint_dir

    if path.is_file():
        return "gguf" if path.suffix == GGUF_SUFFIX else None
    if not path.is_dir():
        return None
    if _step_dirs(path):
        return "run"
    if is_checkpoint_dir(path):
        return "checkpoint"  # ours, or ours with a corrupt config.json (reported as failed later)
    if not (path / CONFIG_FILE).is_file():
        return None
    try:
        return "hf_dir" if classify_dir(path) == "hf_dir" else None
    except ModelResolutionError:
        return None  # a config.json that is neither ours nor Hugging Face's: not a model


def _checkpoint_target(path: Path, run: str | None = None, step: float | None = None) -> Target:
    """Run name, step and label of one of our checkpoint dirs (a corrupt config.json is reported later)."""
    config = _read_json(path / CONFIG_FILE)
    config = config if isinstance(config, dict) else {}
    match = STEP_DIR.fullmatch(path.name)
    is_step = match is not None and path.parent.name == "checkpoints"
    if run is None:
        run = path.parent.parent.name if is_step else path.name
    if step is None:
        value = config.get("step")
        step = float(value) if isinstance(value, int | float) else (float(match.group(1)) if is_step else math.nan)
    label = config.get("label") if isinstance(config.get("label"), str) else ""
    return Target(path, "checkpoint", run, step, label)


def _run_targets(run_dir: Path) -> list[Target]:
    """Step checkpoints by step, then the final model unless it equals the last step checkpoint."""
    steps = [_checkpoint_target(p, run=run_dir.name) for p in _step_dirs(run_dir)]
    if (run_dir / WEIGHTS_FILE).is_file():
        final = _checkpoint_target(run_dir, run=run_dir.name, step=math.nan)
        try:
            same = file_sha256(run_dir / WEIGHTS_FILE) == file_sha256(steps[-1].path / WEIGHTS_FILE)
        except OSError:
            same = False  # the last step checkpoint is broken: keep both, it is reported when probed
        if not same:
            steps.append(final)
    return steps


def _targets_at(path: Path) -> list[Target]:
    kind = _classify(path)
    if kind == "run":
        return _run_targets(path)
    if kind == "checkpoint":
        return [_checkpoint_target(path)]
    if kind in ("hf_dir", "gguf"):
        return [Target(path, kind, label=path.stem if kind == "gguf" else path.name)]
    if not path.is_dir():
        return []
    found = []
    for child in sorted(path.iterdir()):
        if child.name.startswith(".") or child.name.endswith(PARTS_SUFFIX):
            continue
        found.extend(_targets_at(child))
    return found


def expand_paths(paths: list[str | Path]) -> list[Target]:
    """The models that PATHs stand for (rules in the module docstring), each once, in order."""
    if not paths:
        raise ValueError("no PATH given: pass checkpoint dirs, run dirs, HF model dirs, .gguf files or folders")
    targets: list[Target] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.exists() and str(raw) in REGISTRY:  # a registry name: its GGUF file (same numbers; tested)
            resolve_model(raw)  # ModuleNotFoundError with the pip command when its package is missing
            path = REGISTRY[str(raw)].locate()
            found = [Target(path, "gguf", label=str(raw))]
        elif not path.exists():
            raise FileNotFoundError(f"{raw}: no such file or directory (nor a registry model: {', '.join(REGISTRY)})")
        else:
            found = _targets_at(path)
        if not found:
            raise ValueError(f"{raw}: found no checkpoint dir (model.safetensors + config.json), run dir "
                             f"(checkpoints/step_*), HF model dir or {GGUF_SUFFIX} file there")
        for target in found:
            resolved = target.path.resolve()
            if resolved not in seen:
                seen.add(resolved)
                targets.append(target)
    return targets


# --------------------------------------------------------------------------------------------------
# Content hashes, cached by (path, size, mtime)
# --------------------------------------------------------------------------------------------------

def file_sha256(path: str | Path) -> str:
    """sha256 of a file, streamed; cached under cache_dir("hashes") until the file's size or mtime changes
    (a rewrite through os.replace, as every checkpoint save does, changes the mtime)."""
    path = Path(path).resolve()
    stat = path.stat()  # FileNotFoundError names the file
    entry = cache_dir("hashes") / f"{hashlib.sha256(str(path).encode()).hexdigest()[:24]}.json"
    cached = _read_json(entry) if entry.is_file() else None
    if (isinstance(cached, dict) and cached.get("path") == str(path) and cached.get("size") == stat.st_size
            and cached.get("mtime_ns") == stat.st_mtime_ns):
        return cached["sha256"]
    with open(path, "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    write_json_atomic(entry, {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
                                          "sha256": digest})
    return digest


def weights_sha256(target: Target) -> str:
    """Hash of the weights alone (config.json excluded): one file's sha256, or a hash over a sharded HF
    checkpoint's files (name and sha256 of each)."""
    files = target.weights_files()
    if len(files) == 1:
        return file_sha256(files[0])
    lines = "".join(f"{f.name} {file_sha256(f)}\n" for f in files)
    return hashlib.sha256(lines.encode()).hexdigest()


# --------------------------------------------------------------------------------------------------
# Parts and the merged table
# --------------------------------------------------------------------------------------------------

def parts_dir(out: str | Path) -> Path:
    """results/batch.parquet -> results/batch.parts/"""
    out = Path(out)
    return out.with_name(out.stem + PARTS_SUFFIX)


def _failed_part(parts: Path, path: Path) -> Path:
    return parts / f"{FAILED_PREFIX}{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]}.parquet"


def _write_parquet_atomic(df: pd.DataFrame, path: Path) -> None:
    atomic_write(path.parent, {path.name: lambda p: df.to_parquet(p, index=False)})


def _order(df: pd.DataFrame) -> pd.DataFrame:
    """BATCH_COLUMNS first, rows in (run, step, path, metric, layer) order: a table that does not depend
    on which rank or which invocation wrote which part."""
    first = [c for c in BATCH_COLUMNS if c in df.columns]
    df = df[first + [c for c in df.columns if c not in first]]
    by = [c for c in SORT_COLUMNS if c in df.columns]
    return df.sort_values(by, na_position="last", kind="stable").reset_index(drop=True) if by else df


def merge_parts(out: str | Path, csv: bool = False) -> pd.DataFrame:
    """Rebuild the table OUT from every part under OUT.parts/ and write it atomically (and OUT.csv)."""
    import pandas as pd

    out = Path(out)
    parts = parts_dir(out)
    files = sorted(parts.glob("*.parquet")) if parts.is_dir() else []
    if not files:
        raise FileNotFoundError(f"{parts}: no parts to merge; run `interp batch PATH... --out {out}` first")
    frames = [pd.read_parquet(f) for f in files]
    df = _order(pd.concat([f for f in frames if len(f)], ignore_index=True))
    _write_parquet_atomic(df, out)
    if csv:
        atomic_write(out.parent, {out.with_suffix(".csv").name: lambda p: df.to_csv(p, index=False)})
    return df


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
        df = probe_df.copy() if probe_df is not None else pd.DataFrame(index=[0])
        for name, value in columns.items():
            df[name] = value
        return _order(df)

    def _analyse(self, target: Target, key: str, weights: str, settings: str, tokenizer: Any) -> pd.DataFrame:
        from interp.probes import run as probe_run  # by module: a test can stand in for probe_run.probe

        options = {"tokenizer": tokenizer} if tokenizer is not None else {}
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

        text, _ = load_text(cfg.probe.text)
        settings = settings_hash(cfg.settings(text_sha256(text)))
        del text
        targets = expand_paths(cfg.paths)
        dist = _distributed(cfg)
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
        positions, probe_s = 0, 0.0
        bar = tqdm(total=len(mine), unit="ckpt", dynamic_ncols=True, file=sys.stderr, disable=not cfg.progress,
                   desc=f"batch{f' rank {result.rank}/{result.world_size}' if result.world_size > 1 else ''}")
        try:
            for target in mine:
                weights, key = "", ""
                try:
                    weights = weights_sha256(target)
                    key = f"{weights[:16]}-{settings}"
                    part = self.parts / f"{key}.parquet"
                    if part.is_file():
                        result.skipped.append(str(target.path))
                    else:
                        rows = self._analyse(target, key, weights, settings, tokenizer)
                        timing = rows.attrs.pop("timing", {})  # run-to-run noise: kept out of the part
                        _write_parquet_atomic(rows, part)
                        result.analysed.append(str(target.path))
                        positions += timing.get("positions", 0)
                        probe_s += timing.get("probe_s", 0.0)
                    _failed_part(self.parts, target.path).unlink(missing_ok=True)
                except Exception as err:  # one broken checkpoint must not stop the batch
                    message = f"{type(err).__name__}: {err}"
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


def run_batch(cfg: BatchConfig | None = None, **kwargs: Any) -> BatchResult:
    """BatchRunner(cfg).run(); or build the config from flat keyword arguments (BatchConfig.build):
    run_batch(paths=[...], out=..., tokens=64, reference="normed")."""
    return BatchRunner(cfg if cfg is not None else BatchConfig.build(**kwargs)).run()
