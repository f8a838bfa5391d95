"""Bad inputs of the data layer (issue #11 items 5, 11, 12): sources, tokenizers, token and tokenizer caches.

Every case runs `interp train --preset micro` (or `interp probe`) on a small generated text ("book.txt", ~330 kB,
a second to tokenize) instead of the wiki corpus, so a case that builds a cache entry in `setup` costs seconds;
the cache is the case's own (<scratch>/cache). A case that damages a cache entry expects the error and the entry
left as it was (nothing under the scratch folder changes but the run folder).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import string
from pathlib import Path

import numpy as np
import pytest

from tests.badinput import Case, cases_of, check_case
from tests.factories import WORDS, tiny_checkpoint, tiny_lm, word_tokenizer_json

MICRO = ["train", "--preset", "micro", "--steps", "2", "--out", "runs/x"]
BOOK = [*MICRO, "--source", "book.txt"]
RUNS = ("runs",)          # a failed run may leave its (empty) run folder or lock; never anything else
VOCAB = 384               # the micro preset's


# ------------------------------------------------------------------------------------------ setups

def _book(tmp: Path, name: str = "book.txt", paragraphs: int = 400) -> Path:
    """~300 kB of prose over 300 made-up words: enough merges for a BPE larger than the micro preset's 384."""
    rng = random.Random(0)
    words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 8))) for _ in range(300)]
    text = "\n\n".join(" ".join(rng.choice(words) for _ in range(120)).capitalize() + "." for _ in range(paragraphs))
    (tmp / name).write_text(text, encoding="utf-8")
    return tmp / name


def _write(name: str, content: bytes | None = None, *, book: bool = False):
    """A setup writing `name` (a folder when content is None), and book.txt when `book`."""
    def setup(tmp: Path) -> None:
        if book:
            _book(tmp)
        if content is None:
            (tmp / name).mkdir()
        else:
            (tmp / name).write_bytes(content)
    return setup


def _token_cache(tmp: Path) -> Path:
    """book.txt and its micro-preset token cache entry (what `interp train --preset micro` builds)."""
    from interp import data

    _book(tmp)
    return Path(data.prepare_tokens("book.txt", "bpe", VOCAB, 0.05).meta["path"])


def _tokenizer_entry(tmp: Path, vocab_size: int) -> Path:
    from interp import data

    return data.get_tokenizer("bpe", vocab_size=vocab_size, source="book.txt").path.parent


def _edit_json(path: Path, **changes) -> None:
    meta = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
    path.write_text(json.dumps(meta))


