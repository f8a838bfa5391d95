"""ProbeConfig: every option of a probe run, declared once (torch-free).

interp.probes.probe builds one from its keyword arguments, interp.probes.batch.BatchConfig and the
analysis configs nest one, and `interp probe` / `interp batch` generate their probe flags from it
(interp._util.config.add_arguments), so an option added here appears everywhere at once.

The checks here are plain Python on the options alone (no file, no model, no torch): they run before
anything is read, so a typo fails in milliseconds with the allowed values in the message.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from interp._util.config import option, reject_unknown_keys
from interp._util.devices import (
    check_device_name,
    device_map_option,
    device_option,
    model_dtype_option,
    parse_device_map,
)
from interp._util.dtypes import MODEL_DTYPES
from interp.data.text import TEXT_HELP
from interp.probes.names import (
    ALL_METRIC_NAMES,
    BACKENDS,
    DEFAULT_EPS,
    DTYPE_NAMES,
    METRIC_NAMES,
    POSITIONS,
    REFERENCES,
)


class OptionParseError(ValueError, argparse.ArgumentTypeError):
    """A flag value that does not parse; argparse shows the message as it is."""


def parse_exclude_dims(spec: str) -> int | list[int]:
    """--exclude-massive-dims: "3" -> 3 (measure the top 3), "17,247,507" -> [17, 247, 507]."""
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts or not all(p.isdigit() for p in parts):
        raise OptionParseError(f"--exclude-massive-dims {spec!r}: give K (e.g. 3) or a comma list of dims (e.g. 17,247,507)")
    return int(parts[0]) if len(parts) == 1 and "," not in spec else [int(p) for p in parts]


DEFAULT_SEQ_LEN = 512   # probe()'s sequence length when none is given and the model's context allows it
# The causal rows' own budget (--causal-tokens): 8 sequences of 512, chosen from the CI width against tokens measured
# on SmolLM2-135M (docs/probes.md, 'Causal rows'); their deltas are paired per sequence and converge faster than the
# probe's 16,384-token means need.
DEFAULT_CAUSAL_TOKENS = 4096
CAUSAL_METHODS = ("exact", "attribution")   # measured, or estimated to first order (interp.ablations.attribution)
CAUSAL_TIME = "about 13 min on 2 quiet cores, probe included"   # benchmarks/RESULTS.md, bench_causal


@dataclass
class ProbeConfig:
    """What to probe over and how: the text, the token plan, the backend and the metric math."""

    text: str | None = option(None, TEXT_HELP)
    tokens: int = option(16384, "model positions to run, rounded down to a multiple of --seq-len")
    seq_len: int | None = option(None, f"positions per sequence, BOS included (default: {DEFAULT_SEQ_LEN}, or the "
                                 "model's context where that is shorter; `interp batch`: 256, or the shortest "
                                 "context among its models)")
    batch_size: int = option(4, "sequences per forward")
    backend: str = option("torch", "how the activations are read", choices=BACKENDS)
    positions: str = option("skip_first", "skip_first: position 0 of each sequence (the attention sink) is left "
                            "out; all: every position", choices=POSITIONS)
    prepend_bos: bool = option(False, "start every sequence with BOS")
    dtype: str = option("float32", "precision of the metric math (the model runs in --model-dtype)",
                        choices=DTYPE_NAMES)
    model_dtype: str = model_dtype_option()
    device_map: str | None = device_map_option()
    metrics: tuple[str, ...] = option(METRIC_NAMES, f"subset of {', '.join(ALL_METRIC_NAMES)}", metavar="M[,M]")
    reference: str = option("raw", "normed: also rho_mlp_normed, the cosine with the MLP's normalised input",
                            choices=REFERENCES)
    exclude_massive_dims: int | tuple[int, ...] | None = option(
        None, "zero residual dims in every operand of every measure (cosines, norms, lens, covariances): K = the "
        "K of largest mean |resid_pre| (measured on a first pass), or a comma list of dims",
        parse=parse_exclude_dims, metavar="K|D[,D]")
    eps: float = option(DEFAULT_EPS, "floor of |a||b| in every cosine (a zero vector gives 0, not NaN)")
    tokenizer: str | None = option(None, "tokenizer name for interp.data.get_tokenizer, overriding the model's own")
    device: str = device_option()
    causal: bool = option(False, "also the causal rows (interp.ablations.layers): per layer, delta loss when its "
                          "MLP is skipped, mean-ablated, its attention skipped, or the whole block removed, over "
                          "--causal-tokens; about 2 + 2 x (n_layers + 2) forwards of those tokens, each pass resumed "
                          "at the layer it ablates (SmolLM2-135M at the defaults: " + CAUSAL_TIME + "; joined by "
                          "interp.causal.probe / run_batch, not interp.probes')")
    causal_tokens: int = option(DEFAULT_CAUSAL_TOKENS, "positions the causal rows run over: the probe's first "
                                "sequences, as many as fit; 0: all of --tokens. The default comes from "
                                "a measured curve of CI width against tokens (docs/probes.md, 'Causal rows')")
    causal_method: str = option("exact", "exact: every row measured; attribution: every row estimated to first order "
                                "from one forward and one backward (grad . (patched - clean); about 3 forwards, an "
                                "approximation: figures/attribution_vs_exact.csv says how good)",
                                choices=CAUSAL_METHODS)

    def __post_init__(self) -> None:
        if isinstance(self.text, os.PathLike):
            self.text = str(self.text)
        if isinstance(self.metrics, list | tuple):
            self.metrics = tuple(self.metrics)
        if isinstance(self.exclude_massive_dims, list):
            self.exclude_massive_dims = tuple(self.exclude_massive_dims)

    def validate(self) -> ProbeConfig:
        """ValueError naming the field and its allowed values; returns self."""
        with_reference(self.metrics, self.reference)
        exclusion_request(self.exclude_massive_dims)
        for name, value, allowed in (("backend", self.backend, BACKENDS), ("positions", self.positions, POSITIONS),
                                     ("dtype", self.dtype, DTYPE_NAMES), ("model_dtype", self.model_dtype, MODEL_DTYPES)):
            if value not in allowed:
                raise ValueError(f"{name}={value!r}: choose one of {allowed}")
        if self.tokenizer is not None and not isinstance(self.tokenizer, str):
            raise ValueError(f"tokenizer={self.tokenizer!r}: ProbeConfig holds a name for interp.data.get_tokenizer "
                             "or None; pass a tokenizer object to interp.probes.probe(..., tokenizer=obj) instead")
        if self.text is not None and not isinstance(self.text, str):
            raise ValueError(f"text={self.text!r}: a text file path, a corpus name, or None (held-out wiki)")
        check_device_name(self.device)
        parse_device_map(self.device_map)
        if isinstance(self.eps, bool) or not isinstance(self.eps, int | float) or not 0 < self.eps < math.inf:
            raise ValueError(f"eps={self.eps!r}: a positive finite floor for |a||b| (default {DEFAULT_EPS})")
        if self.causal_method not in CAUSAL_METHODS:
            raise ValueError(f"causal_method={self.causal_method!r}: choose one of {CAUSAL_METHODS}")
        if isinstance(self.causal_tokens, bool) or not isinstance(self.causal_tokens, int) or self.causal_tokens < 0:
            raise ValueError(f"causal_tokens={self.causal_tokens!r}: a number of positions >= 0 (0: all of tokens; "
                             f"default {DEFAULT_CAUSAL_TOKENS})")
        if self.seq_len is None:   # fitted to the model by for_context(), and checked in full then
            if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
                raise ValueError(f"need batch_size >= 1, got batch_size={self.batch_size}")
            if isinstance(self.tokens, bool) or not isinstance(self.tokens, int) or self.tokens < 2:
                raise ValueError(f"tokens={self.tokens} is less than one sequence; raise tokens")
            return self
        sequence_plan(self.tokens, self.seq_len, self.batch_size, self.prepend_bos)
        if self.causal and 0 < self.causal_tokens < self.seq_len:
            raise ValueError(f"causal_tokens={self.causal_tokens} is less than one sequence of seq_len={self.seq_len}: "
                             f"raise causal_tokens to >= {self.seq_len} (2 sequences or more give a CI), or 0 for all "
                             "of tokens")
        if self.positions == "skip_first" and self.seq_len < 2:
            raise ValueError(f"seq_len={self.seq_len} with positions=skip_first counts no token (position 0 of each "
                             "sequence is left out): raise seq_len to >= 2, or pass positions=all")
        return self

    def causal_sequences(self, n_sequences: int) -> int:
        """How many of the probe's `n_sequences` sequences (from the first) the causal rows run over."""
        if self.causal_tokens == 0 or self.seq_len is None:
            return n_sequences
        return max(1, min(n_sequences, self.causal_tokens // self.seq_len))

    def for_context(self, context: int | None, default: int = DEFAULT_SEQ_LEN) -> ProbeConfig:
        """This config with seq_len fitted to a model of `context` positions (None: unknown): a seq_len left
        unset becomes min(default, context), and is checked; one given stays as given (check_fits refuses it
        when it does not fit)."""
        if self.seq_len is not None:
            return self
        return dataclasses.replace(self, seq_len=min(default, context) if context else default).validate()

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["metrics"] = list(self.metrics)
        if isinstance(self.exclude_massive_dims, tuple):
            d["exclude_massive_dims"] = list(self.exclude_massive_dims)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProbeConfig:
        reject_unknown_keys(cls, d)
        return cls(**d)

    @classmethod
    def build(cls, config: ProbeConfig | None = None, **options: Any) -> ProbeConfig:
        """`config` (or the defaults) with `options` replaced; TypeError naming an unknown option."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"unknown probe options {unknown}; ProbeConfig's options are {sorted(known)}")
        return dataclasses.replace(config, **options) if config is not None else cls(**options)


# --------------------------------------------------------------------------------------------------
# Checks shared with the torch modules (metrics, accumulator, run): one copy, torch-free
# --------------------------------------------------------------------------------------------------

def check_metrics(metrics: Sequence[str]) -> tuple[str, ...]:
    metrics = tuple(metrics)
    unknown = [m for m in metrics if m not in ALL_METRIC_NAMES]
    if unknown or not metrics:
        raise ValueError(f"metrics={list(metrics)}: choose a non-empty subset of {list(ALL_METRIC_NAMES)}")
    return metrics


def with_reference(metrics: Sequence[str], reference: str) -> tuple[str, ...]:
    """The metrics to track for reference="raw" (as given) or "normed" (plus rho_mlp_normed)."""
    if reference not in REFERENCES:
        raise ValueError(f"reference={reference!r}: choose one of {REFERENCES} ('normed' adds rho_mlp_normed, "
                         "the cosine against the MLP's normalised input)")
    metrics = check_metrics(metrics)
    return metrics + ("rho_mlp_normed",) if reference == "normed" and "rho_mlp_normed" not in metrics else metrics


def check_dims(dims: Sequence[int]) -> tuple[int, ...]:
    """Sorted unique non-negative ints (exclude_dims / exclude_massive_dims as a list)."""
    if isinstance(dims, int | str) or not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        raise ValueError(f"exclude dims={dims!r}: expected a list of d_model indices, e.g. [138, 406]")
    if any(d < 0 for d in dims):
        raise ValueError(f"exclude dims={list(dims)}: indices must be >= 0")
    return tuple(sorted({int(d) for d in dims}))


def exclusion_request(spec: int | Sequence[int] | None) -> tuple[int, tuple[int, ...]]:
    """(k to measure, dims given) from exclude_massive_dims."""
    if spec is None:
        return 0, ()
    if isinstance(spec, int) and not isinstance(spec, bool):
        if spec < 1:
            raise ValueError(f"exclude_massive_dims={spec}: give k >= 1 (or None for no exclusion, or a list of dims)")
        return spec, ()
    return 0, check_dims(spec)


def sequence_plan(tokens: int, seq_len: int, batch_size: int, bos: bool) -> tuple[int, int]:
    """(number of sequences, text tokens per sequence); raises before any model loads if the text is too short."""
    if seq_len < 1 + bos or batch_size < 1:
        raise ValueError(f"need seq_len >= {1 + bos} and batch_size >= 1, got seq_len={seq_len}, batch_size={batch_size}")
    n_seqs = tokens // seq_len
    if n_seqs < 1:
        raise ValueError(f"tokens={tokens} is less than one sequence of seq_len={seq_len}; raise tokens or lower seq_len")
    return n_seqs, seq_len - bos


def too_little_text(have: int, need: int, tokens: int, seq_len: int, bos: bool) -> str:
    """The error for a text too short for the plan, with the most `tokens` that fit (or, for a text shorter
    than one sequence, the longest seq_len that does); never an advice of 0."""
    fits = have // (seq_len - bos) * seq_len
    if fits:
        fix = f"pass a longer text (--text FILE) or lower tokens to at most {fits}"
    elif have:
        fix = (f"pass a longer text (--text FILE; one sequence needs {seq_len - bos} text tokens) or lower seq_len "
               f"to at most {have + bos} (--seq-len {have + bos} --tokens {have + bos})")
    else:
        fix = "the text is empty: pass a text file with some text (--text FILE)"
    return (f"the text has {have} tokens but tokens={tokens} at seq_len={seq_len}"
            f"{' with prepend_bos' if bos else ''} needs {need}: {fix}")
