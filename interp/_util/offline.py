"""Whether this process may ask the network: HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE, or `--offline` (set_offline).

Kept apart from interp.hf.hub so every layer that fetches (models in interp.hf, dataset texts in interp.data)
asks the same question without importing the other."""

from __future__ import annotations

import os

_TRUTHY = ("1", "true", "yes", "on")
_offline_flag = False


def set_offline(value: bool = True) -> None:
    """`--offline`: never ask the network in this process (as HF_HUB_OFFLINE=1 does)."""
    global _offline_flag
    _offline_flag = value
    if value:  # huggingface_hub / datasets read the variable (datasets at import): make them agree with us
        os.environ["HF_HUB_OFFLINE"] = "1"


def is_offline() -> bool:
    """HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE set to a true value, or set_offline() called."""
    return _offline_flag or any(os.environ.get(v, "").strip().lower() in _TRUTHY
                                for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
