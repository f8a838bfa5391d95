"""What a pretrained-model capacity ablation runs (interp.ablations), without importing torch.

Kept apart so the command line (`interp --help`, `interp ablate pretrained --help`) can build its
parser from these defaults in milliseconds; the experiment itself lives in interp.ablations.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from interp._util.config import comma_list, option
from interp._util.dtypes import dtype_names

GROUPS = ("early", "middle", "late")
SELECTIONS = ("lowest", "random")
DTYPE_NAMES = dtype_names("float32", "bfloat16")   # interp.ablations.DTYPES maps them to autocast dtypes


def _skip_layers(text: str) -> tuple[int, ...] | None:
    """--skip-layers: "all" -> None (every layer), "none" -> (), "3,7" -> (3, 7)."""
    return None if text == "all" else () if text == "none" else comma_list(int)(text)


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

    model: str = option("smollm2-135m", "registry name, HF dir, .gguf file or hub id")
    # None: held-out wiki split; a corpus name or a UTF-8 text file
    text: str | None = option(None, "corpus name (wiki, shakespeare) or UTF-8 text file; default: held-out wiki split")
    seq_len: int = option(128, "tokens per sequence")
    # consecutive sequences from the START of the text score the neurons
    score_sequences: int = option(32, "sequences (from the start of the text) that score the neurons")
    # the NEXT sequences (disjoint) measure the loss of every condition
    eval_sequences: int = option(16, "the next sequences, on which every condition's loss is measured")
    batch_size: int = option(8, "sequences per forward pass")
    fractions: tuple[float, ...] = option((0.10, 0.25, 0.50), "fractions of each layer's neurons to remove",
                                          parse=comma_list(float), metavar="F[,F]")
    seeds: tuple[int, ...] = option((0, 1, 2), "seeds of the random-selection control", parse=comma_list(int),
                                    metavar="S[,S]")
    groups: tuple[str, ...] = option(GROUPS, f"layer thirds to ablate, from {','.join(GROUPS)}",
                                     parse=comma_list(str, GROUPS), metavar="G[,G]")
    selections: tuple[str, ...] = option(SELECTIONS, f"neuron selections, from {','.join(SELECTIONS)}",
                                         parse=comma_list(str, SELECTIONS), metavar="S[,S]")
    # None: every layer; () for none
    skip_layers: tuple[int, ...] | None = option(None, "layers whose whole MLP is skipped, one at a time "
                                                       "(default: all)", parse=_skip_layers,
                                                 metavar="all|none|L[,L]")
    # "bfloat16" = bf16 autocast (the fp32 baseline is measured too, for the check)
    dtype: str = option("float32", "bfloat16 = bf16 autocast (~2.5x faster on CPU; the fp32 baseline is recorded "
                                   "too)", choices=DTYPE_NAMES)
    # masks act on the MLP only; sdpa is faster than eager and exact enough
    attn_implementation: str = option("sdpa", "sdpa | eager")
    threads: int | None = option(None, "torch.set_num_threads (default: torch's)")
    confidence: float = option(0.95, "level of the Student-t intervals")

    def validate(self) -> None:
        if self.dtype not in DTYPE_NAMES:
            raise ValueError(f"dtype={self.dtype!r}: choose one of {DTYPE_NAMES}")
        for name in ("seq_len", "score_sequences", "eval_sequences", "batch_size"):
            if int(getattr(self, name)) < (2 if name == "seq_len" else 1):
                raise ValueError(f"{name}={getattr(self, name)!r}: must be a positive integer (seq_len >= 2)")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
