"""The artifact's boundary: uint8 in and out, graph outputs that are also read inside."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from loop.compilers.onnxruntime import OnnxRuntimeCompiler
from loop.core.sessions import session
from loop.core.vocab import CompileOptions


def _fpn_like() -> onnx.ModelProto:
    """Two outputs, the second a MaxPool of the first: the first output is read inside too."""
    w = numpy_helper.from_array(np.random.default_rng(0).normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["level"], name="conv", pads=[1] * 4),
        helper.make_node("MaxPool", ["level"], ["pool"], name="pool", kernel_shape=[1, 1], strides=[2, 2]),
    ]
    graph = helper.make_graph(
        nodes,
        "fpn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [
            helper.make_tensor_value_info("level", TensorProto.FLOAT, [1, 4, 8, 8]),
            helper.make_tensor_value_info("pool", TensorProto.FLOAT, [1, 4, 4, 4]),
        ],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_an_output_read_inside_the_graph_keeps_its_float_for_the_readers():
    compiler, frames = OnnxRuntimeCompiler(), np.random.default_rng(1).random((4, 3, 8, 8), dtype=np.float32)
    artifact = compiler.compile(
        compiler.optimize(_fpn_like().SerializeToString(), frames, CompileOptions()), CompileOptions()
    )
    assert [t.dtype for t in artifact.outputs] == ["uint8", "uint8"]
    x = np.clip(np.round(frames[:1] / artifact.inputs[0].scale), 0, 255).astype(np.uint8)
    level, pool = session(artifact.data, optimize="all").run(None, {"x": x})
    # MaxPool of the uint8 level, on the shared grid, is the pooled output.
    np.testing.assert_array_equal(pool, level[:, :, ::2, ::2])
