"""Loading a pretrained causal LM offline: LoadedModel, load_pretrained, load_tokenizer.

What a spec names is decided by interp.hf.resolve (the only resolver), and each kind of model is a class of
interp.hf.sources that calls one of the two loaders here; this module knows no kind:
  load_gguf         a GGUF file (a registry model's or a .gguf): dequantize it to fp32 once, then read the cache
                    (interp.hf.cache);
  load_dir          AutoModelForCausalLM.from_pretrained of a local folder (an HF directory, or a hub model's
                    snapshot that interp.hf.sources.hub fetched first).
Our own checkpoints are TaperedLMs, loaded by interp.training.checkpoints (interp.hf.sources.checkpoint).
Every from_pretrained call gets trust_remote_code explicitly (the source's, False unless the caller passed
trust_remote_code=True / --trust-remote-code), so transformers never prompts and never runs a directory's
Python files unasked; a GGUF file is checked for truncation before transformers parses it (gguf_file).
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from interp._util.devices import resolve_device_map
from interp._util.dtypes import MODEL_DTYPES, torch_dtype
from interp._util.errors import InputError, one_line
from interp._util.gguf_file import check_gguf
from interp._util.io import file_fingerprint, file_sha256, safetensors_header
from interp._util.paths import CONFIG_FILE
from interp.hf.adapters import SiteMap, layer_modules, site_map_or_none
from interp.hf.attention import attention_for
from interp.hf.cache import _cache_path, _drop_quantization_state, _save_cache, _valid_cache
from interp.hf.export import register_tapered_llama
from interp.hf.export_styles import EXPORT_MODEL_TYPES
from interp.model.weights import check_layer_count

if TYPE_CHECKING:
    from interp.hf.sources.base import ModelSource

# attn_implementation values that need nothing beyond torch; any other (flash_attention_2, flex_attention, a kernels
# hub id) may be refused by transformers for a missing package or an architecture without it (_attn_error)
BUILTIN_ATTENTION = ("eager", "sdpa")


@dataclass
class LoadedModel:
    """An HF causal LM (fp32 unless asked otherwise, eval mode) with what the probes need to hook it."""

    model: nn.Module
    tokenizer: Any
    name: str            # registry name, or the path / hub id as given
    source: str          # resolved file/dir path or hub id the weights came from
    architecture: str    # type(model).__name__
    sites: SiteMap | None             # None: no residual map (evaluation needs none; the probes say why)
    from_cache: bool = False          # weights read from the dequantized safetensors cache
    timings: dict[str, float] = field(default_factory=dict)  # {"model_s", "tokenizer_s", "total_s"}
    ref: ModelSource | None = None    # what was loaded (a hub model's: with its revision and commit)

    def n_layers(self) -> int:
        return len(layer_modules(self))

    @property
    def d_model(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def d_mlp(self) -> int:
        """MLP width (uniform in every HF model we know; GPT-2 stores None for its default 4 * d_model)."""
        cfg = self.model.config
        return int(getattr(cfg, "intermediate_size", None) or getattr(cfg, "n_inner", None) or 4 * self.d_model)


@dataclass(frozen=True)
class GgufWeights:
    """A GGUF model: the name of its cache folder, its file and a cheap key of its weights."""

    cache_name: str
    locate: Callable[[], Path]      # may assemble the file (Gemma3), so called only on a cache miss
    cache_key: Callable[[], str]

    @classmethod
    def of_file(cls, path: Path) -> GgufWeights:
        """A .gguf file's: cached under its stem, keyed by its fingerprint (size, mtime)."""
        path = path.resolve()
        return cls(path.stem, lambda: path, lambda: file_fingerprint(path))

    def cache_path(self) -> Path:
        return _cache_path(self.cache_name, self.cache_key())


def _checked_gguf(gguf: GgufWeights) -> Path:
    """The GGUF file, checked complete (a cache miss is about to parse it; InputError names a damaged one)."""
    file = gguf.locate()
    check_gguf(file)
    return file


