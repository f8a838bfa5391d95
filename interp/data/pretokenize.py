"""`interp data tokenize`: corpora at scale -> a tokenized folder (interp.data.shards), in parallel, resumable.

The parallel part runs on datatrove (pinned in pyproject.toml; why it and not `datasets.map`: docs/data.md).
A run is: discover the inputs (interp.data.sources), group them into shards (deterministically, from their names
and sizes only), skip the shards already done (interp.data.shards.shard_done), and hand the rest to datatrove's
LocalPipelineExecutor as tasks: task r of the executor tokenizes shard r of the plan (a TokenizeShards step),
`--workers` of them at a time, one core each. `--task-index I --task-count K` gives machine I the I-th of K
contiguous blocks of shards (datatrove's local_rank_offset / local_tasks); machines may share DIR over a network
file system, and any run, finally one without --task-index, writes the manifest of every shard done so far.
The same step runs under datatrove's SlurmPipelineExecutor (tasks = shards): docs/data.md.

Which shards are done is decided here, not by datatrove's completion markers (those name a task by its index,
which moves when inputs are added); the executor asks this module (`Executor.is_rank_completed`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import multiprocess
from datatrove.executor.local import LocalPipelineExecutor
from datatrove.pipeline.base import PipelineStep

from interp._util.children import die_with_parent, kill_children
from interp._util.errors import InputError
from interp._util.io import (
    TEMP_SUFFIX,
    check_output,
    exclusive_lock,
    file_lock,
    json_sha256,
    read_json,
    remove_stale_temps,
    write_json_atomic,
    write_text_atomic,
)
from interp.data.config import TokenizeConfig
from interp.data.documents import CHUNK_CHARS
from interp.data.shards import (
    MANIFEST_FILE,
    SHARD_FORMAT,
    SHARDS_DIR,
    ShardSpec,
    build_manifest,
    read_manifest,
    shard_done,
    write_shard,
)
from interp.data.sources import Input, discover, missing_fields
from interp.data.tokenizers import TOKENIZER_CONFIG_FILE, TOKENIZER_FILE, TextTokenizer, get_tokenizer
from interp.data.tokens import token_dtype

LOGS_DIR = "logs"
PLAN_PREFIX = "plan-"
LOCK_PREFIX = ".lock"    # .lock (a whole run), .lock-task-I-of-K (one --task-index), .lock-setup (shared files)
SETUP_LOCK = ".lock-setup"
OUR_FILES = (MANIFEST_FILE, TOKENIZER_FILE, TOKENIZER_CONFIG_FILE)   # what every run writes in DIR itself
NAME_CHARS = 64          # of the first input's name in a shard's folder name
_CACHE: dict[tuple, object] = {}   # per process: the plan and the tokenizer, loaded once per worker


# ----------------------------------------------------------------------------------------------- planning

def plan_shards(inputs: Sequence[Input], shard_size: int) -> list[ShardSpec]:
    """Consecutive inputs of one source grouped until they reach ``shard_size`` bytes on disk; an input of that
    size or more is a shard of its own. Depends only on the inputs (names, kinds, sizes): never on workers."""
    groups: list[list[Input]] = []
    current: list[Input] = []
    for inp in inputs:
        if current and (current[0].source != inp.source or inp.size >= shard_size):
            groups.append(current)
            current = []
        current.append(inp)
        if sum(i.size for i in current) >= shard_size:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return [ShardSpec(_shard_name(g), tuple(g)) for g in groups]


def _shard_name(group: Sequence[Input]) -> str:
    """A folder name from the inputs' names: readable, unique, and stable when other inputs are added."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", group[0].name).strip("._") or "input"
    more = f"+{len(group) - 1}" if len(group) > 1 else ""
    key = json_sha256([[i.name, i.kind, i.doc_prefix, i.row_offset] for i in group])[:10]
    return f"{slug[-NAME_CHARS:]}{more}-{key}"


