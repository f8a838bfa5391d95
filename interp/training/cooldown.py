"""Cooldown branches: every shorter training length from one warmup-stable-decay run.

With `lr_schedule="wsd"` the lr after the warm-up is constant until the run's own cooldown, so the first
decay_start(S) steps of a run of any length S are the same steps. A branch of length S therefore starts from the
main run's state after decay_start(S) steps, trains the remaining cooldown_fraction * S steps with that run's
1-sqrt decay, and is evaluated: it is exactly the run `--steps S --lr-schedule wsd` would have been (same seed,
same data stream, same lr at every step; tests/training/test_cooldown.py checks bit-equality), at a fraction of the cost
(Hagele et al. 2024, "Scaling Laws and Compute-Optimal Training Beyond Fixed Training Durations").

The branch runs in process: the Trainer snapshots weights, optimizer, data stream and RNGs, trains the branch,
writes it, and restores the snapshot, so the main run goes on bit-identical to a run without branches. Each
branch lives in its own directory, a checkpoint like any other (probe, eval and export read it):

    <run>/cooldowns/step_<S>/   model.safetensors, config.json (the run's, with "cooldown" = where it branched),
                                result.json (val loss/ppl at S steps; the commit point: written last)

A finished branch is never trained again; a kill inside a branch redoes that branch on resume (the main run
resumes from a state at or before the branch point), and SIGINT/SIGTERM inside a branch abandons it, so the run
saves at the branch point and stops.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp._util.io import read_json, write_json_atomic
from interp._util.paths import RESULT_FILE
from interp.training import checkpoints
from interp.training.config import TrainConfig, decay_start, lr_at
from interp.training.runtime import rng_state, set_rng_state

if TYPE_CHECKING:
    from interp.training.runtime import StopFlag
    from interp.training.trainer import Trainer

COOLDOWN_DIR = "cooldowns"


def branch_points(cfg: TrainConfig) -> dict[int, list[int]]:
    """{main-run step at which to branch: [branch lengths starting there]} for cfg.cooldowns."""
    points: dict[int, list[int]] = {}
    for length in sorted(cfg.cooldowns):
        points.setdefault(decay_start(length, cfg), []).append(length)
    return points


def branch_dir(run_dir: str | Path, length: int) -> Path:
    return Path(run_dir) / COOLDOWN_DIR / f"step_{length:06d}"


def branch_result(run_dir: str | Path, length: int) -> dict | None:
    """The stored result of a finished branch, or None (not run, or killed before its result was written)."""
    path = branch_dir(run_dir, length) / RESULT_FILE
    return read_json(path) if path.is_file() else None


def branch_done(trainer: Trainer, length: int) -> bool:
    """Whether the cooldown branch to `length` has its result already, agreed by every rank: each reads the file
    rank 0 wrote, and ranks that disagree (a run directory not on one shared filesystem) would part ways and hang
    in the next collective, so that is an error on all of them instead."""
    seen = trainer.all_sum([float(branch_result(trainer.out, length) is not None)])[0]
    if 0 < seen < trainer.dist.world_size:
        raise RuntimeError(f"{trainer.out}: {int(seen)} of {trainer.dist.world_size} ranks see the result of the "
                           f"cooldown branch to {length} steps: every rank must read the same run directory; "
                           "put --out on a filesystem all nodes share")
    return seen > 0


def collect(run_dir: str | Path, cfg: TrainConfig) -> list[dict[str, Any]]:
    """The finished branches of a run, shortest first (what result.json's "cooldowns" lists)."""
    return [r for r in (branch_result(run_dir, n) for n in sorted(cfg.cooldowns)) if r is not None]


class Snapshot:
    """Everything a branch changes: weights, optimizer state, the data stream and the global RNGs."""

    def __init__(self, trainer: Trainer):
        self.model = {k: v.detach().clone() for k, v in trainer.raw.state_dict().items()}
        self.optimizer = copy.deepcopy(trainer.optimizer.state_dict())
        self.generator = trainer.generator.get_state()
        self.rng = rng_state()

    def restore(self, trainer: Trainer) -> None:
        trainer.raw.load_state_dict(self.model)
        trainer.optimizer.load_state_dict(self.optimizer)
        trainer.generator.set_state(self.generator)
        set_rng_state(self.rng)


def run_branch(trainer: Trainer, length: int, step: int, tokens: int, flag: StopFlag) -> dict | None:
    """Train the cooldown branch of `length` steps from the main run's state after `step` steps, write it,
    restore the main run's state; the branch's result, or None when a signal abandoned it."""
    cfg = trainer.cfg
    snapshot = Snapshot(trainer)
    tokens_per_step = cfg.batch_size * cfg.n_ctx
    start = step
    try:
        while step < length:
            if trainer.all_sum([float(flag.signal is not None)])[0] > 0:
                return None
            batch = trainer.data.sample_batch("train", cfg.batch_size, cfg.n_ctx, trainer.generator)
            loss, _ = trainer.train_step(batch, step, lr=lr_at(step, cfg, steps=length))
            step, tokens = step + 1, tokens + tokens_per_step
        metrics = trainer.evaluate()
        train_loss = trainer.all_sum([loss.item()])[0] / trainer.dist.world_size
        result = {"status": "done", "step": length, "tokens": tokens, "branched_at": start,
                  "cooldown_steps": length - start, "train_loss": train_loss, **metrics}
        weights = trainer.full_weights()
        if trainer.dist.primary:
            out = branch_dir(trainer.out, length)
            config = {**trainer.run_config, "step": length, "tokens": tokens,
                      "cooldown": {"of": str(trainer.out), "branched_at": start, "steps": length,
                                   "lr_schedule": cfg.lr_schedule, "cooldown_fraction": cfg.cooldown_fraction}}
            checkpoints.save_checkpoint(out, weights, config)
            write_json_atomic(out / RESULT_FILE, result)
        return result
    finally:
        snapshot.restore(trainer)
