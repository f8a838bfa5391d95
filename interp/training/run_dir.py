"""The run-directory protocol: what a training run finds in its --out before it builds anything, the lock that
keeps a second process out, and every file the run writes there, in the order that keeps it resumable
(layout: docs/ARCHITECTURE.md, "Run directories").

    run = RunDir(out, dist, all_sum)   one process's view of a run directory (rank 0 writes, every rank agrees)
    run.lock(create)                   out/.lock, held by rank 0 until close(); every rank raises alike
    run.inspect(cfg) -> Found          finished (its result), fresh (nothing to read) or resumable (config, state);
                                       refuses another config's directory, an unasked resume, unreadable files
    run.start(run_config)              a fresh run: config.json, an empty log
    run.reopen(step, keep, ...)        a resumed run: sweep killed writes' temporaries, cut the log back to `step`,
                                       rewrite that step's checkpoint if a kill tore it
    run.log(record) / logged_train_loss(step)
    run.save(weights, run_config, state, step, tokens, keep_step)   checkpoint, train_state.pt (the commit
                                       point), step checkpoint
    run.write_result(result)           result.json, naming a finished run's weights by their sha256

The Trainer (interp.training.trainer) owns the model, the optimizer and the loop, and calls these; the file names
and the order of the writes live here only. Cooldown branches keep their own folder (interp.training.cooldown).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from interp._util.dist import Distributed
from interp._util.errors import InputError
from interp._util.io import (
    LockHeld,
    atomic_write,
    exclusive_lock,
    file_sha256,
    read_json,
    remove_stale_temps,
    safe_open,
    write_json_atomic,
)
from interp._util.paths import CONFIG_FILE, LOG_FILE, RESULT_FILE, RUN_LOCK_FILE, TRAIN_STATE_FILE, WEIGHTS_FILE
from interp.training import checkpoints, sharded
from interp.training.config import TrainConfig, config_diff

if TYPE_CHECKING:
    from interp.model import TaperedLM

LOCK_FILE = RUN_LOCK_FILE  # in the run directory; held by rank 0 for the whole run (interp._util.io.exclusive_lock)
RUN_FILES = (WEIGHTS_FILE, CONFIG_FILE, TRAIN_STATE_FILE, LOG_FILE, RESULT_FILE)  # whose temporaries we sweep
STEP_DIRS = "checkpoints"  # checkpoints/step_NNNNNN/ (TrainConfig.keep_step_checkpoints)


def read_run_json(path: Path, fix: str) -> dict | None:
    """A run directory's config.json / result.json (None if missing); unreadable: InputError with `fix`."""
    try:
        value = read_json(path, missing_ok=True)
    except ValueError as err:  # invalid JSON or UTF-8
        raise InputError(f"cannot be read ({err.__cause__ or err})", path=path, fix=fix) from err
    if value is not None and not isinstance(value, dict):
        raise InputError(f"holds a JSON {type(value).__name__}, not an object", path=path, fix=fix)
    return value


@dataclass
class Found:
    """What inspect() found: a finished run's result, or (resuming) the stored config and train state; all
    empty for a fresh run."""

    finished: dict | None = None  # result.json of this exact run, done: nothing needs building
    stored: dict = field(default_factory=dict)  # config.json of the run a resume continues
    state: dict | None = None  # its train_state.pt (loaded on the CPU)


