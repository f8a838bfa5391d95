"""What a pretrained-model capacity ablation runs (interp.ablations), without importing torch.

Kept apart so the command line (`interp --help`, `interp ablate pretrained --help`) can build its
parser from these defaults in milliseconds; the experiment itself lives in interp.ablations.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

GROUPS = ("early", "middle", "late")
SELECTIONS = ("lowest", "random")
DTYPE_NAMES = ("float32", "bfloat16")   # interp.ablations.DTYPES maps them to autocast dtypes


@dataclass
class AblationConfig:
    """Capacity ablation of a pretrained model. Budget defaults (why these numbers):
    67 conditions (baseline + 3 groups x 3 fractions x (lowest + 3 random seeds) + 30 MLP skips on
    SmolLM2) x 16 x 128 eval tokens = 137k forward tokens, plus 32 x 128 scoring tokens: about 3.5 min
    at SmolLM2's ~650 tokens/s (fp32, 2 quiet threads), ~1.5 min with dtype="bfloat16". Measured: 12.5 min
    with threads=1 on 2 cores shared with ~6 other jobs (there 1 thread ran ~3x faster than 2). 16
    sequences give a Student-t CI with 15 degrees of freedom. Raise eval_sequences on a bigger machine.
    fp32 is the default because the smallest deltas (~0.01 nats) are near bf16's rounding noise; with
    dtype="bfloat16" the fp32 baseline is measured too and a >= 1% difference is reported."""

    model: str = "smollm2-135m"
    text: str | None = None          # None: held-out wiki split; a corpus name or a UTF-8 text file
    seq_len: int = 128
    score_sequences: int = 32        # consecutive sequences from the START of the text score the neurons
    eval_sequences: int = 16         # the NEXT sequences (disjoint) measure the loss of every condition
    batch_size: int = 8
    fractions: tuple[float, ...] = (0.10, 0.25, 0.50)
    seeds: tuple[int, ...] = (0, 1, 2)
    groups: tuple[str, ...] = GROUPS
    selections: tuple[str, ...] = SELECTIONS
    skip_layers: tuple[int, ...] | None = None     # None: every layer; () for none
    dtype: str = "float32"           # "bfloat16" = bf16 autocast (the fp32 baseline is measured too, for the check)
    attn_implementation: str = "sdpa"  # masks act on the MLP only; sdpa is faster than eager and exact enough
    threads: int | None = None       # torch.set_num_threads; None leaves torch's default
    confidence: float = 0.95

    def validate(self) -> None:
        if self.dtype not in DTYPE_NAMES:
            raise ValueError(f"dtype={self.dtype!r}: choose one of {DTYPE_NAMES}")
        for name in ("seq_len", "score_sequences", "eval_sequences", "batch_size"):
            if int(getattr(self, name)) < (2 if name == "seq_len" else 1):
                raise ValueError(f"{name}={getattr(self, name)!r}: must be a positive integer (seq_len >= 2)")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
