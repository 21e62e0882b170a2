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
