"""XXH3-64 of long inputs, the checksum of HEF header versions 2 and 3, against xxHash itself.

The fixed answers were computed with libxxhash 0.8.1 (``XXH3_64bits``) on Debian; where that library
is installed the test also compares random inputs of the lengths where the algorithm changes step.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import io
import random

import pytest

from loop.hailort.xxh3 import xxh3_64

KNOWN = {241: 0x07525DBC14902C7F, 1024: 0xE2898655DB7BC9EE, 1025: 0x134C652BA3D6FB9E, 5000: 0x82C9E6E5B7476DC8}


def pattern(n: int) -> bytes:
    return bytes((i * 31 + 7) % 251 for i in range(n))


def digest(data: bytes) -> int:
    return xxh3_64(io.BytesIO(data).read, len(data))


@pytest.mark.parametrize("length", sorted(KNOWN))
def test_known_answers(length: int) -> None:
    assert digest(pattern(length)) == KNOWN[length]


def test_agrees_with_libxxhash_across_block_edges() -> None:
    name = ctypes.util.find_library("xxhash")
    if name is None:
        pytest.skip("libxxhash is not installed (the fixed answers above still ran)")
    lib = ctypes.CDLL(name)
    lib.XXH3_64bits.restype, lib.XXH3_64bits.argtypes = ctypes.c_uint64, [ctypes.c_char_p, ctypes.c_size_t]
    rng = random.Random(33)
    for length in (241, 256, 1023, 1024, 1025, 1087, 1088, 1089, 2049, 1024 * 1024 + 17, 3 * 1024 * 1024 + 1):
        data = rng.randbytes(length)
        assert digest(data) == lib.XXH3_64bits(data, length), length


def test_short_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="more than 240 bytes"):
        digest(b"x" * 240)
