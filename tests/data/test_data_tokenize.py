"""`interp data tokenize` / `train-tokenizer` and training from the tokenized folder (issue #15, "Corpora at scale").

Every input kind on tiny files (a text folder, a .txt, .jsonl, .jsonl.gz, .jsonl.zst, .parquet and a saved HF
dataset of two .arrow files); the token streams checked against an independent tokenization (the `tokenizers`
backend on documents read back with json / pyarrow / datasets); the same manifest with 1 and 2 workers and with
2 machines; reruns skipping by content; a run killed inside a shard's write resuming to the same folder; corrupt
inputs skipped; `interp train --source DIR`, exactly resumable. A word-level tokenizer keeps it all fast.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from interp._util.errors import InputError
from interp._util.io import FAULT_ENV
from interp.data import (
    ConcatTokens,
    TokenData,
    TokenizeConfig,
    TrainTokenizerConfig,
    chunk_text,
    discover,
    get_tokenizer,
    is_validation,
    load_documents,
    prepare_tokens,
    read_input,
    stream_chunks,
    strip_gutenberg,
    tokenize_corpus,
    train_tokenizer,
)
from interp.data.shards import MANIFEST_FILE, SHARD_FILE, SHARDS_DIR
from interp.data.sources import InputReport
from tests.badinput import REPO
from tests.factories import WORDS, word_tokenizer_json

VAL = 0.2   # held out: enough validation documents in a tiny corpus
N_SHARDS = 13 + 1 + 3 + 1 + 2   # one per input at shard_size=1: 13 folder files, book.txt, 3 JSONL, parquet, 2 arrow


def sentence(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + " ."


def write_inputs(root: Path) -> dict[str, Path]:
    """One input of every kind under root; returns kind -> path (the SOURCE arguments)."""
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    rng = random.Random(0)
    root.mkdir(parents=True, exist_ok=True)
    folder = root / "folder"
    (folder / "sub").mkdir(parents=True)
    for name in [f"doc{i:02d}.txt" for i in range(10)] + ["b.md", "sub/c.txt", "sub/d.txt"]:
        (folder / name).write_text(" ".join(sentence(rng) for _ in range(8)))
    (folder / "notes.csv").write_text("ignored,file\n")
    lines = ["*** START OF THE PROJECT GUTENBERG EBOOK X ***"]
    for _ in range(60):
        lines += [" ".join(sentence(rng) for _ in range(6)), ""]
    lines.append("*** END OF THE PROJECT GUTENBERG EBOOK X ***")
    (root / "book.txt").write_bytes(("licence text\r\n" + "\r\n".join(lines) + "\r\nfooter").encode("utf-8-sig"))
    records = [{"text": " ".join(sentence(rng) for _ in range(3)), "id": f"r{i}"} for i in range(90)]
    records[5]["text"] = "   "  # empty: counted, not a document
    (root / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records[:30]))
    with gzip.open(root / "e.jsonl.gz", "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in records[30:60])
    (root / "f.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(
        "".join(json.dumps(r) + "\n" for r in records[60:]).encode()))
    pq.write_table(pa.table({"text": [sentence(rng, 20) for _ in range(40)], "n": list(range(40))}),
                   root / "g.parquet", row_group_size=16)
    datasets.Dataset.from_dict({"text": [sentence(rng, 15) for _ in range(50)]}).save_to_disk(
        str(root / "ds"), num_shards=2)
    return {"folder": folder, "text": root / "book.txt", "jsonl": root / "d.jsonl", "gz": root / "e.jsonl.gz",
            "zst": root / "f.jsonl.zst", "parquet": root / "g.parquet", "arrow": root / "ds"}


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokenize")
    sources = write_inputs(root / "in")
    tok_dir = word_tokenizer_json(root / "tok" / "tokenizer.json", [*WORDS, "."]).parent
    return root, sources, tok_dir


def config(work, out: str, *sources: Path, **overrides) -> TokenizeConfig:
    root, all_sources, tok_dir = work
    srcs = sources or tuple(all_sources.values())
    return TokenizeConfig(sources=tuple(map(str, srcs)), tokenizer=str(tok_dir), out=str(root / out),
                          **{"val_fraction": VAL, "workers": 1, **overrides})


@pytest.fixture(scope="module")
def single(work):
    """Every source tokenized once, 1 worker, one shard per file (shard_size 1 byte)."""
    return tokenize_corpus(config(work, "single", shard_size=1))


@pytest.fixture(scope="module")
def grouped(work):
    """The same, one shard per source (the default shard size): the reference of the runs below."""
    return tokenize_corpus(config(work, "grouped"))


def streams(out: Path) -> dict[str, np.ndarray]:
    data = prepare_tokens(str(out), "bpe", val_fraction=VAL)
    return {s: np.asarray(data.tokens(s)[0:len(data.tokens(s))]) for s in ("train", "val")}


def independent_documents(sources: dict[str, Path]) -> list[tuple[str, str]]:
    """(id, text) of every input, read without interp.data.sources: json, pyarrow, datasets, corpora."""
    import datasets
    import pyarrow.parquet as pq
    import zstandard

    docs = [(d.id, d.text) for d in load_documents(str(sources["folder"]))]            # corpora: by relative path
    book = load_documents(str(sources["text"]))                                           # corpora: chunks
    docs += sorted(((d.id, d.text) for d in book), key=lambda d: int(d[0].split("#")[1]))
    raw = {"jsonl": sources["jsonl"].read_bytes(), "gz": gzip.decompress(sources["gz"].read_bytes()),
           "zst": zstandard.ZstdDecompressor().decompressobj().decompress(sources["zst"].read_bytes())}
    for kind in ("jsonl", "gz", "zst"):
        for i, line in enumerate(raw[kind].decode().splitlines()):
            text = json.loads(line)["text"]
            if text.strip():
                docs.append((f"{sources[kind].name}#{i}", text))
    docs += [(f"g.parquet#{i}", t) for i, t in enumerate(pq.read_table(sources["parquet"])["text"].to_pylist())]
    docs += [(f"ds#{i}", t) for i, t in enumerate(datasets.load_from_disk(str(sources["arrow"]))["text"])]
    return docs


def encoded(docs: list[tuple[str, str]], tok, split: str) -> list[int]:
    out: list[int] = []
    for doc_id, text in docs:
        if is_validation(doc_id, VAL) == (split == "val"):
            out += tok.backend.encode(text, add_special_tokens=False).ids + [tok.eos_id]
    return out


# ------------------------------------------------------------------------------------------------ readers

def test_every_input_kind_reads_with_its_documented_ids(work):
    _, sources, _ = work
    inputs, notes = discover([str(p) for p in sources.values()], "text")
    kinds = {i.kind for i in inputs}
    assert kinds == {"text_doc", "text", "jsonl", "parquet", "arrow"}
    assert [i.name for i in inputs if i.kind == "arrow"] == ["ds/data-00000-of-00002.arrow",
                                                            "ds/data-00001-of-00002.arrow"]
    assert inputs[-1].row_offset == 25 and any("notes.csv" in n for n in notes)
    ours = []
    for inp in inputs:
        report = InputReport()
        ours += list(read_input(inp, "text", None, report, lambda sha: None))
        assert report.bad_lines == 0
    assert ours == independent_documents(sources)


def test_id_field_names_documents_by_the_record(work):
    _, sources, _ = work
    (inp,), _ = discover([str(sources["gz"])], "text")
    ids = [d for d, _ in read_input(inp, "text", "id", InputReport(), lambda sha: None)]
    assert ids == [f"r{i}" for i in range(30, 60)]


@pytest.mark.parametrize("seed", range(40))
def test_streamed_chunks_equal_chunk_text(seed):
    rng = random.Random(seed)
    lines = [" ".join("w" * rng.randint(1, 30) for _ in range(rng.randint(0, 60))) if rng.random() > 0.3 else ""
             for _ in range(rng.randint(0, 300))]
    if rng.random() < 0.5:
        lines.insert(rng.randint(0, len(lines)), "*** START OF THIS PROJECT GUTENBERG EBOOK ***")
    if rng.random() < 0.5:
        lines.insert(rng.randint(0, len(lines)), "*** END OF THE PROJECT GUTENBERG EBOOK ***")
    text = "\n".join(lines) + ("\n" if rng.random() < 0.5 else "")
    chunk = rng.choice([50, 400, 4000])
    assert [c for c in stream_chunks(text.split("\n"), chunk) if c] == chunk_text(text, chunk)
    from interp.data.sources import _between, _markers

    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"interp-chunks-{os.getpid()}-{seed}.txt"
    path.write_text(text)
    try:
        start, end = _markers(str(path), lambda sha: None)
        assert "\n".join(_between(str(path), start, end)) == strip_gutenberg(text)
    finally:
        path.unlink()


# ------------------------------------------------------------------------------------------------ tokenizing

def test_tokens_match_an_independent_tokenization(work, single):
    root, sources, tok_dir = work
    tok = get_tokenizer(str(tok_dir))
    docs = independent_documents(sources)
    got = streams(root / "single")
    for split in ("train", "val"):
        assert got[split].tolist() == encoded(docs, tok, split), split
    assert single["complete"] and single["n_shards"] == N_SHARDS and not single["skipped_inputs"]
    assert single["n_documents"] == {s: sum(is_validation(d, VAL) == (s == "val") for d, _ in docs)
                                     for s in ("train", "val")}
    assert single["settings"]["dtype"] == "uint16" and single["tokenizer"]["hash"] == tok.hash
    assert single["content_hash"] == prepare_tokens(str(root / "single"), "bpe", val_fraction=VAL).meta["source_hash"]
    shard = json.loads((root / "single" / SHARDS_DIR / single["shards"][0]["name"] / SHARD_FILE).read_text())
    assert shard["inputs"][0]["sha256"] == __import__("hashlib").sha256(
        (sources["folder"] / "b.md").read_bytes()).hexdigest()
    assert get_tokenizer(str(root / "single")).hash == tok.hash  # the folder is a tokenizer folder too


def test_text_sources_hold_out_what_interp_train_holds_out(work, single):
    _, sources, _ = work
    for kind in ("folder", "text"):
        old = prepare_tokens(str(sources[kind]), str(work[2]), val_fraction=VAL)
        cfg = config(work, f"only-{kind}", sources[kind])
        new = tokenize_corpus(cfg)
        assert new["n_documents"] == old.meta["n_documents"] and new["n_tokens"] == old.meta["n_tokens"]


def test_same_manifest_and_split_with_1_or_2_workers_and_any_shard_size(work, single, grouped):
    root = work[0]
    assert tokenize_corpus(config(work, "two", workers=2)) == grouped
    assert grouped["n_shards"] == 7 and grouped["n_documents"] == single["n_documents"]
    assert {k: v.tolist() for k, v in streams(root / "grouped").items()} == {
        k: v.tolist() for k, v in streams(root / "single").items()}


def test_two_machines_write_the_single_machine_manifest(work, grouped):
    root = work[0]
    first = tokenize_corpus(config(work, "split", task_index=0, task_count=2))
    assert not first["complete"] and len(first["missing_shards"]) == 4  # machine 0 took shards 0-2 of 7
    with pytest.raises(InputError, match="incomplete: 4 of 7 shards"):
        prepare_tokens(str(root / "split"), "bpe", val_fraction=VAL)
    assert tokenize_corpus(config(work, "split", task_index=1, task_count=2)) == grouped


def test_rerun_skips_by_content_and_rebuilds_what_changed(work, tmp_path):
    _, sources, _ = work
    src = tmp_path / "in"
    src.mkdir()
    for kind in ("jsonl", "gz", "parquet"):
        (src / sources[kind].name).write_bytes(sources[kind].read_bytes())
    cfg = config(work, "unused", src, shard_size=1)
    cfg.out = str(tmp_path / "out")
    first = tokenize_corpus(cfg)
    shard_json = {s["name"]: tmp_path / "out" / SHARDS_DIR / s["name"] / SHARD_FILE for s in first["shards"]}
    stamps = {n: p.stat().st_mtime_ns for n, p in shard_json.items()}
    assert tokenize_corpus(cfg) == first
    assert {n: p.stat().st_mtime_ns for n, p in shard_json.items()} == stamps   # nothing rebuilt
    by_input = {s["inputs"][0]["name"]: s["name"] for s in first["shards"]}
    bins = {n: (p.parent / "train.bin").stat().st_mtime_ns for n, p in shard_json.items()}
    os.utime(src / "d.jsonl", ns=(1, 1))                                         # touched, same bytes
    assert tokenize_corpus(cfg)["content_hash"] == first["content_hash"]
    assert {n: (p.parent / "train.bin").stat().st_mtime_ns for n, p in shard_json.items()} == bins  # not rebuilt
    assert json.loads(shard_json[by_input["d.jsonl"]].read_text())["inputs"][0]["mtime_ns"] == 1  # restamped
    stamps = {n: p.stat().st_mtime_ns for n, p in shard_json.items()}
    with open(src / "e.jsonl.gz", "ab") as f:                                    # new content
        f.write(gzip.compress(b'{"text": "the cat sat ."}\n'))
    bin_path = tmp_path / "out" / SHARDS_DIR / by_input["g.parquet"] / "train.bin"
    damaged = bytearray(bin_path.read_bytes())
    damaged[:2] = bytes([damaged[0] ^ 1, damaged[1]])
    bin_path.write_bytes(bytes(damaged))                                          # same size, other bytes
    third = tokenize_corpus(cfg)
    rebuilt = {n for n, p in shard_json.items() if p.stat().st_mtime_ns != stamps[n]}
    assert rebuilt == {by_input["e.jsonl.gz"], by_input["g.parquet"]}
    assert third["n_documents"]["train"] + third["n_documents"]["val"] == (
        first["n_documents"]["train"] + first["n_documents"]["val"] + 1)
    assert streams(tmp_path / "out")["train"].size > 0


def _tokenize_process(work, out: str, fault: str | None) -> subprocess.CompletedProcess:
    root, sources, tok_dir = work
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    argv = [sys.executable, "-m", "interp.cli", "data", "tokenize", *(str(sources[k]) for k in KILL_SOURCES),
            "--tokenizer", str(tok_dir), "--out", str(root / out), "--val-fraction", str(VAL), "--workers", "1"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=1800, env=env)


KILL_SOURCES = ("folder", "text", "jsonl", "gz")   # what imports fast (no pyarrow, no datasets): 4 shards


@pytest.mark.integration  # spawns interp processes that kill themselves
def test_a_killed_run_resumes_to_the_same_folder(work):
    root, sources = work[0], work[1]
    straight = tokenize_corpus(config(work, "straight", *(sources[k] for k in KILL_SOURCES)))
    out = root / "killed"
    proc = _tokenize_process(work, "killed", "replace book.txt*/train.bin")  # 2nd shard, inside its token files
    assert proc.returncode == -9, proc.stderr
    assert not (out / MANIFEST_FILE).exists()
    done = sorted(p.parent.name for p in (out / SHARDS_DIR).glob(f"*/{SHARD_FILE}"))
    assert len(done) == 1 and list((out / SHARDS_DIR).glob("book.txt*/.*.tmp"))
    proc = _tokenize_process(work, "killed", "replace e.jsonl.gz*/shard.json")  # resumed, killed before a record
    assert proc.returncode == -9, proc.stderr
    stamps = {p: p.stat().st_mtime_ns for p in (out / SHARDS_DIR).glob(f"*/{SHARD_FILE}")}
    assert len(stamps) == 3
    proc = _tokenize_process(work, "killed", None)
    assert proc.returncode == 0, proc.stderr
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())  # finished shards were not redone
    assert not list(out.rglob(".*.tmp"))
    assert json.loads((out / MANIFEST_FILE).read_text()) == straight


def test_corrupt_inputs_are_skipped_and_reported(work, tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = tmp_path / "in"
    src.mkdir()
    good = [{"text": f"the cat sat on the mat {i} ."} for i in range(40)]
    (src / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in good[:20]) + "{not json\n[1, 2]\n")
    (src / "b.jsonl.gz").write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in good).encode())[:-30])
    (src / "c.jsonl.zst").write_bytes(b"\x28\xb5\x2f\xfd garbage")
    buf = pa.BufferOutputStream()
    pq.write_table(pa.table({"text": ["a b"] * 10}), buf)
    (src / "d.parquet").write_bytes(buf.getvalue().to_pybytes()[:-20])
    (src / "e.txt").write_bytes("caf\xe9 latin-1".encode("latin-1"))
    (src / "f.jsonl").write_bytes(b"\x00\x01binary\n\xff\xfe\n")
    (src / "g.txt").write_text("the dog ran .")
    cfg = config(work, "x", src)
    cfg.out = str(tmp_path / "out")
    manifest = tokenize_corpus(cfg)
    err = capsys.readouterr().err
    skipped = {s["input"]: s["error"] for s in manifest["skipped_inputs"]}
    assert set(skipped) == {"b.jsonl.gz", "c.jsonl.zst", "d.parquet", "e.txt", "f.jsonl"}
    assert "EOFError" in skipped["b.jsonl.gz"] and "not UTF-8" in skipped["e.txt"]
    assert "no line is a JSON object" in skipped["f.jsonl"]
    for name in skipped:
        assert f"skipped unreadable input {src / name}" in err
    assert "a.jsonl: skipped 2 bad JSON line(s) (line 21: not JSON" in err
    assert manifest["n_documents"]["train"] + manifest["n_documents"]["val"] == 21  # a.jsonl's 20 + g.txt
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in good[:20]))
    (clean / "g.txt").write_text("the dog ran .")
    ref = config(work, "x", clean)
    ref.out = str(tmp_path / "ref")
    tokenize_corpus(ref)
    assert {k: v.tolist() for k, v in streams(tmp_path / "out").items()} == {
        k: v.tolist() for k, v in streams(tmp_path / "ref").items()}  # the skipped bytes left no trace


# ------------------------------------------------------------------------------------------------ reading back

def test_concat_tokens_is_the_concatenated_array(tmp_path):
    rng = np.random.default_rng(0)
    parts = [rng.integers(0, 60_000, n).astype(np.uint16) for n in (5, 0, 17, 1, 40)]
    paths = []
    for i, part in enumerate(parts):
        paths.append(tmp_path / f"{i}.bin")
        part.tofile(paths[-1])
    whole = np.concatenate(parts)
    view = ConcatTokens(paths, [len(p) for p in parts], np.uint16)
    assert len(view) == len(whole) == 63
    for a in range(0, 64):
        for b in range(a, 64, 3):
            assert np.array_equal(view[a:b], whole[a:b])
    assert view[-1] == whole[-1] and view[22] == whole[22] and np.array_equal(view[:], whole)
    with pytest.raises(IndexError):
        view[63]
    data = TokenData(view, view, {}, 60_000)
    ref = TokenData(whole, whole, {}, 60_000)
    for seq_len in (4, 20, 62):
        g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        assert torch.equal(data.sample_batch("train", 6, seq_len, g1), ref.sample_batch("train", 6, seq_len, g2))
        assert all(torch.equal(x, y) for x, y in zip(data.eval_batches(2, seq_len), ref.eval_batches(2, seq_len),
                                                      strict=True))


def test_loading_checks_the_folder(work, single, tmp_path):
    import shutil

    root = work[0]
    out = tmp_path / "copy"
    shutil.copytree(root / "single", out)
    data = prepare_tokens(str(out), str(out), val_fraction=VAL)        # its own tokenizer by path: accepted
    assert data.meta["n_shards"] == N_SHARDS and data.meta["tokenizer_path"].endswith("tokenizer.json")
    assert data.vocab_size == get_tokenizer(str(work[2])).vocab_size
    with pytest.raises(InputError, match="val_fraction=0.05 was asked for"):
        prepare_tokens(str(out), "bpe", val_fraction=0.05)
    other = word_tokenizer_json(tmp_path / "other" / "tokenizer.json", ["x", "y"])
    with pytest.raises(InputError, match="was tokenized with"):
        prepare_tokens(str(out), str(other), val_fraction=VAL)
    biggest = max(single["shards"], key=lambda sh: sh["n_tokens"]["train"])
    victim = out / SHARDS_DIR / biggest["name"] / "train.bin"
    damaged = bytearray(victim.read_bytes())
    damaged[0] ^= 1
    victim.write_bytes(bytes(damaged))
    with pytest.raises(InputError, match="rerun `interp data tokenize"):
        prepare_tokens(str(out), "bpe", val_fraction=VAL)


# ------------------------------------------------------------------------------------------------ training

def test_train_from_a_tokenized_folder_resumes_exactly(work, single):
    from interp.training import TrainConfig, Trainer
    from safetensors.torch import load_file

    root = work[0]

    def cfg(name: str) -> TrainConfig:
        return TrainConfig.from_preset("micro", source=str(root / "single"), val_fraction=VAL,
                                       out_dir=str(root / "runs" / name), threads=1, log_interval=1, progress=False)

    straight = Trainer(cfg("straight")).run()
    half = Trainer(cfg("split")).run(stop_at=4)
    assert half["status"] == "interrupted" and half["step"] == 4
    done = Trainer(cfg("split").with_overrides(resume=True)).run()
    assert done["status"] == straight["status"] == "done"
    assert done["val_loss"] == straight["val_loss"] and done["train_loss"] == straight["train_loss"]
    wa, wb = (load_file(str(root / "runs" / n / "model.safetensors")) for n in ("straight", "split"))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    stored = json.loads((root / "runs" / "straight" / "config.json").read_text())["data"]
    assert stored["source_hash"] == single["content_hash"] and stored["n_shards"] == N_SHARDS


def test_cli_tokenize_with_a_hf_tokenizer_folder_then_train(work, tmp_path):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    from interp.cli import main
    from interp.data.tokenizers import train_bpe

    root, sources, _ = work
    texts = [d for _, d in independent_documents(sources)]
    hf = PreTrainedTokenizerFast(tokenizer_object=train_bpe(texts, 300), eos_token="<|endoftext|>")
    hf.save_pretrained(str(tmp_path / "hf"))
    slow = tmp_path / "slow"                         # vocab.json + merges.txt only: converted by transformers
    hf.backend_tokenizer.model.save(str(slow.mkdir() or slow))
    (slow / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "GPT2Tokenizer",
                                                            "eos_token": "<|endoftext|>"}))
    for folder in ("hf", "slow"):
        rc = main(["data", "tokenize", str(sources["jsonl"]), "--tokenizer", str(tmp_path / folder), "--out",
                   str(tmp_path / f"out-{folder}"), "--val-fraction", "0.2", "--workers", "1"])
        assert rc == 0
        manifest = json.loads((tmp_path / f"out-{folder}" / MANIFEST_FILE).read_text())
        assert manifest["tokenizer"]["hash"] == get_tokenizer(str(tmp_path / folder)).hash
    reference = AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    docs = [(f"d.jsonl#{i}", json.loads(line)["text"]) for i, line in
            enumerate(sources["jsonl"].read_text().splitlines()) if json.loads(line)["text"].strip()]
    want = [i for d, t in docs if not is_validation(d, 0.2) for i in reference(t)["input_ids"] + [hf.eos_token_id]]
    for folder in ("hf", "slow"):
        assert streams_at(tmp_path / f"out-{folder}", 0.2)["train"].tolist() == want, folder
    rc = main(["train", "--preset", "micro", "--source", str(tmp_path / "out-hf"), "--val-fraction", "0.2",
               "--steps", "2", "--threads", "1", "--out", str(tmp_path / "run"), "--set", "progress=false"])
    assert rc == 0 and json.loads((tmp_path / "run" / "result.json").read_text())["status"] == "done"
    # the run's tokenizer is the folder's copy (not a BPE rebuilt from `train.tokenizer` "bpe"): probe and export work
    from interp.hf.resolve import checkpoint_tokenizer

    stored = json.loads((tmp_path / "run" / "config.json").read_text())
    trained_with = json.loads((tmp_path / "out-hf" / MANIFEST_FILE).read_text())["tokenizer"]["hash"]
    assert checkpoint_tokenizer(stored, "run").hash == trained_with == get_tokenizer(str(tmp_path / "hf")).hash
    (tmp_path / "text.txt").write_text(" ".join(texts[:40]))
    assert main(["probe", "--model", str(tmp_path / "run"), "--text", str(tmp_path / "text.txt"), "--tokens", "64",
                 "--seq-len", "16", "--out", str(tmp_path / "probe.parquet")]) == 0
    assert main(["export", str(tmp_path / "run"), "--hf", str(tmp_path / "export")]) == 0


def streams_at(out: Path, val: float) -> dict[str, np.ndarray]:
    data = prepare_tokens(str(out), "bpe", val_fraction=val)
    return {s: data.tokens(s)[:] for s in ("train", "val")}


# ------------------------------------------------------------------------------------------------ BPE training

def test_train_tokenizer_on_a_sample_of_the_training_split(work, tmp_path):
    from transformers import AutoTokenizer

    root, sources, _ = work
    src = tmp_path / "in"
    src.mkdir()
    rng = random.Random(1)
    rows = [{"text": " ".join(sentence(rng) for _ in range(4))} for _ in range(300)]
    for i, row in enumerate(rows):
        if is_validation(f"a.jsonl#{i}", 0.2):
            row["text"] += " zqxvkzqxvk" * 20  # only in held-out documents: must never become a token
    (src / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = TrainTokenizerConfig(sources=(str(src), str(sources["parquet"])), vocab_size=320, sample_bytes=20_000,
                               val_fraction=0.2, out=str(tmp_path / "bpe"))
    out = train_tokenizer(cfg)
    meta = json.loads((out / "meta.json").read_text())
    assert 19_000 < meta["sampled"]["characters"] <= 20_000 and meta["sampled"]["inputs"] == 2
    tok = get_tokenizer(str(out))
    assert tok.vocab_size == 320 and tok.eos_id == 0 and not any("zq" in t for t in tok.backend.get_vocab())
    assert AutoTokenizer.from_pretrained(str(out))("the cat")["input_ids"] == tok.encode("the cat")
    stamp = (out / "tokenizer.json").stat().st_mtime_ns
    assert train_tokenizer(cfg) == out and (out / "tokenizer.json").stat().st_mtime_ns == stamp  # a no-op
    with pytest.raises(InputError, match="is not empty"):
        train_tokenizer(TrainTokenizerConfig(sources=(str(src),), vocab_size=300, out=str(out)))
    manifest = tokenize_corpus(TokenizeConfig(sources=(str(src),), tokenizer=str(out), out=str(tmp_path / "t"),
                                              val_fraction=0.2, workers=1))
    assert manifest["tokenizer"]["hash"] == tok.hash and manifest["n_tokens"]["val"] > 0


def test_plan_only_writes_the_tokenizer_and_the_plan(work, tmp_path):
    from interp.data.pretokenize import TokenizeShards

    _, sources, tok_dir = work
    cfg = config(work, "x", sources["jsonl"], sources["gz"], shard_size=1, plan_only=True)
    cfg.out = str(tmp_path / "out")
    planned = tokenize_corpus(cfg)
    plan = json.loads(Path(planned["plan"]).read_text())
    assert planned["n_shards"] == len(plan["shards"]) == 2 and not (tmp_path / "out" / SHARDS_DIR).exists()
    assert get_tokenizer(str(tmp_path / "out")).hash == get_tokenizer(str(tok_dir)).hash
    TokenizeShards(planned["plan"]).run(rank=1, world_size=2)  # what a Slurm array task does
    cfg.plan_only = False
    manifest = tokenize_corpus(cfg)  # builds shard 0 only, then writes the manifest
    assert manifest["complete"] and [s["inputs"][0]["name"] for s in manifest["shards"]] == ["d.jsonl", "e.jsonl.gz"]


@pytest.mark.slow
@pytest.mark.integration  # spawns interp processes
def test_bench_tokenize_quick():
    from benchmarks import bench_tokenize

    text = bench_tokenize.main(["--quick", "--threads", "1"])
    for piece in ("load average", "### Requirements", "(a) Tokens/s on one core", "(b) 1 vs 2 worker",
                  "(c) Peak memory", "tokenizers encode_batch_fast"):
        assert piece in text, piece
