"""lm-eval's entry point to our evaluation sets: `custom_dataset: !function interp.evals.data.load_local` in our task
YAMLs (interp/evals/tasks/), which keep lm-eval's prompt fields and swap only the source.

The sets themselves (files, schema, sizes, hashes) are interp.data.evalsets; the text_ppl documents (a text of the
user's choice, `interp eval --text`) are interp.data.text.text_set. What is left here is lm-eval's side: the
{split: datasets.Dataset} it asks for, the task name of the text set, and the metadata key that limits documents.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interp._util.errors import InputError
from interp.data.evalsets import LOCAL_SETS, load_docs, package_dir
from interp.data.text import text_set

if TYPE_CHECKING:
    import datasets

TEXT_TASK = "text_ppl"      # the task scoring `interp eval --text` (interp/evals/tasks/text_ppl.yaml)
DOCS_LIMIT = "docs_limit"   # TaskManager metadata key: keep only the first N documents (what --limit scores)


def load_local(local: str, **metadata: Any) -> dict[str, datasets.Dataset]:
    """lm-eval `custom_dataset` entry point of our task YAMLs (dataset_kwargs: {local: <task>}). lm-eval passes
    the task's metadata too; metadata docs_limit=N keeps the first N documents, the ones lm-eval's
    --limit N scores, so process_docs (HellaSwag's maps 10,042 documents) runs on those alone."""
    import datasets

    if local == TEXT_TASK:
        if not metadata.get("text"):
            raise InputError(f"the {TEXT_TASK} task scores a text of your choice and none was given", field="--text",
                             fix="pass --text hf:DATASET[:CONFIG[:SPLIT[:COLUMN]]], wikitext-2, a corpus or a file")
        texts = text_set(str(metadata["text"])).documents
        split, docs = "validation", datasets.Dataset.from_list([{"page": d} for d in texts])
    else:
        split, docs = load_docs(local)
    limit = metadata.get(DOCS_LIMIT)
    if limit is not None and int(limit) < len(docs):
        docs = docs.select(range(int(limit)))
    splits = {split: docs}
    extra = LOCAL_SETS[local].validation if local in LOCAL_SETS else None
    if extra:
        splits["validation"] = datasets.load_from_disk(str((package_dir() / extra).parent), keep_in_memory=True)
    return splits
