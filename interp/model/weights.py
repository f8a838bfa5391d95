"""What a weight file's tensor names say about a model's shape, read without the tensors (a safetensors header).

Why: a config.json that claims far more layers than its weights hold (a typo, a hand edit, a truncated download)
would otherwise be built and initialised in full before "weights missing" is reported: 100,000 layers of a small
Llama take minutes and tens of GB. Counting the layers the weight names hold costs microseconds per name, so the
loaders (interp.training.checkpoints for ours, interp.hf.load for Hugging Face folders) refuse such a config before
building anything. Torch-free.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from interp._util.errors import InputError

# the first numbered component of a tensor name: "model.layers.12.mlp.up_proj.weight" -> ("model.layers", 12)
_NUMBERED = re.compile(r"(.*?)\.(\d+)(?:\.|$)")


def layer_stacks(names: Iterable[str]) -> dict[str, int]:
    """Each numbered module list the tensor names hold (the prefix before their first numbered component) -> how
    many entries it reaches (its largest index + 1): {"model.layers": 30, ...}."""
    stacks: dict[str, int] = {}
    for name in names:
        found = _NUMBERED.match(name)
        if found:
            stacks[found[1]] = max(stacks.get(found[1], 0), int(found[2]) + 1)
    return stacks


def check_layer_count(names: Iterable[str], claimed: int, *, path: str | os.PathLike, field: str, fix: str,
                      stack: str | None = None, error: type[InputError] = InputError) -> None:
    """`error` (an InputError) naming the config file and its layer-count field when the config claims more layers
    than the weights hold: more than the numbered list `stack` reaches, or (stack None: a Hugging Face model, whose
    layer list may have any name) than the longest numbered list of the names does. Fewer claimed layers are left to
    the loaders' own unexpected-tensor checks (some models keep extra numbered weights, e.g. multi-token prediction)."""
    stacks = layer_stacks(names)
    if stack is not None:
        held, where = stacks.get(stack, 0), f"{stack}.N"
    else:
        where, held = max(stacks.items(), key=lambda item: item[1], default=("", 0))
        where = f"{where}.N" if where else "a numbered module list"
    if claimed > held:
        raise error(f"claims {claimed} layers but the weights hold {held} ({where}); the model is not built",
                         path=path, field=field, fix=fix)
