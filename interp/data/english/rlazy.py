"""Character vectors out of an R package's lazy-load database (``data/Rdata.rdx`` + ``Rdata.rdb``), in pure Python.

Why our own ~80 lines instead of the ``rdata`` package: Debian installs R data as a lazy-load database, not as
``.rda`` files, and all we need is the character vectors (one line of a novel per element). The format is
R's XDR serialization (R Internals, "Serialization Formats"): the ``.rdx`` index is one gzip-compressed stream
(a list: variables -> [offset, length] in the ``.rdb``); each ``.rdb`` blob is a 4-byte big-endian length plus a
zlib stream of one serialized object. Only the types such data uses are read; anything else raises ValueError
naming the type, never a guess.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path
from typing import Any

_NIL, _SYM, _LIST, _CHAR, _LGL, _INT, _REAL, _STR, _VEC, _REF, _NILVALUE = 0, 1, 2, 9, 10, 13, 14, 16, 19, 255, 254
_HAS_ATTR, _HAS_TAG = 1 << 9, 1 << 10


class _Reader:
    def __init__(self, data: bytes, where: str) -> None:
        self.data, self.pos, self.where = data, 0, where
        if data[:2] != b"X\n":
            raise ValueError(f"{where}: not an R XDR serialization (starts {data[:2]!r}, expected b'X\\n')")
        self.pos = 2
        version = self.int()
        self.int(), self.int()                    # writer's R version, minimal reader version
        if version == 3:
            self.bytes(self.int())                # native encoding name
        self.symbols: list[str | None] = []

    def int(self) -> int:
        (value,) = struct.unpack_from(">i", self.data, self.pos)
        self.pos += 4
        return value

    def bytes(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError(f"{self.where}: truncated (needs {n} bytes at offset {self.pos})")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def item(self) -> Any:
        """One object: str / None (CHARSXP), list (vectors), dict (a pairlist: tag -> value), ("sym", name)."""
        flags = self.int()
        kind = flags & 0xFF
        if kind in (_NILVALUE, _NIL):
            return None
        if kind == _REF:                          # a symbol seen before: index in the flags, or in the next int
            index = flags >> 8 or self.int()
            return ("sym", self.symbols[index - 1])
        if kind == _CHAR:
            n = self.int()
            return None if n == -1 else self.bytes(n).decode("utf-8")
        if kind == _SYM:
            name = self.item()
            self.symbols.append(name)
            return ("sym", name)
        if kind == _LIST:
            attr = self.item() if flags & _HAS_ATTR else None
            tag = self.item() if flags & _HAS_TAG else None
            del attr
            value = self.item()
            rest = self.item()
            out = {tag[1] if isinstance(tag, tuple) else tag: value}
            out.update(rest or {})
            return out
        if kind in (_STR, _VEC, _INT, _LGL, _REAL):
            n = self.int()
            if kind in (_STR, _VEC):
                values: list[Any] = [self.item() for _ in range(n)]
            elif kind == _REAL:
                values = list(struct.unpack(f">{n}d", self.bytes(8 * n)))
            else:
                values = list(struct.unpack(f">{n}i", self.bytes(4 * n)))
            attributes = self.item() if flags & _HAS_ATTR else None
            return _Vector(values, attributes or {})
        raise ValueError(f"{self.where}: R object type {kind} at offset {self.pos - 4} is not supported "
                         "(only character, numeric and list vectors)")


class _Vector(list):
    """An R vector: its elements, with its attributes (``names`` ...) beside them."""

    def __init__(self, values: list[Any], attributes: dict) -> None:
        super().__init__(values)
        self.attributes = attributes

    @property
    def names(self) -> list[str]:
        return list(self.attributes.get("names") or [])


def unserialize(data: bytes, where: str = "R data") -> Any:
    """The object of one uncompressed XDR serialization stream."""
    reader = _Reader(data, where)
    value = reader.item()
    if reader.pos != len(data):
        raise ValueError(f"{where}: {len(data) - reader.pos} bytes left after the object (not one R object)")
    return value


def read_lazyload(base: str | Path) -> dict[str, list[str | None]]:
    """{variable: character vector} of the lazy-load database ``<base>.rdx`` / ``<base>.rdb``."""
    base = Path(base)
    rdx, rdb = base.with_suffix(".rdx"), base.with_suffix(".rdb")
    index = unserialize(gzip.decompress(rdx.read_bytes()), str(rdx))
    variables = index[index.names.index("variables")]
    blob_file = rdb.read_bytes()
    out = {}
    for name, (offset, length) in zip(variables.names, variables, strict=True):
        blob = blob_file[int(offset):int(offset) + int(length)]
        (size,) = struct.unpack_from(">I", blob, 0)
        data = zlib.decompress(blob[4:])
        if len(data) != size:
            raise ValueError(f"{rdb}: object {name!r} decompresses to {len(data)} bytes, its header says {size}")
        out[name] = list(unserialize(data, f"{rdb}:{name}"))
    return out
