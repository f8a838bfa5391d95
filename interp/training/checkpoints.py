"""Atomic save / load / validate of a checkpoint directory: model.safetensors + config.json
(+ train_state.pt for resuming).

Why atomic: a run killed mid-save (pre-emption, Ctrl-C twice, full disk) must leave the previous
checkpoint loadable. Every file is written to a temporary name in the same directory, fsynced, and
then moved over the old one with os.replace (atomic on POSIX). The two checkpoint files are replaced
weights-first; a crash between the two replaces leaves new weights beside the previous config.json,
which within one run is the same document (config.json holds no step counter), so it still loads.

Resuming reads only train_state.pt, which holds the model weights too, so the state a run resumes
from is always one self-consistent file, whatever happened to the other two.

config.json must hold the model shape under the key "model" (ModelConfig.to_dict()); anything
else in it (training config, widths, data metadata, provenance) is the caller's.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_model, save_model

from interp._util.errors import InputError, one_line
from interp._util.io import PathLike, atomic_write, read_json, safetensors_header, write_json_atomic  # noqa: F401 (re-exported)
from interp._util.paths import CONFIG_FILE, TRAIN_STATE_FILE, WEIGHTS_FILE
from interp._util.schema import Field, Schema, inside, list_of, non_negative, positive
from interp.model import ModelConfig, TaperedLM
from interp.model.weights import check_layer_count


class CheckpointError(InputError):
    """A checkpoint directory that cannot be loaded; the message names the file, the field and the fix."""


# -------------------------------------------------------------------------------- model checkpoints

def _model_config(model: TaperedLM) -> ModelConfig:
    cfg = getattr(model, "cfg", None)
    if not isinstance(cfg, ModelConfig):
        raise TypeError(f"save_checkpoint: model {type(model).__name__} has no ModelConfig at .cfg; "
                        "pass an interp.model.TaperedLM (unwrap DDP with .module first)")
    return cfg


def save_checkpoint(dir: PathLike, model: TaperedLM, config: dict) -> None:
    """Write dir/model.safetensors and dir/config.json atomically; config["model"] is set from model.cfg.

    Weights are saved in their current dtype (fp32 master weights in training); tied embeddings are
    stored once (safetensors.torch.save_model removes shared-tensor duplicates). config.json starts with
    the format marker {FORMAT_KEY: FORMAT}, which tells it from a Hugging Face config (is_interp_config).
    """
    model_cfg = _model_config(model).to_dict()
    if "model" in config and config["model"] != model_cfg:
        raise ValueError("save_checkpoint: config['model'] differs from model.cfg.to_dict(); "
                         "drop the 'model' key and let save_checkpoint fill it in")
    config = {FORMAT_KEY: FORMAT, **config, "model": model_cfg}
    config[FORMAT_KEY] = FORMAT  # a config read back from an older format is re-marked as this one
    text = json.dumps(config, indent=2) + "\n"
    atomic_write(dir, {
        WEIGHTS_FILE: lambda p: save_model(model, str(p)),
        CONFIG_FILE: lambda p: p.write_text(text),
    })


FORMAT_KEY = "interp_format"       # config.json marker written by save_checkpoint
FORMAT = "interp.checkpoint/1"     # bump the suffix when the directory layout changes


def is_interp_config(config: Any) -> bool:
    """Whether a parsed config.json describes one of OUR checkpoints, by what it says, not by file names:
    the format marker, or (checkpoints written before the marker existed) a "model" dict holding d_mlp
    and no Hugging Face "model_type"/"architectures". A Hugging Face `save_pretrained` directory also has
    config.json + model.safetensors, so file names alone cannot tell the two apart."""
    if not isinstance(config, dict):
        return False
    if config.get(FORMAT_KEY) is not None:
        return True
    model = config.get("model")
    return (isinstance(model, dict) and "d_mlp" in model
            and "model_type" not in config and "architectures" not in config)


def is_checkpoint_dir(path: PathLike) -> bool:
    """True if `path` holds both checkpoint files and its config.json is ours (is_interp_config) or cannot
    be parsed (then it is reported when loaded, not mistaken for a Hugging Face directory). Not whether the
    checkpoint is valid: see validate_checkpoint."""
    path = Path(path)
    if not ((path / WEIGHTS_FILE).is_file() and (path / CONFIG_FILE).is_file()):
        return False
    try:
        config = read_json(path / CONFIG_FILE)
    except (OSError, ValueError):
        return True
    return is_interp_config(config) or not isinstance(config, dict) or not (
        "model_type" in config or "architectures" in config)


# The blocks of config.json that interp itself reads back (save_checkpoint's callers may add any other key).
# `model` is checked field by field by ModelConfig.from_dict + validate (_model_config_from); here only its type.
_CONFIG_FIX = "restore config.json from a copy, or re-save the checkpoint"
CONFIG_SCHEMA = Schema(CONFIG_FILE, {
    "model": Field(dict),
    "train": Field(dict, required=False, nullable=True),
    "data": Field(dict, required=False, nullable=True),
    "step": Field(int, required=False, check=non_negative),
    "tokens": Field(int, required=False, check=non_negative),
}, fix=_CONFIG_FIX)
# config.json `train` (TrainConfig.to_dict()): the fields rebuilding the tokenizer and comparing runs read.
# `source` is never null: TrainConfig writes its corpus (a name or an absolute path), which a "bpe" tokenizer is
# rebuilt from; a null one would reach every reader (probe, eval, export) as a path of None (issue #47 item 17).
TRAIN_BLOCK = Schema(f"{CONFIG_FILE} train", {
    "tokenizer": Field(str, required=False, nullable=True),
    "vocab_size": Field(int, required=False, check=positive),
    "source": Field(str, required=False),
    "val_fraction": Field((int, float), required=False,
                          check=lambda v: (0 <= v < 1) or "a fraction in [0, 1)"),
    "n_ctx": Field(int, required=False, check=positive),
    "steps": Field(int, required=False, check=non_negative),
    "seed": Field(int, required=False),
}, fix=_CONFIG_FIX)
# config.json `data` (TokenData.meta): what a resume compares and where the tokenizer copy lives
DATA_BLOCK = Schema(f"{CONFIG_FILE} data", {
    "tokenizer_path": Field(str, required=False, nullable=True),
    "tokenizer_hash": Field(str, required=False, nullable=True),
    "source_hash": Field(str, required=False, nullable=True),
    "tokenizer": Field(str, required=False, nullable=True),
    "source": Field(str, required=False, nullable=True),
    "n_tokens": Field((int, dict), required=False, nullable=True),
}, fix=_CONFIG_FIX)


def check_config(config: Any, path: PathLike) -> dict:
    """A parsed config.json of one of our checkpoints, checked against CONFIG_SCHEMA and its train/data blocks:
    the dict, or one CheckpointError (an InputError) naming the file and the field."""
    try:
        if not isinstance(config, dict):
            raise InputError(f"is a {type(config).__name__}, not an object", path=path, fix=_CONFIG_FIX)
        if "model" not in config:
            raise InputError("missing field 'model' (the ModelConfig.to_dict() of the weights); re-save with "
                             "interp.training.checkpoints.save_checkpoint", path=path, field="model")
        CONFIG_SCHEMA.validate(config, path)
        for key, schema in (("train", TRAIN_BLOCK), ("data", DATA_BLOCK)):
            if config.get(key) is not None:
                schema.validate(config[key], path, prefix=f"{key}.")
    except CheckpointError:
        raise
    except InputError as err:
        raise CheckpointError(str(err)) from None
    return config


def read_config(dir: PathLike) -> dict:
    """config.json of a checkpoint directory, checked (check_config), with errors that say which file is wrong
    and how."""
    path = Path(dir) / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; a checkpoint directory needs {CONFIG_FILE} and "
                                f"{WEIGHTS_FILE} (written by interp.training.checkpoints.save_checkpoint / `interp train`)")
    try:
        config = json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        raise CheckpointError(f"{path}: not valid JSON ({err}); the file is corrupt or was edited by hand: "
                              "restore it or re-save the checkpoint") from err
    return check_config(config, path)


def _model_config_from(config: dict, path: Path) -> ModelConfig:
    try:
        cfg = ModelConfig.from_dict(config["model"])
        cfg.validate()
    except (TypeError, KeyError, ValueError, AttributeError) as err:
        raise CheckpointError(f"{path}: field 'model' is not a valid ModelConfig ({err}); "
                              "fix the listed key or re-save the checkpoint") from err
    return cfg


def _config_field_for(tensor_name: str) -> str:
    """Which config.json field determines a tensor's shape, for error messages."""
    if m := re.match(r"blocks\.(\d+)\.mlp\.", tensor_name):
        return f"model.d_mlp[{m.group(1)}]"
    if tensor_name.startswith(("embed", "unembed")):
        return "model.vocab_size / model.d_model"
    return "model.d_model / model.n_heads"


