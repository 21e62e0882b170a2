"""SHA-256 of arrays, framed one way everywhere: fingerprints, frame sets, outputs.

An array is framed as its dtype (``dtype.str``, byte order included), its shape (``repr`` of
the tuple) and its C-order bytes. The stream decodes one way: ``dtype.str`` holds no ``(``,
the shape ends at its ``)``, and dtype and shape fix how many bytes follow. So two arrays
with the same bytes and another dtype or shape hash apart, and so do two sequences that
split the same bytes differently. A name (an input's, a parameter's) goes before its array,
length-prefixed. Bytes alone (files, artifacts) are plain SHA-256 of the bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any, BinaryIO

import numpy as np


def bytes_sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def add_part(h: Any, part: bytes) -> None:
    """``part`` into ``h`` with its length in front, so parts never run into each other."""
    h.update(len(part).to_bytes(8, "little"))
    h.update(part)


def stream_sha(f: BinaryIO, chunk: int = 1 << 24) -> str:
    """SHA-256 of an open file's bytes, read a chunk at a time (a file of gigabytes is never whole)."""
    h = hashlib.sha256()
    while part := f.read(chunk):
        h.update(part)
    return h.hexdigest()


def parts_sha(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        add_part(h, part)
    return h.hexdigest()


def add_array(h: Any, a: np.ndarray) -> None:
    # ascontiguousarray frames a 0-d array as shape (1,): one value, one way, as recorded
    # fingerprints have always had it (a per-tensor scale is 0-d in one graph, (1,) in another)
    a = np.ascontiguousarray(a)
    h.update(f"{a.dtype.str}{a.shape}".encode())
    h.update(a.tobytes())


def array_sha(*arrays: np.ndarray) -> str:
    """Over dtype, shape and bytes of each array, in order."""
    h = hashlib.sha256()
    for a in arrays:
        add_array(h, a)
    return h.hexdigest()


def array_shas(first: np.ndarray, *branches: tuple[np.ndarray, ...]) -> tuple[str, ...]:
    """``array_sha(first, *branch)`` for each branch, ``first`` hashed once: a kernel's hash with
    its grid and its integers' alone share the kernel, hundreds of megabytes at a time."""
    h = hashlib.sha256()
    add_array(h, first)
    out = []
    for branch in branches:
        g = h.copy()
        for a in branch:
            add_array(g, a)
        out.append(g.hexdigest())
    return tuple(out)


def named_sha(items: Iterable[tuple[str, np.ndarray]]) -> str:
    """Over each name (length-prefixed) and its array, in the order given."""
    h = hashlib.sha256()
    for name, a in items:
        add_part(h, name.encode())
        add_array(h, a)
    return h.hexdigest()
