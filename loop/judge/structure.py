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

from loop.core.modelfile import knows_folder, tensor_array

QUANTIZED_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")
FOLDED_ACTIVATIONS = ("Relu", "Clip")
# Ops whose quantized output takes their input's scale and zero point: ONNX Runtime's QDQ
# quantizer (onnxruntime/quantization/registry.py, QDQDirect8BitOp and kin) gives them one
# shared grid when their input is already quantized, so a forced range must be placed on
# the first tensor of the chain and reaches through them. The value is the lowest opset at
# which the quantizer shares (below it the op keeps its own grid, or none).
SAME_SCALE_OPS: dict[str, int] = {
    "Reshape": 1,
    "Transpose": 1,
    "Squeeze": 1,
    "Unsqueeze": 1,
    "Flatten": 1,
    "AveragePool": 1,
    "Slice": 1,
    "Split": 1,
    "Gather": 1,
    "GatherElements": 1,
    "TopK": 1,
    "Pad": 1,
    "Resize": 11,
    "MaxPool": 12,
}
# Ops whose outputs the quantizer never marks (shapes, indices, casts).
UNQUANTIZED_OUTPUTS = (
    "Shape",
    "Size",
    "Cast",
    "ArgMax",
    "ArgMin",
    "NonZero",
    "ConstantOfShape",
    "Range",
    "Equal",
    "Greater",
    "Less",
    "Not",
    "And",
    "Or",
)


@dataclass(frozen=True)
class Layer:
    name: str
    op: str
    index: int
    weight: str | None
    bias: str | None
    in_tensor: str
    out_tensor: str
    channels: int | None = None  # output channels, from the kernel's shape (None: no kernel)
    weight_count: int = 0  # the kernel's values (what its precision weighs)


@dataclass(frozen=True)
class Structure:
    layers: tuple[Layer, ...]
    node_names: tuple[str, ...]
    bounds: dict[str, tuple[float, float]]
    inputs: tuple[str, ...]
    input_shape: tuple[int, ...] = ()
    grid_of: dict[str, str] = field(default_factory=dict)  # tensor -> the tensor whose grid it shares
    writes: dict[str, str] = field(default_factory=dict)  # node name -> its first output

    def on_grid(self, tensor: str) -> list[str]:
        """Every node whose output is quantized on ``tensor``'s grid (the writer of a shared grid's
        head, and the Reshapes and pools that share it)."""
        head = self.grid(tensor)
        return [n for n, out in self.writes.items() if self.grid(out) == head]

    def grid(self, tensor: str) -> str:
        return self.grid_of.get(tensor, tensor)

    def layer(self, name: str) -> Layer | None:
        return next((lp for lp in self.layers if lp.name == name), None)

    def producer_of(self, tensor: str) -> list[Layer]:
        return [lp for lp in self.layers if self.grid(lp.out_tensor) == self.grid(tensor)]

    def consumers_of(self, tensor: str) -> list[Layer]:
        """Layers reading ``tensor``, directly or through ops that keep its quantization grid."""
        return [lp for lp in self.layers if self.grid(lp.in_tensor) == self.grid(tensor)]


def describe(structure: Structure) -> list[dict[str, object]]:
    """Each layer as ``loop layers`` shows it: the names an op takes, and the tensors a forced
    range would land on (after removed activations, at the head of a shared grid)."""
    return [
        {
            "layer": lp.name,
            "op": lp.op,
            "weights": lp.weight is not None,
            "weight_count": lp.weight_count,  # at 8 bits, bytes; at 4, half (precision's weights:)
            "in_tensor": structure.grid(lp.in_tensor),
            "out_tensor": structure.grid(lp.out_tensor),
            "out_bounds": _bounds(structure, lp.out_tensor),
            "in_bounds": _bounds(structure, lp.in_tensor),
        }
        for lp in structure.layers
    ]


