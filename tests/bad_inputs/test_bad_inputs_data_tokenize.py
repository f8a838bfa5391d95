"""Bad inputs of corpora at scale (issue #15 item 1): `interp data tokenize`, `interp data train-tokenizer`, and
`interp train --source DIR` on a tokenized folder. Each through the real CLI (tests/badinput.py): exit 2 and one
line naming the file, field and fix, nothing outside the expected outputs changed; a corrupt input is the
exception: skipped, reported, exit 0.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.badinput import Case, cases_of, check_case
from tests.factories import WORDS, word_tokenizer_json

TOKENIZE = ["data", "tokenize", "c", "--tokenizer", "tok", "--out", "out", "--workers", "1"]
TRAIN = ["train", "--preset", "micro", "--source", "out", "--threads", "1", "--steps", "2", "--out", "runs/x"]
RUN = ("runs", "cache/locks")   # a refused run may leave its folder; loading a token folder takes a lock
BPE = ["data", "train-tokenizer", "c", "--vocab-size", "300", "--sample-bytes", "10K", "--out", "bpe"]


def _corpus(tmp: Path, field: str = "text") -> None:
    word_tokenizer_json(tmp / "tok" / "tokenizer.json", [*WORDS, "."])
    (tmp / "c").mkdir()
    rows = [{field: " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(40)) + " ."} for i in range(80)]
    (tmp / "c" / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _with(*extra):
    def setup(tmp: Path) -> None:
        _corpus(tmp)
        for step in extra:
            step(tmp)
    return setup


def _file(name: str, content: bytes = b"x"):
    def write(tmp: Path) -> None:
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_bytes(content)
    return write


def _tokenized(*args: str, val: float = 0.2):
    def make(tmp: Path) -> None:
        from interp.cli import main

        assert main([*TOKENIZE, "--val-fraction", str(val), *args]) == 0
    return make


def _dataset_without_text(tmp: Path) -> None:
    import datasets

    datasets.Dataset.from_dict({"body": ["the cat"] * 4}).save_to_disk(str(tmp / "ds"))


def _damage_shard(tmp: Path) -> None:
    path = max((tmp / "out" / "shards").glob("*/train.bin"), key=lambda p: p.stat().st_size)
    data = bytearray(path.read_bytes())
    data[0] ^= 1
    path.write_bytes(bytes(data))


# `interp data tokenize`: refused before anything is written
Case("scale-tokenize-missing-source", item="15.1", setup=_with(),
     argv=["data", "tokenize", "c", "nope/", "--tokenizer", "tok", "--out", "out"],
     message=r"source 'nope/': no such file or folder")
Case("scale-tokenize-folder-without-inputs", item="15.1", setup=_with(_file("e/notes.csv")),
     argv=["data", "tokenize", "e", "--tokenizer", "tok", "--out", "out"], message=r"e: holds no inputs.*pass a folder")
Case("scale-tokenize-unknown-file-type", item="15.1", setup=_with(_file("notes.csv")),
     argv=["data", "tokenize", "notes.csv", "--tokenizer", "tok", "--out", "out"],
     message=r"notes.csv: unknown input type '.csv'")
Case("scale-tokenize-bpe-tokenizer", item="15.1", setup=_with(), argv=[*TOKENIZE, "--tokenizer", "bpe"],
     message=r"--tokenizer bpe trains on a named corpus.*interp data train-tokenizer")
Case("scale-tokenize-no-tokenizer", item="15.1", setup=_with(),
     argv=["data", "tokenize", "c", "--out", "out"], message=r"--tokenizer is required")
Case("scale-tokenize-missing-tokenizer", item="15.1", setup=_with(), argv=[*TOKENIZE, "--tokenizer", "nope/tok"],
     message=r"tokenizer 'nope/tok': no such file or folder")
Case("scale-tokenize-out-is-a-file", item="15.1", setup=_with(_file("out")), argv=TOKENIZE,
     message=r"--out out: out is a file, not a folder")
Case("scale-tokenize-out-not-ours", item="15.1", setup=_with(_file("out/mine.txt")), argv=TOKENIZE,
     message=r"out: --out: is a non-empty folder that `interp data tokenize` did not write")
Case("scale-tokenize-out-other-settings", item="15.1", setup=_with(_tokenized()), argv=[*TOKENIZE, "--field", "body"],
     message=r"holds tokens made with other settings \(val_fraction: 0.2 -> 0.05; field: 'text' -> 'body'\)")
Case("scale-tokenize-task-index", item="15.1", setup=_with(),
     argv=[*TOKENIZE, "--task-index", "2", "--task-count", "2"],
     message=r"--task-index 2 must be below --task-count 2")
Case("scale-tokenize-bad-size", item="15.1", setup=_with(), argv=[*TOKENIZE, "--shard-size", "12Q"],
     message=r"'12Q' is not a size")
Case("scale-tokenize-dataset-without-field", item="15.1", setup=_with(_dataset_without_text),
     argv=["data", "tokenize", "ds", "--tokenizer", "tok", "--out", "out"],
     message=r"ds: --field: dataset 'ds' has no column 'text' \(columns: \['body'\]\)")
Case("scale-tokenize-same-document-ids", item="15.1", setup=_with(_file("x/a.jsonl"), _file("y/a.jsonl")),
     argv=["data", "tokenize", "x/a.jsonl", "y/a.jsonl", "--tokenizer", "tok", "--out", "out"],
     message=r"two inputs share the document-id prefix 'a.jsonl'.*pass their common parent folder")
# nothing usable: the manifest says why, the exit status too
Case("scale-tokenize-no-documents", item="15.1", setup=_with(), argv=[*TOKENIZE, "--field", "body"],
     message=r"no documents found: 0 input\(s\) unreadable, 80 record\(s\) without a string field 'body'",
     may_change=("out",))
# a corrupt input is skipped and reported, the run succeeds
Case("scale-tokenize-corrupt-input-skipped", item="15.1", rc=0, may_change=("out",),
     setup=_with(_file("c/b.jsonl.gz", gzip.compress(b'{"text": "the cat"}\n' * 50)[:-12])), argv=TOKENIZE,
     message=r"interp data tokenize: skipped unreadable input .*b.jsonl.gz: EOFError",
     check=lambda tmp: json.loads((tmp / "out" / "manifest.json").read_text())["skipped_inputs"][0]["input"]
     == "b.jsonl.gz" or pytest.fail("not in the manifest"))

# `interp train --source DIR`: the folder is checked before any training
_SPLIT = _with(_file("c/b.jsonl", b'{"text": "the dog ran ."}\n' * 40),
               _tokenized("--shard-size", "1", "--task-count", "2"))
Case("scale-train-half-tokenized", item="15.1", setup=_SPLIT, argv=[*TRAIN, "--val-fraction", "0.2"],
     message=r"is incomplete: 1 of 2 shards are missing.*another --task-index", may_change=RUN)
Case("scale-train-val-fraction", item="15.1", setup=_with(_tokenized()), argv=TRAIN,
     message=r"was split at val_fraction=0.2, but val_fraction=0.05.*pass --val-fraction 0.2", may_change=RUN)
Case("scale-train-other-tokenizer", item="15.1",
     setup=_with(_tokenized(), lambda tmp: word_tokenizer_json(tmp / "t2" / "tokenizer.json", ["x", "y"])),
     argv=[*TRAIN, "--val-fraction", "0.2", "--tokenizer", "t2"],
     message=r"was tokenized with 'tok'.*pass --tokenizer out",
     may_change=RUN)
Case("scale-train-damaged-shard", item="15.1", setup=_with(_tokenized(), _damage_shard),
     argv=[*TRAIN, "--val-fraction", "0.2"], message=r"train.bin: its sha256 is .*rerun `interp data tokenize",
     may_change=RUN)
Case("scale-train-garbled-manifest", item="15.1",
     setup=_with(_tokenized(), lambda tmp: (tmp / "out" / "manifest.json").write_text("{garbled")),
     argv=[*TRAIN, "--val-fraction", "0.2"], message=r"manifest.json: is not valid JSON", may_change=RUN)

# `interp data train-tokenizer`
Case("scale-bpe-vocab-size", item="15.1", setup=_with(), argv=[*BPE, "--vocab-size", "100"],
     message=r"--vocab-size 100 must be an int from 257")
Case("scale-bpe-out-not-empty", item="15.1", setup=_with(_file("bpe/x.txt")), argv=BPE,
     message=r"bpe: --out: is not empty")
Case("scale-bpe-no-documents", item="15.1", setup=_with(), argv=[*BPE, "--field", "body"],
     message=r"no training-split document was read.*check --field", may_change=("bpe",))


@pytest.mark.parametrize("case", cases_of("scale-"), ids=lambda c: c.id)
def test_case(case, tmp_path):
    check_case(case, tmp_path)
