"""EvalConfig: one `interp eval` job. Torch-free: the command's flags are generated from these fields."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from interp._util.config import comma_list, option, reject_unknown_keys
from interp._util.devices import (
    check_device_name,
    device_map_option,
    device_option,
    model_dtype_option,
    parse_device_map,
)
from interp._util.errors import InputError
from interp.evals.niah import DEFAULT_LENGTHS, DEFAULT_SAMPLES, TOKENS_TO_GENERATE
from interp.jobs.executors import ExecutorConfig
from interp.jobs.targets import CHECKPOINTS_HELP, parse_checkpoints


def _limit(text: str) -> int | None:
    """--limit N: a whole number (validate refuses N < 1: 0 is not "all", which is `all` or no --limit)."""
    if text.strip().lower() in ("none", "all"):
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of documents (write N >= 1, or omit "
                                         "--limit for every document)") from None


@dataclass
class EvalConfig:
    """Which models on which tasks, how many documents, and where the table goes."""

    models: list[str] = option(default_factory=list, cli=False,
                               help="registry names, .gguf files, HF dirs, our checkpoints, run dirs or folders")
    checkpoints: str = option("all", CHECKPOINTS_HELP, metavar="all|final|S[,S]")
    revision: str | None = option(None, "the revision of every hub model among the MODELs (branch, tag or commit; "
                                        "also: MODEL@REV)", metavar="REV")
    tasks: str = option("paper", "comma-separated tasks or groups: paper (wiki_heldout + the 8 commonsense "
                        "tasks), commonsense, niah, or names such as piqa,hellaswag")
    text: str | None = option(None, "score perplexity on this text too (task text_ppl, added to --tasks): "
                              "hf:DATASET[:CONFIG[:SPLIT[:COLUMN]]], wikitext-2 (the paper's WikiText-2 test "
                              "split), a corpus name or a UTF-8 file", metavar="TEXT")
    limit: int | None = option(None, "score only the first N documents of each task (lm-eval's --limit; for "
                               "niah: N samples per length); default all", parse=_limit, metavar="N")
    num_fewshot: int = option(0, "few-shot examples (the paper's numbers are 0-shot; with no training split "
                              "offline, lm-eval draws them from the evaluated split)")
    batch_size: int = option(8, "requests per forward pass (length-sorted)")
    bootstrap_iters: int = option(1000, "bootstrap resamples for stderrs without a closed form (LAMBADA "
                                  "perplexity); lm-eval's CLI default is 100000; 0 skips every stderr")
    niah_lengths: tuple[int, ...] = option(DEFAULT_LENGTHS, "needle-in-a-haystack context lengths in the model's "
                                           "tokens; lengths beyond the model's context are skipped with a note",
                                           parse=comma_list(int), metavar="L[,L]")
    niah_samples: int = option(DEFAULT_SAMPLES, "needle-in-a-haystack samples per length (depths spread evenly)")
    niah_gen_tokens: int = option(TOKENS_TO_GENERATE, "tokens generated per needle question (RULER: 128)")
    out: str = option("results/eval.parquet", "the table (parquet); finished model/task pairs are kept in "
                      "OUT.parts/ and skipped by a rerun")
    csv: bool = option(False, "also write OUT as CSV beside the parquet file")
    threads: int = option(0, "torch.set_num_threads (0: torch's default)")
    device: str = device_option()
    model_dtype: str = model_dtype_option()
    device_map: str | None = device_map_option()
    execution: ExecutorConfig = field(default_factory=ExecutorConfig, metadata={"cli": False})   # where tasks run

    def __post_init__(self) -> None:
        if isinstance(self.execution, dict):
            self.execution = ExecutorConfig(**self.execution)

    def validate(self) -> None:
        """Cheap checks before any file is read (InputError naming the flag)."""
        if not self.models:
            raise InputError("no MODEL given: pass registry names (interp models), .gguf files, HF dirs, "
                             "checkpoints, run dirs or folders of them")
        if not str(self.out).endswith(".parquet"):
            raise InputError(f"{self.out!r}: the table is parquet; use a path ending in .parquet", field="--out")
        for name in ("batch_size", "niah_samples", "niah_gen_tokens"):
            if getattr(self, name) < 1:
                raise InputError(f"must be at least 1, got {getattr(self, name)}", field=f"--{name.replace('_', '-')}")
        if self.limit is not None and self.limit < 1:
            raise InputError(f"must be at least 1 (or omitted for every document), got {self.limit}", field="--limit")
        if self.num_fewshot < 0 or self.bootstrap_iters < 0 or self.threads < 0:
            raise InputError("--num-fewshot, --bootstrap-iters and --threads must be >= 0")
        if not self.niah_lengths or min(self.niah_lengths) < 1:
            raise InputError(f"need positive lengths, got {self.niah_lengths}", field="--niah-lengths")
        check_device_name(self.device)
        parse_device_map(self.device_map)
        from interp._util.dtypes import MODEL_DTYPES

        if self.model_dtype not in MODEL_DTYPES:
            raise InputError(f"{self.model_dtype!r} is not a load precision", field="--model-dtype",
                             fix=f"use one of {', '.join(MODEL_DTYPES)}")
        try:
            parse_checkpoints(self.checkpoints)
        except ValueError as err:
            raise InputError(str(err).split(": ", 1)[1], field="--checkpoints") from None
        self.execution.validate()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvalConfig:
        reject_unknown_keys(cls, d)
        return cls(**d)
