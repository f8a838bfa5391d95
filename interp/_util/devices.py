"""Where a model given by name runs: the `device` option (declared once, for ProbeConfig and AblationConfig),
its cheap check, and the move after loading.

Torch is imported only when a GPU is asked for, so configs and `--help` stay torch-free.
"""

from __future__ import annotations

import re
from typing import Any

from interp._util.config import option
from interp._util.dtypes import MODEL_DTYPES
from interp._util.errors import InputError

DEVICE_PATTERN = re.compile(r"cpu|cuda(:\d+)?")


def device_option() -> Any:
    """The `device` field of a config (-> `--device` on its command)."""
    return option("cpu", "where a model given by name or path runs: cpu, cuda (under torchrun the rank's own GPU) "
                  "or cuda:N; the math follows it. A model object passed in stays where it is", metavar="DEVICE")


def device_map_option() -> Any:
    """The `device_map` field of a config (-> `--device-map`): probes, ablations and evals declare it alike."""
    return option(None, "place a model larger than one device through accelerate: auto, balanced, "
                  "balanced_low_0, sequential, or a JSON object {module: device|cpu|disk}; the model then stays "
                  "where the map puts it (not moved to --device), and each layer computes on its device",
                  metavar="MAP")


def model_dtype_option() -> Any:
    """The `model_dtype` field of a config (-> `--model-dtype`): the precision a pretrained model is loaded in."""
    return option("float32", "precision a pretrained model is loaded in (auto: the checkpoint's own; a GGUF "
                  "model dequantizes to float32; ours are cast)", choices=MODEL_DTYPES)


def check_device_name(device: Any) -> None:
    """ValueError naming the field for anything but cpu, cuda or cuda:N (no torch; the GPU is resolve_device's)."""
    if not isinstance(device, str) or not DEVICE_PATTERN.fullmatch(device):
        raise ValueError(f"device={device!r}: write cpu, cuda or cuda:N (N the GPU's index)")


def cuda_device_count() -> int:
    """How many CUDA devices torch sees here (0 without a CUDA build or a GPU)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_device(device: str) -> str:
    """A config's device as a torch device string ("cuda" = this rank's GPU under torchrun: LOCAL_RANK), checked
    before any weights are read: InputError naming the field when this machine has no such device."""
    check_device_name(device)
    if device == "cpu":
        return device
    import os

    count = cuda_device_count()
    if count == 0:
        raise InputError(f"{device!r} asked for, but torch sees no CUDA device", field="device",
                         fix="use --device cpu, or a torch build with CUDA on a machine with a GPU")
    index = int(device.partition(":")[2] or os.environ.get("LOCAL_RANK", "0"))
    if index >= count:
        raise InputError(f"{device!r}: this machine has {count} CUDA device(s)", field="device",
                         fix=f"use cuda:0 .. cuda:{count - 1}")
    return f"cuda:{index}"


def _first_weight(model: Any) -> Any:
    """The first weight of a module or of anything carrying one as `.model` (a LoadedModel); an empty float32 CPU
    tensor for a weightless module or an object without one."""
    import torch
    from torch import nn

    inner = model if isinstance(model, nn.Module) else getattr(model, "model", None)
    if not isinstance(inner, nn.Module):
        return torch.empty(0)
    return next(inner.parameters(), torch.empty(0))


DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")   # accelerate's placement strategies
# what a device map may place a module on: the CPU, accelerate's disk offload, a GPU ("cuda", "cuda:N", or its index N)
PLACE_PATTERN = re.compile(r"cpu|disk|cuda(:\d+)?")
_PLACES = "cpu, disk, cuda:N or a GPU index N"


def parse_device_map(spec: str | dict | None) -> str | dict | None:
    """--device-map: a strategy of DEVICE_MAPS, or a JSON object {module: device | "cpu" | "disk"} whose every
    value is a place (check_place); InputError naming the flag otherwise. No torch: whether the GPUs it names exist
    is resolve_device_map's, and whether its keys name modules is checked against the model's structure."""
    import json

    if spec is None or (isinstance(spec, str) and spec in DEVICE_MAPS):
        return spec
    parsed: Any = spec
    if not isinstance(spec, dict):
        try:
            parsed = json.loads(spec)
        except (TypeError, ValueError):
            parsed = spec
    if not isinstance(parsed, dict) or not parsed:
        alone = parsed if isinstance(parsed, (str, int)) and _place_error(parsed) is None else None
        raise InputError(f"{spec!r} is not a device map", field="device_map",
                         fix=f"use {', '.join(DEVICE_MAPS)}, or a JSON object such as "
                             '\'{"model.embed_tokens": "cpu", "model.layers.1": "disk", ...}\''
                             + (f"; to run the whole model on one device use --device, or --device-map "
                                f"'{json.dumps({'': alone})}'" if alone is not None else ""))
    for module, place in parsed.items():
        check_place(module, place)
    return parsed


def _place_error(place: Any) -> str | None:
    """Why `place` cannot be a device map's value (None: it can)."""
    if isinstance(place, bool) or not isinstance(place, (str, int)):
        return f"{place!r} is not a device"
    if isinstance(place, int):
        return None if place >= 0 else f"{place} is not a GPU index"
    if place == "meta":
        return "'meta' holds no weights, so a module placed there cannot compute"
    return None if PLACE_PATTERN.fullmatch(place) else f"{place!r} is not a device"


