"""Content keys: what identifies a model and a setting, so that a rerun skips what is done and two paths to the
same model are analysed once.

A part is keyed <weights>-<settings>-<definition> (part_key, 16 hex each):
  * weights: the sha256 of the weight file(s) (weights_sha256; a sharded HF checkpoint: a hash over the name and
    sha256 of each file), or a hub revision's commit (known without a download);
  * settings: the hash of everything that changes the numbers (settings_hash of a dict the command builds);
  * definition: the other files that define the model (definition_sha256 over Target.definition_files: our
    config.json and tokenizer, an HF directory's config, tokenizer and code files); none for a GGUF file, whose
    key has two parts, as every key had before the definition entered it.
File hashes are streamed and cached by (path, size, mtime) under cache_dir("hashes") (interp._util.io.file_sha256).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from interp._util.io import file_sha256, json_sha256
from interp._util.paths import cache_dir
from interp.hf.registry import REGISTRY
from interp.jobs.targets import GGUF_SUFFIX, PATH_KINDS, Target

__all__ = ["sha256_cached", "weights_sha256", "ref_weights_sha256", "definition_sha256", "settings_hash",
           "part_key", "tokenizer_sha256", "HUB_KEY"]

HUB_KEY = "hub"   # the third part of a hub revision's key, <commit>-<settings>-hub: its commit defines every file


def sha256_cached(path: str | Path) -> str:
    """file_sha256 remembered under cache_dir("hashes") until the file's size or mtime changes."""
    return file_sha256(path, cache_dir("hashes"))


def _files_sha256(named: list[tuple[str, Path]]) -> str:
    lines = "".join(f"{name} {sha256_cached(f)}\n" for name, f in named)
    return hashlib.sha256(lines.encode()).hexdigest()


def weights_sha256(target: Target) -> str:
    """Hash of the weights alone (config.json excluded): one file's sha256, or a hash over a sharded HF
    checkpoint's files (name and sha256 of each)."""
    files = target.weights_files()
    if len(files) == 1:
        return sha256_cached(files[0])
    return _files_sha256([(f.name, f) for f in files])


def registry_key(name: str) -> str:
    """The key of a registry model: its name and its package's cache key (a new package version is a new model)."""
    return f"registry:{name}:{REGISTRY[name].cache_key()}"


def ref_weights_sha256(ref: Any) -> str:
    """weights_sha256 of a resolved model (interp.hf.ModelRef): its weight file(s), a registry model's GGUF file, a
    fetched hub model's snapshot files; "" for a hub id not fetched (and for the rows of a model object passed in)."""
    if ref.kind == "registry":
        return sha256_cached(REGISTRY[ref.spec].locate())
    if ref.kind == "hub" and ref.path is not None:   # fetched: its snapshot is a Hugging Face directory
        return weights_sha256(Target(Path(ref.path), "hf_dir"))
    if ref.path is None or ref.kind not in PATH_KINDS:
        return ""
    path = Path(ref.path)
    if ref.kind == "gguf" and path.is_dir():   # a folder holding one .gguf file (interp.hf.resolve.classify_dir)
        path = next(path.glob(f"*{GGUF_SUFFIX}"))
    return weights_sha256(Target(path, ref.kind))


def definition_sha256(target: Target) -> str:
    """Hash of the files besides the weights that define the model (Target.definition_files: name and sha256
    of each); "" for a GGUF file, which holds everything itself."""
    named = target.definition_files()
    return _files_sha256(named) if named else ""


def settings_hash(settings: dict[str, Any]) -> str:
    return json_sha256(settings)[:16]


def tokenizer_sha256(name: str | None) -> str:
    """Content hash of a --tokenizer that is a file or folder ("" for a name such as bpe, or None)."""
    path = Path(name).expanduser() if name else None
    if path is None or not path.exists():
        return ""
    files = [path] if path.is_file() else sorted(f for f in path.iterdir() if f.is_file())
    return json_sha256([[f.name, sha256_cached(f)] for f in files])


def part_key(weights: str, settings: str, definition: str) -> str:
    """<weights>-<settings>-<definition> (16 hex each); two parts when nothing but the weights defines the
    model (a GGUF file), which is also the key every part had before the definition entered it."""
    return f"{weights[:16]}-{settings}" + (f"-{definition[:16]}" if definition else "")
