"""Token files: documents -> token memmaps with metadata (dtype, size, max id, tokenizer hash), cached;
TokenData serves training batches and fixed evaluation windows from them.

Layout: each document's tokens followed by the separator (``<|endoftext|>`` when the tokenizer has it,
else its eos token), concatenated in id order. dtype uint16 when vocab_size <= 65535 else uint32, always
stored in the metadata beside the ``.bin`` file and checked on load, together with the file size, the
largest token id, the tokenizer hash and the content's sha256 (recorded while writing; interp.data.integrity).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from interp._util.io import atomic_write, file_lock, json_sha256, safe_open, write_text_atomic
from interp._util.paths import TOKENS_META_SUFFIX, TOKENS_SUFFIX, cache_dir
from interp.data.corpora import load_documents
from interp.data.documents import (
    SPLITS,
    Document,
    documents_hash,
    no_validation_advice,
    source_label,
    split_documents,
)
from interp.data.integrity import (
    CONTENT_FIELD,
    CacheEntryError,
    content_record,
    created_with,
    delete_fix,
    read_meta,
    verify_content,
)
from interp.data.tokenizers import TextTokenizer, get_tokenizer

if TYPE_CHECKING:  # torch is imported where batches are made: tokenizing a corpus (interp.data.shards) needs none
    import torch
    from jaxtyping import Int
    from torch import Tensor

TOKENS_FORMAT = 1            # bump when the token-file layout or separator convention changes
ENCODE_BATCH_DOCS = 1_024    # documents per encode_batch call: bounds memory on large corpora
VALIDATE_SAMPLE = 1_000_000  # at most this many tokens are read to check max id < vocab_size


class TokenFileError(CacheEntryError):
    """A cached token file does not match its metadata or the request; the message names the fix."""


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits (vocab_size <= 65535), else uint32; always stored, never implied."""
    return np.dtype(np.uint16 if vocab_size <= 65_535 else np.uint32)


class TokenStream(Protocol):
    """What TokenData reads: len() and contiguous slices as numpy arrays. A memmap of one token file, or the
    shard files of a tokenized folder seen as one array (interp.data.shards.ConcatTokens)."""

    def __len__(self) -> int: ...

    def __getitem__(self, key: slice) -> np.ndarray: ...


@dataclass
class TokenData:
    """Train and val token streams (memmaps: nothing is read until sliced) with their metadata."""

    train: TokenStream
    val: TokenStream
    meta: dict
    vocab_size: int

    def tokens(self, split: str) -> TokenStream:
        if split not in SPLITS:
            raise ValueError(f"split={split!r}: choose one of {SPLITS}")
        return self.train if split == "train" else self.val

    def sample_batch(self, split: str, batch_size: int, seq_len: int,
                     generator: torch.Generator) -> Int[Tensor, "batch seq_len+1"]:
        """Random windows of seq_len + 1 tokens (inputs + shifted targets) as int64.

        Start offsets come only from ``generator``, so saving/restoring its state resumes exactly.
        """
        import torch

        data = self.tokens(split)
        n_starts = len(data) - seq_len  # window [s, s + seq_len + 1) fits for s < n_starts
        if n_starts < 1:
            raise ValueError(f"the {split} split has {len(data)} tokens, fewer than seq_len + 1 = {seq_len + 1}; "
                             "lower seq_len or use more text")
        starts = torch.randint(0, n_starts, (batch_size,), generator=generator).tolist()
        return torch.from_numpy(np.stack([data[s:s + seq_len + 1] for s in starts]).astype(np.int64))

    def eval_batches(self, batch_size: int, seq_len: int, max_batches: int | None = None,
                     split: str = "val") -> Iterator[Int[Tensor, "batch seq_len+1"]]:
        """Fixed consecutive windows from the start of the split: window i = tokens[i*seq_len : i*seq_len+seq_len+1].

        Inputs do not overlap and each token is a target at most once (the last token of a window
        is the first input of the next). The last batch may have fewer rows; weight by rows.
        """
        data = self.tokens(split)
        n_windows = (len(data) - 1) // seq_len
        if n_windows < 1:
            raise ValueError(f"the {split} split has {len(data)} tokens, fewer than seq_len + 1 = {seq_len + 1}; "
                             "lower seq_len or raise val_fraction")
        if max_batches is not None:
            n_windows = min(n_windows, max_batches * batch_size)
        return self._windows(data, batch_size, seq_len, n_windows)  # checks above run eagerly, not on first next()

    @staticmethod
    def _windows(data: TokenStream, batch_size: int, seq_len: int, n_windows: int
                 ) -> Iterator[Int[Tensor, "batch seq_len+1"]]:
        import torch

        for first in range(0, n_windows, batch_size):
            last = min(first + batch_size, n_windows)
            rows = [data[i * seq_len:i * seq_len + seq_len + 1] for i in range(first, last)]
            yield torch.from_numpy(np.stack(rows).astype(np.int64))


