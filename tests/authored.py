"""Tiny ONNX models and sweep text authored for the tests (no binary blobs)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FAST_MEASURE = "measure: {warmup: 2, frames: 20, repeats: 2, ttfo_repeats: 1, latency_frames: 5, min_duration_s: 0}"


def exported_classifier(act: str = "relu6", seed: int = 0) -> onnx.ModelProto:
    """A small model shaped like a framework export: path-like node names, a ReLU6 as Clip,
    a global pool and a Gemm head."""
    rng = np.random.default_rng(seed)
    w1 = rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32)
    w2 = rng.normal(0, 0.2, (16, 8, 3, 3)).astype(np.float32)
    fc = rng.normal(0, 0.2, (10, 16)).astype(np.float32)
    inits = [
        numpy_helper.from_array(a, n)
        for a, n in [
            (w1, "features.0.weight"),
            (rng.normal(0, 0.1, 8).astype(np.float32), "features.0.bias"),
            (w2, "features.1.weight"),
            (rng.normal(0, 0.1, 16).astype(np.float32), "features.1.bias"),
            (fc, "classifier.weight"),
            (rng.normal(0, 0.1, 10).astype(np.float32), "classifier.bias"),
            (np.float32(0), "zero"),
            (np.float32(6), "six"),
        ]
    ]
    act_node = (
        helper.make_node("Clip", ["a", "zero", "six"], ["b"], name="/features/act0/Clip")
        if act == "relu6"
        else helper.make_node("Relu", ["a"], ["b"], name="/features/act0/Relu")
    )
    nodes = [
        helper.make_node(
            "Conv",
            ["pixels", "features.0.weight", "features.0.bias"],
            ["a"],
            name="/features/0/Conv",
            pads=[1, 1, 1, 1],
            strides=[2, 2],
        ),
        act_node,
        helper.make_node(
            "Conv", ["b", "features.1.weight", "features.1.bias"], ["c"], name="/features/1/Conv", pads=[1, 1, 1, 1]
        ),
        helper.make_node("Relu", ["c"], ["d"], name="/features/act1/Relu"),
        helper.make_node("GlobalAveragePool", ["d"], ["e"], name="/pool/GlobalAveragePool"),
        helper.make_node("Flatten", ["e"], ["f"], name="/Flatten"),
        helper.make_node(
            "Gemm", ["f", "classifier.weight", "classifier.bias"], ["logits"], name="/classifier/Gemm", transB=1
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "exported",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["N", 3, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
        inits,
    )
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
    inits = [
        numpy_helper.from_array(rng.normal(0, 0.1, (8, 3, 3, 3)).astype(np.float32), "w1"),
        numpy_helper.from_array(np.zeros(8, np.float32), "b1"),
        numpy_helper.from_array(rng.normal(0, 0.1, (4, 8, 3, 3)).astype(np.float32), "w2"),
        numpy_helper.from_array(np.zeros(4, np.float32), "b2"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["a"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a"], ["r"], name="relu1"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p", "w2", "b2"], ["y"], name="conv2", pads=[1, 1, 1, 1]),
    ]
    graph = helper.make_graph(
        nodes,
        "pooled",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4, 4])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _init(rng: np.random.Generator, name: str, shape: tuple[int, ...], std: float = 0.2) -> onnx.TensorProto:
    return numpy_helper.from_array(rng.normal(0, std, shape).astype(np.float32), name)


def patterns_model() -> onnx.ModelProto:
    """One small network with a layer of every kind the zoo check sweeps: after an
    activation, behind MaxPool, depthwise, feeding an Add, feeding a Concat, behind Slice and
    Resize, behind GlobalAveragePool -> Flatten (a Gemm), behind Gather (a MatMul), the last."""
    rng = np.random.default_rng(0)
    b = lambda n, c: numpy_helper.from_array(rng.normal(0, 0.05, c).astype(np.float32), n)  # noqa: E731
    inits = [
        _init(rng, "w0", (8, 3, 3, 3), 0.3),
        b("b0", 8),
        _init(rng, "w1", (8, 8, 3, 3)),
        b("b1", 8),
        _init(rng, "wdw", (8, 1, 3, 3), 0.4),
        b("bdw", 8),
        _init(rng, "w2", (8, 8, 1, 1), 0.3),
        b("b2", 8),
        _init(rng, "w3", (4, 8, 1, 1), 0.3),
        b("b3", 4),
        _init(rng, "w4", (4, 8, 1, 1), 0.3),
        b("b4", 4),
        _init(rng, "w5", (8, 8, 3, 3)),
        b("b5", 8),
        _init(rng, "wfc", (10, 8), 0.3),
        b("bfc", 10),
        _init(rng, "wmm", (6, 4), 0.3),
        numpy_helper.from_array(np.array(0, np.float32), "lo"),
        numpy_helper.from_array(np.array(6, np.float32), "hi"),
        numpy_helper.from_array(np.array([0], np.int64), "s0"),
        numpy_helper.from_array(np.array([8], np.int64), "s1"),
        numpy_helper.from_array(np.array([1], np.int64), "ax"),
        numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
        numpy_helper.from_array(np.arange(6, dtype=np.int64), "idx"),
    ]
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w0", "b0"], ["c0"], name="first", pads=[1] * 4),
        n("Relu", ["c0"], ["r0"], name="relu0"),
        n("MaxPool", ["r0"], ["p0"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["p0", "w1", "b1"], ["c1"], name="after_pool", pads=[1] * 4),
        n("Relu", ["c1"], ["r1"], name="relu1"),
        n("Conv", ["r1", "wdw", "bdw"], ["cdw"], name="depthwise", pads=[1] * 4, group=8),
        n("Clip", ["cdw", "lo", "hi"], ["r2"], name="relu6"),
        n("Conv", ["r2", "w2", "b2"], ["c2"], name="to_add"),
        n("Add", ["c2", "r1"], ["s"], name="add"),
        n("Relu", ["s"], ["r3"], name="relu3"),
        n("Conv", ["r3", "w3", "b3"], ["c3"], name="to_concat_a"),
        n("Conv", ["r3", "w4", "b4"], ["c4"], name="to_concat_b"),
        n("Concat", ["c3", "c4"], ["cat"], name="concat", axis=1),
        n("Slice", ["cat", "s0", "s1", "ax"], ["sl"], name="slice"),
        n("Resize", ["sl", "", "scales"], ["rs"], name="resize", mode="nearest"),
        n("Conv", ["rs", "w5", "b5"], ["c5"], name="after_resize", pads=[1] * 4),
        n("GlobalAveragePool", ["c5"], ["g"], name="gap"),
        n("Flatten", ["g"], ["f"], name="flatten"),
        n("Gemm", ["f", "wfc", "bfc"], ["logits"], name="head", transB=1),
        n("Gather", ["f", "idx"], ["gath"], name="gather", axis=1),
        n("MatMul", ["gath", "wmm"], ["m"], name="last"),
    ]
    graph = helper.make_graph(
        nodes,
        "patterns",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10]),
            helper.make_tensor_value_info("m", TensorProto.FLOAT, [1, 4]),
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def attention_model() -> onnx.ModelProto:
    """A one-head attention block over 4 tokens of width 8: Q.K^T and A.V are MatMuls of two
    activations (no kernel), the projections are weighted MatMuls."""
    rng = np.random.default_rng(1)
    inits = [_init(rng, name, (8, 8), 0.4) for name in ("wq", "wk", "wv", "wo")]
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "wq"], ["q"], name="q_proj"),
        n("MatMul", ["x", "wk"], ["k"], name="k_proj"),
        n("MatMul", ["x", "wv"], ["v"], name="v_proj"),
        n("Transpose", ["k"], ["kt"], name="kt", perm=[0, 2, 1]),
        n("MatMul", ["q", "kt"], ["scores"], name="qk"),
        n("Softmax", ["scores"], ["attn"], name="softmax", axis=-1),
        n("MatMul", ["attn", "v"], ["ctx"], name="av"),
        n("MatMul", ["ctx", "wo"], ["y"], name="out_proj"),
    ]
    graph = helper.make_graph(
        nodes,
        "attention",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def old_style_model() -> onnx.ModelProto:
    """Opset 9 and IR 3, as the old model zoos wrote them: initializers listed as graph
    inputs, a kernel held in a Constant node, a bias behind an Identity."""
    rng = np.random.default_rng(2)
    w = rng.normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32)
    b = rng.normal(0, 0.1, 4).astype(np.float32)
    w2 = rng.normal(0, 0.3, (4, 4, 1, 1)).astype(np.float32)
    n = helper.make_node
    nodes = [
        n("Constant", [], ["W"], name="kernel_const", value=numpy_helper.from_array(w, "W")),
        n("Identity", ["B"], ["B_id"], name="bias_id"),
        n("Conv", ["x", "W", "B_id"], ["c"], name="conv", pads=[1] * 4),
        n("Relu", ["c"], ["r"], name="relu"),
        n("Conv", ["r", "W2", "B"], ["y"], name="conv2"),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8]),
        helper.make_tensor_value_info("B", TensorProto.FLOAT, [4]),
        helper.make_tensor_value_info("W2", TensorProto.FLOAT, [4, 4, 1, 1]),
    ]
    graph = helper.make_graph(
        nodes,
        "old",
        inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [numpy_helper.from_array(b, "B"), numpy_helper.from_array(w2, "W2")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 3
    return model


def two_input_model() -> onnx.ModelProto:
    """An image and a side vector: conv -> pool -> concat with the vector -> Gemm."""
    rng = np.random.default_rng(3)
    inits = [
        _init(rng, "w", (4, 3, 3, 3), 0.3),
        _init(rng, "b", (4,), 0.05),
        _init(rng, "fc", (5, 8), 0.3),
        _init(rng, "fcb", (5,), 0.05),
    ]
    n = helper.make_node
    nodes = [
        n("Conv", ["image", "w", "b"], ["c"], name="conv", pads=[1] * 4),
        n("Relu", ["c"], ["r"], name="relu"),
        n("GlobalAveragePool", ["r"], ["g"], name="gap"),
        n("Flatten", ["g"], ["f"], name="flatten"),
        n("Concat", ["f", "side"], ["cat"], name="concat", axis=1),
        n("Gemm", ["cat", "fc", "fcb"], ["y"], name="head", transB=1),
    ]
    inputs = [
        helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 8, 8]),
        helper.make_tensor_value_info("side", TensorProto.FLOAT, [1, 4]),
    ]
    graph = helper.make_graph(
        nodes, "two_inputs", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], inits
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _conv(name: str, x: str, y: str, w: np.ndarray, bias: str | None = None) -> tuple[onnx.NodeProto, list]:
    inits = [numpy_helper.from_array(w, f"{name}.w")]
    inputs = [x, f"{name}.w"] + ([bias] if bias else [])
    return helper.make_node("Conv", inputs, [y], name=name, pads=[1, 1, 1, 1]), inits


def clamp_chain_model(chain: str, seed: int = 0) -> onnx.ModelProto:
    """conv1 (no bias) -> CHAIN -> conv2, where CHAIN ends in a clamp the quantizer removes
    although no layer feeds it directly: ``add-relu`` (a bias Add then Relu, as Paddle exports
    a conv), ``add-clip`` (Add then Clip [0, 6]) or ``hardsigmoid`` (Mul 0.2, Add 0.5, Clip
    [0, 1], as a HardSigmoid is decomposed)."""
    rng = np.random.default_rng(seed)
    conv1, w1 = _conv("conv1", "x", "c1", rng.normal(0, 0.4, (8, 3, 3, 3)).astype(np.float32))
    conv2, w2 = _conv("conv2", "act", "y", rng.normal(0, 0.2, (4, 8, 3, 3)).astype(np.float32), "conv2.b")
    consts = {
        "bias": rng.normal(0, 0.2, (1, 8, 1, 1)).astype(np.float32),
        "conv2.b": rng.normal(0, 0.1, 4).astype(np.float32),
        "zero": np.float32(0),
        "six": np.float32(6),
        "one": np.float32(1),
        "fifth": np.float32(0.2),
        "half": np.float32(0.5),
    }
    tail = {
        "add-relu": [
            helper.make_node("Add", ["c1", "bias"], ["a"], name="bias_add"),
            helper.make_node("Relu", ["a"], ["act"], name="relu"),
        ],
        "add-clip": [
            helper.make_node("Add", ["c1", "bias"], ["a"], name="bias_add"),
            helper.make_node("Clip", ["a", "zero", "six"], ["act"], name="relu6"),
        ],
        "hardsigmoid": [
            helper.make_node("Mul", ["c1", "fifth"], ["m"], name="hs_mul"),
            helper.make_node("Add", ["m", "half"], ["a"], name="hs_add"),
            helper.make_node("Clip", ["a", "zero", "one"], ["act"], name="hs_clip"),
        ],
    }[chain]
    graph = helper.make_graph(
        [conv1, *tail, conv2],
        f"clamp_{chain}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        w1 + w2 + [numpy_helper.from_array(v, k) for k, v in consts.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def linear_model(seed: int = 0) -> onnx.ModelProto:
    """Two linear layers as exporters write them on a sequence: MatMul then an Add of the bias
    (the first followed by Relu), over [1, T, C]."""
    rng = np.random.default_rng(seed)
    arrays = {
        "w1": rng.normal(0, 0.3, (16, 12)).astype(np.float32),
        "b1": rng.normal(0.3, 0.2, 12).astype(np.float32),
        "w2": rng.normal(0, 0.3, (12, 6)).astype(np.float32),
        "b2": rng.normal(-0.2, 0.2, 6).astype(np.float32),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["m1"], name="fc1"),
        helper.make_node("Add", ["m1", "b1"], ["a1"], name="fc1_bias"),
        helper.make_node("Relu", ["a1"], ["r1"], name="fc1_relu"),
        helper.make_node("MatMul", ["r1", "w2"], ["m2"], name="fc2"),
        helper.make_node("Add", ["m2", "b2"], ["y"], name="fc2_bias"),
    ]
    graph = helper.make_graph(
        nodes,
        "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 10, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10, 6])],
        [numpy_helper.from_array(v, k) for k, v in arrays.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def dynamic_detector(opset: int = 17) -> onnx.ModelProto:
    """A conv over an input of dynamic height and width whose output's last dimension is
    computed from them (Shape, Gather, Mul, Concat, Reshape: YOLO's 'anchors')."""
    rng = np.random.default_rng(0)
    w = rng.normal(0, 0.3, (6, 3, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["images", "w", "b"], ["c"], name="head", pads=[1, 1, 1, 1]),
        helper.make_node("Shape", ["c"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "i23"], ["hw"], name="gather", axis=0),
        helper.make_node("ReduceProd", ["hw"], ["n"], name="prod", keepdims=1),
        helper.make_node("Concat", ["lead", "n"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["c", "target"], ["boxes"], name="reshape"),
    ]
    inits = [
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(rng.normal(0, 0.1, 6).astype(np.float32), "b"),
        numpy_helper.from_array(np.array([2, 3], np.int64), "i23"),
        numpy_helper.from_array(np.array([1, 6], np.int64), "lead"),
    ]
    graph = helper.make_graph(
        nodes,
        "detector",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, "H", "W"])],
        [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 6, "anchors"])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return model