def _register_if_ours(where: str) -> None:
    """register_tapered_llama() when `where` holds an `interp export` folder (or its config cannot be read):
    importing our modeling classes costs ~2 s, once per process, that any other model would pay for nothing."""
    import json

    try:
        model_type = json.loads((Path(where) / CONFIG_FILE).read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        model_type = None
    if model_type is None or model_type in EXPORT_MODEL_TYPES:
        register_tapered_llama()


def _check_config(where: str, trust_remote_code: bool) -> Any:
    """Parse a local HF directory's config.json the way transformers will, so a field of the wrong type is
    one error naming the file (transformers raises huggingface_hub's StrictDataclassError, not a ValueError);
    returns the parsed config (PretrainedConfig)."""
    from huggingface_hub.errors import StrictDataclassError
    from transformers import AutoConfig

    _register_if_ours(where)
    try:
        return AutoConfig.from_pretrained(where, trust_remote_code=trust_remote_code, local_files_only=True)
    except (StrictDataclassError, TypeError, KeyError) as err:
        raise InputError(f"not a valid model config ({one_line(err)}); fix the field or re-save the model",
                         path=Path(where) / CONFIG_FILE) from err


def _check_weight_headers(where: str, config: Any = None) -> None:
    """Every *.safetensors file of a folder checked against the format before transformers reads it (a header
    that lies about dtypes, shapes or offsets is one InputError naming the file and the tensor, not a Rust
    panic or a model that loads other bytes); given the folder's parsed config, the layers it declares checked
    against those the weights hold (_check_layer_count), before transformers builds and initialises them."""
    names: list[str] = []
    for file in sorted(Path(where).glob("*.safetensors")):
        names.extend(safetensors_header(file, InputError))
    if config is not None and names:   # pickled weights (.bin) have no header to read the names from cheaply
        _check_layer_count(where, config, names)


# model_type -> the config field that counts the entries of its numbered layer list, where num_hidden_layers does not
# (tests/hf/test_load_checks.py walks every causal LM transformers builds, so the table cannot go stale)
LAYER_COUNT_FIELDS = {
    "longcat_flash": "num_layers",            # num_hidden_layers is derived: 2 * num_layers (two sub-layers each)
    "hrm_text": "num_layers_per_stack",       # num_hidden_layers is rewritten to the steps of its recurrence
}


def _check_layer_count(where: str, config: Any, names: list[str]) -> None:
    """InputError naming config.json and its layer field (n_layer for GPT-2, text_config.num_hidden_layers for a
    model with a vision tower, ...) when it declares more decoder layers than any numbered module list of the weight
    names reaches (interp.model.weights.check_layer_count)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    name = LAYER_COUNT_FIELDS.get(getattr(text, "model_type", ""), "num_hidden_layers")
    claimed = getattr(text, name, None)
    if not isinstance(claimed, int) or isinstance(claimed, bool):
        return
    field = type(text).attribute_map.get(name, name)
    nested = next((key for key in getattr(config, "sub_configs", None) or {} if getattr(config, key, None) is text),
                  None)
    check_layer_count(names, claimed, path=Path(where) / CONFIG_FILE, field=f"{nested}.{field}" if nested else field,
                      fix=f"set {field} to the number of layers the weights hold, or re-save the model")


def _from_pretrained(where: str, gguf_file: str | None, dtype: torch.dtype | str, attn_implementation: str,
                     timings: dict[str, float], trust_remote_code: bool = False, device_map: DeviceMap = None):
    """Tokenizer and model from a directory / hub id (with gguf_file: dequantize that GGUF to fp32); device_map
    places the layers through accelerate (placement_options)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _register_if_ours(where)  # `interp export` folders load with the installed classes, never their code copy
    placement = placement_options(device_map, where, trust_remote_code)   # checked before the tokenizer and weights
    start = time.perf_counter()
    # local_files_only: nothing is downloaded, and a hub id missing from the cache fails at once (not after
    # huggingface_hub's ~50 s of retries when there is no network)
    tokenizer = (auto_tokenizer(where, trust_remote_code) if gguf_file is None else
                 AutoTokenizer.from_pretrained(where, gguf_file=gguf_file, trust_remote_code=trust_remote_code,
                                               local_files_only=True))
    timings["tokenizer_s"] = time.perf_counter() - start
    start = time.perf_counter()
    # an architecture without an sdpa path (Gemma-2's soft-capped scores) falls back to eager, and says so
    attn_implementation = attention_for(where if gguf_file is None else None, attn_implementation, trust_remote_code)
    options = dict(dtype=dtype, attn_implementation=attn_implementation, trust_remote_code=trust_remote_code,
                   local_files_only=True, **placement)
    try:
        if gguf_file is None:
            # a directory: weights that are missing or do not fit config.json would be initialised at random
            # (silently, or after a traceback); ask for the report and refuse them with the first one named
            model, info = AutoModelForCausalLM.from_pretrained(where, output_loading_info=True,
                                                               ignore_mismatched_sizes=True, **options)
            _check_loading(where, info)
        else:
            model = AutoModelForCausalLM.from_pretrained(where, gguf_file=gguf_file, **options)
    except pickle.UnpicklingError:   # weights_only refused a pickled object: it never ran
        pickled = sorted(f.name for f in Path(where).glob("*") if f.suffix in (".bin", ".pt", ".pth", ".ckpt"))
        raise InputError(f"{', '.join(pickled) or 'a weight file'} holds pickled objects that are not plain tensors "
                         "(torch.load with weights_only=True refused them, so nothing in it ran); interp never runs "
                         "pickled code", path=where,
                         fix="use safetensors weights from a source you trust (or convert a trusted copy with "
                             "save_pretrained(..., safe_serialization=True))") from None
    except (ImportError, ValueError) as err:
        if attn_implementation in BUILTIN_ATTENTION or isinstance(err, InputError) or (
                isinstance(err, ValueError) and not any(w in str(err).lower() for w in ("attention", "attn"))):
            raise
        raise _attn_error(attn_implementation, err) from err
    timings["model_s"] = time.perf_counter() - start
    return model, tokenizer


def _attn_error(attn_implementation: str, err: Exception) -> InputError:
    """InputError naming the field when transformers refuses an attention implementation: its package is missing
    (flash_attention_2 without flash-attn: an ImportError) or the architecture has none (a ValueError)."""
    cause = (str(err).strip().splitlines() or [type(err).__name__])[0]
    cause = cause.split("following error:")[-1].strip()  # "FlashAttention2 has been toggled on, but ... error: "
    cause = cause.split(". ")[0].rstrip(".")[:200]
    return InputError(f"{attn_implementation!r} cannot be used: {cause}", field="attn_implementation",
                      fix="use sdpa or eager; flash_attention_2 needs the flash-attn package and a CUDA GPU")


def _check_loading(where: str, info: dict[str, Any]) -> None:
    """InputError naming the directory when from_pretrained left weights at their random initialisation."""
    mismatched = sorted(info.get("mismatched_keys") or (), key=lambda item: item[0])
    if mismatched:
        key, saved, expected = mismatched[0]
        raise InputError(f"{len(mismatched)} weight(s) do not fit {CONFIG_FILE}: {key} has shape {tuple(saved)} in "
                         f"the weight files but {tuple(expected)} in the model {CONFIG_FILE} describes; fix the "
                         "config or re-save the model", path=where)
    missing = sorted(info.get("missing_keys") or ())
    if missing:
        raise InputError(f"{len(missing)} weight(s) missing from the weight files ({', '.join(missing[:3])}"
                         f"{', ...' if len(missing) > 3 else ''}); they would be initialised at random: re-save "
                         "the model", path=where)


def gguf_tokenizer(gguf: GgufWeights) -> Any:
    """The tokenizer load_gguf pairs with the model, without loading the weights (reads the cache when it is
    valid)."""
    from transformers import AutoTokenizer

    path = gguf.cache_path()
    if _valid_cache(path):
        return auto_tokenizer(str(path))
    file = _checked_gguf(gguf)
    return AutoTokenizer.from_pretrained(file.parent, gguf_file=file.name, trust_remote_code=False,
                                         local_files_only=True)


def dir_tokenizer(folder: Path, trust_remote_code: bool = False) -> Any:
    """The tokenizer load_dir pairs with the model of a local HF folder, without loading the weights."""
    where = str(folder.resolve())
    _check_config(where, trust_remote_code)
    return auto_tokenizer(where, trust_remote_code)


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".msgpack", ".h5", ".ckpt", ".onnx")
_TOKENIZERS: dict[str, Any] = {}   # content key -> tokenizer; a checkpoint series shares one (Pythia: 154 revisions)
_TOKENIZERS_KEPT = 4