def prepare_tokens(source: str = "wiki", tokenizer: str | TextTokenizer = "bpe", vocab_size: int = 8192,
                   val_fraction: float = 0.05) -> TokenData:
    """Tokenize both splits of ``source`` once into cache_dir("tokens", ...) and memmap them.

    The cache key covers the corpus content, the tokenizer hash, val_fraction and the file format;
    a later call with the same arguments only validates and memmaps the files.
    ``vocab_size`` only matters for ``tokenizer="bpe"``. A folder written by ``interp data tokenize`` (a
    manifest.json beside its shards) is read as it is (interp.data.shards.load_token_dir): its tokenizer and
    split are the ones it was made with.
    """
    from interp.data.shards import is_token_dir, load_token_dir  # imports this module: not at import time

    if is_token_dir(source):
        return load_token_dir(source, tokenizer, val_fraction)
    docs = load_documents(source)
    train, val = split_documents(docs, val_fraction)
    if val_fraction > 0 and not val:  # before a tokenizer is trained on it
        raise ValueError(no_validation_advice(source, docs, val_fraction))
    tok = get_tokenizer(tokenizer, vocab_size=vocab_size, source=source, val_fraction=val_fraction)
    source_hash = documents_hash(docs)
    key = json_sha256({"format": TOKENS_FORMAT, "source_hash": source_hash, "tokenizer_hash": tok.hash,
                      "val_fraction": val_fraction})
    label = source_label(source)
    readable = tok.name if tok.name.endswith(label) else f"{label}-{tok.name}"  # "wiki-smollm2", "bpe8192-wiki"
    folder = cache_dir("tokens", f"{readable}-{key[:16]}")
    expected = {"format": TOKENS_FORMAT, "source_hash": source_hash, "tokenizer_hash": tok.hash,
                "vocab_size": tok.vocab_size, "dtype": token_dtype(tok.vocab_size).name,
                "val_fraction": val_fraction, "eos_id": tok.eos_id}
    paths = {split: folder / f"{split}{TOKENS_SUFFIX}" for split in SPLITS}
    arrays, metas = {}, {}
    with file_lock(folder / ".lock"):  # loads too: one rank hashes a changed file, the others find it checked
        if not all(_meta_path(p).exists() for p in paths.values()):
            for split, split_docs in (("train", train), ("val", val)):
                base = {**expected, "source": source, "tokenizer": tok.name, "split": split}
                write_tokens(paths[split], sorted(split_docs, key=lambda d: d.id), tok, base)
        for split, path in paths.items():
            arrays[split], metas[split] = load_tokens(path, {**expected, "split": split}, tokenizer_name=tok.name)
    meta = {k: metas["train"][k] for k in ("format", "source", "source_hash", "tokenizer", "tokenizer_hash",
                                          "vocab_size", "dtype", "eos_id", "val_fraction")}
    meta.update(n_tokens={s: metas[s]["n_tokens"] for s in SPLITS},
                n_documents={s: metas[s]["n_documents"] for s in SPLITS}, path=str(folder))
    return TokenData(arrays["train"], arrays["val"], meta, tok.vocab_size)


def _meta_path(bin_path: Path) -> Path:
    return bin_path.with_suffix(TOKENS_META_SUFFIX)


def write_tokens(path: Path, docs: Sequence[Document], tok: TextTokenizer, meta: dict) -> dict:
    """Encode documents (each followed by ``tok.eos_id``) into ``path`` and its metadata .json, atomically.

    Streams batches of documents to disk, so memory stays bounded for large corpora.
    """
    dtype = token_dtype(tok.vocab_size)
    n_tokens, max_id = 0, -1
    digest = hashlib.sha256()  # of the bytes as written: the content record costs no second read

    def write(tmp: Path) -> None:
        nonlocal n_tokens, max_id
        with safe_open(tmp, "wb") as f:
            for first in range(0, len(docs), ENCODE_BATCH_DOCS):
                flat: list[int] = []
                for ids in tok.encode_batch([d.text for d in docs[first:first + ENCODE_BATCH_DOCS]]):
                    flat.extend(ids)
                    flat.append(tok.eos_id)
                ids_array = np.asarray(flat, dtype=np.int64)
                if ids_array.size and (ids_array.min() < 0 or ids_array.max() >= tok.vocab_size):
                    raise ValueError(f"tokenizer {tok.name!r} produced id {int(ids_array.max())} outside "
                                     f"[0, vocab_size={tok.vocab_size})")
                max_id = max(max_id, int(ids_array.max()) if ids_array.size else -1)
                stored = ids_array.astype(dtype)
                digest.update(stored.tobytes())
                stored.tofile(f)
                n_tokens += ids_array.size

    atomic_write(path.parent, {path.name: write})
    full = {**meta, "dtype": dtype.name, "itemsize": dtype.itemsize, "vocab_size": tok.vocab_size,
            "n_tokens": n_tokens, "n_documents": len(docs), "max_token_id": max_id,
            "separator": "eos_id after every document", "created_with": created_with(),
            CONTENT_FIELD: content_record(path, digest.hexdigest())}
    write_text_atomic(_meta_path(path), json.dumps(full, indent=2))  # after the .bin: marks it complete
    return full


