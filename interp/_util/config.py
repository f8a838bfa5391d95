"""Shared rule for reading config dicts back into dataclasses: an unknown key is an error, never ignored
(a typo in a stored config.json must not silently fall back to a default)."""

from __future__ import annotations

import dataclasses


def reject_unknown_keys(cls: type, d: dict) -> None:
    """ValueError naming the unknown keys of `d` for dataclass `cls` and listing the known ones."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise ValueError(f"{cls.__name__}.from_dict: unknown keys {unknown}; known keys are {sorted(known)}")