def auto_tokenizer(folder: str, trust_remote_code: bool = False) -> Any:
    """AutoTokenizer.from_pretrained(folder), shared between folders whose non-weight files are identical (the
    revisions of a series, a model and its tokenizer check): loading a 50k-vocabulary tokenizer takes ~0.3 s,
    a tenth of probing a small revision. The object is shared: callers must not change it. Remote-code
    tokenizers are never shared."""
    import hashlib

    from transformers import AutoTokenizer

    def load() -> Any:
        return AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code, local_files_only=True)

    root = Path(folder)
    if trust_remote_code or not root.is_dir():
        return load()
    digest = hashlib.sha256()
    for path in sorted(p for p in root.iterdir() if p.is_file() and p.suffix not in WEIGHT_SUFFIXES):
        digest.update(f"{path.name}\0{file_sha256(path)}\n".encode())
    key = digest.hexdigest()
    if key not in _TOKENIZERS:
        while len(_TOKENIZERS) >= _TOKENIZERS_KEPT:
            _TOKENIZERS.pop(next(iter(_TOKENIZERS)))
        _TOKENIZERS[key] = load()
    return _TOKENIZERS[key]


DeviceMap = str | dict[str, Any] | None


def placement_options(device_map: DeviceMap, where: str, trust_remote_code: bool = False) -> dict[str, Any]:
    """from_pretrained's device_map (an accelerate strategy of DEVICE_MAPS, or {module: device | "cpu" | "disk"},
    its devices checked to exist here and its modules against the model's structure: check_device_map_modules)
    and, when some layers may go to disk, an offload folder of their own under cache_dir("offload")."""
    device_map = resolve_device_map(device_map)
    if device_map is None:
        return {}
    check_device_map_modules(device_map, where, trust_remote_code)
    import hashlib

    from interp._util.paths import cache_dir

    folder = cache_dir("offload") / hashlib.sha256(str(where).encode()).hexdigest()[:16]
    return {"device_map": device_map, "offload_folder": str(folder)}


