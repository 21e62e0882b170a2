"""Tiny ONNX models and sweep text authored for the tests (no binary blobs)."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FAST_MEASURE = "measure: {warmup: 2, frames: 20, repeats: 2, ttfo_repeats: 1, latency_frames: 5}"


def exported_classifier(act: str = "relu6", seed: int = 0) -> onnx.ModelProto:
    """A small model shaped like a framework export: path-like node names, a ReLU6 as Clip,
    a global pool and a Gemm head."""
    rng = np.random.default_rng(seed)
    w1 = rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32)
    w2 = rng.normal(0, 0.2, (16, 8, 3, 3)).astype(np.float32)
    fc = rng.normal(0, 0.2, (10, 16)).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in [
        (w1, "features.0.weight"), (rng.normal(0, .1, 8).astype(np.float32), "features.0.bias"),
        (w2, "features.1.weight"), (rng.normal(0, .1, 16).astype(np.float32), "features.1.bias"),
        (fc, "classifier.weight"), (rng.normal(0, .1, 10).astype(np.float32), "classifier.bias"),
        (np.float32(0), "zero"), (np.float32(6), "six")]]
    act_node = (helper.make_node("Clip", ["a", "zero", "six"], ["b"], name="/features/act0/Clip") if act == "relu6"
                else helper.make_node("Relu", ["a"], ["b"], name="/features/act0/Relu"))
    nodes = [
        helper.make_node("Conv", ["pixels", "features.0.weight", "features.0.bias"], ["a"],
                         name="/features/0/Conv", pads=[1, 1, 1, 1], strides=[2, 2]),
        act_node,
        helper.make_node("Conv", ["b", "features.1.weight", "features.1.bias"], ["c"],
                         name="/features/1/Conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["d"], name="/features/act1/Relu"),
        helper.make_node("GlobalAveragePool", ["d"], ["e"], name="/pool/GlobalAveragePool"),
        helper.make_node("Flatten", ["e"], ["f"], name="/Flatten"),
        helper.make_node("Gemm", ["f", "classifier.weight", "classifier.bias"], ["logits"],
                         name="/classifier/Gemm", transB=1),
    ]
    graph = helper.make_graph(nodes, "exported", [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["N", 3, 16, 16])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


TWO_CONV_RECIPE = """\
name: tiny_two_conv
seed: 0
params: {height: 8, width: 8}
input: {name: input, shape: [1, 3, $height, $width]}
layers:
  - {name: conv1, op: conv, out: 8, kernel: 3, act: relu, weight_std: 0.1}
  - {name: conv2, op: conv, out: 4, kernel: 3, weight_std: 0.1}
"""


def pooled_two_conv() -> onnx.ModelProto:
    """conv1 -> Relu -> MaxPool -> conv2: the pool shares conv1's output grid."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.normal(0, 0.1, (8, 3, 3, 3)).astype(np.float32), "w1"),
             numpy_helper.from_array(np.zeros(8, np.float32), "b1"),
             numpy_helper.from_array(rng.normal(0, 0.1, (4, 8, 3, 3)).astype(np.float32), "w2"),
             numpy_helper.from_array(np.zeros(4, np.float32), "b2")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["a"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["r"], name="relu1"),
             helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p", "w2", "b2"], ["y"], name="conv2", pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "pooled", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model