def shard_settings(tok: TextTokenizer, cfg: TokenizeConfig) -> dict:
    """What a shard's content depends on besides its inputs: a shard built with other settings is rebuilt."""
    return {"format": SHARD_FORMAT, "tokenizer": tok.name, "tokenizer_hash": tok.hash, "vocab_size": tok.vocab_size,
            "eos_id": tok.eos_id, "dtype": token_dtype(tok.vocab_size).name, "val_fraction": cfg.val_fraction,
            "field": cfg.field, "id_field": cfg.id_field, "chunk_chars": CHUNK_CHARS}


def _store_tokenizer(out: Path, tok: TextTokenizer) -> TextTokenizer:
    """tokenizer.json + tokenizer_config.json in DIR (what `--tokenizer DIR` and the workers load), loaded back:
    it must hash as the given tokenizer does (its serialization round-trips)."""
    text = tok.backend.to_str()
    if not (out / TOKENIZER_FILE).is_file() or (out / TOKENIZER_FILE).read_text(encoding="utf-8") != text:
        write_json_atomic(out / TOKENIZER_CONFIG_FILE, {"tokenizer_class": "PreTrainedTokenizerFast",
                                                        "eos_token": tok.backend.id_to_token(tok.eos_id)})
        write_text_atomic(out / TOKENIZER_FILE, text)
    stored = _load_tokenizer(str(out.resolve()), tok.hash)
    if stored.eos_id != tok.eos_id:
        raise InputError(f"holds a tokenizer whose separator is id {stored.eos_id}, not {tok.eos_id}",
                         path=out / TOKENIZER_CONFIG_FILE, fix="delete it; the next run writes it again")
    _CACHE[("tokenizer", str(out.resolve()), tok.hash)] = stored  # this process's tasks (--workers 1) reuse it
    return stored


def _ours(name: str) -> bool:
    """An entry of DIR that `interp data tokenize` writes: its files and folders, its locks, and what a killed
    run's atomic writes leave (`.<file>.XXXXXXXX.tmp`)."""
    if name in (*OUR_FILES, SHARDS_DIR, LOGS_DIR) or name.startswith(LOCK_PREFIX):
        return True
    return name.startswith(".") and name.endswith(TEMP_SUFFIX) and any(
        re.fullmatch(rf"\.{re.escape(f)}\.[a-z0-9_]{{8}}{re.escape(TEMP_SUFFIX)}", name) for f in OUR_FILES)


def _check_out(out: Path, settings: dict, tok: TextTokenizer, note: bool = True) -> None:
    """DIR may be new, empty, or a folder this command wrote with the same settings, finished or not (a run
    stopped before its first shard, or a --plan-only run, leaves only the tokenizer, the plan and locks);
    nothing is written here."""
    if out.exists() and not out.is_dir():
        raise InputError("exists and is not a folder", path=out, field="--out", fix="choose a folder")
    if not out.is_dir():
        return
    foreign = sorted(p.name for p in out.iterdir() if not _ours(p.name))
    ran = (out / MANIFEST_FILE).is_file() or (out / SHARDS_DIR).is_dir() or any(
        (out / LOGS_DIR).glob(f"{PLAN_PREFIX}*.json"))
    if foreign and not ran:
        raise InputError(f"is a non-empty folder that `interp data tokenize` did not write (it holds "
                         f"{foreign[0]!r})", path=out, field="--out", fix="choose a new or empty --out")
    if (out / MANIFEST_FILE).is_file():
        try:
            old = read_manifest(out).settings
        except InputError as err:  # rewritten by this run; each shard still checks its own settings
            if note:
                print(f"[data] {out / MANIFEST_FILE} is damaged and will be written again "
                      f"({' '.join(str(err).split())})", file=sys.stderr)
            return
        changed = [f"{k}: {old.get(k)!r} -> {v!r}" for k, v in settings.items() if old.get(k) != v]
        if changed:
            raise InputError(f"holds tokens made with other settings ({'; '.join(changed)})", path=out,
                             field="--out", fix="choose another --out, or delete the folder to rebuild it")
    elif not ran and (out / TOKENIZER_FILE).is_file():
        # only a tokenizer (a run stopped before its plan): ours when it is the one asked for
        with contextlib.suppress(OSError, UnicodeDecodeError):
            if (out / TOKENIZER_FILE).read_text(encoding="utf-8") == tok.backend.to_str():
                return
        raise InputError(f"holds a {TOKENIZER_FILE} other than --tokenizer's and no tokenized shards", path=out,
                         field="--out", fix="choose a new or empty --out, or delete the folder")