def expected_shapes(cfg: ModelConfig) -> tuple[dict[str, tuple[int, ...]], set[str]]:
    """Tensor shapes the config implies (built on the meta device: no memory), and tied-alias names."""
    with torch.device("meta"):
        model = TaperedLM(cfg)
    state = model.state_dict(keep_vars=True)
    seen: dict[int, str] = {}
    aliases = set()
    for name, tensor in state.items():
        if id(tensor) in seen:
            aliases.update({name, seen[id(tensor)]})
        seen.setdefault(id(tensor), name)
    return {name: tuple(t.shape) for name, t in state.items()}, aliases


FLOAT_DTYPES = ("F32", "BF16", "F16", "F64")  # what save_checkpoint writes: a model's weights are floats


def validate_checkpoint(dir: PathLike) -> dict:
    """Check a checkpoint directory without loading the weights; return its config.

    Raises FileNotFoundError (missing file) or CheckpointError (unparsable JSON, missing 'model'
    field, invalid model config, truncated safetensors, unexpected/missing tensors, shape mismatch
    against the config's widths), each naming the file, the field and the fix.
    """
    dir = Path(dir)
    weights = dir / WEIGHTS_FILE
    config = read_config(dir)
    cfg = _model_config_from(config, dir / CONFIG_FILE)
    if not weights.is_file():
        raise FileNotFoundError(f"{weights}: missing; the checkpoint has {CONFIG_FILE} but no weights. "
                                "Re-save it, or point at a directory that holds both files")
    header = safetensors_header(weights, CheckpointError)
    # the layer count first, from the names alone: a config claiming 100,000 layers is not built, even on meta
    check_layer_count(header, cfg.n_layers, path=dir / CONFIG_FILE, field="model.n_layers", stack="blocks",
                      error=CheckpointError, fix="set it (and model.d_mlp) to the weights' layers, or restore "
                                                 "config.json from a copy")
    expected, aliases = expected_shapes(cfg)
    unexpected = sorted(set(header) - set(expected))
    if unexpected:
        raise CheckpointError(f"{weights}: tensors {unexpected[:5]} are not in a TaperedLM built from "
                              f"{dir / CONFIG_FILE} field 'model'; the weights belong to another model config")
    missing = sorted(n for n in set(expected) - set(header) if n not in aliases)
    if missing:
        raise CheckpointError(f"{weights}: missing tensors {missing[:5]} required by {dir / CONFIG_FILE} "
                              "field 'model'; the file is incomplete or from another model config")
    for name, info in header.items():
        if info["dtype"] not in FLOAT_DTYPES:
            raise CheckpointError(f"{weights}: tensor {name!r} is stored as {info['dtype']}, not a float dtype "
                                  f"({', '.join(FLOAT_DTYPES)}); the header lies about the data: re-save the "
                                  "checkpoint or restore it from a copy")
        if tuple(info["shape"]) != expected[name]:
            raise CheckpointError(
                f"{weights}: tensor {name!r} has shape {tuple(info['shape'])} but {dir / CONFIG_FILE} field "
                f"{_config_field_for(name)} implies {expected[name]}; the config does not describe these "
                "weights (fix the field or re-save the checkpoint)")
    return config