def weighed_model() -> onnx.ModelProto:
    """Conv (float32 kernel and bias), a quantized per-channel factor (int8 read by a
    DequantizeLinear, its float32 scale and int8 zero point), a float16 Constant, and an int64
    shape (no weight): 216 + 8 + 8 + 1 + 1 + 6 = 240 weights."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.normal(size=(8, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.normal(size=8).astype(np.float32), "b"),
        numpy_helper.from_array(rng.integers(-127, 127, size=8).astype(np.int8), "q"),
        numpy_helper.from_array(np.array(0.05, np.float32), "q_scale"),
        numpy_helper.from_array(np.array(0, np.int8), "q_zero"),
        numpy_helper.from_array(np.array([1, 8, 1, 1], np.int64), "shape"),
    ]
    half = numpy_helper.from_array(rng.normal(size=6).astype(np.float16), "c")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv"),
        helper.make_node("DequantizeLinear", ["q", "q_scale", "q_zero"], ["d"], name="dq"),
        helper.make_node("Reshape", ["d", "shape"], ["r"], name="reshape"),
        helper.make_node("Mul", ["y", "r"], ["m"], name="mul"),
        helper.make_node("Constant", [], ["c"], name="const", value=half),
        helper.make_node("Cast", ["c"], ["cf"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Add", ["m", "cf"], ["out"], name="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 8, 6, 6])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


FEATURES, TOKENS, CLASSES = 64, 8, 10


def layer_norm_written_out(seed: int = 0, ln: str = "ln/", head: str = "head/") -> onnx.ModelProto:
    """A LayerNorm written out as E[x^2] - E[x]^2, then a MatMul head: fed tokens near 4 with a small
    spread (:func:`ln_frames`), its int8 default ruins it (the variance cancels). ``ln`` and ``head``
    prefix its node names (a real export's share a long one)."""
    rng = np.random.default_rng(seed)
    consts = [
        numpy_helper.from_array(np.array(1e-6, np.float32), "eps"),
        numpy_helper.from_array(rng.normal(0, 0.3, (FEATURES, CLASSES)).astype(np.float32), "head.weight"),
    ]
    mean = {"axes": [-1], "keepdims": 1}
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], f"{ln}mean", **mean),
        helper.make_node("Mul", ["x", "x"], ["sq"], f"{ln}square"),
        helper.make_node("ReduceMean", ["sq"], ["mean_sq"], f"{ln}mean_sq", **mean),
        helper.make_node("Mul", ["mean", "mean"], ["sq_mean"], f"{ln}sq_mean"),
        helper.make_node("Sub", ["mean_sq", "sq_mean"], ["var"], f"{ln}var"),
        helper.make_node("Add", ["var", "eps"], ["var_eps"], f"{ln}add_eps"),
        helper.make_node("Sqrt", ["var_eps"], ["std"], f"{ln}sqrt"),
        helper.make_node("Reciprocal", ["std"], ["inv"], f"{ln}rsqrt"),
        helper.make_node("Sub", ["x", "mean"], ["centred"], f"{ln}centre"),
        helper.make_node("Mul", ["centred", "inv"], ["normed"], f"{ln}scale"),
        helper.make_node("MatMul", ["normed", "head.weight"], ["logits"], f"{head}MatMul"),
    ]
    graph = helper.make_graph(
        nodes,
        "ln",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, TOKENS, FEATURES])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, TOKENS, CLASSES])],
        consts,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def ln_frames(count: int, seed: int) -> np.ndarray:
    """Token features near 4 with a spread of 0.3 per token: a variance 180 times below the mean square."""
    rng = np.random.default_rng(seed)
    spread = rng.uniform(0.1, 0.5, (count, TOKENS, 1))
    return (4.0 + spread * rng.standard_normal((count, TOKENS, FEATURES))).astype(np.float32)


def one_linear(name: str, weight: np.ndarray, bias: np.ndarray, as_add: bool) -> onnx.ModelProto:
    """One linear layer over [1, K]: a Gemm with its bias, or MatMul then an Add of it."""
    if as_add:
        nodes = [
            helper.make_node("MatMul", ["x", "w"], ["m"], name=name),
            helper.make_node("Add", ["m", "b"], ["y"], name=f"{name}_bias"),
        ]
    else:
        nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["y"], name=name)]
    graph = helper.make_graph(
        nodes,
        "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, weight.shape[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, weight.shape[1]])],
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model
