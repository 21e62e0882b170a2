"""Removing the boundary Quantize/DequantizeLinear so an artifact takes and returns uint8,
with the scale and zero point kept in its layout, as a HEF's are."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from loop.compilers.qdq import QdqGraph
from loop.core.vocab import TensorLayout

DTYPES: dict[int, str] = {TensorProto.FLOAT: "float32", TensorProto.UINT8: "uint8", TensorProto.INT8: "int8"}


def _shape(value: onnx.ValueInfoProto) -> tuple[int, ...]:
    dims = value.type.tensor_type.shape.dim
    if not all(d.HasField("dim_value") for d in dims):
        # a layout of unknown size cannot be fed or read back; loading resolves these first
        raise ValueError(f"tensor '{value.name}' has a dynamic shape {[d.dim_param or '?' for d in dims]}")
    return tuple(int(d.dim_value) for d in dims)


def _dtype(value: onnx.ValueInfoProto) -> str:
    elem = value.type.tensor_type.elem_type
    return DTYPES.get(elem) or np.dtype(helper.tensor_dtype_to_np_dtype(elem)).name


def float_io(model: onnx.ModelProto) -> tuple[tuple[TensorLayout, ...], tuple[TensorLayout, ...]]:
    inits = {t.name for t in model.graph.initializer}
    layout = lambda v: TensorLayout(v.name, _shape(v), _dtype(v))  # noqa: E731
    return (
        tuple(layout(v) for v in model.graph.input if v.name not in inits),
        tuple(layout(v) for v in model.graph.output),
    )


def _retype(value: onnx.ValueInfoProto, elem_type: int) -> None:
    value.type.tensor_type.elem_type = elem_type


def _layout(g: QdqGraph, value: onnx.ValueInfoProto, q: onnx.NodeProto | None) -> TensorLayout:
    """A boundary tensor's layout: the integers of ``q``'s grid (uint8, or uint16 for a 16-bit
    tensor) when its Q/DQ is removed."""
    if q is None:
        return TensorLayout(value.name, _shape(value), _dtype(value))
    zero_point = g.inits.get(q.input[2]) if len(q.input) > 2 else None
    elem = zero_point.data_type if zero_point is not None else TensorProto.UINT8
    _retype(value, elem)
    return TensorLayout(value.name, _shape(value), _dtype(value), g.scalar(q.input[1]), int(g.scalar(q.input[2]) or 0))


def _keep_for_readers(dq: onnx.NodeProto, output: str, readers: list[onnx.NodeProto]) -> None:
    """The graph output becomes the uint8 tensor; its DequantizeLinear stays, under a new
    name, for the nodes that read the float value inside the graph."""
    inner = f"{output}_loop_float"
    dq.input[0], dq.output[0] = output, inner
    for node in readers:
        for i, name in enumerate(node.input):
            if name == output:
                node.input[i] = inner


def strip(model: onnx.ModelProto) -> tuple[tuple[TensorLayout, ...], tuple[TensorLayout, ...]]:
    """Remove boundary Q/DQ in place; return the uint8 layouts. Unquantized I/O stays float."""
    g = QdqGraph(model)
    inputs, outputs = [], []
    drop: list[onnx.NodeProto] = []
    for value in model.graph.input:
        if value.name in g.inits:
            continue
        after = g.consumers.get(value.name, [])
        q: onnx.NodeProto | None = after[0] if len(after) == 1 and after[0].op_type == "QuantizeLinear" else None
        if q is not None:
            for dq in g.consumers.get(q.output[0], []):
                dq.input[0] = value.name
            drop.append(q)
        inputs.append(_layout(g, value, q))
    for value in model.graph.output:
        last = g.producer.get(value.name)
        q = None
        if last is not None and last.op_type == "DequantizeLinear":
            before = g.producer.get(last.input[0])
            q = before if before is not None and before.op_type == "QuantizeLinear" else None
        if q is not None and last is not None:
            readers = g.consumers.get(value.name, [])
            q.output[0] = value.name
            if readers:  # an output also read inside the graph (an FPN level that is pooled)
                _keep_for_readers(last, value.name, readers)
            else:
                drop.append(last)
        outputs.append(_layout(g, value, q))
    for node in drop:
        model.graph.node.remove(node)
    return tuple(inputs), tuple(outputs)
