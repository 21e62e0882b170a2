"""Per-layer noise (issue 36): ``loop.api.noise`` against a check written here from the float and the
quantized models' own activations, run with every tensor an output (not through qdq_loss_debug).

* accumulated: the quantized model's dequantized value of a tensor against the float model's;
* local: the layer that makes the tensor run alone on the float model's values of its inputs, its
  kernel dequantized, then the tensor put on its own grid, against the float model's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from loop import api
from loop.author.author import author, with_reference
from loop.author.sweepfile import parse
from loop.compilers.onnxruntime import OnnxRuntimeCompiler, calibration_feeds
from loop.core.modelfile import load_model
from loop.judge.noise import NoiseReport, precision_line, snr_db
from loop.judge.structure import analyse

EXAMPLE = Path(__file__).parents[2] / "graphs" / "variants.yaml"
TOLERANCE_DB = 0.1


def resnet_like(seed: int = 0) -> onnx.ModelProto:
    """A torchvision-shaped net: stem conv+relu, a residual block (two convs, Add, Relu), a global
    pool, Flatten and a Gemm head, with torchvision's node and weight names."""
    rng = np.random.default_rng(seed)

    def w(name: str, *shape: int, std: float = 0.2) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.normal(0, std, shape).astype(np.float32), name)

    inits = [
        w("conv1.weight", 8, 3, 3, 3),
        w("conv1.bias", 8, std=0.1),
        w("layer1.0.conv1.weight", 8, 8, 3, 3, std=0.15),
        w("layer1.0.conv1.bias", 8, std=0.1),
        w("layer1.0.conv2.weight", 8, 8, 3, 3, std=0.15),
        w("layer1.0.conv2.bias", 8, std=0.1),
        w("fc.weight", 5, 8),
        w("fc.bias", 5, std=0.1),
    ]
    pad = {"pads": [1, 1, 1, 1]}
    nodes = [
        helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["c1"], "/conv1/Conv", **pad),
        helper.make_node("Relu", ["c1"], ["r1"], "/relu/Relu"),
        helper.make_node(
            "Conv", ["r1", "layer1.0.conv1.weight", "layer1.0.conv1.bias"], ["c2"], "/layer1/0/conv1/Conv", **pad
        ),
        helper.make_node("Relu", ["c2"], ["r2"], "/layer1/0/relu/Relu"),
        helper.make_node(
            "Conv", ["r2", "layer1.0.conv2.weight", "layer1.0.conv2.bias"], ["c3"], "/layer1/0/conv2/Conv", **pad
        ),
        helper.make_node("Add", ["c3", "r1"], ["s"], "/layer1/0/Add"),
        helper.make_node("Relu", ["s"], ["r3"], "/layer1/0/relu_1/Relu"),
        helper.make_node("GlobalAveragePool", ["r3"], ["p"], "/avgpool/GlobalAveragePool"),
        helper.make_node("Flatten", ["p"], ["f"], "/Flatten", axis=1),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], "/fc/Gemm", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "resnet_like",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 5])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def sweep_of(folder: Path, model: onnx.ModelProto) -> Path:
    onnx.save(model, folder / "net.onnx")
    path = folder / "sweep.yaml"
    path.write_text(
        "sweep: noise-test\nbase: net.onnx\ncalibration: {count: 16, seed: 1}\ninputs: {count: 4, seed: 2}\n"
        "variants:\n  - name: base\n"
    )
    return path


# --- the check: both models run by hand, every float tensor an output -----------------------------


