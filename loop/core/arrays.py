"""Arrays as values of a perturbation (per-channel factors from an optimizer, say): named by hash.

A candidate built in Python may hold a numpy array where a sweep file writes a list of numbers.
The array is kept as a ``.npy`` file named by its hash (:func:`loop.core.hashing.array_sha`: its
dtype, shape and bytes), a sweep file names that file by reference (:data:`REF_KEYS`), and the
ledger records the reference (``{"array": SHA, "dtype": ..., "shape": [...]}``), never the
numbers. The file is read with ``allow_pickle=False`` and checked against its hash, so a
swapped or damaged file is refused, and an array of objects is never written in the first place.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from loop.core.errors import LoopError
from loop.core.hashing import array_sha

NUMERIC = "fiu"  # float, signed and unsigned integer: nothing a .npy would need pickle for
REF_KEYS = ("array", "dtype", "shape", "path")  # a reference in a sweep file: its hash, what it holds, its file


def numbers(value: Any, what: str = "array") -> np.ndarray:
    """``value`` as a one-dimensional array of numbers, or a ValueError saying why not."""
    if not isinstance(value, np.ndarray):
        raise ValueError(f"{what}: a numpy array, not {type(value).__name__}")
    if value.dtype.kind not in NUMERIC:
        raise ValueError(f"{what}: an array of numbers, not of dtype {value.dtype}")
    if value.ndim != 1:
        raise ValueError(f"{what}: a one-dimensional array, not of shape {list(value.shape)}")
    return np.ascontiguousarray(value)


def ref_of(a: np.ndarray) -> dict[str, Any]:
    """The array as the ledger records it: its hash, dtype and shape."""
    return {"array": array_sha(a), "dtype": str(a.dtype), "shape": list(a.shape)}


def is_ref(value: Any) -> bool:
    return isinstance(value, Mapping) and "array" in value


def npy_bytes(a: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, a, allow_pickle=False)
    return out.getvalue()


def read_array(path: Path, sha: str) -> np.ndarray:
    """The array stored at ``path``, checked against ``sha``; a LoopError naming the file if it
    is missing, not an array of numbers, or another array."""
    try:
        found = np.load(io.BytesIO(Path(path).read_bytes()), allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise LoopError(f"array {path}: cannot be read ({exc})", field="array") from None
    if not isinstance(found, np.ndarray) or found.dtype.kind not in NUMERIC:
        raise LoopError(f"array {path}: not a .npy array of numbers", field="array")
    if array_sha(found) != sha:
        raise LoopError(f"array {path} does not hold array {sha[:12]} (its hash is {array_sha(found)[:12]})")
    return found


def referenced(ref: Mapping[str, Any], folder: Path | None, held: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    """The array a sweep file's reference names (its ``path`` relative to ``folder``), checked
    against its hash, and against its dtype and shape where the reference gives them. ``held``:
    arrays by hash, hashed by the caller, whose files are not written yet (a generation checked
    before anything lands under ``runs``): one named there is not read from its file."""
    unknown = set(ref) - set(REF_KEYS)
    if unknown:
        raise ValueError(f"an array reference takes {list(REF_KEYS)}, not {sorted(map(str, unknown))}")
    sha, path = ref.get("array"), ref.get("path")
    if not isinstance(sha, str) or len(sha) != 64 or not all(c in "0123456789abcdef" for c in sha):
        raise ValueError("an array reference's 'array' is the SHA-256 of its array, 64 hex digits")
    if not isinstance(path, str) or not path:
        raise ValueError("an array reference names its .npy file in 'path' (relative to the sweep file)")
    found = (held or {}).get(sha)
    if found is None:
        try:
            found = read_array((folder or Path.cwd()) / path, sha)
        except LoopError as exc:
            raise ValueError(exc.message) from None
    kept = {"dtype": str(found.dtype), "shape": list(found.shape)}
    for key in ("dtype", "shape"):
        if key in ref and ref[key] != kept[key]:
            raise ValueError(f"array {sha[:12]} has {key} {kept[key]}, not {ref[key]}")
    return found


__all__ = ["is_ref", "npy_bytes", "numbers", "read_array", "ref_of", "referenced"]
