"""The arithmetic of the FAKE Dataflow Compiler (tests/compilers/hailo_fakes.py): a TEST DOUBLE of
what Hailo's closed-source DFC does to an ONNX model, so that loop's Hailo path is tested on layer
names and parameters that behave as the real ones do. It is not Hailo's code and copies none.

What it does, and the public source each behaviour stands on (docs/hailo.md, "The DFC test
double", lists them with what is NOT confirmed):

- **Translate.** It reads the ONNX it is given (nodes and initializers). Each weighted op starts
  a layer named by kind and a running count, ``<net>/conv1``, ``<net>/conv2``, ... (hailo_model_zoo
  v5.2.0 ``core/hn_editor/normalization_folding.py`` reads ``params["<net>/conv1/kernel:0"]`` of the
  first conv; model scripts name ``conv45``, ``fc1``; public code reads ``model/conv134/qp_out:0``).
  Inputs are ``input_layer1``, outputs ``output_layer1``, ... fed by the layer that makes them
  (hailo_model_zoo ``core/hn_editor/layer_splitter.py``, ``_make_output_layer``: an output layer
  with ``input`` = [its producer]).
- **Fuse.** A BatchNormalization and a Relu after a Conv become that conv layer: the BN is folded
  into its kernel and bias, the Relu is its activation, and the layer's HN ``original_names``
  lists every ONNX node (``layer_splitter.py`` copies and writes ``original_names``; HailoRT's
  ``Hef::get_original_names_from_vstream_name`` returns a list of them per stream,
  hailort v5.2.0 ``libhailort/include/hailo/hef.hpp``). Native params hold the folded float
  kernel, laid out ``[kh, kw, c_in, c_out]`` (``normalization_folding.py`` indexes it so).
- **Quantize at optimize.** Activations: uint grids from the calibration range (min/max over the
  calibration frames, widened to hold 0), or the model script's
  ``quantization_param(L, force_range_out=[lo, hi])`` / ``force_range_in``; ``precision_mode=a16_w16``
  makes the layer's output 16-bit and its kernel int16 (hailo_model_zoo's ``.alls`` scripts write
  these lines). Stored as ``qp_out``/``qp_in`` = (zero point, scale) (public code unpacks
  ``qp_out:0`` so) and ``stats/output_0/stats_limvals`` (Hailo's clipping inspector reads it).
  Kernels: one symmetric scale per layer from the kernel's range (ASSUMED: per-layer, not per
  channel; the key ``kernel_scale`` is the double's own). Bias: int32 on the step
  ``in_scale * kernel_scale`` (ASSUMED, with the key ``bias_scale``), or kept in float for the
  layers in ``float_bias`` (ASSUMED: no public source shows when the DFC keeps a float bias).
- **Weight precision.** ``quantization_param(L, precision_mode=a8_w4)`` quantizes L's kernel at 4 bits:
  integers in [-8, 7] on a scale from the kernel's range over 7 (hailo_model_zoo v5.2.0
  ``cfg/alls/generic/yolov5m.alls`` writes that line for seven convs; Hailo-10H's GenAI models are A8W4,
  docs/hailo.md). They are kept in int8 (ASSUMED: how the DFC stores a 4-bit kernel is not public).
  ``model_optimization_config(compression_params, auto_4bit_weights_ratio=R)`` makes the double choose
  layers itself (:func:`auto_4bit`): the DFC's choice rule is NOT public (Hailo's compression inspector,
  Hailo-Application-Code-Examples ``inspectors/compression_inspector.py``, only reads the outcome: the
  share of ``layer.weights`` whose mode ends in ``w4``), so the double's rule is its own and stated
  there: the largest kernels not named by a ``precision_mode`` line first, until R of the weights by
  count are at 4 bits. Either way ``get_hn_model()`` reports the layer's mode as ``a8_w4`` in its
  ``precision_config`` (the inspector reads ``layer.precision_config.precision_mode.value``). That the
  DFC leaves a layer named by a ``precision_mode`` line out of its own choice is ASSUMED.
- **Re-derive.** With ``post_quantization_optimization(bias_correction, policy=enabled)`` each
  layer's bias gets the mean, per channel, of its float pre-activation minus its quantized one
  over the calibration frames, in graph order (the classic bias correction; the DFC's own
  algorithm is not public). A layer whose range is forced has its kernel re-derived against that
  range: rounded with error feedback along each output channel instead of to nearest, so its
  integers are no longer its float kernel rounded (the seed rig saw forcing conv1's range change
  the kernel hash: "the optimiser re-derives weight quantisation, bias correction and its
  distillation pass against the new range", seeds/000_861571b4a11cff51.txt; the rounding rule is
  the double's stand-in for an algorithm that is not public).
- **Cut.** ``translate_onnx_model(..., start_node_names=[...], end_node_names=[...])`` translates only
  the nodes from the start nodes to the end nodes, whose outputs become the net's outputs: the rest
  (a post-processing tail, say) is never read, so an op the parser cannot translate there does not
  fail it (hailo_model_zoo v5.2.0 ``core/main_utils.py`` passes ``start_node_names``/``end_node_names``
  so for its detection networks, whose NMS tails stay on the host).
- **Equalize.** With ``pre_quantization_optimization(equalization, policy=enabled)`` (hailo_model_zoo's
  ``cfg/alls/generic/centernet_resnet_v1_50_postprocess.alls`` writes that line) each conv whose output
  only one conv reads is rescaled with it, per channel, before quantization: its output channel c is
  divided by ``s_c`` and the reader's input channel c multiplied by it, with ``s_c = sqrt(r1_c / r2_c)``
  from the two kernels' ranges, so both reach ``sqrt(r1_c * r2_c)`` and the function is unchanged
  (a ReLU between them commutes with a positive scale). This is cross-layer equalization as published
  (Nagel et al., "Data-Free Quantization Through Weight Equalization and Bias Correction", ICCV 2019);
  the DFC's own algorithm is not public (ASSUMED: data-free, on pairs of convs). The native params
  (``get_params()``) then hold the equalized kernels, the float kernels the DFC quantized.
- **Compile.** ``compile()`` returns the HEF's bytes; a test may ask for a HEF of a given size
  (:class:`SizedHef`, never materialized), to stand for one bigger than a device can take. A quantized
  HAR compiles without optimizing (hailo_model_zoo ``main_driver.py``, ``compile_model``).
- **Load translated params.** ``load_params(npz, params_kind=ParamsKinds.TRANSLATED)`` replaces the
  runner's translated params (the spelling a public diagnostic script uses). Whether such params reach
  the compiled HEF is NOT confirmed by any public source, so the double does either, by a switch named
  as such (``edits_reach_hef``): honoured, the HEF is compiled from them; ignored, from the params as
  optimize made them (the HAR keeps both). The emulator always runs the loaded ones (ASSUMED).
  ``hef_with_params`` makes a loopback "HEF" that carries the params it was compiled from, so the
  loopback device's outputs move with them.
- **Emulate.** ``infer`` runs the quantized layers on float NHWC frames and returns the outputs
  in the HN's output-layer order, which is the order of the layers, not of the ONNX outputs
  (ASSUMED: the DFC is not known to keep the ONNX order).
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

WEIGHTED = {"Conv": "conv"}
FUSED = ("BatchNormalization", "Relu")
_PARAM = re.compile(r"^\s*quantization_param\(\s*(\[[^\]]*\]|\{[^}]*\}|[^,\s()]+)\s*,(.*)\)\s*$")
_RANGE = re.compile(r"force_range_(out|in)\s*=\s*\[\s*([-0-9.eE+]+)\s*,\s*([-0-9.eE+]+)\s*\]")
_RATIO = re.compile(
    r"model_optimization_config\(\s*compression_params\s*,.*auto_4bit_weights_ratio\s*=\s*([0-9.eE+-]+)"
)


class FakeDfcError(RuntimeError):
    """What the double raises where the real parser would refuse (an op it does not translate)."""


@dataclass
class Layer:
    """One translated layer: a conv with its fused BatchNorm and Relu."""

    name: str  # without the net's prefix: conv1
    original_names: list[str]
    kernel: np.ndarray  # float32 [kh, kw, c_in, c_out], BN folded in
    bias: np.ndarray
    strides: tuple[int, int]
    pads: tuple[int, int, int, int]  # top, left, bottom, right
    relu: bool
    input: str  # the layer it reads: input_layer1 or convN
    out_tensor: str  # the ONNX tensor it makes
    out_shape: tuple[int, int, int] = (0, 0, 0)  # H, W, C


@dataclass
class Net:
    name: str
    input_name: str  # the ONNX input
    input_shape: tuple[int, int, int]  # H, W, C
    layers: list[Layer] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)  # producing layer of each output layer, in HN order

    def hn(self) -> dict[str, Any]:
        """The HN as ``runner.get_hn()`` returns it: ``{"name", "layers": {<net>/<layer>: {...}}}``."""
        p = f"{self.name}/"
        layers: dict[str, Any] = {
            f"{p}input_layer1": {
                "type": "input_layer",
                "input": [],
                "output": [p + ly.name for ly in self.layers if ly.input == "input_layer1"],
                "input_shapes": [[-1, *self.input_shape]],
                "output_shapes": [[-1, *self.input_shape]],
                "original_names": [self.input_name],
            }
        }
        for layer in self.layers:
            readers = [p + ly.name for ly in self.layers if ly.input == layer.name]
            outs = [f"{p}output_layer{i + 1}" for i, o in enumerate(self.outputs) if o == layer.name]
            kh, kw, cin, cout = layer.kernel.shape
            layers[p + layer.name] = {
                "type": "conv",
                "input": [p + layer.input],
                "output": readers + outs,
                "input_shapes": [[-1, *self._shape(layer.input)]],
                "output_shapes": [[-1, *layer.out_shape]],
                "params": {
                    "kernel_shape": [kh, kw, cin, cout],
                    "strides": [1, *layer.strides, 1],
                    "activation": "relu" if layer.relu else "linear",
                },
                "original_names": list(layer.original_names),
            }
        for i, producer in enumerate(self.outputs):
            shape = [-1, *self._shape(producer)]
            layers[f"{p}output_layer{i + 1}"] = {
                "type": "output_layer",
                "input": [p + producer],
                "output": [],
                "input_shapes": [shape],
                "output_shapes": [shape],
                "original_names": ["out"],  # as layer_splitter.py writes an output layer's
            }
        return {"name": self.name, "layers": layers}

    def _shape(self, layer: str) -> tuple[int, int, int]:
        return self.input_shape if layer == "input_layer1" else self.layer(layer).out_shape

    def layer(self, name: str) -> Layer:
        return next(ly for ly in self.layers if ly.name == name)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "input_name": self.input_name,
            "input_shape": list(self.input_shape),
            "outputs": self.outputs,
            "layers": [
                {
                    **{k: getattr(ly, k) for k in ("name", "original_names", "relu", "input", "out_tensor")},
                    "strides": list(ly.strides),
                    "pads": list(ly.pads),
                    "out_shape": list(ly.out_shape),
                    "kernel": _to_json(ly.kernel),
                    "bias": _to_json(ly.bias),
                }
                for ly in self.layers
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Net:
        layers = [
            Layer(
                d["name"],
                d["original_names"],
                _from_json(d["kernel"]),
                _from_json(d["bias"]),
                tuple(d["strides"]),  # type: ignore[arg-type]
                tuple(d["pads"]),  # type: ignore[arg-type]
                d["relu"],
                d["input"],
                d["out_tensor"],
                tuple(d["out_shape"]),  # type: ignore[arg-type]
            )
            for d in data["layers"]
        ]
        return cls(data["name"], data["input_name"], tuple(data["input_shape"]), layers, data["outputs"])  # type: ignore[arg-type]


def _to_json(a: np.ndarray) -> dict[str, Any]:
    a = np.asarray(a)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.reshape(-1).tolist()}


def _from_json(d: dict[str, Any]) -> np.ndarray:
    return np.asarray(d["data"], dtype=d["dtype"]).reshape(d["shape"])


def params_to_json(params: dict[str, dict[str, np.ndarray]]) -> dict[str, Any]:
    return {layer: {leaf: _to_json(v) for leaf, v in leaves.items()} for layer, leaves in params.items()}


def params_from_json(data: dict[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    return {layer: {leaf: _from_json(v) for leaf, v in leaves.items()} for layer, leaves in data.items()}


# -- translate ------------------------------------------------------------------------------


def _between(graph: onnx.GraphProto, start: list[str], end: list[str]) -> tuple[list[onnx.NodeProto], list[str]]:
    """The nodes from ``start`` to ``end`` (every node when neither is given) and the net's outputs."""
    if not end:
        return list(graph.node), [o.name for o in graph.output]
    makers = {o: n for n in graph.node for o in n.output}
    by_name = {n.name: n for n in graph.node}
    unknown = [n for n in [*start, *end] if n not in by_name]
    if unknown:
        raise FakeDfcError(f"FAKE DFC: no node named {unknown[0]}")
    keep: set[str] = set()
    todo = [by_name[n] for n in end]
    while todo:
        node = todo.pop()
        if node.name in keep:
            continue
        keep.add(node.name)
        if node.name not in start:
            todo.extend(makers[t] for t in node.input if t in makers)
    return [n for n in graph.node if n.name in keep], [by_name[n].output[0] for n in end]


