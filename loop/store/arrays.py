"""Arrays a run's perturbations were given as, kept under ``runs/arrays/<sha>.npy`` (named by
:func:`loop.core.hashing.array_sha`), so the ledger's reference to one rebuilds the run; written
to temporary names and renamed, made durable together (two disk flushes for a generation's
hundreds: :func:`loop.store.files.atomic_writes`), and read back hash-checked
(:mod:`loop.core.arrays`)."""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from loop.core.arrays import npy_bytes, read_array
from loop.core.errors import LoopError
from loop.core.hashing import array_sha
from loop.store.files import StoreWarning, atomic_writes, safe_component

FOLDER = "arrays"


def array_path(runs: Path, sha: str) -> Path:
    return _in(Path(runs).resolve() / FOLDER, sha)


def _in(folder: Path, sha: str) -> Path:
    return folder / safe_component(f"{sha}.npy", "array")


# Files this process wrote or read back whole, by path, with what stat said of them then: a
# generation's arrays are read back once, not again by the sweep that runs it, unless changed since.
# The latest 65,536 files: a search of many steps does not grow it for ever.
_KEPT: OrderedDict[Path, tuple[int, int, int]] = OrderedDict()
KEPT_MAX = 1 << 16


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def store_array(runs: Path, a: np.ndarray, sha: str | None = None) -> Path:
    """Keep ``a`` under ``runs``: a file already there is kept only if it holds this very array
    (the name is the content's hash, so a good file is never written twice)."""
    sha = sha or array_sha(a)
    keep_arrays(runs, {sha: a})
    return array_path(runs, sha)


def keep_arrays(runs: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Keep each array (by its hash) under ``runs``, those not there yet written together and made
    durable at once (:func:`loop.store.files.atomic_writes`)."""
    missing, folder = {}, Path(runs).resolve() / FOLDER
    for sha, a in arrays.items():
        path = _in(folder, sha)
        stamp = _stamp(path)
        if stamp is not None and _KEPT.get(path) == stamp:
            continue
        if stamp is not None:
            try:
                read_array(path, sha)
                _KEPT[path] = stamp
                continue
            except LoopError:
                warnings.warn(f"{path} did not hold its array; rewritten", StoreWarning, stacklevel=3)
        missing[path] = a
    if missing:
        atomic_writes(folder, {path.name: npy_bytes(a) for path, a in missing.items()})
    for path in missing:
        _KEPT[path] = _stamp(path)  # type: ignore[assignment]  # just written
    while len(_KEPT) > KEPT_MAX:
        _KEPT.popitem(last=False)


def load_array(runs: Path, ref: Mapping[str, Any]) -> np.ndarray:
    """The array a ledger record refers to (``{"array": SHA, ...}``), hash-checked."""
    return read_array(array_path(runs, str(ref["array"])), str(ref["array"]))


__all__ = ["array_path", "keep_arrays", "load_array", "store_array"]
