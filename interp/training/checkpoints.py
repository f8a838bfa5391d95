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
import re
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_model, save_model

from interp._util.io import PathLike, atomic_write, read_json, safetensors_header, write_json_atomic  # noqa: F401 (re-exported)
from interp._util.paths import CONFIG_FILE, TRAIN_STATE_FILE, WEIGHTS_FILE
from interp.model import ModelConfig, TaperedLM

class CheckpointError(ValueError):
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


def read_config(dir: PathLike) -> dict:
    """config.json of a checkpoint directory, with errors that say which file is wrong and how."""
    path = Path(dir) / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; a checkpoint directory needs {CONFIG_FILE} and "
                                f"{WEIGHTS_FILE} (written by interp.training.checkpoints.save_checkpoint / `interp train`)")
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{path}: not valid JSON ({err}); the file is corrupt or was edited by hand: "
                              "restore it or re-save the checkpoint") from err
    if not isinstance(config, dict) or not isinstance(config.get("model"), dict):
        raise CheckpointError(f"{path}: missing field 'model' (the ModelConfig.to_dict() of the weights); "
                              "re-save with interp.training.checkpoints.save_checkpoint")
    return config


def _model_config_from(config: dict, path: Path) -> ModelConfig:
    try:
        cfg = ModelConfig.from_dict(config["model"])
        cfg.validate()
    except (TypeError, KeyError, ValueError) as err:
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


def load_train_state(dir: PathLike, map_location: str | torch.device = "cpu") -> dict:
    """Read dir/train_state.pt (tensors and plain Python only: loaded with weights_only=True)."""
    path = Path(dir) / TRAIN_STATE_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; nothing to resume from. Start the run without --resume, "
                                "or point --out at the run directory that holds it")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # torch raises several types for a corrupt/truncated zip
        raise CheckpointError(f"{path}: cannot be read ({type(err).__name__}: {err}); the file is corrupt "
                              "or truncated: restore it from a copy, or delete it and rerun with --resume to "
                              "train the run again from step 0") from err