# ----------------------------------------------------------------------------------------------- the engine

def _loaded(kind: str, key: tuple, load):
    if (kind, *key) not in _CACHE:
        _CACHE[(kind, *key)] = load()
    return _CACHE[(kind, *key)]


def _load_plan(path: str) -> dict:
    plan = read_json(path)
    plan["specs"] = [ShardSpec.from_dict(s) for s in plan["shards"]]
    return plan


def _load_tokenizer(out: str, expected_hash: str) -> TextTokenizer:
    tok = get_tokenizer(out)  # the copy in DIR, like any HF tokenizer folder
    if tok.hash != expected_hash:
        raise InputError(f"holds a tokenizer with hash {tok.hash}, not {expected_hash} (replaced during the run?)",
                         path=Path(out) / TOKENIZER_FILE, fix="rerun interp data tokenize")
    return tok


@contextlib.contextmanager
def _one_core() -> Iterator[None]:
    """encode_batch on this thread only: a worker is one core (TOKENIZERS_PARALLELISM is read on every call)."""
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before


class TokenizeShards(PipelineStep):
    """datatrove step: task ``rank`` tokenizes shard ``rank`` of the plan stored at ``plan_path`` (a JSON file
    in DIR/logs, so a task carries a path, not the plan, to its worker)."""

    name = "interp tokenize shards"
    type = "🔢 - TOKENIZER"

    def __init__(self, plan_path: str):
        super().__init__()
        self.plan_path = plan_path

    def run(self, data=None, rank: int = 0, world_size: int = 1) -> None:
        plan = _loaded("plan", (self.plan_path,), lambda: _load_plan(self.plan_path))
        spec, settings = plan["specs"][rank], plan["settings"]
        tok = _loaded("tokenizer", (plan["out"], settings["tokenizer_hash"]),
                      lambda: _load_tokenizer(plan["out"], settings["tokenizer_hash"]))
        start = time.perf_counter()
        with _one_core():
            record = write_shard(Path(plan["out"]) / SHARDS_DIR / spec.name, spec, settings, tok)
        seconds = time.perf_counter() - start
        n = sum(record["n_tokens"].values())
        self.stat_update("tokens", value=n, unit="shard")
        self.stat_update("documents", value=sum(record["n_documents"].values()), unit="shard")
        skipped = sum(i["status"] != "ok" for i in record["inputs"])
        print(f"[data] shard {rank + 1}/{world_size} {spec.name}: {record['n_tokens']['train']:,} train + "
              f"{record['n_tokens']['val']:,} val tokens in {seconds:.1f} s ({n / max(seconds, 1e-9):,.0f} "
              "tokens/s)" + (f", {skipped} input(s) skipped as unreadable" if skipped else ""),
              file=sys.stderr, flush=True)