def load_checkpoint(dir: PathLike, map_location: str | torch.device = "cpu") -> tuple[TaperedLM, dict]:
    """Validate, build a TaperedLM from config.json and load model.safetensors into it (strict)."""
    config = validate_checkpoint(dir)
    model = TaperedLM(_model_config_from(config, Path(dir) / CONFIG_FILE))
    load_model(model, str(Path(dir) / WEIGHTS_FILE), strict=True, device=str(map_location))
    model.to(map_location)
    return model, config


def checkpoint_metadata(dir: PathLike) -> dict[str, str]:
    """The safetensors __metadata__ block (empty if none), without reading tensors."""
    with safe_open(str(Path(dir) / WEIGHTS_FILE), framework="pt") as f:
        return dict(f.metadata() or {})


# ----------------------------------------------------------------------------------------- train state

def save_train_state(dir: PathLike, state: dict) -> None:
    """Atomically write dir/train_state.pt (model + optimizer state, step, tokens, RNG states...).

    Keep `state` to tensors and plain Python values so load_train_state can use weights_only=True.
    """
    atomic_write(dir, {TRAIN_STATE_FILE: lambda p: torch.save(state, p)})


_STATE_FIX = ("restore it from a copy, or delete it and rerun with --resume to train the run again from step 0")


