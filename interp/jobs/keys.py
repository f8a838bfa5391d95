"""Content keys: what identifies a model and a setting, so that a rerun skips what is done and two paths to the
same model are analysed once; the same for probe batch, eval and ablate.

A model's key is its source's content key (interp.hf.sources: ModelSource.content_key): a hash of its weights and
the files that define it beside them (our config.json; an HF directory's config, tokenizer and code files), a hub
revision's commit (known without a download), a registry package's cache key. A part is named
model_part_key(model key, settings): <sha256 of the model key, 16 hex>-<settings_hash of what changes the numbers>.
Every row carries the model's identity, IDENTITY_COLUMNS (weights_sha256, model_key, model_spec), so the three
tables join on it.

The keys parts had before (each command's own scheme) are read once as aliases, so old tables keep resuming:
  * probe batch: part_key, <weights>-<settings>-<definition> (16 hex each; a hub revision <commit>-<settings>-hub;
    a GGUF file, and every key before the definition entered it, <weights>-<settings>);
  * eval: eval_pair_key, sha256(<model key>|<json_sha256 of the settings>)[:20];
  * ablate: <weights[:32]>-<settings> (a registry model <model key[:32]>, a hub revision hub-<hash of id@commit>).
File hashes are streamed and cached by (path, size, mtime) under cache_dir("hashes") (interp._util.io.file_sha256).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp._util.io import json_sha256, text_sha256
from interp.hf.sources.base import sha256_cached
from interp.jobs.targets import Target

if TYPE_CHECKING:
    from interp.hf.sources.base import ModelSource

__all__ = [
    "HUB_KEY",
    "IDENTITY_COLUMNS",
    "ablation_keys",
    "definition_sha256",
    "eval_pair_key",
    "identity",
    "model_part_key",
    "part_key",
    "ref_weights_sha256",
    "settings_hash",
    "sha256_cached",
    "tokenizer_sha256",
    "weights_sha256",
]

HUB_KEY = "hub"   # the third part of a hub revision's old batch key, <commit>-<settings>-hub
IDENTITY_COLUMNS = ("weights_sha256", "model_key", "model_spec")   # on every row of batch, eval and ablate


def weights_sha256(target: Target | ModelSource) -> str:
    """Hash of the weights alone (config.json excluded): one file's sha256, or a hash over a sharded HF
    checkpoint's files (name and sha256 of each); of a target's model or of a model source (interp.hf.sources)."""
    return getattr(target, "source", target).weights_sha256()


def ref_weights_sha256(ref: ModelSource) -> str:
    """weights_sha256 of a resolved model (interp.hf.sources): its weight file(s), a registry model's GGUF file, a
    fetched hub model's snapshot files; "" where none is on this machine (a hub id not fetched)."""
    return ref.weights_sha256()


def definition_sha256(target: Target | ModelSource) -> str:
    """Hash of the files besides the weights that define the model (name and sha256 of each); "" for a GGUF file,
    which holds everything itself."""
    return getattr(target, "source", target).definition_sha256()


def settings_hash(settings: dict[str, Any]) -> str:
    return json_sha256(settings)[:16]


def tokenizer_sha256(name: str | None) -> str:
    """Content hash of a --tokenizer that is a file or folder ("" for a name such as bpe, or None)."""
    path = Path(name).expanduser() if name else None
    if path is None or not path.exists():
        return ""
    files = [path] if path.is_file() else sorted(f for f in path.iterdir() if f.is_file())
    return json_sha256([[f.name, sha256_cached(f)] for f in files])


def identity(weights: str, model_key: str, spec: str) -> dict[str, str]:
    """The IDENTITY_COLUMNS of a model's rows: its weights' hash ("" for a hub revision not fetched), its content
    key (ModelSource.content_key) and its spec as the plan names it (a path, a registry name, HUB_ID@REVISION)."""
    return dict(zip(IDENTITY_COLUMNS, (weights, model_key, spec), strict=True))


def model_part_key(model_key: str, settings: str) -> str:
    """The part of one model (its content key) at one setting (settings_hash): every command's part name."""
    return f"{hashlib.sha256(model_key.encode()).hexdigest()[:16]}-{settings}"


def eval_pair_key(model_key: str, settings: dict[str, Any]) -> str:
    """The name an eval part had before model_part_key (an alias: such parts are done)."""
    return hashlib.sha256(f"{model_key}|{json_sha256(settings)}".encode()).hexdigest()[:20]


def ablation_keys(source: ModelSource, model_key: str, settings: str) -> list[str]:
    """The names an ablation part of this model could have had before model_part_key (aliases: such a part is
    done), each of its content: <weights[:32]>-<settings> (a path's; a run folder's final model's), <model
    key[:32]>-<settings> (a registry model's), hub-<hash of id@commit>-<settings> (a hub revision's)."""
    weights = source.weights_sha256()
    keys = [model_key[:32], *([weights[:32]] if weights else [])]
    if source.pinned_key():
        keys.append(f"hub-{text_sha256(f'{source.hub_id}@{source.commit}')[:27]}")
    return [f"{key}-{settings}" for key in keys]


def part_key(weights: str, settings: str, definition: str) -> str:
    """The name a batch part had before model_part_key: <weights>-<settings>-<definition> (16 hex each); two parts
    when nothing but the weights defines the model (a GGUF file), as every key before the definition entered it."""
    return f"{weights[:16]}-{settings}" + (f"-{definition[:16]}" if definition else "")
