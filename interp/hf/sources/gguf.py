"""A GGUF model: a .gguf file, or a folder holding exactly one and no config.json; and an offline registry model,
whose pip package ships one (interp.data.registry). Both load through the dequantized fp32 cache
(interp.hf.load.load_gguf) and hold everything in their one file."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp.data.registry import REGISTRY
from interp.hf.sources.base import ModelSource

GGUF_SUFFIX = ".gguf"


@dataclass(frozen=True)
class GgufSource(ModelSource):
    """A .gguf file (or a folder with exactly one)."""

    kind = "gguf"

    @property
    def label(self) -> str:
        return self.path.stem

    def gguf_file(self) -> Path:
        """The file itself (a folder's one .gguf: resolve_model checked there is exactly one)."""
        return self.path if self.path.is_file() else min(self.path.glob(f"*{GGUF_SUFFIX}"))

    def weights_files(self) -> list[Path]:
        return [self.gguf_file()]

    def content_key(self) -> str:
        """The hash of the file's sha256 (nothing beside it defines the model)."""
        return hashlib.sha256(self.weights_sha256().encode()).hexdigest()

    def gguf(self) -> Any:
        from interp.hf.load import GgufWeights

        return GgufWeights.of_file(self.gguf_file())

    def load_pretrained(self, **kwargs: Any) -> Any:
        from interp.hf.load import load_gguf

        return load_gguf(self.gguf(), self, **kwargs)

    def pretrained_tokenizer(self) -> Any:
        from interp.hf.load import gguf_tokenizer

        return gguf_tokenizer(self.gguf())


@dataclass(frozen=True)
class RegistrySource(GgufSource):
    """A name in interp.hf.REGISTRY: an offline GGUF model shipped in a pip package (smollm2-135m, gemma3-270m)."""

    kind = "registry"

    @property
    def label(self) -> str:
        return self.spec

    def gguf_file(self) -> Path:
        return REGISTRY[self.spec].locate()

    def gguf(self) -> Any:
        from interp.hf.load import GgufWeights

        entry = REGISTRY[self.spec]
        return GgufWeights(self.spec, entry.locate, entry.cache_key)

    def content_key(self) -> str:
        """Its name and its package's cache key (a new package version is a new model)."""
        return f"registry:{self.spec}:{REGISTRY[self.spec].cache_key()}"
