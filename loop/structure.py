"""What a float ONNX graph looks like to a quantizer: its layers and their tensors.

ONNX Runtime's QDQ flow (and the Dataflow Compiler) removes a Relu or Clip that follows a
layer and quantizes only the activation's output, so "a layer's output" means the tensor
after those activations. The bounds of the removed activations are kept: a forced range
wider than them changes the function.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper

QUANTIZED_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")
FOLDED_ACTIVATIONS = ("Relu", "Clip")
# Ops whose quantized output takes their input's scale and zero point (ONNX Runtime's QDQ
# quantizer gives them one shared grid), so a forced range reaches through them.
SAME_SCALE_OPS = ("MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Identity",
                  "Slice", "Gather", "Split", "Resize", "SpaceToDepth", "DepthToSpace", "Pad", "Expand",
                  "GlobalMaxPool")


@dataclass(frozen=True)
class Layer:
    name: str
    op: str
    index: int
    weight: str | None
    bias: str | None
    in_tensor: str
    out_tensor: str


@dataclass(frozen=True)
class Structure:
    layers: tuple[Layer, ...]
    node_names: tuple[str, ...]
    bounds: dict[str, tuple[float, float]]
    inputs: tuple[str, ...]
    input_shape: tuple[int, ...] = ()
    grid_of: dict[str, str] = field(default_factory=dict)  # tensor -> the tensor whose grid it shares

    def grid(self, tensor: str) -> str:
        return self.grid_of.get(tensor, tensor)

    def layer(self, name: str) -> Layer | None:
        return next((l for l in self.layers if l.name == name), None)

    def producer_of(self, tensor: str) -> list[Layer]:
        return [l for l in self.layers if self.grid(l.out_tensor) == self.grid(tensor)]

    def consumers_of(self, tensor: str) -> list[Layer]:
        """Layers reading ``tensor``, directly or through ops that keep its quantization grid."""
        return [l for l in self.layers if self.grid(l.in_tensor) == self.grid(tensor)]


def _consumers(graph: onnx.GraphProto) -> dict[str, list[onnx.NodeProto]]:
    out: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            out.setdefault(name, []).append(node)
    return out


def _clip_bounds(node: onnx.NodeProto, consts: dict[str, np.ndarray]) -> tuple[float, float]:
    lo, hi = -np.inf, np.inf
    for attr in node.attribute:  # opset < 11 carries bounds as attributes
        if attr.name == "min":
            lo = attr.f
        if attr.name == "max":
            hi = attr.f
    if len(node.input) > 1 and node.input[1] in consts:
        lo = float(consts[node.input[1]])
    if len(node.input) > 2 and node.input[2] in consts:
        hi = float(consts[node.input[2]])
    return float(lo), float(hi)


def follow_activations(tensor: str, graph: onnx.GraphProto,
                       consts: dict[str, np.ndarray] | None = None) -> tuple[str, tuple[float, float]]:
    """The tensor actually quantized after ``tensor``, and the bounds of what was removed."""
    consts = consts if consts is not None else _constants(graph)
    consumers = _consumers(graph)
    lo, hi = -np.inf, np.inf
    while len(consumers.get(tensor, [])) == 1 and consumers[tensor][0].op_type in FOLDED_ACTIVATIONS:
        node = consumers[tensor][0]
        a, b = (0.0, np.inf) if node.op_type == "Relu" else _clip_bounds(node, consts)
        lo, hi = max(lo, a), min(hi, b)
        tensor = node.output[0]
    return tensor, (float(lo), float(hi))


def _constants(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute:
            consts[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return consts


def analyse(model: onnx.ModelProto) -> Structure:
    graph = model.graph
    consts = _constants(graph)
    inits = {t.name for t in graph.initializer}
    layers: list[Layer] = []
    bounds: dict[str, tuple[float, float]] = {}
    for node in graph.node:
        if node.op_type not in QUANTIZED_OPS:
            continue
        weight = next((i for i in node.input[1:2] if i in consts), None)
        if node.op_type == "MatMul" and weight is None:
            continue  # activation x activation: nothing to fingerprint
        bias = node.input[2] if len(node.input) > 2 and node.input[2] in consts else None
        out, bound = follow_activations(node.output[0], graph, consts)
        if bound != (-np.inf, np.inf):
            bounds[out] = bound
        layers.append(Layer(node.name, node.op_type, len(layers), weight, bias, node.input[0], out))
    values = [v for v in graph.input if v.name not in inits]
    shape = tuple(int(d.dim_value) for d in values[0].type.tensor_type.shape.dim) if values else ()
    return Structure(tuple(layers), tuple(n.name for n in graph.node), bounds, tuple(v.name for v in values),
                     shape, _grids(graph))


def _grids(graph: onnx.GraphProto) -> dict[str, str]:
    """For each output of a same-scale op, the tensor whose grid it shares (in graph order,
    so chains of them resolve to the first)."""
    grid: dict[str, str] = {}
    for node in graph.node:
        if node.op_type in SAME_SCALE_OPS and node.input:
            for out in node.output:
                grid[out] = grid.get(node.input[0], node.input[0])
    return grid
