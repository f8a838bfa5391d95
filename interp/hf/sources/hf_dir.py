"""A Hugging Face directory (save_pretrained: config.json with model_type / architectures), read by
AutoModelForCausalLM.from_pretrained (interp.hf.load.load_dir); and the remote-code check every such folder passes.

Remote code: a Hugging Face directory whose config.json or tokenizer_config.json has an `auto_map` names Python
files of its own that transformers would import (and run). resolve_model refuses such a directory unless
trust_remote_code=True (`--trust-remote-code`), and the loaders pass trust_remote_code explicitly on every
from_pretrained call, so transformers never asks on the terminal (batch runs are unattended).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp._util.io import read_json
from interp._util.paths import CONFIG_FILE
from interp.hf.export_styles import EXPORT_MODEL_TYPES
from interp.hf.sitemap import CONTEXT_FIELDS
from interp.hf.sources.base import (
    HF_WEIGHT_PATTERNS,
    NOT_DEFINING,
    ModelResolutionError,
    ModelSource,
    hf_weight_files,
    plain_files,
    read_config,
)

REMOTE_CODE_FILES = (CONFIG_FILE, "tokenizer_config.json")  # where transformers reads auto_map
TRUST_REMOTE_CODE_FLAG = "--trust-remote-code"


@dataclass(frozen=True)
class HfDirSource(ModelSource):
    """A local Hugging Face directory."""

    kind = "hf_dir"

    def weights_files(self) -> list[Path]:
        files = hf_weight_files(self.path)
        if not files:
            raise FileNotFoundError(f"{self.path}: no weight files ({', '.join(HF_WEIGHT_PATTERNS)}) in this "
                                    "HF model directory")
        return files

    def definition_files(self) -> list[tuple[str, Path]]:
        """Every other top-level file (config, tokenizer files, generation config, custom code; not tables or
        READMEs: NOT_DEFINING)."""
        weights = set(self.weights_files())
        return [(f.name, f) for f in plain_files(self.path) if f not in weights and f.suffix not in NOT_DEFINING]

    def checked(self) -> HfDirSource:
        """This source, its remote code refused unless trusted (refuse_remote_code)."""
        if not self.trust_remote_code:
            refuse_remote_code(self.path)
        return self

    def load_pretrained(self, **kwargs: Any) -> Any:
        from interp.hf.load import load_dir

        return load_dir(self.path, self, **kwargs)

    def pretrained_tokenizer(self) -> Any:
        from interp.hf.load import dir_tokenizer

        return dir_tokenizer(self.path, self.trust_remote_code)

    def context_length(self) -> int | None:
        """The first of CONTEXT_FIELDS its config.json (or text_config) states."""
        config = read_config(self.path, CONFIG_FILE) if self.path is not None and self.path.is_dir() else None
        if not isinstance(config, dict):
            return None
        text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
        for name in CONTEXT_FIELDS:
            value = text.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return None


def remote_code(path: Path) -> tuple[Path, dict] | None:
    """(file, auto_map) of the first of REMOTE_CODE_FILES in the directory `path` that has an auto_map."""
    for name in REMOTE_CODE_FILES:
        try:
            config = read_json(path / name, missing_ok=True)
        except ValueError:
            continue  # unparsable: transformers cannot read it either; loading reports the file
        if isinstance(config, dict) and config.get("auto_map"):
            if config.get("model_type") in EXPORT_MODEL_TYPES:
                continue  # an `interp export` folder: loaded with the installed classes, its copy never runs
            return path / name, config["auto_map"]
    return None


def _code_files(auto_map: Any) -> list[str]:
    """The Python files an auto_map names: "modeling_x.XForCausalLM" -> modeling_x.py ("repo--" prefix dropped)."""
    names = set()
    for ref in auto_map.values() if isinstance(auto_map, dict) else [auto_map]:
        for item in ref if isinstance(ref, list | tuple) else [ref]:
            if isinstance(item, str) and "." in item:
                names.add(item.split("--")[-1].rsplit(".", 1)[0] + ".py")
    return sorted(names)


def refuse_remote_code(path: Path) -> None:
    """ModelResolutionError (one line naming the auto_map and the flag) when `path` asks to run its own code."""
    found = remote_code(path)
    if found is None:
        return
    file, auto_map = found
    modules = _code_files(auto_map)
    raise ModelResolutionError(
        f"{file}: auto_map {json.dumps(auto_map)} asks to run Python code shipped with the model "
        f"({', '.join(modules) or 'custom code'}); interp runs such code only when asked: pass "
        f"{TRUST_REMOTE_CODE_FLAG} (trust_remote_code=True) if you trust it")
