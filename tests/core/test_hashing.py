"""One framing for hashing arrays: dtype, shape and bytes, and names length-prefixed."""

from __future__ import annotations

import hashlib

import numpy as np

from loop.core.hashing import array_sha, bytes_sha, named_sha, parts_sha


def test_dtype_shape_and_bytes_each_count() -> None:
    a = np.arange(8, dtype=np.int8)
    same_bytes = [a, a.view(np.uint8), a.view(np.int16), a.reshape(2, 4), a.reshape(4, 2)]
    assert len({array_sha(x) for x in same_bytes}) == len(same_bytes)
    assert array_sha(a) == array_sha(a.copy()) != array_sha(a[::-1])


def test_a_sequence_splits_one_way() -> None:
    a = np.arange(6, dtype=np.float32)
    assert array_sha(a[:2], a[2:]) != array_sha(a[:3], a[3:]) != array_sha(a)


def test_the_framing_recorded_fingerprints_were_made_with() -> None:
    """Kernel and bias hashes in existing ledgers were made with exactly this stream: a
    non-contiguous view is hashed as its C-order copy, a 0-d scale as one value of shape (1,)."""
    kernel, scale = np.arange(12, dtype=np.int8).reshape(3, 4).T, np.float32(0.25)
    stream = b"|i1(4, 3)" + np.ascontiguousarray(kernel).tobytes() + b"<f4(1,)" + scale.tobytes()
    assert array_sha(kernel, scale) == hashlib.sha256(stream).hexdigest()


def test_names_are_framed_apart_from_their_arrays() -> None:
    x, y = np.zeros(2, np.float32), np.ones(2, np.float32)
    assert named_sha([("a", x), ("b", y)]) != named_sha([("b", x), ("a", y)])
    assert named_sha([("ab", x)]) != named_sha([("a", x)]) != array_sha(x)
    assert parts_sha(b"ab", b"c") != parts_sha(b"a", b"bc")


def test_bytes_alone_are_plain_sha256() -> None:
    assert bytes_sha(b"artifact") == hashlib.sha256(b"artifact").hexdigest()