def _module_label(module: str) -> str:
    return "'' (the whole model)" if module == "" else repr(module)


def check_place(module: Any, place: Any) -> None:
    """InputError naming --device-map when a device map's entry module -> place is not a string key and one of
    cpu, disk, cuda, cuda:N or a GPU index N (no torch: the GPU's existence is resolve_device_map's)."""
    if not isinstance(module, str):
        raise InputError(f"key {module!r} is not a module name", field="device_map",
                         fix="key --device-map by module names such as model.layers.0 (\"\" for the whole model)")
    why = _place_error(place)
    if why is not None:
        raise InputError(f"{_module_label(module)} -> {why}", field="device_map",
                         fix=f"give each module of --device-map one of {_PLACES}")


def resolve_device_map(spec: str | dict | None) -> str | dict | None:
    """parse_device_map, and every GPU a map names checked to exist on this machine ("cuda" = any GPU), before any
    weights are read: InputError naming --device-map and the devices there are. A strategy (auto, ...) places on
    what accelerate finds, so it needs no check."""
    device_map = parse_device_map(spec)
    if not isinstance(device_map, dict):
        return device_map
    count = None
    for module, place in device_map.items():
        if place in ("cpu", "disk"):
            continue
        index = place if isinstance(place, int) else int(place.partition(":")[2] or "0")
        count = cuda_device_count() if count is None else count
        if index >= count:
            here = ("cpu and disk (torch sees no CUDA device)" if count == 0 else
                    f"cpu, disk and cuda:0 .. cuda:{count - 1} (GPU indices 0 .. {count - 1})")
            raise InputError(f"{_module_label(module)} -> {place!r}: this machine has no such device; the places here "
                             f"are {here}",
                             field="device_map", fix="place each module of --device-map on one of those")
    return device_map


def model_device(model: Any) -> Any:
    """Where a model computes: its first weight's torch.device (cpu without one; rows record this as `device`).
    A model placed by a device map (accelerate's hf_device_map) takes its inputs where its first placed module sits
    (a disk-offloaded one computes on the CPU)."""
    import torch
    from torch import nn

    inner = model if isinstance(model, nn.Module) else getattr(model, "model", None)
    placed = getattr(inner, "hf_device_map", None)
    if isinstance(placed, dict) and placed:
        first = next(iter(placed.values()))
        return torch.device("cpu" if first in ("disk", "cpu") else f"cuda:{first}" if isinstance(first, int)
                            else first)
    return _first_weight(model).device


def model_dtype(model: Any) -> Any:
    """What a model computes in: its first weight's dtype (float32 without one; the hardware label's portability
    depends on it)."""
    return _first_weight(model).dtype


def to_device(model: Any, device: str) -> Any:
    """A model we loaded (TaperedLM, HF module, LoadedModel: its .model), moved to a resolve_device() device."""
    if device != "cpu":
        from torch import nn

        (model if isinstance(model, nn.Module) else model.model).to(device)
    return model
