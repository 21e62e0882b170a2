from pathlib import Path

import numpy as np
import pytest

from loop.devices.onnxruntime import OnnxRuntimeDevice, OnnxRuntimeSession
from loop.measure.check import check


def test_check_passes_on_an_artifact(artifact):
    results = check(OnnxRuntimeDevice(), artifact)
    assert [r.passed for r in results] == [True] * 4
    assert "refused" in results[2].detail and "refused" in results[3].detail


class UncheckedSessionDouble(OnnxRuntimeSession):
    """Test double: a session that skips buffer checks, to show check() catches it."""

    def infer(self, frames, out=None):
        return [np.zeros(t.shape, t.dtype) for t in self.outputs]


class UncheckedDeviceDouble(OnnxRuntimeDevice):
    def open(self, artifact, options):
        return UncheckedSessionDouble(artifact, options)


def test_check_fails_a_session_that_accepts_anything(artifact):
    results = {r.name: r for r in check(UncheckedDeviceDouble(), artifact)}
    assert not results["different inputs -> different outputs"].passed
    assert not results["undersized input buffer -> refused"].passed
    assert "accepted" in results["undersized output buffer -> refused"].detail


def test_loop_check_cli(artifact, tmp_path):
    from click.testing import CliRunner

    from loop.cli import main

    path = tmp_path / "a.onnx"
    path.write_bytes(artifact.data)
    result = CliRunner().invoke(main, ["check", str(path)])
    assert result.exit_code == 0 and result.output.count("PASS") == 4
    bad = tmp_path / "b.onnx"
    bad.write_bytes(b"garbage")
    result = CliRunner().invoke(main, ["check", str(bad)])
    assert result.exit_code == 2 and "unreadable ONNX artifact" in result.output


def _authored_artifact(folder: Path, weight=None, node=None) -> Path:
    """A one-Add artifact with loop's layout metadata; ``weight`` edits its initializer (to
    point it at external data), ``node`` replaces its node."""
    from onnx import TensorProto, helper, numpy_helper

    from loop.core.vocab import TensorLayout
    from loop.store.artifacts import with_layout

    w = numpy_helper.from_array(np.ones(4, np.float32), "w")
    if weight is not None:
        weight(w)
    graph = helper.make_graph(
        [node or helper.make_node("Add", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    io = (TensorLayout("x", (1, 4), "float32"),), (TensorLayout("y", (1, 4), "float32"),)
    path = folder / "crafted.onnx"
    with_layout(model, *io)
    path.write_bytes(model.SerializeToString())
    return path


def _one_line(path: Path) -> str:
    from click.testing import CliRunner

    from loop.cli import main

    result = CliRunner().invoke(main, ["check", str(path)])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and "Traceback" not in result.output, result.output
    assert str(path) in lines[0]
    return lines[0]


@pytest.mark.parametrize("where", ["absolute", "parent", "link", "beside"])
def test_an_artifact_with_external_data_is_one_line(tmp_path, where):
    """ONNX Runtime refuses the first three (and would read the fourth from the working folder):
    an artifact's weights are in its own bytes, the ones its hash covers."""
    from onnx.external_data_helper import set_external_data

    (tmp_path / "w.bin").write_bytes(np.ones(4, np.float32).tobytes())
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "link.bin").symlink_to(tmp_path / "w.bin")
    location = {"absolute": str(tmp_path / "w.bin"), "parent": "../w.bin", "link": "link.bin", "beside": "w.bin"}

    def external(w):
        set_external_data(w, location=location[where], offset=0, length=16)
        w.ClearField("raw_data")

    assert "keeps its data in another file" in _one_line(_authored_artifact(folder, weight=external))


def test_a_session_the_runtime_will_not_make_is_one_line(tmp_path):
    from onnx import helper

    from loop.core.errors import LoopError
    from loop.store.artifacts import load_artifact

    path = _authored_artifact(tmp_path, node=helper.make_node("NoSuchOp", ["x", "w"], ["y"], domain="com.example"))
    assert "onnxruntime cannot open it" in _one_line(path)
    with pytest.raises(LoopError, match=r"^the artifact: onnxruntime cannot open it"):
        check(OnnxRuntimeDevice(), load_artifact(path))
