"""What a float graph looks like to the quantizer: layers, removed activations, shared grids."""

from __future__ import annotations

import numpy as np
import onnx
from authored import attention_model, patterns_model
from onnx import TensorProto, helper, numpy_helper

from loop.judge.structure import analyse


def test_grid_heads_follow_onnx_runtime():
    s = analyse(patterns_model())
    # A forced input range must land on the first tensor of a shared grid.
    assert s.grid(s.layer("after_pool").in_tensor) == "r0"  # Relu (removed) -> MaxPool
    assert s.grid(s.layer("after_resize").in_tensor) == "cat"  # Concat -> Slice -> Resize
    assert s.grid(s.layer("head").in_tensor) == "g"  # GlobalAveragePool -> Flatten
    assert s.grid(s.layer("last").in_tensor) == "g"  # ... -> Gather
    assert s.layer("depthwise").out_tensor == "r2" and s.bounds["r2"] == (0.0, 6.0)
    # An Add keeps its own grid, and so does what it feeds into through a removed Relu.
    assert s.grid(s.layer("to_concat_a").in_tensor) == "r3"


def test_consumers_through_a_shared_grid():
    s = analyse(patterns_model())
    assert [lp.name for lp in s.consumers_of("g")] == ["head", "last"]
    assert [lp.name for lp in s.producer_of("r0")] == ["first"]


def test_attention_matmuls_are_unweighted_layers():
    s = analyse(attention_model())
    assert [(lp.name, lp.weight is None) for lp in s.layers] == [
        ("q_proj", False),
        ("k_proj", False),
        ("v_proj", False),
        ("qk", True),
        ("av", True),
        ("out_proj", False),
    ]


def _chain(op: str, **attrs: object) -> onnx.ModelProto:
    w = numpy_helper.from_array(np.ones((2, 2, 1, 1), np.float32), "w")
    extra = [numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")] if op == "Pad" else []
    inputs = ["a", "pads"] if op == "Pad" else ["a"]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["a"], name="c1"),
        helper.make_node(op, inputs, ["b"], name="op", **attrs),
        helper.make_node("Conv", ["b", "w"], ["y"], name="c2"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [w, *extra],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_pad_shares_only_when_it_adds_no_value():
    assert analyse(_chain("Pad", mode="reflect")).grid("b") == "a"
    assert analyse(_chain("Pad")).grid("b") == "a"  # constant 0
    assert analyse(_chain("GlobalMaxPool")).grid("b") == "b"  # not a same-scale op in ORT's QDQ registry