def load_tokens(path: Path, expected: dict | None = None, tokenizer_name: str | None = None
                ) -> tuple[np.ndarray, dict]:
    """Memmap a token .bin after checking it against its metadata and ``expected`` field values.

    Refuses (TokenFileError naming file, field and fix): a dtype that does not fit vocab_size, a file
    size other than n_tokens * itemsize, token ids >= vocab_size, any field differing from ``expected``,
    content whose sha256 differs from the one recorded when it was written (interp.data.integrity).
    """
    path = Path(path)
    meta, dtype = check_tokens(path, expected, tokenizer_name)
    data = np.memmap(path, dtype=dtype, mode="r") if meta["n_tokens"] else np.zeros(0, dtype=dtype)
    step = max(1, len(data) // VALIDATE_SAMPLE)
    largest = max(int(meta.get("max_token_id", -1)), int(data[::step].max()) if len(data) else -1)
    if largest >= meta["vocab_size"]:
        raise TokenFileError(f"{_meta_path(path)}: field 'vocab_size' is {meta['vocab_size']} but the file holds "
                             f"token id {largest}; {delete_fix(path.parent)}")
    return data, meta


def check_tokens(path: Path, expected: dict | None = None, tokenizer_name: str | None = None,
                 fix: str | None = None) -> tuple[dict, np.dtype]:
    """load_tokens' checks without reading the tokens (the stored max id stands for the sampled scan): the
    metadata, the file size and the content hash (hashed only when the file's stat changed). Returns
    (metadata, dtype). ``fix`` replaces the default advice (delete the cache folder)."""
    path = Path(path)
    meta_path = _meta_path(path)
    fix = fix or delete_fix(path.parent)
    if not meta_path.is_file() or not path.is_file():
        raise FileNotFoundError(f"token file {str(path)!r} or its metadata {meta_path.name} is missing; {fix}")
    meta = read_meta(meta_path, fix)

    def refuse(field: str, problem: str, extra: str = "") -> TokenFileError:
        return TokenFileError(f"{meta_path}: field {field!r} {problem}; {fix}{extra}")

    for field in ("dtype", "n_tokens", "vocab_size", "tokenizer_hash"):
        if field not in meta:
            raise refuse(field, "is missing")
    for field in ("n_tokens", "vocab_size", "max_token_id"):
        value = meta.get(field, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < -1:
            raise refuse(field, f"is {value!r}, not a count")
    if meta["dtype"] not in ("uint16", "uint32"):
        raise refuse("dtype", f"is {meta['dtype']!r}, expected 'uint16' or 'uint32'")
    dtype = np.dtype(meta["dtype"])
    if dtype != token_dtype(meta["vocab_size"]):
        raise refuse("dtype", f"is {dtype.name!r} but vocab_size {meta['vocab_size']} is stored as "
                              f"{token_dtype(meta['vocab_size']).name!r}")
    for field, want in (expected or {}).items():
        if meta.get(field) != want:
            extra = (f", or pass tokenizer= the one this file was built with ({meta.get('tokenizer')!r}, "
                     f"hash {meta.get('tokenizer_hash')!r}; requested: {tokenizer_name!r})"
                     if field == "tokenizer_hash" else "")
            raise refuse(field, f"is {meta.get(field)!r} but {want!r} was requested", extra)
    size = path.stat().st_size
    if size != meta["n_tokens"] * dtype.itemsize:
        raise refuse("n_tokens", f"says {meta['n_tokens']} tokens x {dtype.itemsize} bytes = "
                                 f"{meta['n_tokens'] * dtype.itemsize} bytes but {path.name} has {size} bytes "
                                 "(truncated, or written with another dtype)")
    if int(meta.get("max_token_id", -1)) >= meta["vocab_size"]:
        raise refuse("vocab_size", f"is {meta['vocab_size']} but the file holds token id {meta['max_token_id']}")
    verify_content(path, meta, meta_path, fix)
    return meta, dtype
