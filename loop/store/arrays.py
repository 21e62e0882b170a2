"""Arrays a run's perturbations were given as, kept under ``runs/arrays/<sha>.npy`` (named by
:func:`loop.core.hashing.array_sha`), so the ledger's reference to one rebuilds the run; written
to a temporary name, fsynced and renamed, and read back hash-checked (:mod:`loop.core.arrays`).
A scratch copy (a generation checked before anything lands under ``runs``) is thrown away, so it
is written plainly: an fsync there buys nothing and costs a disk flush per array."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from loop.core.arrays import npy_bytes, read_array
from loop.core.errors import LoopError
from loop.core.hashing import array_sha
from loop.store.files import StoreWarning, atomic_write, safe_component

FOLDER = "arrays"


def array_path(runs: Path, sha: str) -> Path:
    return Path(runs).resolve() / FOLDER / safe_component(f"{sha}.npy", "array")


def store_array(runs: Path, a: np.ndarray, sha: str | None = None, durable: bool = True) -> Path:
    """Keep ``a`` under ``runs``: a file already there is kept only if it holds this very array
    (the name is the content's hash, so a good file is never written twice). ``durable=False``:
    ``runs`` is a scratch folder about to be thrown away, so the file is written without fsync."""
    sha = sha or array_sha(a)
    path = array_path(runs, sha)
    if path.is_file():
        try:
            read_array(path, sha)
            return path
        except LoopError:
            warnings.warn(f"{path} did not hold its array; rewritten", StoreWarning, stacklevel=2)
    if not durable:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(npy_bytes(a))
        return path
    return atomic_write(path, npy_bytes(a))


def load_array(runs: Path, ref: Mapping[str, Any]) -> np.ndarray:
    """The array a ledger record refers to (``{"array": SHA, ...}``), hash-checked."""
    return read_array(array_path(runs, str(ref["array"])), str(ref["array"]))


__all__ = ["array_path", "load_array", "store_array"]