def zero_tokens(tmp: Path) -> None:
    """Zero a block inside train.bin in place: size, dtype and every id (0 = the separator) stay valid."""
    path = _token_cache(tmp) / "train.bin"
    with open(path, "r+b") as f:
        f.seek(path.stat().st_size // 3)
        f.write(bytes(8192))


def swapped_tokenizer(vocab_size: int, old_entry: bool = False):
    """Another BPE's tokenizer.json copied over the micro entry's (old_entry: one written before content hashes
    were recorded, where only a larger vocabulary can be told)."""
    def setup(tmp: Path) -> None:
        _book(tmp)
        entry, other = _tokenizer_entry(tmp, VOCAB), _tokenizer_entry(tmp, vocab_size)
        shutil.copyfile(other / "tokenizer.json", entry / "tokenizer.json")
        if old_entry:
            _edit_json(entry / "meta.json", content=None)
    return setup


def truncated_tokenizer(tmp: Path) -> None:
    _book(tmp)
    path = _tokenizer_entry(tmp, VOCAB) / "tokenizer.json"
    path.write_bytes(path.read_bytes()[:1000])


def truncated_tokens(tmp: Path) -> None:
    path = _token_cache(tmp) / "train.bin"
    os.truncate(path, path.stat().st_size - 100)


def token_meta(text: str | None = None, **changes):
    def setup(tmp: Path) -> None:
        meta = _token_cache(tmp) / "train.json"
        if text is not None:
            meta.write_text(text)
        if changes:
            _edit_json(meta, **changes)
    return setup


def probe_model(text_setup=None):
    """A tiny checkpoint whose tokenizer is a word-level tokenizer.json (loads in milliseconds)."""
    def setup(tmp: Path) -> None:
        tok = word_tokenizer_json(tmp / "tok" / "tokenizer.json", WORDS + ["."])
        tiny_checkpoint(tmp / "ck", tiny_lm(vocab_size=64), tokenizer=tok)
        if text_setup is not None:
            text_setup(tmp)
    return setup


def _folder_of_blank_files(tmp: Path) -> None:
    (tmp / "texts").mkdir()
    (tmp / "texts" / "a.txt").write_text("\n \n")


def _latin1(tmp: Path) -> None:
    """A latin-1 book, long enough to train on (the old code did, decoding it as latin-1 without a word)."""
    book = _book(tmp).read_text(encoding="utf-8")
    (tmp / "latin.txt").write_bytes(("The caf\u00e9 by the river.\n\n" + book).encode("latin-1"))


PROBE = ["probe", "--model", "ck", "--out", "p.parquet"]
NOT_UTF8 = r"is not UTF-8: byte 0xe9 at offset 7 \(line 1\).*iconv -f latin1 -t utf-8 latin.txt > latin.txt.utf8"
CACHE_FIX = r"delete the cache folder '.*cache/tokens/bpe384-book.txt-[0-9a-f]{16}'"
TOKENIZER_FIX = r"delete the cache folder '.*cache/tokenizers/bpe384-[0-9a-f]{16}'"


# ------------------------------------------------------------------------------------------ item 5: cache content
Case("data-tokens-zeroed-block", item="5", argv=BOOK, setup=zero_tokens, may_change=RUNS,
     message=r"interp train: .*train.bin: its sha256 is [0-9a-f]{16}\.\.\. but train.json recorded .* changed since.*"
             + CACHE_FIX)
SWAPPED = r"tokenizer.json: holds a tokenizer of \d+ ids but this cache entry is for vocab_size=384 \(the file was replaced\); "
Case("data-tokenizer-swapped-larger", item="5", argv=BOOK, setup=swapped_tokenizer(1000), may_change=RUNS,
     message=r"interp train: .*" + SWAPPED + TOKENIZER_FIX)
Case("data-tokenizer-swapped-larger-old-entry", item="5", argv=BOOK, setup=swapped_tokenizer(1000, old_entry=True),
     may_change=RUNS, message=r"interp train: .*" + SWAPPED + TOKENIZER_FIX)
Case("data-tokenizer-swapped-smaller", item="5", argv=BOOK, setup=swapped_tokenizer(300), may_change=RUNS,
     message=r"interp train: .*tokenizer.json: its sha256 is .* but meta.json recorded .*" + TOKENIZER_FIX)

# ------------------------------------------------------------------------------------------ item 12: text, caches
Case("data-train-source-latin1", item="12", argv=[*MICRO, "--source", "latin.txt"], setup=_latin1,
     message=r"interp train: source 'latin.txt' " + NOT_UTF8)
Case("data-probe-text-latin1", item="12", argv=[*PROBE, "--text", "latin.txt"], setup=probe_model(_latin1),
     message=r"interp probe: text 'latin.txt' " + NOT_UTF8)
Case("data-tokenizer-cache-corrupt", item="12", argv=BOOK, setup=truncated_tokenizer, may_change=RUNS,
     message=r"interp train: .*tokenizer.json: not a tokenizers JSON file \(.*\); " + TOKENIZER_FIX)
Case("data-probe-text-too-short", item="12", argv=[*PROBE, "--text", "short.txt", "--seq-len", "16", "--tokens", "32"],
     setup=probe_model(_write("short.txt", b"the cat sat on a")),
     message=r"interp probe: the text has 5 tokens but .*needs \d+: pass a longer text .*or lower seq_len to at "
             r"most [1-9]\d* \(--seq-len \d+ --tokens \d+\)$")
Case("data-probe-text-empty", item="12", argv=[*PROBE, "--text", "empty.txt", "--seq-len", "16", "--tokens", "32"],
     setup=probe_model(_write("empty.txt", b"")),
     message=r"interp probe: the text has 0 tokens .*: the text is empty")

# ------------------------------------------------------------------------------------------ item 11: before training
Case("data-train-source-empty", item="11", argv=[*MICRO, "--source", "empty.txt"], setup=_write("empty.txt", b""),
     message=r"interp train: source 'empty.txt' holds no text \(0 bytes\)")
Case("data-train-source-short", item="11", argv=[*MICRO, "--source", "short.txt"],
     setup=_write("short.txt", b"Just a few words here."),
     message=r"interp train: source 'short.txt': none of its 1 document .*give at least ~[1-9][\d,]* characters")
Case("data-train-source-missing", item="11", argv=[*MICRO, "--source", "missing.txt"],
     message=r"interp train: source 'missing.txt': no such file or folder")
Case("data-train-vocab-zero", item="11", argv=[*BOOK, "--vocab-size", "0"], setup=_book,
     message=r"interp train: .*vocab_size.*0")
Case("data-train-vocab-three", item="11", argv=[*BOOK, "--vocab-size", "3"], setup=_book,
     message=r"interp train: vocab_size=3: a byte-level BPE needs an int from 257")
Case("data-train-vocab-huge", item="11", argv=[*BOOK, "--set", "vocab_size=1000000000"], setup=_book, subprocess=True,
     message=r"interp train: vocab_size=1000000000: .* to 1,048,576")   # was: a Rust abort allocating 70 GB
Case("data-train-unknown-tokenizer", item="11", argv=[*BOOK, "--tokenizer", "bogus"], setup=_book,
     message=r"interp train: unknown tokenizer 'bogus'")
Case("data-train-token-cache-truncated", item="11", argv=BOOK, setup=truncated_tokens, may_change=RUNS,
     message=r"interp train: .*train.json: field 'n_tokens' says .* but train.bin has \d+ bytes \(truncated.*"
             + CACHE_FIX)

# ------------------------------------------------------------------------------------------ more hostile inputs
Case("data-train-source-binary", item="new", argv=[*MICRO, "--source", "blob.bin"],
     setup=_write("blob.bin", bytes(range(256)) * 64),
     message=r"interp train: source 'blob.bin' is not text: a NUL byte at offset 0")
Case("data-probe-text-binary", item="new", argv=[*PROBE, "--text", "blob.bin"],
     setup=probe_model(_write("blob.bin", b"text\x00\x01\x02")),
     message=r"interp probe: text 'blob.bin' is not text: a NUL byte at offset 4")
Case("data-train-source-utf16", item="new", argv=[*MICRO, "--source", "wide.txt"],
     setup=_write("wide.txt", "The river.\n".encode("utf-16")),
     message=r"interp train: source 'wide.txt' is UTF-16 text .*iconv -f utf-16 -t utf-8 wide.txt")
Case("data-train-source-device", item="new", argv=[*MICRO, "--source", "/dev/null"],
     message=r"interp train: source '/dev/null' is not a regular file or folder")
Case("data-train-source-folder-empty-files", item="new", argv=[*MICRO, "--source", "texts"],
     setup=_folder_of_blank_files,
     message=r"interp train: folder 'texts': its 1 .txt/.md files hold no text")
Case("data-probe-text-folder", item="new", argv=[*PROBE, "--text", "texts"],
     setup=probe_model(_write("texts")), message=r"interp probe: text='texts': is a folder")
Case("data-probe-seq-len-1-skip-first", item="new", argv=[*PROBE, "--seq-len", "1"], setup=probe_model(),
     message=r"interp probe: seq_len=1 with positions=skip_first counts no token .*pass positions=all")
Case("data-probe-eps-nan", item="new", argv=[*PROBE, "--eps", "nan"], setup=probe_model(),
     message=r"interp probe: eps=nan: a positive finite floor")
Case("data-train-val-fraction-holds-nothing", item="new", argv=[*BOOK, "--val-fraction", "0.00001"], setup=_book,
     message=r"interp train: val_fraction=1e-05 holds out no document .*at least 0.0001")
Case("data-train-tokenizer-not-a-tokenizer", item="new", argv=[*BOOK, "--tokenizer", "conf.json"],
     setup=_write("conf.json", b'{"a": 1}', book=True),
     message=r"interp train: conf.json: not a tokenizers JSON file \(.*\); pass a tokenizer.json")
Case("data-train-tokenizer-text-file", item="new", argv=[*BOOK, "--tokenizer", "book.txt"], setup=_book,
     message=r"interp train: tokenizer 'book.txt' is neither a tokenizer.json")
Case("data-train-tokenizer-empty-folder", item="new", argv=[*BOOK, "--tokenizer", "tokdir"],
     setup=_write("tokdir", book=True),
     message=r"interp train: tokenizer folder 'tokdir' has neither tokenizer.json nor tokenizer_config.json")
Case("data-train-token-meta-not-json", item="new", argv=BOOK, setup=token_meta(text='{"format": 1,'),
     may_change=RUNS, message=r"interp train: .*train.json: not valid JSON \(.*\); " + CACHE_FIX)
Case("data-train-token-meta-bad-count", item="new", argv=BOOK, setup=token_meta(n_tokens="many"), may_change=RUNS,
     message=r"interp train: .*train.json: field 'n_tokens' is 'many', not a count; " + CACHE_FIX)


@pytest.mark.parametrize("case", cases_of("data-"), ids=lambda c: c.id)
def test_case(case, tmp_path):
    check_case(case, tmp_path)


# ------------------------------------------------------------------------------------------ the content record

def test_content_hash_is_recorded_checked_once_and_adopted_by_old_entries(tmp_path, monkeypatch):
    """A new entry records its sha256; a load whose file is unchanged does not hash it again; a touched file is
    hashed once more; an entry written before the record gets one (same files, same ids)."""
    from interp import data
    from interp.data import integrity

    monkeypatch.setenv("INTERP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    folder = _token_cache(tmp_path)
    meta_path = folder / "train.json"
    record = json.loads(meta_path.read_text())["content"]
    assert record["sha256"] == integrity.file_sha256(folder / "train.bin") and record["file"] == "train.bin"
    hashed: list[str] = []
    real = integrity.file_sha256
    monkeypatch.setattr(integrity, "file_sha256", lambda p: hashed.append(Path(p).name) or real(p))
    first = data.prepare_tokens("book.txt", "bpe", VOCAB, 0.05)
    assert hashed == []                                     # stat unchanged: nothing re-read
    os.utime(folder / "train.bin")
    data.prepare_tokens("book.txt", "bpe", VOCAB, 0.05)
    assert hashed == ["train.bin"]                          # touched: hashed once, recorded
    data.prepare_tokens("book.txt", "bpe", VOCAB, 0.05)
    assert hashed == ["train.bin"]
    for path in (meta_path, folder / "val.json", _tokenizer_entry(tmp_path, VOCAB) / "meta.json"):
        _edit_json(path, content=None)                      # as written before content hashes existed
    again = data.prepare_tokens("book.txt", "bpe", VOCAB, 0.05)
    assert json.loads(meta_path.read_text())["content"]["sha256"] == record["sha256"]
    assert again.meta == first.meta and np.array_equal(again.train, first.train)


def test_read_only_cache_still_loads(tmp_path, monkeypatch):
    """Where the record cannot be written (a shared read-only cache), the entry is verified on every load."""
    from interp import data
    from interp.data import integrity

    monkeypatch.setenv("INTERP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    folder = _token_cache(tmp_path)
    os.utime(folder / "train.bin")

    def refuse(*args, **kwargs):
        raise PermissionError("read-only")

    monkeypatch.setattr(integrity, "write_text_atomic", refuse)
    assert len(data.prepare_tokens("book.txt", "bpe", VOCAB, 0.05).train) > 0
