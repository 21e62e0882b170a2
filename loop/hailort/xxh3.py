"""XXH3-64 (seed 0, default secret) of more than 240 bytes: the checksum of HEF header versions 2 and 3.

HailoRT computes it with xxHash (``common/utils.hpp`` ``Xxhash::calc_xxh3_on_stream``, ``XXH3_64bits``).
Written here from xxHash's own description of the long-input path (``xxhash.h``:
``XXH3_hashLong_internal_loop``, ``XXH3_accumulate_512``, ``XXH3_scrambleAcc``, ``XXH3_mergeAccs``),
so that reading a HEF needs no extra package; the tests check it against libxxhash where installed.
Inputs of 240 bytes or fewer take other paths, not written here: a HEF's body is never that small.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# xxhash.h XXH3_kSecret: the default 192-byte secret.
SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671fcb79e64eccc0e578825ad07dccff7221"
    "b8084674f743248ee03590e6813a264c3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364eac5ac8334d3ebc3c581a0fffa1363eb"
    "170ddd51b7f0da49d316552629d4689e2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e"
)
PRIME32_1, PRIME32_2, PRIME32_3 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D
PRIME64 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5)
PRIME_MX1 = 0x165667919E3779F9
STRIPE, STRIPES_PER_BLOCK = 64, 16  # (192 - 64) / 8 stripes of 64 bytes per block
BLOCK = STRIPE * STRIPES_PER_BLOCK
MIN_LENGTH = 241
MASK = (1 << 64) - 1
_WORDS = np.frombuffer(SECRET, "<u8")
_KEYS = np.stack([_WORDS[s : s + 8] for s in range(STRIPES_PER_BLOCK)])  # stripe s reads the secret from 8 s
_SWAP = [1, 0, 3, 2, 5, 4, 7, 6]  # acc[i ^ 1] += data[i]


def _stripes(data: np.ndarray) -> np.ndarray:
    """The sum, lane by lane (mod 2**64), of what ``XXH3_accumulate_512`` adds for each stripe of
    ``data`` (shape (..., stripes, 8)), stripe ``s`` keyed from the secret at byte ``8 s``."""
    keyed = data ^ _KEYS[: data.shape[-2]]
    products = (keyed & np.uint64(0xFFFFFFFF)) * (keyed >> np.uint64(32))
    return np.asarray((products + data[..., _SWAP]).sum(axis=-2, dtype=np.uint64))


def _scramble(acc: list[int]) -> list[int]:
    keys = _WORDS[16:24]  # the secret's last 64 bytes
    return [((a ^ (a >> 47) ^ int(k)) * PRIME32_1) & MASK for a, k in zip(acc, keys, strict=True)]


def _avalanche(h: int) -> int:
    h ^= h >> 37
    h = (h * PRIME_MX1) & MASK
    return h ^ (h >> 32)


def xxh3_64(read: Callable[[int], bytes], length: int) -> int:
    """XXH3_64bits of the next ``length`` bytes that ``read(n)`` gives (``length`` > 240)."""
    if length < MIN_LENGTH:
        raise ValueError(f"xxh3_64 here covers more than 240 bytes, not {length}")
    acc = [PRIME32_3, PRIME64[0], PRIME64[1], PRIME64[2], PRIME64[3], PRIME32_2, PRIME64[4], PRIME32_1]
    blocks = (length - 1) // BLOCK
    done, last = 0, b""
    while done < blocks:
        count = min(blocks - done, 1024)
        chunk = _exact(read, count * BLOCK)
        sums = _stripes(np.frombuffer(chunk, "<u8").reshape(count, STRIPES_PER_BLOCK, 8))
        for row in sums.tolist():
            acc = _scramble([(a + s) & MASK for a, s in zip(acc, row, strict=True)])
        done, last = done + count, chunk[-STRIPE:]
    tail = _exact(read, length - blocks * BLOCK)
    full = (len(tail) - 1) // STRIPE
    if full:
        lanes = np.frombuffer(tail[: full * STRIPE], "<u8").reshape(full, 8)
        acc = [(a + int(s)) & MASK for a, s in zip(acc, _stripes(lanes), strict=True)]
    # the input's last 64 bytes, which may reach back into the last full block
    acc = _accumulate_at(acc, (last + tail)[-STRIPE:], SECRET[192 - STRIPE - 7 :])  # XXH_SECRET_LASTACC_START
    return _merge(acc, SECRET[11:], (length * PRIME64[0]) & MASK)  # XXH_SECRET_MERGEACCS_START


def _accumulate_at(acc: list[int], stripe: bytes, secret: bytes) -> list[int]:
    data = np.frombuffer(stripe, "<u8").tolist()
    keys = np.frombuffer(secret[:STRIPE], "<u8").tolist()
    out = list(acc)
    for i, (value, key) in enumerate(zip(data, keys, strict=True)):
        keyed = value ^ key
        out[i ^ 1] = (out[i ^ 1] + value) & MASK
        out[i] = (out[i] + (keyed & 0xFFFFFFFF) * (keyed >> 32)) & MASK
    return out


def _merge(acc: list[int], secret: bytes, start: int) -> int:
    keys = np.frombuffer(secret[:64], "<u8").tolist()
    result = start
    for i in range(4):
        product = (acc[2 * i] ^ keys[2 * i]) * (acc[2 * i + 1] ^ keys[2 * i + 1])
        result = (result + ((product & MASK) ^ (product >> 64))) & MASK
    return _avalanche(result)


def _exact(read: Callable[[int], bytes], count: int) -> bytes:
    data = read(count)
    if len(data) != count:
        raise EOFError(f"{count - len(data):,} bytes missing")
    return data