def _bounds(structure: Structure, tensor: str) -> list[float | None] | None:
    """The removed clamp whose work the grid of ``tensor`` does, as [lo, hi] (None: unbounded)."""
    for name in (tensor, structure.grid(tensor)):
        if name in structure.bounds:
            return [b if np.isfinite(b) else None for b in structure.bounds[name]]
    return None


def consumers_of(graph: onnx.GraphProto) -> dict[str, list[onnx.NodeProto]]:
    """The nodes that read each tensor, in graph order."""
    out: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            out.setdefault(name, []).append(node)
    return out


def clip_bounds(node: onnx.NodeProto, consts: dict[str, np.ndarray]) -> tuple[float, float]:
    """What a Relu or a Clip lets through."""
    if node.op_type == "Relu":
        return 0.0, float(np.inf)
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


def follow_activations(
    tensor: str,
    graph: onnx.GraphProto,
    consts: dict[str, np.ndarray] | None = None,
    consumers: dict[str, list[onnx.NodeProto]] | None = None,
) -> tuple[str, tuple[float, float]]:
    """The tensor actually quantized after ``tensor``, and the bounds of what was removed.
    A caller following many tensors passes ``consumers`` made once: made per call, it costs
    the whole graph each time (minutes for 100,000 nodes)."""
    consts = consts if consts is not None else constants(graph)
    consumers = consumers if consumers is not None else consumers_of(graph)
    lo, hi = -np.inf, np.inf
    while len(consumers.get(tensor, [])) == 1 and consumers[tensor][0].op_type in FOLDED_ACTIVATIONS:
        node = consumers[tensor][0]
        a, b = clip_bounds(node, consts)
        lo, hi = max(lo, a), min(hi, b)
        tensor = node.output[0]
    return tensor, (float(lo), float(hi))


