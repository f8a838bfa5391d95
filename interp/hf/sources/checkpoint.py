"""One of our checkpoint directories (config.json says so: interp.training.checkpoints.is_interp_config): a
TaperedLM loaded as saved, with the tokenizer its training config names."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp._util.errors import InputError
from interp._util.paths import CONFIG_FILE, WEIGHTS_FILE
from interp.hf.sources.base import (
    ModelResolutionError,
    ModelSource,
    files_sha256,
    plain_files,
    read_config,
    sha256_cached,
)


@dataclass(frozen=True)
class CheckpointSource(ModelSource):
    """One of our checkpoints: the weights (model.safetensors) and config.json of a run or a step of one."""

    kind = "checkpoint"

    @property
    def model_column(self) -> str:
        return self.label

    @property
    def checkpoint(self) -> str:
        return self.spec

    def weights_files(self) -> list[Path]:
        return [self.path / WEIGHTS_FILE]

    def definition_files(self) -> list[tuple[str, Path]]:
        """config.json (widths, tokenizer name and hash, run, step) and the tokenizer file or folder its
        train.tokenizer names."""
        return [(CONFIG_FILE, self.path / CONFIG_FILE), *_tokenizer_files(self.path)]

    def content_key(self) -> str:
        """The weights' hash and config.json's, and the hash of the tokenizer files its train.tokenizer names where
        it names files (a built-in tokenizer is defined by the config's own fields)."""
        tokenizer = _tokenizer_files(self.path)
        return self._key(*([files_sha256(tokenizer)] if tokenizer else []))

    def older_content_keys(self) -> list[str]:
        """The key evaluations had before the tokenizer files entered it (the same where there are none)."""
        return [self._key()] if _tokenizer_files(self.path) else []

    def _key(self, *more: str) -> str:
        return hashlib.sha256(" ".join([self.weights_sha256(), sha256_cached(self.path / CONFIG_FILE), *more])
                              .encode()).hexdigest()

    def load_pretrained(self, **kwargs: Any) -> Any:
        raise ModelResolutionError(
            f"{self.path}: one of our tapered checkpoints, not a pretrained model; load it with "
            f"interp.training.checkpoints.load_checkpoint, or interp.hf.resolve_model({self.spec!r}).load() / "
            f".load_tokenizer() (the probes and ablations accept both)")

    pretrained_tokenizer = load_pretrained

    def load_tokenizer(self) -> Any:
        from interp.training import checkpoints

        return checkpoint_tokenizer(checkpoints.read_config(self.path), str(self.path))

    def tokenizer_for(self, loaded: Any) -> Any:
        return self.load_tokenizer()

    def load(self, **kwargs: Any) -> Any:
        """The TaperedLM, eval mode, as saved. It computes attention with its own modules (torch's
        scaled_dot_product_attention), so of the kwargs only attn_implementation "sdpa" / "eager" (or None) is
        accepted, and changes nothing; any other (flash_attention_2, flex_attention, ...) is an InputError naming
        the field rather than silently ignored. dtype and use_cache do not apply (cast it with .to(dtype))."""
        from interp.training import checkpoints

        attn = kwargs.get("attn_implementation")
        if attn not in (None, "sdpa", "eager"):
            raise InputError(f"{attn!r} applies to Hugging Face models only; one of our checkpoints always "
                             "computes attention with its own modules (torch scaled_dot_product_attention)",
                             path=self.path, field="attn_implementation", fix="use sdpa (or eager) for it")
        model, _config = checkpoints.load_checkpoint(self.path)
        return model.eval()

    def load_placed(self, device: str = "cpu", model_dtype: str = "float32", device_map: Any = None,
                    **kwargs: Any) -> Any:
        """Cast to `model_dtype` (auto: as saved) and moved to `device`; a device map is refused (it loads whole)."""
        from interp._util.devices import to_device
        from interp._util.dtypes import torch_dtype

        if device_map is not None:
            raise InputError("a device map places Hugging Face models only; one of our checkpoints loads whole",
                             path=self.path, field="device_map", fix="drop --device-map, or use --device")
        model = self.load(**kwargs)
        return to_device(model if model_dtype == "auto" else model.to(torch_dtype(model_dtype)), device)

    def context_length(self) -> int | None:
        """config.json's model.n_ctx."""
        config = read_config(self.path, CONFIG_FILE) if self.path.is_dir() else None
        model = config.get("model") if isinstance(config, dict) else None
        n_ctx = model.get("n_ctx") if isinstance(model, dict) else None
        return n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None


def _tokenizer_files(folder: Path) -> list[tuple[str, Path]]:
    """The tokenizer file, or the files of the tokenizer folder, that a checkpoint's train.tokenizer names."""
    config = read_config(folder, CONFIG_FILE)
    train = config.get("train") if isinstance(config, dict) else None
    name = train.get("tokenizer") if isinstance(train, dict) else None
    from interp.data.tokenizers import BUILTIN_TOKENIZERS

    if not isinstance(name, str) or name in BUILTIN_TOKENIZERS:
        return []  # a built-in tokenizer is defined by the config's own fields (and data.tokenizer_hash)
    path = Path(name).expanduser()
    files = [path] if path.is_file() else plain_files(path) if path.is_dir() else []
    return [(f"tokenizer/{f.name}", f) for f in files]


def checkpoint_tokenizer(config: dict, where: str) -> Any:
    """The tokenizer one of our checkpoints was trained with: rebuilt by interp.data.get_tokenizer from the
    training config (config.json `train`: tokenizer, vocab_size, source, val_fraction) and checked against
    the hash recorded with its token data (`data.tokenizer_hash`)."""
    from interp import data

    train = config.get("train") or {}
    name = train.get("tokenizer")
    if not name:
        raise ValueError(f"{where}: config.json has no train.tokenizer field, so its tokenizer is unknown; "
                         "pass tokenizer= (--tokenizer): a name for interp.data.get_tokenizer or a TextTokenizer")
    stored = config.get("data") or {}
    if stored.get("tokenizer_path"):  # trained from an `interp data tokenize` folder: its own copy of the tokenizer
        if not Path(stored["tokenizer_path"]).is_file():
            raise InputError("the tokenized folder this run was trained from is gone (its tokenizer copy is "
                             "missing)", path=stored["tokenizer_path"], field="config.json data.tokenizer_path",
                             fix="restore that folder, or pass --tokenizer (tokenizer=) with the tokenizer it used")
        name = stored["tokenizer_path"]
    tok = data.get_tokenizer(name, vocab_size=int(train.get("vocab_size", 8192)), source=train.get("source", "wiki"),
                             val_fraction=float(train.get("val_fraction", 0.05)))
    expected = stored.get("tokenizer_hash")
    if expected and getattr(tok, "hash", expected) != expected:
        raise ValueError(f"{where}: the rebuilt tokenizer {tok.name!r} has hash {tok.hash}, but the checkpoint was "
                         f"trained with {expected} (config.json data.tokenizer_hash); pass tokenizer= explicitly")
    return tok