def check_device_map_modules(device_map: DeviceMap, where: str, trust_remote_code: bool = False) -> None:
    """A {module: device} map's keys checked against the model of `where` built on the meta device from its
    config.json (what from_pretrained itself builds before it reads a weight; no memory, no weights): a key that
    names no module (transformers would ignore it and load the model on the CPU) or a weight no key places (accelerate
    refuses it only after loading) is one InputError naming --device-map. A strategy (auto, ...) needs no check."""
    if not isinstance(device_map, dict) or set(device_map) == {""}:
        return
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.initialization import no_init_weights

    config = AutoConfig.from_pretrained(where, trust_remote_code=trust_remote_code, local_files_only=True)
    try:
        with torch.device("meta"), no_init_weights():
            model = AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code)
    except Exception:  # noqa: BLE001 - a class that cannot be built on meta: from_pretrained places it unchecked
        return
    modules = dict(model.named_modules())
    tops = ", ".join(name for name, _ in model.named_children())
    unknown = [key for key in device_map if key and key not in modules]
    if unknown:
        raise InputError(f"{unknown[0]!r} names no module of {type(model).__name__}"
                         + (f" (nor do {len(unknown) - 1} more keys)" if len(unknown) > 1 else ""), field="device_map",
                         path=where, fix=f"key --device-map by its module names ({tops}, and their children such as "
                                         "model.layers.0), or \"\" for the whole model")
    if "" not in device_map:
        unplaced = [name for name in model.state_dict()
                    if not any(name == key or name.startswith(key + ".") for key in device_map)]
        if unplaced:
            raise InputError(f"places no module holding {unplaced[0]}"
                             + (f" (nor {len(unplaced) - 1} more weights)" if len(unplaced) > 1 else ""),
                             field="device_map", path=where,
                             fix="add its module to --device-map, or a \"\" key for every module not named")


