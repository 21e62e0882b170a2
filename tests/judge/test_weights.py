"""A model's weights counted from shapes: which tensors count, and their bytes at each width."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from authored import weighed_model
from onnx import TensorProto, helper, numpy_helper

from loop.core.errors import LoopError
from loop.judge.weights import Weights, at_bits, weigh


def test_a_small_real_model_is_weighed_exactly() -> None:
    model = weighed_model()
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {"x": np.ones((1, 3, 8, 8), np.float32)})
    assert out.shape == (1, 8, 6, 6)  # a model ONNX Runtime runs, not a bag of tensors
    weights = weigh(model)
    assert weights.by_type == {"float16": 6, "float32": 216 + 8 + 1, "int8": 8}
    assert weights.count == 239
    assert weights.stored_bytes == 225 * 4 + 6 * 2 + 8
    assert [at_bits(239, b) for b in (16, 8, 4)] == [478, 239, 120]  # int4: two to a byte, the odd one rounded up


def test_an_integer_tensor_counts_only_where_a_dequantize_reads_it() -> None:
    model = weighed_model()
    model.graph.node[1].input[0] = "q_zero"  # now the zero point is what is dequantized, the kernel is not
    model.graph.node[1].input[2] = "q"
    assert weigh(model).by_type["int8"] == 1


def test_subgraphs_and_constant_lists_are_weighed() -> None:
    inner = helper.make_graph(
        [helper.make_node("Constant", [], ["k"], value_floats=[1.0, 2.0, 3.0])],
        "then",
        [],
        [helper.make_tensor_value_info("k", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.zeros((4, 4), np.float16), "inner_w")],
    )
    node = helper.make_node("If", ["cond"], ["k"], then_branch=inner, else_branch=inner)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])], [])
    assert weigh(helper.make_model(graph)) == Weights({"float16": 32, "float32": 6})


def test_sub_byte_types_are_stored_packed() -> None:
    four = helper.make_tensor("w4", TensorProto.INT4, [3], [1, 2, 3])
    graph = helper.make_graph([helper.make_node("DequantizeLinear", ["w4", "s"], ["y"])], "g", [], [], [four])
    graph.initializer.append(numpy_helper.from_array(np.array(0.1, np.float32), "s"))
    weights = weigh(helper.make_model(graph))
    assert weights.by_type == {"float32": 1, "int4": 3} and weights.stored_bytes == 4 + 2


def test_a_negative_dimension_is_refused() -> None:
    tensor = TensorProto(name="bad", dims=[-2, 3], data_type=TensorProto.FLOAT)
    with pytest.raises(LoopError, match="tensor 'bad' has a negative dimension"):
        weigh(helper.make_model(helper.make_graph([], "g", [], [], [tensor])))
