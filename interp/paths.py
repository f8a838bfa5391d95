"""File names and cache locations, in one place so every module agrees on them."""

from __future__ import annotations

import os
from pathlib import Path

# Checkpoint directory layout (SAELens-style: weights + config side by side).
WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
TRAIN_STATE_FILE = "train_state.pt"
LOG_FILE = "log.jsonl"
RESULT_FILE = "result.json"

# Token files: a raw memmap plus its metadata.
TOKENS_SUFFIX = ".bin"
TOKENS_META_SUFFIX = ".json"

REPO_ROOT = Path(__file__).resolve().parent.parent
FIGURES_DIR = REPO_ROOT / "figures"


def cache_dir(*parts: str) -> Path:
    """Root for derived, re-creatable data (tokenizers, token files, dequantized models).

    Override with INTERP_CACHE_DIR; default `<repo>/.cache/interp` so a clean clone is self-contained.
    """
    root = Path(os.environ.get("INTERP_CACHE_DIR", REPO_ROOT / ".cache" / "interp"))
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
