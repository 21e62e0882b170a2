"""The one session helper: each knob reaches ONNX Runtime (checked on the graph it saves)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from loop.core.sessions import session


def identity_relu() -> onnx.ModelProto:
    """x -> Identity -> Relu -> y: the Identity is gone at any optimization level but none."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["t"]), helper.make_node("Relu", ["t"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(("level", "kept"), [("none", True), ("basic", False), ("extended", False), ("all", False)])
def test_the_level_reaches_the_graph(tmp_path: Path, level: str, kept: bool) -> None:
    saved = tmp_path / "out.onnx"
    run = session(identity_relu(), 1, level, save_to=saved)  # type: ignore[arg-type]
    x = np.array([[-1.0, 0.0, 2.0, -3.0]], np.float32)
    assert run.run(None, {"x": x})[0].tolist() == [[0.0, 0.0, 2.0, 0.0]]
    ops = [n.op_type for n in onnx.load(str(saved)).graph.node]
    assert ("Identity" in ops) is kept


def test_bytes_and_a_path_load_the_same_model(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(identity_relu(), str(path))
    from_path, from_bytes = session(path, providers=("CPUExecutionProvider",)), session(path.read_bytes())
    assert from_path.get_providers() == from_bytes.get_providers() == ["CPUExecutionProvider"]
    assert [o.name for o in from_path.get_outputs()] == [o.name for o in from_bytes.get_outputs()] == ["y"]


def test_spin_off_reaches_the_session_and_on_is_the_runtimes_default() -> None:
    key = "session.intra_op.allow_spinning"
    assert session(identity_relu(), spin=False).get_session_options().get_session_config_entry(key) == "0"
    with pytest.raises(Exception, match="does not have configuration"):  # left to ONNX Runtime: it spins
        session(identity_relu()).get_session_options().get_session_config_entry(key)


def test_a_proto_past_the_limit_goes_as_a_file_and_is_given_its_tensors_back(monkeypatch) -> None:
    """Past protobuf's 2 GiB a proto cannot be serialized: the session reads it from a scratch file,
    its large tensors beside it, and the caller's proto is as it was (the limit lowered to see it)."""
    from onnx import numpy_helper

    from loop.core import sessions

    w = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 4096
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    before = model.SerializeToString()
    x = np.ones((1, 64), np.float32)
    monkeypatch.setattr(sessions, "PROTO_LIMIT", 1024)
    monkeypatch.setattr(sessions, "SPILL_FROM", 1024)
    spilled = []
    real = sessions._spilled
    monkeypatch.setattr(sessions, "_spilled", lambda m: spilled.append(1) or real(m))
    got = session(model).run(None, {"x": x})[0]
    assert spilled and np.allclose(got, x @ w, rtol=1e-6)
    assert model.SerializeToString() == before  # its tensors given back, nothing left pointing at a file


def test_a_consumed_proto_hands_its_numpy_typed_tensors_and_keeps_the_rest_inline(tmp_path: Path) -> None:
    """``consume``: float and integer tensors go to the session as arrays, while bfloat16 (an
    ml_dtypes type ONNX Runtime refuses as an array) stays in the graph, and the graph the
    session saves holds every tensor inline, as a graph compile's artifact must."""
    import ml_dtypes

    rng = np.random.default_rng(0)
    w = rng.standard_normal((128, 128)).astype(np.float32)
    b = rng.standard_normal((128, 128)).astype(ml_dtypes.bfloat16)
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["b"], ["bf"], to=TensorProto.FLOAT),
            helper.make_node("MatMul", ["x", "w"], ["m"]),
            helper.make_node("MatMul", ["m", "bf"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 128])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 128])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.ones((1, 128), np.float32)
    want = session(model, optimize="extended").run(None, {"x": x})[0]
    saved = tmp_path / "saved.onnx"
    got = session(model, optimize="extended", save_to=saved, consume=True).run(None, {"x": x})[0]
    assert np.array_equal(got, want)
    assert {t.name: t.data_location for t in model.graph.initializer} == {"w": TensorProto.EXTERNAL, "b": 0}
    back = onnx.load(str(saved))
    assert all(t.data_location == TensorProto.DEFAULT and t.raw_data for t in back.graph.initializer)
