"""The dequantized-model cache: a GGUF model dequantized once to fp32 and saved as safetensors.

Why: transformers dequantizes GGUF to plain fp32 `nn.Linear`s, which takes ~12 s; the saved copy loads
in well under a second. One folder per (model name, weights fingerprint) under cache_dir("pretrained"),
written to a temporary folder and renamed, so a crash never leaves half a cache.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp._util.io import complete_safetensors, raise_if_full, remove_entry, safe_open
from interp._util.paths import CONFIG_FILE, PRETRAINED_CACHE, WEIGHTS_FILE, cache_dir

if TYPE_CHECKING:
    from torch import nn

CACHE_SUBDIR = PRETRAINED_CACHE
ORIGIN_FILE = "interp_origin.json"   # beside a cached model: which GGUF it came from, package versions


def _cache_path(name: str, key: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "model"
    return cache_dir(CACHE_SUBDIR) / f"{safe}-{key}"


def _valid_cache(path: Path) -> bool:
    """A cache is usable when its config, tokenizer and complete safetensors are all there."""
    if not (path / CONFIG_FILE).is_file() or not (path / "tokenizer_config.json").is_file():
        return False
    return complete_safetensors(path / WEIGHTS_FILE)


def _drop_quantization_state(model: nn.Module) -> None:
    """A GGUF-loaded model holds plain fp32 weights but still claims to be quantized: save_pretrained
    refuses it, and a saved config would re-attach the GGUF quantizer on every cached load."""
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config


def _save_cache(model: nn.Module, tokenizer: Any, path: Path, origin: dict[str, str]) -> None:
    """save_pretrained into a temp dir beside `path`, then rename: a crash never leaves half a cache."""
    from interp._util.provenance import package_versions

    path.parent.mkdir(parents=True, exist_ok=True)
    # a fresh private folder (mkdtemp: a new name, created 0700 by us), never a predictable name that a planted
    # link could already hold
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{path.name}-{os.getpid()}-", dir=path.parent))
    umask = os.umask(0o22)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)   # as a folder save_pretrained made itself (mkdtemp's is 0700)
    try:
        model.save_pretrained(tmp)  # not-safe-open: tmp is this process's fresh private folder (mkdtemp)
        tokenizer.save_pretrained(tmp)  # not-safe-open: the same private folder
        with safe_open(tmp / ORIGIN_FILE, "w") as f:
            f.write(json.dumps({**origin, "packages": package_versions()}, indent=2))
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise_if_full(err, path.parent, path.name)
        raise
    if path.exists():
        if _valid_cache(path):  # another process won the race
            shutil.rmtree(tmp, ignore_errors=True)
            return
        if path.is_symlink() or not path.is_dir():
            remove_entry(path)   # a link or a file where the cache folder goes: removed, never followed
        else:
            shutil.rmtree(path)
    os.replace(tmp, path)