class Executor(LocalPipelineExecutor):
    """LocalPipelineExecutor whose "completed" is interp.data.shards.shard_done, decided before the run (its own
    markers name tasks by index, which moves when inputs are added), and whose task logs stay in DIR/logs
    unless --verbose: a task's error, with datatrove's long traceback, goes to its log file only, and the
    error itself reaches `interp` as one line (--debug or --verbose show the traceback on stderr too)."""

    def __init__(self, *args, todo: Sequence[int], verbose: bool, debug: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.todo, self.verbose, self.debug = set(todo), verbose, debug

    def is_rank_completed(self, rank: int) -> bool:
        return rank not in self.todo

    def get_incomplete_ranks(self, ranks=None, skip_completed=None) -> list[int]:
        return [r for r in (range(self.world_size) if ranks is None else ranks) if r in self.todo]

    def _run_for_rank(self, rank: int, local_rank: int = 0, node_rank: int = -1):
        from datatrove.executor import base

        add_task_logger = base.add_task_logger
        if not (self.verbose or self.debug):
            base.add_task_logger = functools.partial(_file_only_logger, add_task_logger)
        try:  # datatrove logs INFO to stderr for local_rank 0 only
            return super()._run_for_rank(rank, local_rank if self.verbose else 1, node_rank)
        finally:
            base.add_task_logger = add_task_logger
            if not self.verbose:
                _quiet_logs()


TASK_LOG_FORMAT = "{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <8} | {name}:{function}:{line} - {message}"


def _file_only_logger(add_task_logger, logging_dir, rank: int, local_rank: int = 0, node_rank: int = -1):
    """datatrove's add_task_logger, then its stderr sink removed: the task log file keeps everything (an error's
    traceback included), stderr gets none of it."""
    from loguru import logger

    logfile = add_task_logger(logging_dir, rank, local_rank, node_rank=node_rank)
    logger.remove()
    logger.add(logfile, colorize=False, level="DEBUG", format=TASK_LOG_FORMAT, diagnose=False)
    return logfile


def _quiet_logs() -> None:
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="WARNING", format="datatrove {level}: {message}", backtrace=False, diagnose=False)


def _start_worker() -> None:
    """A pool worker's first act: die with its parent (the forkserver, which exits when `interp` does), so a
    `kill -9` of `interp` leaves no worker writing into DIR; Ctrl-C is for `interp`, which stops the workers."""
    import signal

    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _portable(err: BaseException) -> BaseException:
    """err itself when it survives pickling (InputError, OutputFull, OSError...), else a RuntimeError saying
    what it was: the parent must get every worker's error, never a result it cannot unpickle."""
    import pickle

    try:
        return pickle.loads(pickle.dumps(err))
    except Exception:  # noqa: BLE001 - any error that cannot cross a process boundary is sent as its text
        return RuntimeError(f"{type(err).__name__}: {err}")


def _worker(executor: Executor, tasks, results) -> None:
    """A worker: tokenize the shards it takes from `tasks` (None: stop), report each as (rank, None) or (rank,
    error) on `results`; after an error it stops (the parent stops the others)."""
    _start_worker()
    while (rank := tasks.get()) is not None:
        try:
            executor._run_for_rank(rank)
        except BaseException as err:  # noqa: BLE001 - reported to the parent, which raises it
            results.put((rank, _portable(err)))
            return
        results.put((rank, None))


def _run_workers(executor: Executor, todo: list[int]) -> None:
    """The shards `todo` on `executor.workers` processes forked from a forkserver (it holds no lock: it was
    exec'd, and it exits with this process), handing out one shard at a time. No multiprocessing Pool: its
    terminate() waits on a queue lock that a worker stopped in the middle of reading holds forever, and it
    waits forever for a worker that died (the OOM killer). Here the first error, a dead worker, SIGTERM or
    Ctrl-C stops every worker (SIGTERM, then SIGKILL) in a finally; nothing waits on a lock a worker held."""
    import signal

    from multiprocess.connection import wait

    multiprocess.set_forkserver_preload(["__main__", __name__])  # this module imported once, not per worker
    ctx = multiprocess.get_context("forkserver")
    tasks, results = ctx.Queue(), ctx.SimpleQueue()
    for rank in [*todo, *[None] * executor.workers]:
        tasks.put(rank)
    procs = [ctx.Process(target=_worker, args=(executor, tasks, results), daemon=True, name=f"tokenize-{i}")
             for i in range(executor.workers)]
    try:
        for proc in procs:
            proc.start()
        left, live = set(todo), {proc.sentinel: proc for proc in procs}
        while left:
            ready = wait([results._reader, *live], timeout=5)
            if results._reader in ready:
                rank, err = results.get()
                if err is not None:
                    raise err
                left.discard(rank)
                continue
            for sentinel in [s for s in ready if s in live]:
                proc = live.pop(sentinel)
                if proc.exitcode != 0 and not results._reader.poll():
                    how = (f"was killed by {signal.Signals(-proc.exitcode).name}" if proc.exitcode < 0
                           else f"exited with status {proc.exitcode}")
                    raise RuntimeError(f"a tokenizing worker (pid {proc.pid}) {how} before finishing its shard "
                                       "(out of memory?); rerun to resume: finished shards are kept")
            if not live and not results._reader.poll():
                raise RuntimeError(f"the workers stopped with {len(left)} shard(s) not done; rerun to resume")
    finally:
        started = [proc for proc in procs if proc.pid is not None]
        kill_children(started)  # a stop or an error: the workers go now, not after their shard (writes are atomic)
        deadline = time.monotonic() + 10
        for proc in started:
            proc.join(max(0.0, deadline - time.monotonic()))
        kill_children(started, signal.SIGKILL)
        for proc in started:
            proc.join()
        tasks.cancel_join_thread()
        tasks.close()
        results.close()


