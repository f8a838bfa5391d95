"""What a resumable training process keeps besides its tensors: the stop flag for signals (defined in
interp._util.children, shared with every pool of processes), the global RNG
states (saved in train_state.pt, so a resume continues every random stream), and a hash of the weights.
"""

from __future__ import annotations

import hashlib
import random

import numpy as np
import torch

from interp._util.children import StopFlag  # noqa: F401 (the Trainer's, re-exported)


def rng_state() -> dict:
    """All global RNG states as tensors/plain values (so train_state.pt loads with weights_only=True)."""
    key, keys, pos, has_gauss, cached = np.random.get_state()
    return {"torch": torch.get_rng_state(), "python": random.getstate(),
            "numpy": {"key": key, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                      "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    n = state["numpy"]
    np.random.set_state((n["key"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"],
                         n["cached_gaussian"]))
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def param_hash(model: torch.nn.Module) -> str:
    """sha256 of every parameter's bytes in name order: equal hashes = bit-identical weights."""
    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()