def translate(path: str, net: str, start: list[str] | None = None, end: list[str] | None = None) -> Net:
    """The ONNX at ``path`` as the double's parser sees it: weighted ops named by kind, BN and Relu
    fused; only the nodes between ``start`` and ``end`` when they are given. Read by path, its
    external data from beside it, as the DFC's ``ClientRunner.translate_onnx_model(model, net_name,
    ...)`` takes "the path of the ONNX model" (Hailo Dataflow Compiler user guide, parsing)."""
    graph = onnx.load(path).graph
    weights = {t.name: numpy_helper.to_array(t).astype(np.float32) for t in graph.initializer}
    nodes, outputs = _between(graph, start or [], end or [])
    (inp,) = [i for i in graph.input if i.name not in weights]
    _, c, h, w = (d.dim_value for d in inp.type.tensor_type.shape.dim)
    result = Net(net, inp.name, (h, w, c))
    producer = {inp.name: "input_layer1"}
    counts: dict[str, int] = {}
    for node in nodes:
        source = producer.get(node.input[0])
        if node.op_type in WEIGHTED:
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
            layer = _conv(node, weights, f"{WEIGHTED[node.op_type]}{counts[node.op_type]}", source or "input_layer1")
            layer.out_shape = _out_shape(result._shape(layer.input), layer)
            result.layers.append(layer)
        elif node.op_type in FUSED and source not in (None, "input_layer1"):
            layer = result.layer(source)  # type: ignore[arg-type]
            if layer.out_tensor != node.input[0]:
                raise FakeDfcError(f"FAKE DFC: {node.name} reads an inner tensor of {layer.name}")
            _fuse(layer, node, weights)
        else:
            raise FakeDfcError(f"FAKE DFC: cannot translate {node.op_type} node {node.name}")
        producer[node.output[0]] = result.layers[-1].name if node.op_type in WEIGHTED else str(source)
    made = {ly.out_tensor: ly.name for ly in result.layers}
    missing = [o for o in outputs if o not in made]
    if missing:
        raise FakeDfcError(f"FAKE DFC: output {missing[0]} is not the end of a layer")
    order = [ly.name for ly in result.layers]
    result.outputs = sorted((made[o] for o in outputs), key=order.index)  # the layers' order
    return result