def _execute(plan_path: Path, n_shards: int, todo: list[int], first: int, count: int, cfg: TokenizeConfig,
             logs: Path, debug: bool = False) -> None:
    """Run the shards `todo` (of the block [first, first + count)) on datatrove, `cfg.n_workers` at a time.

    No multiprocessing Manager (datatrove's run() starts one: a forked process holding a copy of DIR's lock,
    which a `kill -9` of this process would orphan, locking DIR until it is found and killed): one task per shard
    in this process, or workers forked from a forkserver that die with it (_run_workers)."""
    executor = Executor([TokenizeShards(str(plan_path))], todo=todo, verbose=cfg.verbose, debug=debug,
                        tasks=n_shards, workers=min(cfg.n_workers, len(todo)), logging_dir=str(logs),
                        local_tasks=count, local_rank_offset=first, skip_completed=True)
    if not cfg.verbose:
        _quiet_logs()
    try:
        if executor.workers == 1:  # datatrove's per-task entry point, in this process
            for rank in todo:
                executor._run_for_rank(rank)
        else:
            _run_workers(executor, todo)
    finally:
        from datatrove.utils.logging import setup_default_logger

        setup_default_logger()


# ----------------------------------------------------------------------------------------------- the run

def tokenize_corpus(cfg: TokenizeConfig, *, debug: bool = False) -> dict:
    """Tokenize ``cfg.sources`` into ``cfg.out`` (this machine's block of shards), write manifest.json, return it
    (with ``cfg.plan_only``: only the tokenizer and the plan, and return {"plan": path, "n_shards": n}).

    Bad input (--out that cannot be written, a source, the tokenizer, an --out holding other tokens) raises
    InputError / OSError before anything is read or written; an unreadable input file is skipped and reported
    (stderr and the manifest). ``debug``: errors inside a task show datatrove's traceback on stderr too.

    Concurrent runs on one DIR: each --task-index holds its own lock (.lock-task-I-of-K; a run without
    --task-index holds .lock) while it runs, and the files every run writes in DIR (the tokenizer, the plan, the
    manifest) are written, and killed runs' temporaries of them removed, only under the blocking .lock-setup."""
    cfg.validate()
    out = Path(cfg.out).expanduser()
    check_output(out, "--out", folder=True)
    tok = get_tokenizer(cfg.tokenizer)
    settings = shard_settings(tok, cfg)
    _check_out(out, settings, tok)
    inputs, notes = discover(cfg.sources, cfg.field, exclude=out)
    specs = plan_shards(inputs, cfg.shard_size)
    for note in notes:
        print(f"[data] {note}", file=sys.stderr)
    tok_info = {"name": tok.name, "spec": cfg.tokenizer, "hash": tok.hash, "vocab_size": tok.vocab_size,
                "eos_id": tok.eos_id, "eos_token": tok.backend.id_to_token(tok.eos_id), "file": TOKENIZER_FILE}
    task = f"task-{cfg.task_index}-of-{cfg.task_count}"
    lock = out / (LOCK_PREFIX if cfg.task_count == 1 else f"{LOCK_PREFIX}-{task}")
    start = time.perf_counter()
    with exclusive_lock(lock, f"tokenized folder {out}" + (f" ({task})" if cfg.task_count > 1 else "")):
        plan_name = f"{PLAN_PREFIX}{json_sha256([settings, [s.to_dict() for s in specs]])[:16]}.json"
        plan_path = out / LOGS_DIR / plan_name
        with file_lock(out / SETUP_LOCK):  # the files every task writes: one task at a time
            _check_out(out, settings, tok, note=False)  # again: another task may have written DIR since
            removed = [*remove_stale_temps(out, OUR_FILES), *remove_stale_temps(out / LOGS_DIR, (plan_name,))]
            if removed:
                print(f"[data] removed {len(removed)} temporary file(s) a stopped run left in {out}", file=sys.stderr)
            _store_tokenizer(out, tok)
            if not plan_path.is_file():
                write_json_atomic(plan_path, {"out": str(out.resolve()), "settings": settings,
                                              "shards": [s.to_dict() for s in specs]})
        if cfg.plan_only:
            print(f"[data] plan of {len(specs)} shard(s): {plan_path} (one datatrove task per shard: "
                  f"TokenizeShards({str(plan_path)!r}))")
            return {"plan": str(plan_path), "n_shards": len(specs)}
        first = cfg.task_index * len(specs) // cfg.task_count
        last = (cfg.task_index + 1) * len(specs) // cfg.task_count
        todo = []
        for i in range(first, last):
            record, why = shard_done(out / SHARDS_DIR / specs[i].name, specs[i], settings)
            if record is None:
                todo.append(i)
                if why != "not built yet":
                    print(f"[data] shard {specs[i].name}: {why}; building it again", file=sys.stderr)
        print(f"[data] {len(specs)} shard(s) from {len(inputs)} input(s); this run: {last - first - len(todo)} done "
              f"already, {len(todo)} to tokenize with {min(cfg.n_workers, len(todo))} worker(s)"
              + (f" ({task})" if cfg.task_count > 1 else ""), file=sys.stderr, flush=True)
        if todo:
            _execute(plan_path, len(specs), todo, first, last - first, cfg, out / LOGS_DIR / task, debug)
        with file_lock(out / SETUP_LOCK):  # the last task to get here writes the complete manifest
            records = [shard_done(out / SHARDS_DIR / s.name, s, settings, restamp=first <= i < last)[0]
                       for i, s in enumerate(specs)]
            manifest = build_manifest(settings, tok_info, cfg.sources, specs, records)
            write_json_atomic(out / MANIFEST_FILE, manifest)
    _report(manifest, out, cfg, todo, time.perf_counter() - start)
    return manifest


