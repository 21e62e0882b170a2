"""A model's files and their streamed content key."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from loop.core.errors import LoopError
from loop.core.modelfile import external_locations, file_sha, model_files, model_key


def _model(weights: np.ndarray) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, weights.shape[0]])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, weights.shape[1]])
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [y], [numpy_helper.from_array(weights, "w")]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _external(folder: Path, weights: np.ndarray, location: str = "w.data") -> Path:
    path = folder / "m.onnx"
    onnx.save(_model(weights), str(path), save_as_external_data=True, location=location, size_threshold=0)
    return path


def test_a_self_contained_model_is_keyed_by_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(_model(np.ones((4, 2), np.float32)), str(path))
    assert model_key(path) == hashlib.sha256(path.read_bytes()).hexdigest() == file_sha(path)
    assert model_files(path) == [path] and external_locations(path) == []


def test_external_data_is_in_the_key(tmp_path: Path) -> None:
    weights = np.arange(64, dtype=np.float32).reshape(16, 4)
    path = _external(tmp_path, weights)
    assert external_locations(path) == ["w.data"] and [p.name for p in model_files(path)] == ["m.onnx", "w.data"]
    key = model_key(path)
    assert key != file_sha(path) and key == model_key(path)
    data = bytearray((tmp_path / "w.data").read_bytes())
    data[5] ^= 1
    (tmp_path / "w.data").write_bytes(bytes(data))
    assert model_key(path) != key  # one bit of the weights moves it; the .onnx is unchanged
    other = tmp_path / "other"
    other.mkdir()
    assert model_key(_external(other, weights, "v.data")) not in (key, model_key(path))  # another name


def test_data_outside_the_folder_or_missing_is_refused(tmp_path: Path) -> None:
    path = _external(tmp_path, np.ones((4, 2), np.float32))
    (tmp_path / "w.data").unlink()
    with pytest.raises(LoopError, match=r"'w\.data' is not a regular file in the model's folder"):
        model_key(path)


def test_a_written_model_is_named_by_its_key_and_a_variant_writes_only_its_changes(tmp_path: Path) -> None:
    from loop.core.modelfile import write_model

    rng = np.random.default_rng(0)
    model = _model(rng.standard_normal((64, 32)).astype(np.float32))
    model.graph.initializer.append(numpy_helper.from_array(rng.standard_normal((32, 32)).astype(np.float32), "v"))
    base, key = write_model(model, tmp_path, external=True)
    assert base == tmp_path / f"{key}.onnx" and model_key(base) == key
    assert [p.name for p in model_files(base)][1:] == [f"{file_sha(model_files(base)[1])}.data"]
    variant = onnx.load(str(base), load_external_data=False)
    w = next(t for t in variant.graph.initializer if t.name == "w")
    w.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(w, str(tmp_path)) * 2, "w"))
    path, vkey = write_model(variant, tmp_path, external=True)
    files, shared = model_files(path), model_files(base)[1]
    assert vkey != key and len(files) == 3 and shared in files  # its own data file, and the base's
    own = next(p for p in files[1:] if p != shared)
    assert own.stat().st_size == 64 * 32 * 4  # the changed kernel alone; v is read from the base's file
    loaded = onnx.load(str(path))
    assert np.array_equal(numpy_helper.to_array(loaded.graph.initializer[0]), numpy_helper.to_array(w, str(tmp_path)))
    again = onnx.load(str(base), load_external_data=False)
    t = next(t for t in again.graph.initializer if t.name == "w")
    t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t, str(tmp_path)) * 2, "w"))
    assert write_model(again, tmp_path, external=True) == (path, vkey)  # the same content: the same files
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({*(p.name for p in files), base.name})


def test_a_small_model_is_written_whole_under_the_sha_of_its_bytes(tmp_path: Path) -> None:
    from loop.core.modelfile import write_model

    model = _model(np.ones((4, 2), np.float32))
    path, key = write_model(model, tmp_path, external=False)
    assert key == hashlib.sha256(model.SerializeToString(deterministic=True)).hexdigest() == file_sha(path)
    assert [p.name for p in tmp_path.iterdir()] == [f"{key}.onnx"]
