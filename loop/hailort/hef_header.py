"""A HEF's fixed header, read and checked as HailoRT v5.2.0 does (``libhailort/src/hef/hef_internal.hpp``:
``hef__header_t``; ``hef.cpp``: ``parse_hef_file``, ``validate_hef_header``, ``calc_hef_residue_size``).

Every field is big-endian (``BYTE_ORDER__htonl``/``htonll`` on read). After magic, version and the
protobuf body's size, each version has its own tail:

- 0: reserved u32, MD5 of everything after the header (16 bytes); the rest of the file is the body;
- 1: CRC-32 (zlib's polynomial, ``common/utils.hpp`` ``CRC32``) of everything after the header, the
  size of the config words (CCWs) after the body, reserved u32;
- 2: XXH3-64 of everything after the header, CCWs size, two reserved u64;
- 3: XXH3-64, CCWs size with padding, padding size (u32), additional info size, XXH3-64 of the body
  alone (when not 0 only it is checked), reserved u64.

XXH3-64 is HailoRT's ``XXH3_64bits`` with seed 0 (``common/utils.hpp`` ``Xxhash::calc_xxh3_on_stream``),
here the ``xxhash`` package's ``xxh3_64``. Every checksum is fed the file in chunks, as HailoRT does:
a HEF may be gigabytes, and hashing it must not hold it in memory.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

import xxhash

MAGIC = 0x01484546  # HEADER_MAGIC: b"\x01HEF"
COMMON = struct.Struct(">III")  # magic, version, hef_proto_size
TAILS = {0: struct.Struct(">I16s"), 1: struct.Struct(">IQI"), 2: struct.Struct(">QQQQ"), 3: struct.Struct(">QQIQQQ")}
CHUNK = 1 << 20


class HefFormatError(ValueError):
    """The file is not a HEF HailoRT would read, with what is wrong in a few words."""


@dataclass(frozen=True)
class HefHeader:
    version: int
    header_bytes: int
    proto_bytes: int  # the protobuf body, right after the header
    extra_bytes: int  # what follows the body: CCWs (v1, v2), padded CCWs and additional info (v3)
    checksum: str  # "crc32", "md5" or "xxh3-64", of what HailoRT checks
    checksum_value: str  # hex, as stored
    checked: bool  # always True since every span is hashed; kept, as `loop inspect --json` shows it


def read_header(file: BinaryIO, size: int) -> HefHeader:
    """The header of an open HEF of ``size`` bytes, its lengths and checksum verified; raises
    :class:`HefFormatError`. Leaves ``file`` at the start of the protobuf body."""
    start = file.read(COMMON.size)
    if start[:4] != MAGIC.to_bytes(4, "big")[: len(start)] or not start:
        raise HefFormatError(f"not a HEF: it starts {start[:4].hex() or 'empty'}, a HEF starts {MAGIC:08x}")
    if len(start) < COMMON.size:
        raise HefFormatError(f"truncated: the header needs {COMMON.size} bytes, the file has {len(start)}")
    _magic, version, proto = COMMON.unpack(start)
    if version not in TAILS:
        raise HefFormatError(f"HEF header version {version} is not one HailoRT v5.2.0 reads (0 to 3)")
    tail = _unpack(TAILS[version], file, f"the version {version} header")
    header = COMMON.size + TAILS[version].size
    residue = size - header
    extra, stored, kind, covered = _layout(version, tail, proto, residue)
    if proto + extra != residue:
        raise HefFormatError(
            f"truncated or padded: the header declares {header + proto + extra:,} bytes "
            f"(body {proto:,} + {extra:,} after it), the file has {size:,}"
        )
    body = file.tell()
    computed = _digest(kind, file, covered)
    file.seek(body)
    if computed != stored:
        raise HefFormatError(f"{kind} does not match: stored {stored}, computed {computed} (the file is damaged)")
    return HefHeader(version, header, proto, extra, kind, stored, True)


def _unpack(layout: struct.Struct, file: BinaryIO, what: str) -> tuple[int, ...]:
    raw = file.read(layout.size)
    if len(raw) != layout.size:
        raise HefFormatError(f"truncated: {what} needs {layout.size} bytes, the file has {len(raw)} left")
    return layout.unpack(raw)


def _layout(version: int, tail: tuple[Any, ...], proto: int, residue: int) -> tuple[int, str, str, int]:
    """(bytes after the body, stored checksum in hex, its kind, bytes it covers from the body on)."""
    if version == 0:
        return 0, tail[1].hex(), "md5", residue  # v0: the body is the whole rest of the file
    if version == 1:
        return tail[1], f"{tail[0]:08x}", "crc32", residue
    if version == 2:
        return tail[1], f"{tail[0]:016x}", "xxh3-64", residue
    xxh, padded, _padding, additional, proto_xxh = tail[:5]
    if proto_xxh:
        return padded + additional, f"{proto_xxh:016x}", "xxh3-64", proto
    return padded + additional, f"{xxh:016x}", "xxh3-64", residue


def _digest(kind: str, file: BinaryIO, count: int) -> str:
    if kind == "crc32":
        crc = [0]

        def update(chunk: bytes) -> None:
            crc[0] = zlib.crc32(chunk, crc[0])

        _feed(file, count, update)
        return f"{crc[0]:08x}"
    state = xxhash.xxh3_64() if kind == "xxh3-64" else hashlib.md5(usedforsecurity=False)
    _feed(file, count, state.update)
    return state.hexdigest()


def _feed(file: BinaryIO, count: int, update: Callable[[bytes], None]) -> None:
    left = count
    while left:
        chunk = file.read(min(CHUNK, left))
        if not chunk:
            raise HefFormatError(f"truncated: {left:,} bytes missing")
        update(chunk)
        left -= len(chunk)
