"""Arrays as perturbation values: one-dimensional numbers only, named by hash, read back checked."""

from pathlib import Path

import numpy as np
import pytest

from loop.core.arrays import npy_bytes, numbers, read_array, ref_of, referenced
from loop.core.errors import LoopError
from loop.core.hashing import array_sha


def test_only_one_dimensional_numbers_are_arrays():
    assert numbers(np.arange(3, dtype=np.uint8)).dtype == np.uint8
    for bad, words in [
        (np.array([{}], dtype=object), "of dtype object"),  # never pickled
        (np.array(["a"]), "array of numbers"),
        (np.zeros((2, 2)), r"shape \[2, 2\]"),
        ([1.0, 2.0], "not list"),
    ]:
        with pytest.raises(ValueError, match=words):
            numbers(bad)


def test_the_ref_names_hash_dtype_and_shape(tmp_path: Path):
    a = np.array([0.5, 2.0], np.float32)
    assert ref_of(a) == {"array": array_sha(a), "dtype": "float32", "shape": [2]}
    assert ref_of(a)["array"] != ref_of(a.astype(np.float64))["array"]  # the dtype is in the hash


def test_a_stored_array_is_read_back_only_if_it_is_the_one_named(tmp_path: Path):
    a, other = np.array([0.5, 2.0], np.float32), np.array([0.5, 2.5], np.float32)
    path = tmp_path / "a.npy"
    path.write_bytes(npy_bytes(a))
    assert np.array_equal(read_array(path, array_sha(a)), a)
    path.write_bytes(npy_bytes(other))  # swapped
    with pytest.raises(LoopError, match="does not hold array"):
        read_array(path, array_sha(a))
    path.write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(LoopError, match="cannot be read"):
        read_array(path, array_sha(a))
    np.save(path, np.array([{}], dtype=object), allow_pickle=True)  # a pickle inside is never loaded
    with pytest.raises(LoopError, match="cannot be read"):
        read_array(path, array_sha(a))


def test_a_reference_is_checked_against_the_dtype_and_shape_it_gives(tmp_path: Path):
    a = np.array([1.0, 2.0, 3.0])
    (tmp_path / "a.npy").write_bytes(npy_bytes(a))
    ref = {**ref_of(a), "path": "a.npy"}
    assert np.array_equal(referenced(ref, tmp_path), a)
    for wrong, words in [
        ({**ref, "shape": [4]}, "has shape"),
        ({**ref, "dtype": "float32"}, "has dtype"),
        ({**ref, "array": "ab"}, "64 hex digits"),
        ({"array": ref["array"]}, "names its .npy file"),
        ({**ref, "more": 1}, "not \\['more'\\]"),
    ]:
        with pytest.raises(ValueError, match=words):
            referenced(wrong, tmp_path)
