"""What a pretrained-model capacity ablation runs (interp.ablations), without importing torch.

Kept apart so the command line (`interp --help`, `interp ablate pretrained --help`) can build its
parser from these defaults in milliseconds; the experiment itself lives in interp.ablations.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from interp._util.config import comma_list, option
from interp._util.devices import (
    check_device_name,
    device_map_option,
    device_option,
    model_dtype_option,
    parse_device_map,
)
from interp._util.dtypes import MODEL_DTYPES, dtype_names
from interp.data.text import TEXT_HELP

GROUPS = ("early", "middle", "late")
SELECTIONS = ("lowest", "random")
DTYPE_NAMES = dtype_names("float32", "bfloat16")   # interp.ablations.DTYPES maps them to autocast dtypes
# what transformers' from_pretrained accepts (a checkpoint of ours ignores it)
ATTN_IMPLEMENTATIONS = ("sdpa", "eager", "flash_attention_2", "flex_attention")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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

    model: str = option("smollm2-135m", "registry name, HF dir, .gguf file, hub id or TransformerLens name "
                                        "(MODEL@REV for a revision), or one of our checkpoints")
    revision: str | None = option(None, "a hub model's branch, tag or commit (also: MODEL@REV)")
    # None: held-out wiki split; a corpus name or a UTF-8 text file
    text: str | None = option(None, TEXT_HELP)
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
    attn_implementation: str = option("sdpa", "sdpa | eager (Hugging Face models)", choices=ATTN_IMPLEMENTATIONS)
    threads: int | None = option(None, "torch.set_num_threads (default: torch's)")
    device: str = device_option()
    model_dtype: str = model_dtype_option()
    device_map: str | None = device_map_option()
    confidence: float = option(0.95, "level of the Student-t intervals")
    trust_remote_code: bool = option(False, "let a Hugging Face directory whose config.json has an auto_map run "
                                            "its own Python files (refused otherwise; never asked)")

    def validate(self) -> None:
        """ValueError naming the field (= the flag) and the fix, before any model is loaded."""
        if self.dtype not in DTYPE_NAMES:
            raise ValueError(f"dtype={self.dtype!r}: choose one of {DTYPE_NAMES}")
        if self.attn_implementation not in ATTN_IMPLEMENTATIONS:
            raise ValueError(f"attn_implementation={self.attn_implementation!r}: choose one of {ATTN_IMPLEMENTATIONS}")
        check_device_name(self.device)
        parse_device_map(self.device_map)
        if self.model_dtype not in MODEL_DTYPES:
            raise ValueError(f"model_dtype={self.model_dtype!r}: choose one of {MODEL_DTYPES}")
        for name in ("seq_len", "score_sequences", "eval_sequences", "batch_size"):
            value = getattr(self, name)
            if not _is_int(value) or value < (2 if name == "seq_len" else 1):
                raise ValueError(f"{name}={value!r}: must be a positive integer (seq_len >= 2)")
        if self.threads is not None and (not _is_int(self.threads) or self.threads < 0):
            raise ValueError(f"threads={self.threads!r}: must be an integer >= 1 (0 or unset: torch's default)")
        if not (isinstance(self.confidence, float | int) and 0 < self.confidence < 1):
            raise ValueError(f"confidence={self.confidence!r}: must be in (0, 1), e.g. 0.95")
        for f in self.fractions:
            if not (isinstance(f, float | int) and 0 <= f <= 1):
                raise ValueError(f"fraction={f!r}: must be in [0, 1], e.g. 0.25 to remove a quarter of the neurons")
        for name, allowed in (("groups", GROUPS), ("selections", SELECTIONS)):
            bad = [v for v in getattr(self, name) if v not in allowed]
            if bad:
                raise ValueError(f"{name}={bad}: choose from {', '.join(allowed)}")
        if not all(_is_int(s) for s in self.seeds) or not all(_is_int(i) and i >= 0 for i in self.skip_layers or ()):
            raise ValueError(f"seeds={self.seeds!r} and skip_layers={self.skip_layers!r} must be integers "
                             "(layers >= 0)")
        neurons = bool(self.groups and self.fractions and self.selections)
        if not neurons and self.skip_layers == ():
            raise ValueError("nothing to ablate: no neuron removals (groups, fractions or selections is empty) and "
                             "skip_layers is none; give --groups/--fractions/--selections or --skip-layers")
        if neurons and "random" in self.selections and not self.seeds:
            raise ValueError("seeds is empty but selections include 'random': give --seeds (e.g. 0,1,2) or "
                             "--selections lowest")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
