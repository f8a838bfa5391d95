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
    tok = jobs.add_parser("tokenize", help="SOURCE... -> sharded token files + manifest.json (resumable)",
                          description="Tokenize text folders, .txt/.md, .jsonl(.gz/.zst), .parquet files and saved "
                                      "HF datasets into DIR, in parallel; a rerun skips finished shards.")
    tok.add_argument("sources", nargs="+", metavar="SOURCE", help=_help(TokenizeConfig, "sources"))
    add_arguments(tok, TokenizeConfig, exclude=("sources",))
    tok.set_defaults(func=run_tokenize, command="data tokenize")
    bpe = jobs.add_parser("train-tokenizer", help="a byte-level BPE from a streamed sample of SOURCE...",
                          description="Train a byte-level BPE on a streamed, size-proportional sample of the "
                                      "training split; pass the folder as --tokenizer.")
    bpe.add_argument("sources", nargs="+", metavar="SOURCE", help=_help(TrainTokenizerConfig, "sources"))
    add_arguments(bpe, TrainTokenizerConfig, exclude=("sources",))
    bpe.set_defaults(func=run_train_tokenizer, command="data train-tokenizer")


def _help(cls: type, name: str) -> str:
    import dataclasses

    return next(f.metadata["help"] for f in dataclasses.fields(cls) if f.name == name)


def run_tokenize(args: argparse.Namespace) -> int:
    from interp.data.config import TokenizeConfig
    from interp.data.pretokenize import tokenize_corpus

    tokenize_corpus(dataclass_from_args(TokenizeConfig, args, exclude=("sources",), sources=tuple(args.sources)))
    return 0


def run_train_tokenizer(args: argparse.Namespace) -> int:
    from interp.data.config import TrainTokenizerConfig
    from interp.data.tokenizer_training import train_tokenizer

    train_tokenizer(dataclass_from_args(TrainTokenizerConfig, args, exclude=("sources",),
                                        sources=tuple(args.sources)))
    return 0