class RunDir:
    """One process's view of a run directory. `all_sum` sums a list of floats over the ranks (a collective every
    rank calls; the identity in one process), so that every rank raises the same error or none."""

    def __init__(self, path: str | Path, dist: Distributed, all_sum: Callable[[list[float]], list[float]]):
        self.path, self.dist, self.all_sum = Path(path), dist, all_sum
        self._held, self.locked = contextlib.ExitStack(), False

    def close(self) -> None:
        """Release the lock (if held)."""
        self._held.close()
        self.locked = False

    def step_dir(self, step: int) -> Path:
        return self.path / STEP_DIRS / f"step_{step:06d}"

    # -- before the run builds anything ------------------------------------------------------------
    def lock(self, create: bool) -> None:
        """Rank 0 holds LOCK_FILE from its first look at the run directory to the end of the run, so a second
        process on the same --out fails at once (LockHeld names the holder's pid) instead of mixing its writes
        with this one's; every rank raises alike. A directory that does not exist yet is created and locked
        only when the run first writes to it (create=True), so bad input found before that leaves nothing
        behind; if another run filled the directory in the meantime, this one stops rather than overwrite it."""
        out = self.path
        if out.exists() and not out.is_dir():
            raise InputError("is a file, not a run directory; choose another --out", path=out)
        error: Exception | None = None
        if self.dist.primary and not self.locked and (create or out.is_dir()):
            try:
                self._held.enter_context(exclusive_lock(out / LOCK_FILE, f"run directory {out}"))
                self.locked = True
            except LockHeld as err:
                error = err
            if self.locked and create and any(p.name != LOCK_FILE for p in out.iterdir()):
                error = InputError("was filled by another run while this one prepared its data; rerun (with "
                                   "--resume to continue that run) or choose another --out", path=out)
        if self.dist.world_size > 1 and self.all_sum([float(error is not None)])[0] and error is None:
            error = LockHeld(f"run directory {out}: rank 0 could not take it (see rank 0's error)")
        if error is not None:
            raise error

    def inspect(self, cfg: TrainConfig) -> Found:
        """Finished (this exact run's result), fresh, or resumable (its config and train state). Refuses, naming the
        file and the fix: a directory written by another config, an unfinished run without --resume, an unreadable
        config.json / result.json / train_state.pt (a resume reads its state here, before any data)."""
        out = self.path
        config_path, state_path = out / CONFIG_FILE, out / TRAIN_STATE_FILE
        stored = read_run_json(config_path, "restore it from a copy, or choose another --out: it records the "
                                            "run's settings, which continuing the run needs")
        result = read_run_json(out / RESULT_FILE, f"delete it and rerun with --resume: the run writes it "
                                                  f"again from {TRAIN_STATE_FILE}")
        has_state = state_path.is_file()
        if stored is None:
            if has_state or result is not None:
                raise InputError(f"holds {TRAIN_STATE_FILE if has_state else RESULT_FILE} but no {CONFIG_FILE}, "
                                 "which records the run's settings; restore it, or choose another --out", path=out)
            return Found()  # nothing here yet
        if not (has_state or result):
            return Found()  # only a config, from a run that died before its first save
        diff = config_diff(stored.get("train", {}), cfg)
        if diff:
            raise InputError(f"was written by a different run config; differing fields: {'; '.join(diff)}. "
                             "Use another --out, or pass the same settings to resume", path=config_path)
        if result and result.get("status") == "done":
            return Found(finished=result)
        if not cfg.resume:
            where = (f"status {result.get('status')!r} at step {result.get('step')}" if result else
                     f"{TRAIN_STATE_FILE} but no {RESULT_FILE}: the last run was killed")
            raise InputError(f"holds an unfinished run ({where}); pass --resume (TrainConfig.resume=True) to "
                             "continue it, or choose another --out", path=out)
        found = Found(stored=stored)
        if has_state:
            found.state = checkpoints.load_train_state(out, map_location="cpu")
            if sharded.STATE_KEY in found.state:
                sharded.check(out, found.state)
        return found

    # -- opening it for writes (rank 0; the caller holds the lock: lock(create=True)) -------------
    def start(self, run_config: dict) -> None:
        """A fresh run: sweep temporaries, then config.json and an empty log."""
        if not self.dist.primary:
            return
        self.remove_stale_temps(keep=None)
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / LOG_FILE).unlink(missing_ok=True)
        write_json_atomic(self.path / CONFIG_FILE, run_config)

    def reopen(self, step: int, keep: str | None, weights: TaperedLM | None = None, config: dict | None = None) -> None:
        """A resumed run at `step`: sweep temporaries (but the sharded state folder `keep`), keep the log up to
        `step`, and, given the restored `weights` and that step's `config`, repair that step's checkpoint: a kill
        after train_state.pt but inside the step checkpoint's write leaves it missing or half-replaced, and the
        restored weights are exactly that step's."""
        if not self.dist.primary:
            return
        self.remove_stale_temps(keep)
        self.truncate_log(step)
        step_dir = self.step_dir(step)
        torn = not all((step_dir / n).is_file() for n in (WEIGHTS_FILE, CONFIG_FILE))
        if weights is not None and config is not None and torn:
            checkpoints.save_checkpoint(step_dir, weights, config)

    def remove_stale_temps(self, keep: str | None) -> None:
        """Temporaries of writes a kill interrupted, in the run directory and its step checkpoints (ours: we
        hold the lock); a step directory left empty is removed, so nothing looks like a checkpoint that is not.
        Sharded states: every folder but `keep` (the one the restored train_state.pt names)."""
        remove_stale_temps(self.path, RUN_FILES)
        sharded.sweep(self.path, keep=keep)
        for step_dir in sorted((self.path / STEP_DIRS).glob("step_*")):
            if step_dir.is_dir() and not step_dir.is_symlink():
                remove_stale_temps(step_dir, RUN_FILES)
                with contextlib.suppress(OSError):
                    step_dir.rmdir()  # only if empty

    # -- the log -----------------------------------------------------------------------------------
    def log(self, record: dict) -> None:
        if self.dist.primary:
            with safe_open(self.path / LOG_FILE, "a") as f:
                f.write(json.dumps(record) + "\n")

    def truncate_log(self, step: int) -> None:
        """On resume drop log lines written after the checkpoint we resume from (they are redone), and a
        half-written last line if the process was killed mid-write."""
        path = self.path / LOG_FILE
        if not (self.dist.primary and path.is_file()):
            return
        keep = []
        for line in path.read_text().splitlines():
            try:
                if json.loads(line).get("step", 0) <= step:
                    keep.append(line + "\n")
            except json.JSONDecodeError:
                continue
        atomic_write(self.path, {LOG_FILE: lambda p: p.write_text("".join(keep))})

    def logged_train_loss(self, step: int) -> float:
        """The last train loss log.jsonl holds at or before `step` (train states saved before they held it)."""
        path, loss = self.path / LOG_FILE, float("nan")
        for line in path.read_text().splitlines() if path.is_file() else ():
            with contextlib.suppress(json.JSONDecodeError, AttributeError):
                record = json.loads(line)
                if record.get("kind") == "train" and record.get("step", 0) <= step:
                    loss = float(record["loss"])
        return loss

    # -- saves and the result (rank 0) -------------------------------------------------------------
    def save(self, weights: TaperedLM, run_config: dict, state: dict, step: int, tokens: int, keep_step: bool) -> None:
        """The run's checkpoint, train_state.pt (what a resume reads: the commit point), then the step checkpoint
        (if `keep_step`); a kill after the state is repaired on resume (reopen). A sharded state's folder was
        written by every rank before (interp.training.sharded.save); the previous one, now unnamed, goes."""
        checkpoints.save_checkpoint(self.path, weights, run_config)
        checkpoints.save_train_state(self.path, state)
        if sharded.STATE_KEY in state:
            sharded.sweep(self.path, keep=state[sharded.STATE_KEY])
        if keep_step:
            checkpoints.save_checkpoint(self.step_dir(step), weights, {**run_config, "step": step, "tokens": tokens})

    def write_result(self, result: dict) -> None:
        """result.json (rank 0). A finished run's final save wrote its weights: `result` gains their sha256
        (weights_sha256), by which probe and eval rows name them."""
        if not self.dist.primary:
            return
        if result.get("status") == "done":
            result["weights_sha256"] = file_sha256(self.path / WEIGHTS_FILE)
        write_json_atomic(self.path / RESULT_FILE, result)
