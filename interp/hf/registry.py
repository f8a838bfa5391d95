"""The offline model registry as `interp models` shows it: each entry (interp.data.registry: the models pip packages
ship as GGUF files, and where each file is) with whether it is installed, its size and its dequantized cache.
"""

from __future__ import annotations

from dataclasses import dataclass

from interp.data.registry import REGISTRY, RegistryEntry, modules_of, package_dir
from interp.hf.cache import _cache_path, _valid_cache

DEFAULT_MODEL = "smollm2-135m"


@dataclass(frozen=True)
class ModelInfo:
    """One row of `interp models`."""

    name: str
    installed: bool
    architecture: str
    n_layers: int
    d_model: int
    d_ff: int
    size_mb: float | None    # installed weight files, None when not installed
    cached: bool             # a dequantized fp32 copy exists (fast loads)
    licence: str
    notes: str
    pip_command: str


def _package_size_mb(entry: RegistryEntry) -> float | None:
    if not entry.installed():
        return None
    total = sum(p.stat().st_size for m in modules_of(entry) for p in package_dir(m).rglob("*") if p.is_file())
    return round(total / 2**20, 1)


def available_models() -> list[ModelInfo]:
    """Registry entries with whether each is installed, its size, licence and cache state."""
    rows = []
    for entry in REGISTRY.values():
        installed = entry.installed()
        cached = installed and _valid_cache(_cache_path(entry.name, entry.cache_key()))
        rows.append(ModelInfo(
            name=entry.name, installed=installed, architecture=entry.architecture, n_layers=entry.n_layers,
            d_model=entry.d_model, d_ff=entry.d_ff, size_mb=_package_size_mb(entry), cached=cached,
            licence=entry.licence, notes=entry.notes, pip_command=entry.pip_command))
    return rows