def _is_tensor(value: Any) -> bool | str:
    return isinstance(value, torch.Tensor) or "a tensor"


def _byte_state(value: Any) -> bool | str:
    """A CPU generator state: a 1-D uint8 tensor as long as torch's own."""
    ok = (isinstance(value, torch.Tensor) and value.dtype == torch.uint8 and value.dim() == 1
          and value.numel() == torch.Generator().get_state().numel())
    return ok or "a torch generator state (a 1-D uint8 tensor)"


def _python_rng(value: Any) -> bool | str:
    ok = (len(value) == 3 and type(value[0]) is int and isinstance(value[1], tuple) and len(value[1]) == 625
          and all(type(v) is int and 0 <= v < 2 ** 32 for v in value[1][:-1])
          and type(value[1][-1]) is int and 0 <= value[1][-1] <= 624
          and (value[2] is None or isinstance(value[2], float)))
    return ok or "random.getstate() (version, 625 ints, gauss)"


def _tensor_dict(value: Any) -> bool | str:
    return (all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in value.items())
            or "a dict of tensor names to tensors")


TRAIN_STATE_SCHEMA = Schema(TRAIN_STATE_FILE, {
    "step": Field(int, check=non_negative),
    "tokens": Field(int, check=non_negative),
    "elapsed_s": Field((int, float), check=non_negative),
    "train_loss": Field((int, float), required=False),      # nan before the first logged loss
    "rng": Field(dict),
    "data_generator": Field(torch.Tensor, check=_byte_state),
    "model": Field(dict, required=False, check=_tensor_dict),   # absent when "sharded" names the DCP folder
    "optimizer": Field(dict, required=False),
    "sharded": Field(str, required=False),
}, fix=_STATE_FIX)
RNG_SCHEMA = Schema(f"{TRAIN_STATE_FILE} rng", {
    "torch": Field(torch.Tensor, check=_byte_state),
    "python": Field(tuple, check=_python_rng),
    "numpy": Field(dict),
    "cuda": Field(list, check=list_of(torch.Tensor, "tensors")),
}, fix=_STATE_FIX)
NUMPY_RNG_SCHEMA = Schema(f"{TRAIN_STATE_FILE} rng.numpy", {
    "key": Field(str, check=lambda v: v == "MT19937" or "'MT19937'"),
    "keys": Field(torch.Tensor, check=lambda v: (v.dim() == 1 and v.numel() == 624 and not v.is_floating_point())
                  or "624 integers"),
    "pos": Field(int, check=lambda v: 0 <= v <= 624 or "an int in [0, 624]"),
    "has_gauss": Field(int, check=lambda v: v in (0, 1) or "0 or 1"),
    "cached_gaussian": Field((int, float)),
}, fix=_STATE_FIX)
OPTIMIZER_SCHEMA = Schema(f"{TRAIN_STATE_FILE} optimizer", {
    "state": Field(dict),
    "param_groups": Field(list, check=list_of(dict, "objects (parameter groups)")),
}, fix=_STATE_FIX)