def _conv(node: onnx.NodeProto, weights: dict[str, np.ndarray], name: str, source: str) -> Layer:
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if attrs.get("group", 1) != 1:
        raise FakeDfcError(f"FAKE DFC: grouped conv {node.name} is not translated by the double")
    kernel = weights[node.input[1]].transpose(2, 3, 1, 0)  # OIHW -> [kh, kw, c_in, c_out]
    cout = kernel.shape[-1]
    bias = weights[node.input[2]] if len(node.input) > 2 and node.input[2] else np.zeros(cout, np.float32)
    pads = tuple(attrs.get("pads", [0, 0, 0, 0]))
    return Layer(
        name,
        [node.name],
        np.ascontiguousarray(kernel),
        bias.copy(),
        tuple(attrs.get("strides", [1, 1])),  # type: ignore[arg-type]
        (pads[0], pads[1], pads[2], pads[3]),
        False,
        source,
        node.output[0],
    )


def _fuse(layer: Layer, node: onnx.NodeProto, weights: dict[str, np.ndarray]) -> None:
    if node.op_type == "BatchNormalization":
        if layer.relu:
            raise FakeDfcError(f"FAKE DFC: BatchNormalization {node.name} after an activation")
        gamma, beta, mean, var = (weights[n] for n in node.input[1:5])
        eps = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-5)
        gain = gamma / np.sqrt(var + np.float32(eps))
        layer.kernel = (layer.kernel * gain).astype(np.float32)
        layer.bias = ((layer.bias - mean) * gain + beta).astype(np.float32)
    else:
        layer.relu = True
    layer.original_names.append(node.name)
    layer.out_tensor = node.output[0]


