"""Options of `interp data tokenize` and `interp data train-tokenizer`, declared once (the CLI is built from them).

Torch-free and import-light: `interp --help` builds the parser from these dataclasses.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import asdict, dataclass

from interp._util.config import option

SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'256M', '1.5G', '4096' -> bytes (K/M/G/T are powers of 1024; 'MB', 'MiB' read the same)."""
    match = _SIZE.fullmatch(str(text).strip())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size: give bytes or a number with K/M/G/T, e.g. 256M")
    return int(float(match.group(1)) * SIZE_UNITS[match.group(2).upper()])


def available_cores() -> int:
    """Cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS
        return os.cpu_count() or 1


@dataclass
class ReadOptions:
    """How documents are read from the sources (interp.data.sources): shared by tokenizing and BPE training."""

    sources: tuple[str, ...] = option((), "text folders, .txt/.md, .jsonl(.gz/.zst), .parquet files and saved "
                                          "HF datasets (datasets.load_from_disk folders)", cli=False)
    field: str = option("text", "the text field of a JSON record, parquet column or dataset column")
    id_field: str | None = option(None, "a record field holding a stable document id (default: file name + "
                                        "line/row index); decides the train/val split")
    val_fraction: float = option(0.05, "fraction of documents held out (by a hash of their id; never moves)")

    def check_read_options(self, where: str) -> None:
        from interp.data.documents import _check_val_fraction

        if not self.sources:
            raise ValueError(f"{where}: give at least one SOURCE (a folder, a file or a saved HF dataset)")
        if not isinstance(self.field, str) or not self.field:
            raise ValueError(f"{where}: --field {self.field!r} must name a field, e.g. text")
        if self.id_field is not None and (not isinstance(self.id_field, str) or not self.id_field):
            raise ValueError(f"{where}: --id-field {self.id_field!r} must name a field, or be left out")
        _check_val_fraction(self.val_fraction)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class TokenizeConfig(ReadOptions):
    """`interp data tokenize SOURCE... --tokenizer T --out DIR`: sharded token files plus manifest.json."""

    tokenizer: str | None = option(None, "smollm2, a HF tokenizer folder, a tokenizer.json or a .gguf file "
                                         "(or a folder from `interp data train-tokenizer`)", metavar="T")
    out: str | None = option(None, "the tokenized folder to write (new, or one this command wrote: finished "
                                   "shards are skipped)", metavar="DIR")
    workers: int = option(0, "tokenizing processes on this machine, one core each (0 = every core available)")
    task_index: int = option(0, "this machine's index among --task-count machines sharing the shards")
    task_count: int = option(1, "machines tokenizing the same corpus into the same --out (each takes a "
                                "contiguous block of shards)")
    shard_size: int = option(256 << 20, "input bytes per shard: consecutive files of one folder are grouped "
                                        "up to this size; a larger file is a shard of its own",
                             parse=parse_size, metavar="SIZE")
    verbose: bool = option(False, "show datatrove's own log lines on stderr (always in DIR/logs/)")
    plan_only: bool = option(False, "write DIR's tokenizer and plan (DIR/logs/plan-*.json), print it and stop: "
                                    "for another datatrove executor, e.g. Slurm (docs/data.md)")

    def validate(self) -> None:
        where = "interp data tokenize"
        self.check_read_options(where)
        if not self.tokenizer:
            raise ValueError(f"{where}: --tokenizer is required (smollm2, a HF tokenizer folder, a tokenizer.json "
                             "or a .gguf file)")
        if self.tokenizer == "bpe":
            raise ValueError(f"{where}: --tokenizer bpe trains on a named corpus; train one on these sources with "
                             "`interp data train-tokenizer SOURCE... --out TOKDIR` and pass --tokenizer TOKDIR")
        if not self.out:
            raise ValueError(f"{where}: --out DIR is required (the tokenized folder)")
        for name, low in (("workers", 0), ("task_index", 0), ("task_count", 1), ("shard_size", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{where}: --{name.replace('_', '-')} {value!r} must be an int >= {low}")
        if self.task_index >= self.task_count:
            raise ValueError(f"{where}: --task-index {self.task_index} must be below --task-count "
                             f"{self.task_count} (indices count from 0)")

    @property
    def n_workers(self) -> int:
        return self.workers or available_cores()


@dataclass
class TrainTokenizerConfig(ReadOptions):
    """`interp data train-tokenizer SOURCE... --vocab-size V --sample-bytes B --out DIR`: a byte-level BPE."""

    vocab_size: int = option(8192, "vocabulary size of the byte-level BPE (257 .. 1,048,576)")
    sample_bytes: int = option(1 << 30, "characters of training-split text to learn the merges from, taken from "
                                        "every input in proportion to its size", parse=parse_size, metavar="SIZE")
    out: str | None = option(None, "the tokenizer folder to write (tokenizer.json + tokenizer_config.json); pass "
                                   "it as --tokenizer", metavar="DIR")

    def validate(self) -> None:
        from interp.data.tokenizers import MAX_BPE_VOCAB

        where = "interp data train-tokenizer"
        self.check_read_options(where)
        if isinstance(self.vocab_size, bool) or not isinstance(self.vocab_size, int) or not (
                257 <= self.vocab_size <= MAX_BPE_VOCAB):
            raise ValueError(f"{where}: --vocab-size {self.vocab_size!r} must be an int from 257 (256 bytes + "
                             f"<|endoftext|>) to {MAX_BPE_VOCAB:,}; 8192 to 65536 is usual")
        if isinstance(self.sample_bytes, bool) or not isinstance(self.sample_bytes, int) or self.sample_bytes < 1:
            raise ValueError(f"{where}: --sample-bytes {self.sample_bytes!r} must be a positive size, e.g. 1G")
        if not self.out:
            raise ValueError(f"{where}: --out DIR is required (the tokenizer folder)")