def check_train_state(state: Any, path: PathLike, model: torch.nn.Module | None = None,
                      optimizer: torch.optim.Optimizer | None = None) -> dict:
    """A loaded train_state.pt checked against TRAIN_STATE_SCHEMA (and, given them, the model's parameter shapes
    and the optimizer's parameter groups): the dict, or one CheckpointError naming train_state.pt, the field and
    the fix. What passes can be restored without a KeyError, TypeError or shape error."""
    try:
        _check_train_state(state, path, model, optimizer)
    except CheckpointError:
        raise
    except InputError as err:
        raise CheckpointError(str(err)) from None
    return state


def _check_train_state(state: Any, path: PathLike, model: torch.nn.Module | None,
                       optimizer: torch.optim.Optimizer | None) -> None:
    TRAIN_STATE_SCHEMA.validate(state, path)
    RNG_SCHEMA.validate(state["rng"], path, prefix="rng.")
    NUMPY_RNG_SCHEMA.validate(state["rng"]["numpy"], path, prefix="rng.numpy.")
    if state["rng"]["cuda"] and not all(_byte_state_any(t) for t in state["rng"]["cuda"]):
        raise InputError("holds a CUDA generator state that is not a 1-D uint8 tensor", path=path,
                         field="rng.cuda", fix=_STATE_FIX)
    if "sharded" in state:
        inside(Path(path).parent, state["sharded"], path=path, key="sharded", fix=_STATE_FIX)
        return
    for key in ("model", "optimizer"):
        if key not in state:
            raise InputError(f"{TRAIN_STATE_FILE} has no field {key!r} (nor 'sharded')", path=path, field=key,
                             fix=_STATE_FIX)
    OPTIMIZER_SCHEMA.validate(state["optimizer"], path, prefix="optimizer.")
    if model is not None:
        expected = model.state_dict()
        names = set(state["model"])
        if names != set(expected):
            extra, missing = sorted(names - set(expected)), sorted(set(expected) - names)
            raise InputError(f"its tensors do not match the model of this run (unexpected {extra[:3]}, missing "
                             f"{missing[:3]}): it belongs to another model", path=path, field="model",
                             fix=_STATE_FIX)
        for name, tensor in state["model"].items():
            if tuple(tensor.shape) != tuple(expected[name].shape) or not tensor.is_floating_point():
                raise InputError(f"tensor {name!r} is {tensor.dtype} {tuple(tensor.shape)} but the model of this "
                                 f"run has {expected[name].dtype} {tuple(expected[name].shape)}: it belongs to "
                                 "another model", path=path, field=f"model.{name}", fix=_STATE_FIX)
    if optimizer is not None:
        _check_optimizer(state["optimizer"], optimizer, path)