def _out_shape(shape: tuple[int, int, int], layer: Layer) -> tuple[int, int, int]:
    kh, kw, _, cout = layer.kernel.shape
    t, left, b, r = layer.pads
    return ((shape[0] + t + b - kh) // layer.strides[0] + 1, (shape[1] + left + r - kw) // layer.strides[1] + 1, cout)


# -- equalize -------------------------------------------------------------------------------


def equalization_enabled(script: str) -> bool:
    return bool(re.search(r"pre_quantization_optimization\(\s*equalization\s*,\s*policy\s*=\s*enabled", script))


def equalize(net: Net) -> list[str]:
    """Cross-layer equalization of each conv with its only reader, in place; the layers it rescaled."""
    touched: list[str] = []
    for first in net.layers:
        readers = [ly for ly in net.layers if ly.input == first.name]
        if len(readers) != 1 or first.name in net.outputs:
            continue
        second = readers[0]
        r1 = np.max(np.abs(first.kernel), axis=(0, 1, 2))
        r2 = np.max(np.abs(second.kernel), axis=(0, 1, 3))
        s = np.where((r1 > 0) & (r2 > 0), np.sqrt(r1 / np.where(r2 > 0, r2, 1.0)), 1.0)
        first.kernel = (first.kernel / s).astype(np.float32)
        first.bias = (first.bias / s).astype(np.float32)
        second.kernel = (second.kernel * s[None, None, :, None]).astype(np.float32)
        touched += [n for n in (first.name, second.name) if n not in touched]
    return touched


class SizedHef:
    """A HEF of ``size`` bytes that is never made: ``len()`` answers, the bytes are refused (a test's
    stand-in for a HEF bigger than a device can take, which no test machine should hold)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __bytes__(self) -> bytes:
        raise MemoryError(f"FAKE DFC: a {self.size:,}-byte HEF is not materialized")


# -- run --------------------------------------------------------------------------------------


def conv(x: np.ndarray, kernel: np.ndarray, bias: np.ndarray, layer: Layer) -> np.ndarray:
    """NHWC convolution, before the activation."""
    kh, kw = kernel.shape[:2]
    t, left, b, r = layer.pads
    padded = np.pad(x, ((0, 0), (t, b), (left, r), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(1, 2))
    windows = windows[:, :: layer.strides[0], :: layer.strides[1]]  # N, H', W', C, kh, kw
    return np.einsum("nhwcij,ijco->nhwo", windows, kernel, optimize=True) + bias


def float_run(net: Net, x: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each layer's (input, pre-activation output) on float NHWC frames, unquantized."""
    values = {"input_layer1": x.astype(np.float64)}
    seen: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for layer in net.layers:
        source = values[layer.input]
        pre = conv(source, layer.kernel.astype(np.float64), layer.bias.astype(np.float64), layer)
        seen[layer.name] = (source, pre)
        values[layer.name] = np.maximum(pre, 0) if layer.relu else pre
    return seen


# -- quantize ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Script:
    """The model-script lines the double acts on; every other line is taken and ignored."""

    forced: dict[tuple[str, str], tuple[float, float]]  # (layer, "out"/"in") -> range
    bits: dict[str, tuple[int, int]]  # layer -> (activation, weight), as the script's precision_mode lines say
    bias_correction: bool
    auto_4bit: float | None = None  # auto_4bit_weights_ratio, the share of the weights to put at 4 bits

    @classmethod
    def parse(cls, text: str, layers: list[str]) -> Script:
        forced: dict[tuple[str, str], tuple[float, float]] = {}
        bits: dict[str, tuple[int, int]] = {}
        for line in text.splitlines():
            match = _PARAM.match(line)
            if not match:
                continue
            names = [n.strip().split("/")[-1] for n in match.group(1).strip("[]{} ").split(",")]
            for side, lo, hi in _RANGE.findall(match.group(2)):
                forced.update({(n, side): (float(lo), float(hi)) for n in names})
            mode = re.search(r"precision_mode\s*=\s*a(\d+)_w(\d+)", match.group(2))
            if mode:
                bits.update({n: (int(mode.group(1)), int(mode.group(2))) for n in names if n in layers})
        enabled = re.search(r"post_quantization_optimization\(\s*bias_correction\s*,\s*policy\s*=\s*enabled", text)
        ratios = [float(m.group(1)) for m in map(_RATIO.search, text.splitlines()) if m]
        return cls(forced, bits, bool(enabled), ratios[-1] if ratios else None)


def precision_modes(net: Net, text: str) -> dict[str, tuple[int, int]]:
    """(activation, weight) bits by layer: the script's ``precision_mode`` lines, and the layers the
    double puts at 4 bits itself for ``auto_4bit_weights_ratio`` (:func:`auto_4bit`)."""
    script = Script.parse(text, [ly.name for ly in net.layers] + ["input_layer1"])
    return {**script.bits, **dict.fromkeys(auto_4bit(net, script), (8, 4))}


def auto_4bit(net: Net, script: Script) -> list[str]:
    """The layers ``auto_4bit_weights_ratio=R`` puts at 4 bits. The DFC's rule is NOT public; the double's
    is stated: of the layers no ``precision_mode`` line names, the largest kernels first (graph order on a
    tie), until the 4-bit weights (those a line already put at 4 bits included) reach R of all weights
    by count, as Hailo's compression inspector counts the share."""
    if script.auto_4bit is None:
        return []
    sizes = {ly.name: int(ly.kernel.size) for ly in net.layers}
    done = sum(n for name, n in sizes.items() if script.bits.get(name, (8, 8))[1] == 4)
    chosen: list[str] = []
    for name in sorted((n for n in sizes if n not in script.bits), key=lambda n: -sizes[n]):
        if done >= script.auto_4bit * sum(sizes.values()):
            break
        chosen.append(name)
        done += sizes[name]
    return chosen


def _grid(lo: float, hi: float, bits: int) -> tuple[float, int]:
    """An unsigned activation grid holding [lo, hi] and 0: (scale, zero point)."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / (2**bits - 1) or 1.0
    return scale, int(round(-lo / scale))


def _fake_quant(x: np.ndarray, scale: float, zp: int, bits: int) -> np.ndarray:
    return (np.clip(np.round(x / scale) + zp, 0, 2**bits - 1) - zp) * scale


def _kernel_ints(kernel: np.ndarray, bits: int, feedback: bool) -> tuple[np.ndarray, float]:
    top = 2 ** (bits - 1) - 1
    scale = float(np.float32(np.max(np.abs(kernel)) / top)) or 1.0  # stored float32: round on that
    units = kernel.astype(np.float64) / scale
    if not feedback:
        q = np.round(units)
    else:  # the re-derivation against a forced range: error carried along each output channel
        flat = units.reshape(-1, units.shape[-1])
        q, carry = np.empty_like(flat), np.zeros(flat.shape[1])
        for i, row in enumerate(flat):
            q[i] = np.round(row + carry)
            carry = row + carry - q[i]
        q = q.reshape(units.shape)
    # a 4-bit kernel is kept in int8, its integers in [-8, 7] (ASSUMED: the DFC's storage is not public)
    return np.clip(q, -top - 1, top).astype(np.int16 if bits > 8 else np.int8), scale


def quantize(
    net: Net, calibration: np.ndarray, script_text: str, float_bias: set[str]
) -> dict[str, dict[str, np.ndarray]]:
    """The translated (quantized) params, per ``<net>/<layer>``, as ``get_params_translated()`` gives them."""
    script = Script.parse(script_text, [ly.name for ly in net.layers] + ["input_layer1"])
    modes = precision_modes(net, script_text)
    seen = float_run(net, calibration)
    in_bits = modes.get("input_layer1", (8, 8))[0]
    grids = {"input_layer1": (*_grid(float(calibration.min()), float(calibration.max()), in_bits), in_bits)}
    params: dict[str, dict[str, np.ndarray]] = {}
    layers: dict[str, dict[str, Any]] = {}
    for layer in net.layers:
        a_bits, w_bits = modes.get(layer.name, (8, 8))
        post = np.maximum(seen[layer.name][1], 0) if layer.relu else seen[layer.name][1]
        calibrated = (float(post.min()), float(post.max()))
        lo, hi = script.forced.get((layer.name, "out"), calibrated)
        out = (*_grid(lo, hi, a_bits), a_bits)
        grids[layer.name] = out
        source = grids[layer.input]
        if (layer.name, "in") in script.forced:
            source = (*_grid(*script.forced[(layer.name, "in")], source[2]), source[2])
        forced = any((layer.name, side) in script.forced for side in ("out", "in"))
        q_kernel, k_scale = _kernel_ints(layer.kernel, w_bits, feedback=forced)
        layers[layer.name] = {"in": source, "out": out, "kernel": q_kernel, "k_scale": k_scale, "bias": layer.bias}
        params[f"{net.name}/{layer.name}"] = {"stats/output_0/stats_limvals:0": np.float32(calibrated)}
    if script.bias_correction:
        _correct_biases(net, calibration, seen, layers)
    for layer in net.layers:
        own = layers[layer.name]
        leaves = params[f"{net.name}/{layer.name}"]
        leaves["kernel:0"] = own["kernel"]
        leaves["kernel_scale:0"] = np.float32([own["k_scale"]])
        step = own["in"][0] * own["k_scale"]
        if layer.name in float_bias:
            leaves["bias:0"] = np.asarray(own["bias"], np.float32)
        else:
            leaves["bias:0"] = np.round(np.asarray(own["bias"], np.float64) / step).astype(np.int32)
            leaves["bias_scale:0"] = np.float32([step])
        leaves["qp_in:0"] = np.float64([own["in"][1], own["in"][0]])
        leaves["qp_out:0"] = np.float64([own["out"][1], own["out"][0]])
    return params


def _correct_biases(
    net: Net, calibration: np.ndarray, seen: dict[str, tuple[np.ndarray, np.ndarray]], layers: dict[str, Any]
) -> None:
    """In graph order: each bias moves by the mean gap between the float and the quantized
    pre-activation, given the layers before it already corrected."""
    values = {"input_layer1": calibration.astype(np.float64)}
    for layer in net.layers:
        own = layers[layer.name]
        x = _fake_quant(values[layer.input], *own["in"])
        kernel = own["kernel"].astype(np.float64) * own["k_scale"]
        pre = conv(x, kernel, np.asarray(own["bias"], np.float64), layer)
        gap = (seen[layer.name][1] - pre).mean(axis=(0, 1, 2))
        own["bias"] = (np.asarray(own["bias"], np.float64) + gap).astype(np.float32)
        pre = pre + gap
        values[layer.name] = _fake_quant(np.maximum(pre, 0) if layer.relu else pre, *own["out"])


def emulate(net: Net, params: dict[str, dict[str, np.ndarray]], script: str, x: np.ndarray) -> list[np.ndarray]:
    """SDK_QUANTIZED as the double has it: every layer on its quantized params, the outputs in
    the HN's output order, float32 NHWC."""
    width = {name: a for name, (a, _) in precision_modes(net, script).items()}
    values: dict[str, np.ndarray] = {"input_layer1": np.asarray(x, np.float64)}
    for layer in net.layers:
        leaves = params[f"{net.name}/{layer.name}"]
        kernel = leaves["kernel:0"].astype(np.float64) * float(leaves["kernel_scale:0"][0])
        step = float(leaves["bias_scale:0"][0]) if "bias_scale:0" in leaves else 1.0
        in_zp, in_scale = (float(v) for v in leaves["qp_in:0"])
        x_in = _fake_quant(values[layer.input], in_scale, int(in_zp), width.get(layer.input, 8))
        pre = conv(x_in, kernel, leaves["bias:0"].astype(np.float64) * step, layer)
        out_zp, out_scale = (float(v) for v in leaves["qp_out:0"])
        post = np.maximum(pre, 0) if layer.relu else pre
        values[layer.name] = _fake_quant(post, out_scale, int(out_zp), width.get(layer.name, 8))
    return [values[o].astype(np.float32) for o in net.outputs]


def native(net: Net) -> dict[str, np.ndarray]:
    """``runner.get_params()``: flat ``<net>/<layer>/kernel:0`` and ``bias:0``, float, BN folded in."""
    out: dict[str, np.ndarray] = {}
    for layer in net.layers:
        out[f"{net.name}/{layer.name}/kernel:0"] = layer.kernel.copy()
        out[f"{net.name}/{layer.name}/bias:0"] = layer.bias.copy()
    return out


PerLayer = dict[str, dict[str, np.ndarray]]


def har_bytes(net: Net, params: PerLayer, script: str, hw_arch: str | None, optimized: PerLayer | None = None) -> bytes:
    """The double's HAR: enough to reopen it (``ClientRunner(har=...)``) in another process. ``params``
    are the translated params as last loaded, ``optimized`` as optimize made them (what the double
    compiles when loaded params do not reach the HEF)."""
    doc = {
        "hw_arch": hw_arch,
        "script": script,
        "net": net.to_json(),
        "params": params_to_json(params),
        "optimized": params_to_json(params if optimized is None else optimized),
    }
    return ("FAKE-HAR\n" + json.dumps(doc, sort_keys=True)).encode()


def read_har(data: bytes) -> tuple[Net, PerLayer, str, str | None, PerLayer]:
    doc = json.loads(data.decode().split("\n", 1)[1])
    params = params_from_json(doc["params"])
    optimized = params_from_json(doc["optimized"]) if "optimized" in doc else params
    return Net.from_json(doc["net"]), params, doc["script"], doc["hw_arch"], optimized


# -- load translated params, and a HEF that carries what it compiled ---------------------------


def per_layer(flat: dict[str, np.ndarray], current: PerLayer) -> PerLayer:
    """Flat ``<net>/<layer>/<leaf>`` keys (``save_params(TRANSLATED)``'s npz) back per layer, checked
    against the params the runner holds: the double refuses a key or a shape it does not have
    (ASSUMED: the real DFC's checks are not public)."""
    out = {layer: dict(leaves) for layer, leaves in current.items()}
    for key, value in flat.items():
        parts = key.split("/")
        layer, leaf = "/".join(parts[:2]), "/".join(parts[2:])
        old = current.get(layer, {}).get(leaf)
        if old is None or np.shape(old) != np.shape(value):
            raise FakeDfcError(f"FAKE DFC: load_params: {key} is not a translated param of this net, or not its shape")
        out[layer][leaf] = np.asarray(value, np.asarray(old).dtype)
    return out


def hef_with_params(hef: bytes, params: PerLayer) -> bytes:
    """A loopback "HEF" (tests/devices/loopback) that carries the params it was compiled from: its
    first line gains ``seed=<crc32 of them>`` (the loopback's outputs depend on it), the params follow
    on a ``FAKE-HEF-PARAMS`` line (:func:`hef_params` reads them back)."""
    body = json.dumps(params_to_json(params), sort_keys=True)
    head = hef.decode().splitlines()[0]
    return f"{head} seed={zlib.crc32(body.encode()):08x}\nFAKE-HEF-PARAMS {body}\n".encode()


def hef_params(hef: bytes) -> PerLayer:
    """The params a :func:`hef_with_params` HEF was compiled from."""
    line = next(x for x in hef.decode().splitlines() if x.startswith("FAKE-HEF-PARAMS "))
    return params_from_json(json.loads(line.split(" ", 1)[1]))
