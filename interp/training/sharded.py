"""Sharded train states of FSDP runs (TrainConfig.parallel="fsdp"): torch.distributed.checkpoint (DCP), with
the guarantees train_state.pt gives DDP runs (a kill at any moment leaves a resumable state; resume is exact).

In the run directory:
    train_state.pt                 the small state, as for every run (step, tokens, RNGs, data generator), with
                                   "sharded": "train_state.dcp/step_000010" in place of the model and optimizer
    train_state.dcp/step_000010/   DCP: one .distcp file per rank and .metadata: model + AdamW shards
    model.safetensors              the full weights, gathered to rank 0 at every save (what probe/export/eval read)

Why it is atomic: DCP writes a folder, and a folder cannot replace another in one rename. So every save
writes a NEW folder: all ranks write `.step_N.tmp/`, rank 0 renames it to `step_N/` once DCP has finished
(its .metadata is written after every rank's data), then train_state.pt, replaced atomically, starts naming it:
that replace is the commit point. Older folders are deleted after it; what a kill leaves (a temporary, a
folder no train_state.pt names) is swept when the run resumes (`sweep`). A resume loads exactly the shards
that were saved, so it continues bit-identically; DCP also reshards, so a run may resume on another number of
ranks (then equal up to float reduction order). `consolidate` turns a sharded state into model.safetensors in
one process, for a run whose last full save did not happen.

Multi-node runs need the run directory on a filesystem every node sees (DCP writes each rank's shard from its
own node); docs/scale.md.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch

from interp._util.dist import Distributed
from interp._util.errors import InputError
from interp._util.io import PathLike, _fsync_dir, fault_point
from interp._util.paths import TRAIN_STATE_FILE

SHARDED_DIR = "train_state.dcp"
METADATA_FILE = ".metadata"  # written by DCP last: a folder without it is incomplete
STATE_KEY = "sharded"        # the train_state.pt key naming the folder (relative to the run directory)


@contextlib.contextmanager
def _quiet(no_dist: bool) -> Iterator[None]:
    """Without a process group DCP warns that it "assumes the intent" to work in one process: it is ours."""
    with warnings.catch_warnings():
        if no_dist:
            warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")
        yield


def _state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optim_state = get_state_dict(model, optimizer)  # keyed by parameter names (FQNs): reshardable
    return {"model": model_state, "optimizer": optim_state}


def save(run_dir: PathLike, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
         dist: Distributed) -> str:
    """Every rank writes its shards of model + optimizer to train_state.dcp/step_N (via a temporary folder);
    returns the folder relative to run_dir, for train_state.pt. A collective: call it on every rank."""
    import torch.distributed.checkpoint as dcp

    base = Path(run_dir) / SHARDED_DIR
    name = f"step_{step:06d}"
    tmp, final = base / f".{name}.tmp", base / name
    if dist.primary:
        shutil.rmtree(tmp, ignore_errors=True)  # a killed save's
        base.mkdir(parents=True, exist_ok=True)
    dist.barrier()
    with _quiet(not dist.group):
        dcp.save(_state(model, optimizer), checkpoint_id=tmp, no_dist=not dist.group)  # not-safe-open: private temp folder
    if dist.primary:
        fault_point(f"replace {SHARDED_DIR}/{name}")
        if final.exists():  # written by a session killed before its train_state.pt named it: not in use
            shutil.rmtree(final)
        os.replace(tmp, final)
        _fsync_dir(base)
    dist.barrier()
    return f"{SHARDED_DIR}/{name}"


def check(run_dir: PathLike, state: dict) -> None:
    """Refuse (InputError, before any data is prepared) a train_state.pt whose sharded folder is missing or
    incomplete."""
    folder = Path(run_dir) / str(state.get(STATE_KEY))
    if not (folder / METADATA_FILE).is_file():
        raise InputError(f"names the sharded state {state.get(STATE_KEY)!r}, which is missing or incomplete (no "
                         f"{METADATA_FILE})", path=Path(run_dir) / TRAIN_STATE_FILE,
                         fix="restore that folder from a copy, or delete train_state.pt and rerun with --resume "
                             "to train the run again from step 0")


def load(run_dir: PathLike, state: dict, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
         dist: Distributed) -> None:
    """Load the shards train_state.pt's `state` names into `model` and `optimizer` (in place; any number of
    ranks, FSDP-sharded or not). A collective: call it on every rank."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict

    loaded = _state(model, optimizer)  # allocated (the optimizer's state too), filled in place by DCP
    with _quiet(not dist.group):
        dcp.load(loaded, checkpoint_id=Path(run_dir) / state[STATE_KEY], no_dist=not dist.group)
    set_state_dict(model, optimizer, model_state_dict=loaded["model"], optim_state_dict=loaded["optimizer"])


def sweep(run_dir: PathLike, keep: str | None) -> list[Path]:
    """Delete every folder under train_state.dcp/ except `keep` (what train_state.pt names): older states and
    what killed saves left. Rank 0 only, while it holds the run directory's lock."""
    base = Path(run_dir) / SHARDED_DIR
    keep_name = Path(keep).name if keep else None
    removed = []
    for entry in sorted(base.iterdir()) if base.is_dir() else ():
        if entry.name != keep_name and not entry.is_symlink():
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
            removed.append(entry)
    return removed


def consolidate(run_dir: PathLike, out_dir: PathLike | None = None) -> Path:
    """model.safetensors + config.json of the sharded state train_state.pt names, in one process (no process
    group; DCP reads every rank's shards): into run_dir itself by default, or into out_dir. Returns the folder.

    The Trainer writes model.safetensors at every save already; this is for a sharded state whose full save
    did not happen (a kill between the two), or to turn a copied train_state.dcp folder into a checkpoint."""
    import torch.distributed.checkpoint as dcp

    from interp.model import ModelConfig, TaperedLM
    from interp.training.checkpoints import FORMAT_KEY, load_train_state, read_config, save_checkpoint

    run_dir = Path(run_dir)
    config, state = read_config(run_dir), load_train_state(run_dir)
    if STATE_KEY not in state:
        raise InputError("holds no sharded state (the run was not trained with parallel=fsdp); its "
                         "model.safetensors is already complete", path=run_dir / TRAIN_STATE_FILE)
    check(run_dir, state)
    model = TaperedLM(ModelConfig.from_dict(config["model"]))
    loaded = {"model": model.state_dict()}
    with _quiet(True):
        dcp.load(loaded, checkpoint_id=run_dir / state[STATE_KEY], no_dist=True)
    model.load_state_dict(loaded["model"])
    out = Path(out_dir) if out_dir is not None else run_dir
    rest = {k: v for k, v in config.items() if k not in (FORMAT_KEY, "model")}
    save_checkpoint(out, model, rest if out == run_dir else {**rest, "step": state["step"], "tokens": state["tokens"]})
    return out