def _byte_state_any(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype == torch.uint8 and value.dim() == 1


def _same_kind(value: Any, ours: Any) -> bool:
    """A saved optimizer hyperparameter of the kind this run's optimizer holds (numbers finite; None/bool flags
    interchangeable; tuples elementwise)."""
    if ours is None or isinstance(ours, bool):
        return value is None or isinstance(value, bool)
    if isinstance(ours, int | float):
        return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if isinstance(ours, tuple | list):
        return (isinstance(value, tuple | list) and len(value) == len(ours)
                and all(_same_kind(v, o) for v, o in zip(value, ours)))
    if isinstance(ours, torch.Tensor):
        return isinstance(value, torch.Tensor) and value.shape == ours.shape
    return isinstance(value, type(ours))


def _check_optimizer(saved: dict, optimizer: torch.optim.Optimizer, path: PathLike) -> None:
    """The saved optimizer state fits `optimizer`: as many groups of as many parameters, each hyperparameter of
    the kind it holds, and every per-parameter entry (Adam's step and moments) shaped like its parameter."""
    groups = saved["param_groups"]
    if len(groups) != len(optimizer.param_groups):
        raise InputError(f"has {len(groups)} parameter groups but this run's optimizer has "
                         f"{len(optimizer.param_groups)}", path=path, field="optimizer.param_groups", fix=_STATE_FIX)
    params: dict[Any, torch.Tensor] = {}
    for i, (group, ours) in enumerate(zip(groups, optimizer.param_groups)):
        ids = group.get("params")
        if not isinstance(ids, list) or len(ids) != len(ours["params"]) or not all(type(p) is int for p in ids) \
                or len(set(ids)) != len(ids) or set(ids) & set(params):
            raise InputError(f"group {i} does not list {len(ours['params'])} distinct parameter ids as this run's "
                             "optimizer does: it belongs to another model", path=path,
                             field=f"optimizer.param_groups[{i}].params", fix=_STATE_FIX)
        for key, value in ours.items():
            if key == "params":
                continue
            if key not in group:
                raise InputError(f"has no {key!r}", path=path, field=f"optimizer.param_groups[{i}].{key}",
                                 fix=_STATE_FIX)
            if not _same_kind(group[key], value):
                raise InputError(f"is {group[key]!r}, expected a value like {value!r}", path=path,
                                 field=f"optimizer.param_groups[{i}].{key}", fix=_STATE_FIX)
        params.update(zip(ids, ours["params"]))
    adam = isinstance(optimizer, torch.optim.Adam | torch.optim.AdamW)
    for pid, entry in saved["state"].items():
        where = f"optimizer.state[{pid!r}]"
        if pid not in params:
            raise InputError(f"holds state for parameter {pid!r}, which no parameter group lists", path=path,
                             field="optimizer.state", fix=_STATE_FIX)
        if not isinstance(entry, dict):
            raise InputError(f"is a {type(entry).__name__}, expected an object", path=path, field=where,
                             fix=_STATE_FIX)
        needed = ("step", "exp_avg", "exp_avg_sq") if adam and entry else ()
        for key in needed:
            if key not in entry:
                raise InputError(f"has no {key!r}", path=path, field=f"{where}.{key}", fix=_STATE_FIX)
        shape = tuple(params[pid].shape)
        for key, value in entry.items():
            if key == "step":
                ok = (isinstance(value, torch.Tensor) and value.dim() == 0 and value.is_floating_point()
                      and bool(torch.isfinite(value)) and float(value) >= 0) or (
                    isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
                    and value >= 0)
                if not ok:
                    raise InputError(f"is {value!r}, expected a step count (a finite number >= 0)", path=path,
                                     field=f"{where}.step", fix=_STATE_FIX)
            elif not isinstance(value, torch.Tensor) or not value.is_floating_point():
                raise InputError(f"is a {type(value).__name__ if not isinstance(value, torch.Tensor) else value.dtype}"
                                 ", expected a float tensor", path=path, field=f"{where}.{key}", fix=_STATE_FIX)
            elif tuple(value.shape) != shape:
                raise InputError(f"has shape {tuple(value.shape)} but its parameter has {shape}: it belongs "
                                 "to another model", path=path, field=f"{where}.{key}", fix=_STATE_FIX)


def load_train_state(dir: PathLike, map_location: str | torch.device = "cpu") -> dict:
    """Read dir/train_state.pt (tensors and plain Python only: loaded with weights_only=True) and check it
    against TRAIN_STATE_SCHEMA (check_train_state; the shapes against the model are checked by the trainer)."""
    path = Path(dir) / TRAIN_STATE_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; nothing to resume from. Start the run without --resume, "
                                "or point --out at the run directory that holds it")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # torch raises several types for a corrupt/truncated zip
        raise CheckpointError(f"{path}: cannot be read ({type(err).__name__}: {one_line(err)}); the file is "
                              "corrupt or truncated: restore it from a copy, or delete it and rerun with --resume "
                              "to train the run again from step 0") from err
    return check_train_state(state, path)
