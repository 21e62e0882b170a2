"""Arrays kept under runs/arrays: named by hash, written whole, a damaged one rewritten."""

from pathlib import Path

import numpy as np
import pytest

from loop.core.arrays import ref_of
from loop.store.arrays import array_path, load_array, store_array
from loop.store.files import StoreWarning


def test_an_array_is_kept_once_by_hash_and_read_back(tmp_path: Path):
    a = np.linspace(0.5, 2.0, 8, dtype=np.float32)
    path = store_array(tmp_path, a)
    assert path == array_path(tmp_path, ref_of(a)["array"]) and path.parent.name == "arrays"
    stamp = path.stat().st_mtime_ns
    assert store_array(tmp_path, a) == path and path.stat().st_mtime_ns == stamp  # there already: kept
    assert np.array_equal(load_array(tmp_path, ref_of(a)), a)
    assert not [p for p in path.parent.iterdir() if p != path]  # no temporary file left


def test_a_damaged_array_file_is_rewritten(tmp_path: Path):
    a = np.arange(4, dtype=np.float64)
    path = store_array(tmp_path, a)
    path.write_bytes(b"not an array")
    with pytest.warns(StoreWarning, match="did not hold its array"):
        store_array(tmp_path, a)
    assert np.array_equal(load_array(tmp_path, ref_of(a)), a)
