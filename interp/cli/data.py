"""`interp data <job>`: corpora at scale, outside the training run.

    interp data tokenize corpus/ more.jsonl.zst --tokenizer smollm2 --out tokens/corpus --workers 8
    interp data tokenize corpus/ --tokenizer smollm2 --out tokens/corpus --task-index 3 --task-count 16
    interp data train-tokenizer corpus/ --vocab-size 32768 --sample-bytes 2G --out tokenizers/corpus32k
    interp train --preset 440m --source tokens/corpus --out runs/440m     # trains from the shards

Flags come from interp.data.config (TokenizeConfig, TrainTokenizerConfig); docs/data.md has the layout, the
document ids and the engine. Exit status 0 (also when unreadable inputs were skipped: they are listed on
stderr and in manifest.json), 2 for bad input.
"""

from __future__ import annotations

import argparse

from interp._util.config import add_arguments, dataclass_from_args


def register(subparsers: argparse._SubParsersAction) -> None:
    from interp.data.config import TokenizeConfig, TrainTokenizerConfig

    p = subparsers.add_parser("data", help="tokenize large corpora into shards; train a BPE on a sample",
                              description=__doc__.split("\n")[0])
    jobs = p.add_subparsers(dest="job", required=True, metavar="JOB")
    _job(jobs, "tokenize", TokenizeConfig, run_tokenize, "SOURCE... -> sharded token files + manifest.json "
         "(resumable)", "Tokenize text folders, .txt/.md, .jsonl(.gz/.zst), .parquet files and saved HF datasets "
         "into DIR, in parallel; a rerun skips finished shards.")
    _job(jobs, "train-tokenizer", TrainTokenizerConfig, run_train_tokenizer, "a byte-level BPE from a streamed "
         "sample of SOURCE...", "Train a byte-level BPE on a streamed, size-proportional sample of the training "
         "split; pass the folder as --tokenizer.")


def _job(jobs: argparse._SubParsersAction, name: str, cls: type, func, help: str, description: str) -> None:
    """One `interp data <name>` parser: SOURCE... positionals, then every other field of `cls` as a flag."""
    import dataclasses

    job = jobs.add_parser(name, help=help, description=description)
    job.add_argument("sources", nargs="+", metavar="SOURCE",
                     help=next(f.metadata["help"] for f in dataclasses.fields(cls) if f.name == "sources"))
    add_arguments(job, cls, exclude=("sources",))
    job.set_defaults(func=func, command=f"data {name}")  # errors read "interp data <name>: ..."


def run_tokenize(args: argparse.Namespace) -> int:
    from interp._util.errors import debug_requested
    from interp.data.config import TokenizeConfig
    from interp.data.pretokenize import tokenize_corpus

    tokenize_corpus(dataclass_from_args(TokenizeConfig, args, exclude=("sources",), sources=tuple(args.sources)),
                    debug=bool(getattr(args, "debug", False)) or debug_requested())
    return 0


def run_train_tokenizer(args: argparse.Namespace) -> int:
    from interp.data.config import TrainTokenizerConfig
    from interp.data.tokenizer_training import train_tokenizer

    train_tokenizer(dataclass_from_args(TrainTokenizerConfig, args, exclude=("sources",),
                                        sources=tuple(args.sources)))
    return 0
