"""File names and cache locations, in one place so every module agrees on them."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

# Checkpoint directory layout (SAELens-style: weights + config side by side).
WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
TRAIN_STATE_FILE = "train_state.pt"
LOG_FILE = "log.jsonl"
RESULT_FILE = "result.json"
RUN_LOCK_FILE = ".lock"   # in a run directory: held by the Trainer's rank 0 for the whole run (exclusive_lock)

# Token files: a raw memmap plus its metadata.
TOKENS_SUFFIX = ".bin"
TOKENS_META_SUFFIX = ".json"

# cache_dir(PRETRAINED_CACHE): dequantized GGUF models (interp.hf.cache) and the joined GGUF files they come from
PRETRAINED_CACHE = "pretrained"

REPO_ROOT = Path(__file__).resolve().parents[2]
FIGURES_DIR = REPO_ROOT / "figures"


def cache_dir(*parts: str) -> Path:
    """Root for derived, re-creatable data (tokenizers, token files, dequantized models).

    Override with INTERP_CACHE_DIR; default `$XDG_CACHE_HOME/interp` (~/.cache/interp), outside the
    repo, so fresh clones on the same machine (CI) reuse the dequantized models and token files.
    Everything in it is rebuilt on demand if missing.
    """
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "interp"
    root = Path(os.environ.get("INTERP_CACHE_DIR", default))
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def installed_package_dir(module: str) -> Path | None:
    """The folder of an installed package, found WITHOUT importing it (the offline asset packages import torch,
    `llm` and more on import); None when it is not installed."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))
