"""ModelSource: one resolved model spec, whatever its kind. Each kind is a subclass (interp.hf.sources: registry,
gguf, checkpoint, hf_dir, hub) that knows its label, the files that define it, its table columns, how it is loaded
and what its context is; code elsewhere asks a source, never compares its kind (a string kept for tables and
messages).

The base holds what most kinds share: the loaders of a pretrained model (load, load_tokenizer, load_placed go
through load_pretrained / pretrained_tokenizer, which each kind implements), no columns beyond the model's, no
context before loading.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from interp._util.io import file_sha256, read_json
from interp._util.paths import cache_dir

HF_WEIGHT_PATTERNS = ("*.safetensors", "*.bin")
NOT_DEFINING = (".parquet", ".csv", ".md")  # files in an HF dir that define no model (tables written beside it)


class ModelResolutionError(ValueError):
    """A model spec that names nothing loadable; the message says what was checked and the fix."""


@dataclass(frozen=True)
class ModelSource:
    """A resolved model spec: what kind of model it is (the subclass) and where."""

    spec: str             # as given
    path: Path | None     # the file or directory (None for registry names and hub ids not fetched)
    trust_remote_code: bool = False   # passed to every from_pretrained call (never None: no prompt)
    hub_id: str = ""      # a hub model's repo id (a TransformerLens alias resolved)
    revision: str | None = None   # a hub model's revision asked for (None: main)
    commit: str = ""      # a hub model's commit sha the revision resolved to (set before fetching: pinned to it)

    kind: ClassVar[str] = ""          # the table's `kind` column: data, never a switch outside interp.hf.sources

    # ---------------------------------------------------------------- naming
    @property
    def label(self) -> str:
        """Short name for tables: the registry name / hub id as given, else the file or directory name."""
        return self.path.name if self.path is not None else self.spec

    @property
    def model_column(self) -> str:
        """The `model` column of a probe table: the spec as given (our checkpoints and hub models: the label)."""
        return self.spec

    @property
    def checkpoint(self) -> str:
        """The `checkpoint` column of result tables: our checkpoint's path as given, "" otherwise."""
        return ""

    def table_columns(self) -> dict[str, Any]:
        """Columns a row of this model carries besides the model's name (a hub model: revision and commit)."""
        return {}

    # ---------------------------------------------------------------- content
    def weights_files(self) -> list[Path]:
        """The weight file(s) on this machine; [] where none is here yet (a hub model not fetched)."""
        return []

    def definition_files(self) -> list[tuple[str, Path]]:
        """(name in the hash, file) of everything besides the weights that defines the model: interp.jobs.keys."""
        return []

    def weights_sha256(self) -> str:
        """Hash of the weights alone: one file's sha256, or a hash over a sharded checkpoint's files (name and
        sha256 of each); "" where no weight file is here yet."""
        files = self.weights_files()
        if not files:
            return ""
        return sha256_cached(files[0]) if len(files) == 1 else files_sha256([(f.name, f) for f in files])

    def definition_sha256(self) -> str:
        """Hash of definition_files (name and sha256 of each); "" where the weights define everything."""
        named = self.definition_files()
        return files_sha256(named) if named else ""

    def content_key(self) -> str:
        """The one key of this model's content, the `model_key` column of every table (probe batch, eval, ablate)
        and, with a command's settings, the name of its parts (interp.jobs.keys.model_part_key): a hash of the
        weights and what defines the model beside them. The kinds keep the keys their eval parts had."""
        return hashlib.sha256(f"{self.weights_sha256()} {self.definition_sha256()}".encode()).hexdigest()

    def older_content_keys(self) -> list[str]:
        """Content keys this model had under an earlier rule (aliases a rerun recognises its parts by)."""
        return []

    def pinned_key(self) -> str:
        """What identifies the weights before any file is read ("" where only the files can: every kind but a hub
        revision, which its commit names)."""
        return ""

    def pinned(self) -> ModelSource:
        """This source with what names its content resolved now (a hub revision: its commit, one request for the
        repo's refs; offline, the cache's); every other kind as it is."""
        return self

    def checked(self) -> ModelSource:
        """This source, refused (ModelResolutionError) where it asks to run code it was not trusted to (an HF
        directory's auto_map); every other kind as it is."""
        return self

    # ---------------------------------------------------------------- loading
    def fetched(self) -> ModelSource:
        """This source with its files on the local disk (a hub model's snapshot); every other kind as it is."""
        return self

    def load_pretrained(self, **kwargs: Any) -> Any:
        """The LoadedModel (interp.hf.load) of a pretrained model: kwargs dtype, use_cache, attn_implementation,
        device_map."""
        raise NotImplementedError

    def pretrained_tokenizer(self) -> Any:
        """The tokenizer load_pretrained pairs with the model, without loading weights."""
        raise NotImplementedError

    def load(self, **kwargs: Any) -> Any:
        """TaperedLM (our checkpoints, eval mode, as saved) or LoadedModel (everything else; kwargs go to
        interp.hf.load_pretrained: dtype, use_cache, attn_implementation)."""
        return self.load_pretrained(**kwargs)

    def load_tokenizer(self) -> Any:
        """The tokenizer load() pairs with the model, without loading weights."""
        return self.pretrained_tokenizer()

    def tokenizer_for(self, loaded: Any) -> Any:
        """The tokenizer of a model load() returned: a LoadedModel carries its own."""
        return loaded.tokenizer

    def load_placed(self, device: str = "cpu", model_dtype: str = "float32", device_map: Any = None,
                    **kwargs: Any) -> Any:
        """load() in `model_dtype` (--model-dtype), on `device` (a resolve_device string) or placed by `device_map`
        (accelerate; then not moved): what probe, ablate and eval all load through."""
        from interp._util.devices import to_device

        model = self.load(dtype=model_dtype, device_map=device_map, **kwargs)
        return model if device_map is not None else to_device(model, device)

    def context_length(self) -> int | None:
        """The model's context (positions) read from its config alone, before any weights load; None where only a
        load can tell (a .gguf, a registry model, a hub model not yet fetched)."""
        return None


def plain_files(folder: Path) -> list[Path]:
    return sorted(f for f in folder.iterdir() if f.is_file() and not f.name.startswith("."))


def hf_weight_files(folder: Path) -> list[Path]:
    return sorted({f for pattern in HF_WEIGHT_PATTERNS for f in folder.glob(pattern)})


def read_config(folder: Path, name: str) -> Any:
    """The JSON of `folder / name`, or None when it is missing or unreadable (reported when it is loaded)."""
    try:
        return read_json(folder / name, missing_ok=True, torn_ok=True)
    except (OSError, ValueError):  # a directory, no permission, bytes that are not UTF-8
        return None


def sha256_cached(path: str | Path) -> str:
    """file_sha256 remembered under cache_dir("hashes") until the file's size or mtime changes."""
    return file_sha256(path, cache_dir("hashes"))


def files_sha256(named: list[tuple[str, Path]]) -> str:
    """One hash over files: the name and sha256 of each, a line each."""
    lines = "".join(f"{name} {sha256_cached(f)}\n" for name, f in named)
    return hashlib.sha256(lines.encode()).hexdigest()