def constants(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    """The graph's initializers and Constant nodes' values; one whose data lies in a file is mapped
    from it (:func:`loop.core.modelfile.tensor_array`), or left out where the graph does not say
    in which folder (read by ``onnx.load(..., load_external_data=False)``)."""
    consts = {t.name: tensor_array(t) for t in graph.initializer if _readable(t)}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute:
            consts[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return consts


def _readable(tensor: onnx.TensorProto) -> bool:
    return tensor.data_location != onnx.TensorProto.EXTERNAL or knows_folder(tensor)


def _opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


def analyse(model: onnx.ModelProto) -> Structure:
    graph = model.graph
    consts = constants(graph)
    inits = {t.name for t in graph.initializer}
    consumers = consumers_of(graph)
    layers: list[Layer] = []
    bounds: dict[str, tuple[float, float]] = {}
    for node in graph.node:
        if node.op_type not in QUANTIZED_OPS:
            continue
        weight = next((i for i in node.input[1:2] if i in consts), None)
        if weight is None and node.op_type != "MatMul":
            continue  # a Conv or Gemm over a computed kernel is not quantized as a layer
        bias = node.input[2] if len(node.input) > 2 and node.input[2] in consts else None
        out, bound = follow_activations(node.output[0], graph, consts, consumers)
        if bound != (-np.inf, np.inf):
            bounds[out] = bound
        channels = out_channels(node, consts[weight]) if weight is not None else None
        count = int(consts[weight].size) if weight is not None else 0
        layers.append(Layer(node.name, node.op_type, len(layers), weight, bias, node.input[0], out, channels, count))
    values = [v for v in graph.input if v.name not in inits]
    shape = tuple(int(d.dim_value) for d in values[0].type.tensor_type.shape.dim) if values else ()
    grids, clamps = _grids(graph, consts, _opset(model), consumers)
    bounds.update(clamps)
    return Structure(
        tuple(layers),
        tuple(n.name for n in graph.node),
        bounds,
        tuple(v.name for v in values),
        shape,
        grids,
        {n.name: n.output[0] for n in graph.node if n.name and n.output},
    )


def out_channels(node: onnx.NodeProto, kernel: np.ndarray) -> int | None:
    """A layer's output channels as its kernel holds them: a Conv's first axis, a ConvTranspose's
    second (times its groups), a MatMul's last, a Gemm's by ``transB``."""
    if kernel.ndim == 0:
        return None
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "Conv":
        return int(kernel.shape[0])
    if node.op_type == "ConvTranspose" and kernel.ndim > 1:
        return int(kernel.shape[1]) * int(attrs.get("group", 1))
    if node.op_type == "Gemm" and kernel.ndim == 2:
        return int(kernel.shape[0] if attrs.get("transB", 0) else kernel.shape[1])
    return int(kernel.shape[-1])


def _pad_shares(node: onnx.NodeProto, consts: dict[str, np.ndarray]) -> bool:
    """ONNX Runtime shares a Pad's grid only when padding adds no new value (QDQPad)."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    mode = attrs.get("mode", b"constant")
    if mode in (b"reflect", b"edge", b"wrap"):
        return True
    value = consts.get(node.input[2]) if len(node.input) > 2 and node.input[2] else attrs.get("value", 0.0)
    return value is not None and float(np.asarray(value).reshape(-1)[0] if np.size(value) else 0.0) == 0.0


def _grids(
    graph: onnx.GraphProto, consts: dict[str, np.ndarray], opset: int, consumers: dict[str, list[onnx.NodeProto]]
) -> tuple[dict[str, str], dict[str, tuple[float, float]]]:
    """For each tensor whose quantization grid is another tensor's, that tensor; and for each
    tensor whose grid also does a removed clamp's work, the clamp's bounds.

    Mirrors what ONNX Runtime's QDQ quantizer does, in graph order (its QDQRemovableActivation):
    a same-scale op whose input is already quantized shares that input's grid; a Relu or Clip
    that is the only reader of a quantized tensor is removed, whatever produced that tensor (a
    layer, a bias Add, a HardSigmoid-style Mul and Add), and its output carries the grid: from
    then on the grid's ends are all that clamps."""
    parent: dict[str, str] = {}
    clamps: dict[str, tuple[float, float]] = {}
    quantized: set[str] = set()  # what the quantizer has marked so far, in its node order
    ends = {v.name for v in graph.input} | {v.name for v in graph.output}
    for node in graph.node:
        src = node.input[0] if node.input else ""
        if (
            node.op_type in FOLDED_ACTIVATIONS
            and src in quantized
            and src not in ends
            and len(consumers.get(src, [])) == 1
        ):
            parent[src] = node.output[0]
            lo, hi = clip_bounds(node, consts)
            before = clamps.get(src, (-np.inf, np.inf))
            clamps[node.output[0]] = (float(max(lo, before[0])), float(min(hi, before[1])))
        if node.op_type in SAME_SCALE_OPS:
            shares = opset >= SAME_SCALE_OPS[node.op_type] and src in quantized
            if shares and (node.op_type != "Pad" or _pad_shares(node, consts)):
                parent.update((out, src) for out in node.output)
                quantized.update(node.output)
        elif node.op_type not in UNQUANTIZED_OUTPUTS:
            quantized.update(n for n in (src, *node.output) if n and n not in consts)
    return _roots(parent), clamps


def _roots(parent: dict[str, str]) -> dict[str, str]:
    """Each tensor's last ancestor along ``parent``, every link walked once: walking from
    each tensor anew costs the square of a chain's length (a Relu chain of 100,000 nodes)."""
    root: dict[str, str] = {}
    for start in parent:
        path, tensor, on_path = [], start, set()
        while tensor in parent and tensor not in root and tensor not in on_path:
            path.append(tensor)
            on_path.add(tensor)
            tensor = parent[tensor]
        # a tensor already resolved lends its root; a cycle (no valid graph has one) ends where it closes
        end = root.get(tensor, tensor)
        for t in path:
            root[t] = end
    return root
