"""interp.evals.niah: the RULER-style S-NIAH-1/2/3 generator (deterministic, needle where it says, prompts that fit
the length in the model's tokens) and its lm-eval tasks (a model that reads the needle scores 1, one that does
not scores 0)."""

from __future__ import annotations

import re

import pytest

from interp.evals import niah


def words(text: str) -> int:
    """A stand-in token counter: one token per whitespace-separated word."""
    return len(text.split())


@pytest.mark.parametrize("task", sorted(niah.VARIANTS))
def test_samples_are_deterministic_fit_their_length_and_hold_the_needle(task):
    samples = niah.generate(task, (300, 600), 4, words, tokens_to_generate=16)
    assert samples == niah.generate(task, (300, 600), 4, words, tokens_to_generate=16)
    assert [s["max_length"] for s in samples] == [300] * 4 + [600] * 4
    for s in samples:
        value = s["outputs"][0]
        assert s["input"].count(value) == 1 and s["length"] <= s["max_length"]
        assert s["length"] > s["max_length"] - 40                    # grown until it (nearly) fills the length
        assert f"for {s['key']} is: {value}." in s["input"]
        assert s["gen_prefix"].endswith("mentioned in the provided text is")
        assert s["input"].startswith("A special magic ")
        assert s["input"].rstrip().endswith("mentioned in the provided text?")
    kinds = {"niah_single_1": r"\d{7}", "niah_single_2": r"\d{7}", "niah_single_3": r"[0-9a-f-]{36}"}
    assert all(re.fullmatch(kinds[task], s["outputs"][0]) for s in samples)
    assert [s["depth"] for s in samples[:4]] == [0.0, 0.1, 0.2, 0.3]


def test_the_needle_sits_at_its_depth_of_the_haystack():
    early, late = (niah.make_sample("niah_single_2", 800, i, words, tokens_to_generate=16) for i in (1, 9))
    position = [s["input"].index(s["outputs"][0]) / len(s["input"]) for s in (early, late)]
    assert position[0] < 0.25 < 0.75 < position[1]
    repeat = niah.make_sample("niah_single_1", 400, 0, words, tokens_to_generate=16)
    assert repeat["input"].split("\n")[1].startswith("One of the special magic numbers")   # depth 0: first line
    assert "The grass is green. The sky is blue." in repeat["input"]


def test_a_length_that_cannot_hold_the_template_is_refused():
    assert niah.shortest_prompt("niah_single_1", words, 16) > 60
    with pytest.raises(ValueError, match="cannot hold the template"):
        niah.make_sample("niah_single_1", 60, 0, words, tokens_to_generate=16)


class _Reader:
    """A stand-in lm-eval LM for generate_until: answers with the needle's value (or never) read from the prompt."""

    def __init__(self, reads: bool):
        from lm_eval.api.model import LM

        class Reader(LM):
            def generate_until(self, requests, disable_tqdm=False):
                found = [re.search(r"is: ([0-9a-f-]+)\.", r.args[0]) for r in requests]
                return [f" {m.group(1)}." if reads and m else " I do not know." for m in found]

            def loglikelihood(self, requests, disable_tqdm=False):
                raise NotImplementedError

            def loglikelihood_rolling(self, requests, disable_tqdm=False):
                raise NotImplementedError

        self.lm = Reader()


@pytest.mark.parametrize("reads, score", [(True, 1.0), (False, 0.0)])
def test_niah_task_through_lm_eval_scores_string_match_all(reads, score, tmp_path_factory):
    pytest.importorskip("lm_eval")
    from interp.data import get_tokenizer
    from interp.evals.run import lm_evaluate
    from tests.evals.test_evals_fixtures import english_bpe

    from interp.evals.table import niah_rows

    metadata = {"max_seq_lengths": [320, 384], "num_samples": 2, "tokens_to_generate": 16,
                "tokenizer": get_tokenizer(str(english_bpe(tmp_path_factory.getbasetemp() / "bpe" / "tokenizer.json")))}
    results = lm_evaluate(_Reader(reads).lm, "niah_single_3", metadata, log_samples=True)
    assert results["results"]["niah_single_3"]["string_match_all,none"] == score
    rows = niah_rows(results["samples"]["niah_single_3"])
    assert {(r["context_length"], r.get("depth")) for r in rows} == {
        (320, None), (320, 0.0), (320, 0.1), (384, None), (384, 0.0), (384, 0.1)}
    assert all(r["value"] == score for r in rows)
    prompt = results["samples"]["niah_single_3"][0]["arguments"]
    assert "The special magic uuid for" in str(prompt)                 # lm-eval appended RULER's answer prefix