def torch_load_dtype(name: str) -> torch.dtype | str:
    """The load precision of --model-dtype: "auto" (the checkpoint's own, transformers' dtype="auto"), else
    torch.float32 / bfloat16 / float16."""
    if name == "auto":
        return "auto"
    if name not in MODEL_DTYPES:
        raise InputError(f"{name!r} is not a load precision", field="model_dtype", fix=f"use one of {MODEL_DTYPES}")
    return torch_dtype(name)


def load_gguf(gguf: GgufWeights, ref: ModelSource, dtype: torch.dtype | str = torch.float32, use_cache: bool = True,
              attn_implementation: str = "eager", device_map: DeviceMap = None) -> LoadedModel:
    """The LoadedModel of a GGUF model (a registry model's file or a .gguf; see interp.hf.load_pretrained): the
    dequantized fp32 cache when valid, else the file dequantized (and cached unless use_cache=False)."""
    dtype, device_map = _load_options(dtype, device_map)
    start = time.perf_counter()
    timings: dict[str, float] = {}
    from_cache = False
    path = gguf.cache_path()
    gguf_dtype = torch.float32 if dtype == "auto" else dtype   # a GGUF's dequantized weights are fp32
    if device_map is not None and not _valid_cache(path):   # placed layers are read from the fp32 cache
        if not use_cache:
            raise InputError("a device map reads a GGUF model from its dequantized cache", field="device_map",
                             fix="drop use_cache=False, or the device map")
        load_gguf(gguf, ref, use_cache=True, attn_implementation=attn_implementation)   # writes the cache
    if use_cache and _valid_cache(path):
        source = str(path)
        model, tokenizer = _from_pretrained(source, None, gguf_dtype, attn_implementation, timings,
                                            device_map=device_map)
        from_cache = True
    else:
        file = _checked_gguf(gguf)
        # GGUF dequantizes to fp32; cache that, then cast, so one cache serves every dtype.
        model, tokenizer = _from_pretrained(str(file.parent), file.name, torch.float32,
                                            attn_implementation, timings)
        _drop_quantization_state(model)
        if use_cache:
            _save_cache(model, tokenizer, path, origin={"gguf": str(file), "key": path.name})
        model = model.to(gguf_dtype)
        source = str(file)
    return _loaded(model, tokenizer, ref, source, start, timings, from_cache)


def load_dir(folder: Path, ref: ModelSource, dtype: torch.dtype | str = torch.float32, use_cache: bool = True,
             attn_implementation: str = "eager", device_map: DeviceMap = None) -> LoadedModel:
    """The LoadedModel of a local Hugging Face folder (an HF directory, or a hub model's fetched snapshot), its
    config and weight headers checked first; use_cache does not apply (accepted for one signature)."""
    dtype, device_map = _load_options(dtype, device_map)
    start = time.perf_counter()
    timings: dict[str, float] = {}
    source = str(folder.resolve())
    _check_weight_headers(source, _check_config(source, ref.trust_remote_code))
    model, tokenizer = _from_pretrained(source, None, dtype, attn_implementation, timings, ref.trust_remote_code,
                                        device_map)
    return _loaded(model, tokenizer, ref, source, start, timings, False)


def _load_options(dtype: torch.dtype | str, device_map: DeviceMap) -> tuple[torch.dtype | str, DeviceMap]:
    """The load precision and device map, checked: a device that is not here fails before any file is read."""
    return (torch_load_dtype(dtype) if isinstance(dtype, str) else dtype), resolve_device_map(device_map)


def _loaded(model: nn.Module, tokenizer: Any, ref: ModelSource, source: str, start: float,
            timings: dict[str, float], from_cache: bool) -> LoadedModel:
    model.eval()
    # GGUF-loaded configs lack `architectures`; TransformerBridge (Gemma3) reads it to pick an adapter.
    model.config.architectures = [type(model).__name__]
    timings["total_s"] = time.perf_counter() - start
    return LoadedModel(model=model, tokenizer=tokenizer, name=ref.spec, source=source,
                       architecture=type(model).__name__, sites=site_map_or_none(model),
                       from_cache=from_cache, timings=timings, ref=ref)

