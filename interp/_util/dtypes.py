"""The dtype vocabulary, defined once and torch-free: every spelling a config accepts -> its torch name.

Each config keeps its own spellings (stored run configs say "fp32" / "bf16" / "auto"; probe and ablation
configs say "float32" / "float64" / "bfloat16") and draws its allowed subset from this table with
`dtype_names(...)`, so a new precision or alias is added here once and `torch_dtype` resolves all of them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# spelling -> torch attribute name (torch.float32, ...)
TORCH_NAMES: dict[str, str] = {
    "fp32": "float32", "float32": "float32",
    "bf16": "bfloat16", "bfloat16": "bfloat16",
    "fp64": "float64", "float64": "float64",
    "fp16": "float16", "float16": "float16",
}
# Not a precision but a choice made at run time (training: bf16 where the hardware has native bf16, else fp32).
AUTO = "auto"


def dtype_names(*names: str) -> tuple[str, ...]:
    """A config's allowed spellings, checked against the table (a typo here fails at import, not in a run)."""
    unknown = [n for n in names if n not in TORCH_NAMES and n != AUTO]
    if unknown:
        raise ValueError(f"dtype_names: {unknown} are not in interp._util.dtypes.TORCH_NAMES "
                         f"({', '.join(TORCH_NAMES)}); add the spelling there first")
    return names


def torch_dtype(name: str) -> torch.dtype:
    """torch.float32 for "fp32" or "float32", ... (not "auto": the caller decides what it means)."""
    import torch

    if name not in TORCH_NAMES:
        raise ValueError(f"dtype {name!r}: choose one of {tuple(TORCH_NAMES)}"
                         + (" (resolve 'auto' first)" if name == AUTO else ""))
    return getattr(torch, TORCH_NAMES[name])


# the precisions a pretrained model may be loaded in (`--model-dtype`; "auto": the checkpoint's own)
MODEL_DTYPES = dtype_names(AUTO, "float32", "bfloat16", "float16")

__all__ = ["AUTO", "MODEL_DTYPES", "TORCH_NAMES", "dtype_names", "torch_dtype"]