def every_tensor(model: onnx.ModelProto, feeds: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Each float tensor of ``model``, every frame stacked on a new first axis."""
    inferred = onnx.shape_inference.infer_shapes(model)
    known = {v.name: v for v in (*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output)}
    floats = [v for v in known.values() if v.type.tensor_type.elem_type == TensorProto.FLOAT]
    made = {o for n in model.graph.node for o in n.output} | {v.name for v in model.graph.input}
    del inferred.graph.output[:]
    inferred.graph.output.extend(v for v in floats if v.name in made)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(inferred.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    runs = [dict(zip(names, session.run(names, f), strict=True)) for f in feeds]
    return {n: np.stack([r[n] for r in runs]) for n in names}


def check_snr(reference: np.ndarray, value: np.ndarray) -> float:
    ref, got = reference.astype(np.float64).ravel(), value.astype(np.float64).ravel()
    return float(10 * np.log10(np.sum(ref**2) / np.sum((ref - got) ** 2)))


def qdq(x: np.ndarray, scale: np.ndarray, zero: np.ndarray) -> np.ndarray:
    info = np.iinfo(zero.dtype)
    q = np.clip(np.rint(x / scale) + zero.astype(np.int64), info.min, info.max)
    return ((q - zero.astype(np.int64)) * scale).astype(np.float32)


def dequantized(q: np.ndarray, scale: np.ndarray, zero: np.ndarray, axis: int) -> np.ndarray:
    shape = [1] * q.ndim
    if scale.size > 1:
        shape[axis] = -1
    return ((q.astype(np.float64) - zero.reshape(shape)) * scale.reshape(shape)).astype(np.float32)


def one_node(node: onnx.NodeProto, values: dict[str, np.ndarray], consts: dict[str, np.ndarray]) -> np.ndarray:
    """``node`` alone, on ``values`` (one array per frame, stacked) and constant inputs."""
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(values[n].shape[1:])) for n in values]
    alone = helper.make_node(node.op_type, list(node.input), ["out"])
    alone.attribute.extend(node.attribute)
    graph = helper.make_graph(
        [alone],
        "alone",
        inputs,
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in consts.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    frames = len(next(iter(values.values())))
    return np.stack([session.run(["out"], {k: v[j] for k, v in values.items()})[0] for j in range(frames)])


def expected(
    source: onnx.ModelProto, model: onnx.ModelProto, feeds: list[dict[str, np.ndarray]]
) -> dict[str, tuple[float, float]]:
    """(accumulated, local) SNR by tensor, from the two models' activations."""
    floats, quantized = every_tensor(source, feeds), every_tensor(model, feeds)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    made_by = {o: n for n in model.graph.node for o in n.output}
    readers = {i: n for n in model.graph.node for i in n.input}
    found: dict[str, tuple[float, float]] = {}
    for q in (n for n in model.graph.node if n.op_type == "QuantizeLinear"):
        tensor = q.input[0].removesuffix("_QuantizeLinear_Input")
        scale, zero = inits[q.input[1]], inits[q.input[2]]
        accumulated = check_snr(floats[tensor], quantized[readers[q.output[0]].output[0]])
        node = made_by.get(q.input[0])
        pre = floats[tensor] if node is None else alone_output(node, made_by, inits, floats)
        found[tensor] = (accumulated, check_snr(floats[tensor], qdq(pre, scale, zero)))
    return found


def alone_output(
    node: onnx.NodeProto,
    made_by: dict[str, onnx.NodeProto],
    inits: dict[str, np.ndarray],
    floats: dict[str, np.ndarray],
) -> np.ndarray:
    values: dict[str, np.ndarray] = {}
    consts: dict[str, np.ndarray] = {}
    for name in node.input:
        dq = made_by.get(name)
        if dq is not None and dq.op_type == "DequantizeLinear" and dq.input[0] in inits:
            axis = next((a.i for a in dq.attribute if a.name == "axis"), 1)
            consts[name] = dequantized(inits[dq.input[0]], inits[dq.input[1]], inits[dq.input[2]], axis)
        elif dq is not None and dq.op_type == "DequantizeLinear":
            values[name] = floats[made_by[dq.input[0]].input[0].removesuffix("_QuantizeLinear_Input")]
        elif name in inits:
            consts[name] = inits[name]
        else:
            values[name] = floats[name]
    return one_node(node, values, consts)


def kernel_snr(folder: Path, weight: str) -> float:
    """The kernel's own SNR: its float values against the QDQ model's integers times their scales."""
    spec = parse(folder / "sweep.yaml")
    authored = author(spec, spec.variants[0], True)
    quantized = OnnxRuntimeCompiler().optimize(authored.model_path, authored.calibration(), authored.options)
    inits = {t.name: numpy_helper.to_array(t) for t in onnx.load_from_string(quantized.data).graph.initializer}
    source = {t.name: numpy_helper.to_array(t) for t in load_model(quantized.source).graph.initializer}
    scale, zero = inits[weight + "_scale"], inits[weight + "_zero_point"]
    axis = 0 if scale.size > 1 else 1
    return check_snr(source[weight], dequantized(inits[weight + "_quantized"], scale, zero.astype(np.float64), axis))


def report_and_check(path: Path, staging: Path) -> tuple[NoiseReport, dict[str, tuple[float, float]]]:
    spec = parse(path)
    variant = next(v for v in with_reference(spec) if v.name == "base")
    authored = author(spec, variant, True)
    quantized = OnnxRuntimeCompiler().optimize(authored.model_path, authored.calibration(), authored.options)
    source = load_model(quantized.source)
    feeds = calibration_feeds(source, authored.inputs())
    return api.noise(path, "base"), expected(source, onnx.load_from_string(quantized.data), feeds)


def agrees(report: NoiseReport, check: dict[str, tuple[float, float]]) -> None:
    got = {t.tensor: (t.accumulated_snr_db, t.local_snr_db) for t in report.layers}
    assert set(got) == set(check)
    for tensor, (acc, local) in check.items():
        assert got[tensor][0] == pytest.approx(acc, abs=TOLERANCE_DB), tensor
        assert got[tensor][1] == pytest.approx(local, abs=TOLERANCE_DB), tensor


def worst_first(report: NoiseReport) -> None:
    """By the accumulated SNR lost at each layer, largest first (a grid reading nothing quantized last)."""
    lost = [-(t.fall_db or 0.0) for t in report.layers]
    assert lost == sorted(lost)


def test_the_example_graph_agrees_with_its_activations(tmp_path: Path) -> None:
    report, check = report_and_check(EXAMPLE, tmp_path)
    agrees(report, check)
    worst_first(report)
    # named as `loop layers` names them: the conv, not the Relu removed after it
    assert {t.layer for t in report.layers} == {"conv1", "conv2", "input"}
    assert report.frames == 8 and report.notes == []
    # each conv's fall: what it reads (the input's grid, no better than 8 bits can be; conv1's) less its own
    acc = {t.layer: t.accumulated_snr_db for t in report.layers}
    falls = {t.layer: t.fall_db for t in report.layers}
    assert falls["input"] is None
    assert falls["conv1"] == pytest.approx(min(acc["input"], 6.02 * 8 + 1.76) - acc["conv1"])
    assert falls["conv2"] == pytest.approx(acc["conv1"] - acc["conv2"])


def test_a_torchvision_shaped_net_agrees_with_its_activations(tmp_path: Path) -> None:
    path = sweep_of(tmp_path, resnet_like())
    report, check = report_and_check(path, tmp_path)
    agrees(report, check)
    worst_first(report)
    names = {t.tensor: t.layer for t in report.layers}
    structure = analyse(onnx.load(str(path.parent / "net.onnx")))
    for layer in structure.layers:  # every conv and the Gemm, by the name the sweep gives it
        assert names[structure.grid(layer.out_tensor)] == layer.name
    assert names["r3"] == "/layer1/0/Add" and names["x"] == "x"  # the residual sum, before its Relu
    kernels = {lp.name: lp.weight for lp in structure.layers}
    for t in report.layers:
        if t.layer in kernels:  # each kernel against its float values, dequantized here
            assert t.weight_snr_db == pytest.approx(kernel_snr(path.parent, str(kernels[t.layer])), abs=TOLERANCE_DB)
    # the sum carries both branches' noise: its accumulated SNR is below its own
    add = next(t for t in report.layers if t.layer == "/layer1/0/Add")
    assert add.accumulated_snr_db < add.local_snr_db


def test_the_floor_and_the_sixteen_bit_line() -> None:
    assert snr_db(4.0, 0.0) > 300 and snr_db(0.0, 0.0) == 0.0
    assert snr_db(100.0, 1.0) == pytest.approx(20.0)
    assert precision_line("conv1") == "{op: precision, layer: conv1, bits: 16}"
    assert precision_line("/fc/Gemm") == "{op: precision, layer: /fc/Gemm, bits: 16}"
    assert precision_line("a b:c") == '{op: precision, layer: "a b:c", bits: 16}'
