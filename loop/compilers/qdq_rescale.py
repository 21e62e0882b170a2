"""``scale_grid`` on a QDQ model: scale initializers multiplied, every integer left as it was.

A DequantizeLinear computes ``(q - zero_point) * scale``; an int32 bias's scale is the input's
scale times the weight's (ONNX Runtime's quantizer writes it so), so moving either moves the
bias's scale with it. The integers (kernel, bias, zero points) are never touched. ONNX Runtime
runs such a model as it runs any QDQ model (checked with 1.32: weight scales edited in place).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from loop.compilers.qdq import QdqGraph
from loop.core.vocab import Rescale

Slot = tuple[onnx.NodeProto, int]  # a node and the input index that names a scale


def rescale(model: onnx.ModelProto, edits: Sequence[Rescale]) -> list[dict[str, object]]:
    """Apply ``edits`` to ``model`` in place, in order; what each moved, by initializer (the
    factors are the edit's own, recorded with the run's options)."""
    g = QdqGraph(model)  # one index for all the edits: they rename scale inputs, never tensors
    layers = {n.name: n for n in g.layers()}
    readers = Counter(x for n in model.graph.node for x in n.input)
    done: list[dict[str, object]] = []
    for k, edit in enumerate(edits):
        node = _layer(layers, edit.layer)
        slots = _weight_slots(g, node, edit) if edit.of == "weights" else _output_slots(g, node, edit)
        moved = [_scaled(g, readers, group, np.asarray(edit.factors, np.float64), f"{k}") for group in slots]
        done.append({"layer": edit.layer, "of": edit.of, "scales": moved})
    return done


def _layer(layers: dict[str, onnx.NodeProto], name: str) -> onnx.NodeProto:
    node = layers.get(name)
    if node is None:
        raise ValueError(f"scale_grid: the quantized model has no quantized layer '{name}'")
    return node


def _dq_scale(g: QdqGraph, tensor: str) -> Slot | None:
    dq = g.producer.get(tensor)
    return (dq, 1) if dq is not None and dq.op_type == "DequantizeLinear" else None


def _weight_slots(g: QdqGraph, node: onnx.NodeProto, edit: Rescale) -> list[list[Slot]]:
    """The layer's weight scale and, for an int32 bias on ``input scale * weight scale``, its scale."""
    w = g.weight(node)
    weight = _dq_scale(g, node.input[1]) if w is not None else None
    if weight is None:
        raise ValueError(f"scale_grid: layer '{edit.layer}' has no quantized kernel")
    scale = g.required(w.scale)  # type: ignore[union-attr]
    if len(edit.factors) > 1 and scale.size != len(edit.factors):
        raise ValueError(
            f"scale_grid: {len(edit.factors)} factors for layer '{edit.layer}', whose weight grid has "
            f"{scale.size} scale(s) (per channel needs compile.per_channel: true)"
        )
    groups = [[weight]]
    bias = _dq_scale(g, node.input[2]) if len(node.input) > 2 and node.input[2] else None
    if bias is not None and _is_int32(g, bias[0]):
        groups.append([bias])
    return groups


def _is_int32(g: QdqGraph, dq: onnx.NodeProto) -> bool:
    init = g.inits.get(dq.input[0])
    return init is not None and init.data_type == onnx.TensorProto.INT32


def _output_slots(g: QdqGraph, node: onnx.NodeProto, edit: Rescale) -> list[list[Slot]]:
    """Every QuantizeLinear of a tensor on the grid and each DequantizeLinear of it (one group:
    they are one grid), then each reader's int32 bias scale (input scale times weight scale)."""
    quants = _grid_quants(g, node, edit.tensors)
    if not quants:
        raise ValueError(f"scale_grid: the output of layer '{edit.layer}' is not quantized")
    grid: list[Slot] = []
    biases: list[list[Slot]] = []
    for q in quants:
        grid.append((q, 1))
        for dq in (n for n in g.consumers.get(q.output[0], []) if n.op_type == "DequantizeLinear"):
            grid.append((dq, 1))
            for reader in g.consumers.get(dq.output[0], []):
                bias = _reader_bias(g, reader, dq.output[0])
                if bias is not None:
                    biases.append([bias])
    return [grid, *biases]


def _grid_quants(g: QdqGraph, node: onnx.NodeProto, tensors: Sequence[str]) -> list[onnx.NodeProto]:
    """The QuantizeLinear nodes of the grid: of ``tensors`` (a graph output's is fed under the
    quantizer's ``_QuantizeLinear_Input`` name), else the one after the layer's own output."""
    names = {t for t in tensors} | {f"{t}_QuantizeLinear_Input" for t in tensors}
    found = [n for n in g.model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] in names]
    if found:
        return found
    q, _ = g.out_q(node.output[0])
    return [q] if q is not None else []


def _reader_bias(g: QdqGraph, reader: onnx.NodeProto, tensor: str) -> Slot | None:
    """A weighted layer reading ``tensor`` as its activation: its int32 bias's scale."""
    if not reader.input or reader.input[0] != tensor or g.weight(reader) is None or len(reader.input) < 3:
        return None
    bias = _dq_scale(g, reader.input[2]) if reader.input[2] else None
    return bias if bias is not None and _is_int32(g, bias[0]) else None


def _scaled(g: QdqGraph, readers: Counter[str], slots: list[Slot], factors: np.ndarray, tag: str) -> dict[str, object]:
    """Multiply the scale every slot names; an initializer that something outside ``slots`` also
    reads (exports and quantizers share equal constants) is copied first, so only they move."""
    names = dict.fromkeys(node.input[i] for node, i in slots)
    out: dict[str, object] = {}
    for name in names:
        mine = [(n, i) for n, i in slots if n.input[i] == name]
        old = g.required(name)
        by = factors[0] if factors.size == 1 else factors.reshape(old.shape)
        new = (old.astype(np.float64) * by).astype(old.dtype)
        if readers[name] == len(mine):
            g.set_array(name, new)
            out[name] = name
            continue
        own = f"{name}.scale_grid{tag}"
        g.model.graph.initializer.append(numpy_helper.from_array(new, own))
        g.inits[own] = g.model.graph.initializer[-1]
        for n, i in mine:
            n.input[i] = own
        readers[name] -= len(mine)
        readers[own] += len(mine)
        out[name] = own
    return out