def _report(manifest: dict, out: Path, cfg: TokenizeConfig, todo: list[int], seconds: float) -> None:
    for skipped in manifest["skipped_inputs"]:
        print(f"interp data tokenize: skipped unreadable input {skipped['path']}: {skipped['error']}",
              file=sys.stderr)
    for shard in manifest["shards"]:
        for inp in shard["inputs"]:
            if inp.get("bad_lines"):
                print(f"interp data tokenize: {inp['path']}: skipped {inp['bad_lines']} bad JSON line(s) "
                      f"({'; '.join(inp['bad_line_examples'])})", file=sys.stderr)
    n = manifest["n_tokens"]
    state = ("complete" if manifest["complete"] else
             f"{len(manifest['missing_shards'])} shard(s) still missing (other --task-index runs, or rerun)")
    print(f"[data] wrote {out / MANIFEST_FILE}: {manifest['n_shards']} shard(s), {state}; {n['train']:,} train + "
          f"{n['val']:,} val tokens, {sum(manifest['n_documents'].values()):,} documents; {len(todo)} shard(s) "
          f"tokenized in {seconds:.1f} s")
    if manifest["complete"] and not sum(manifest["n_documents"].values()):
        counts = {key: sum(i.get(key, 0) for s in manifest["shards"] for i in s["inputs"])
                  for key in ("empty", "missing_field", "missing_id")}
        raise InputError(f"no documents found: {len(manifest['skipped_inputs'])} input(s) unreadable, "
                         f"{missing_fields(counts, cfg.field, cfg.id_field)}, {counts['empty']} empty",
                         path=out / MANIFEST_FILE, fix="check --field (and --id-field) against the inputs")
