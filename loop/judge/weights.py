"""What a model's weights are, counted from its tensors' shapes alone (``loop fit``).

A weight is a value the graph stores that a layer computes with: every element of a floating-point
initializer, sparse initializer (at its dense shape) or ``Constant`` node's tensor, in the graph and
its subgraphs, and of every integer tensor a quantized operator reads as a kernel, bias or zero point
(``QUANTIZED``: the QDQ form's pair, ONNX Runtime's fused QLinear and integer operators, and
``MatMulNBits``, whose packed bytes hold ``bits``-wide weights). Integer tensors read
otherwise (shapes, indices) are not weights, nor are a model's local functions' constants. Only dims
are read, so a model whose tensors lie in external data is weighed without opening that data.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto

from loop.core.errors import LoopError

# ONNX's type name -> what loop calls it, its bits per element (4-bit types packed two to a byte,
# as ONNX stores them), and whether it is floating point (a weight wherever it is stored)
TYPES: dict[str, tuple[str, int, bool]] = {
    "FLOAT": ("float32", 32, True),
    "DOUBLE": ("float64", 64, True),
    "FLOAT16": ("float16", 16, True),
    "BFLOAT16": ("bfloat16", 16, True),
    **{t: (t.lower(), 8, True) for t in ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ")},
    "FLOAT8E8M0": ("float8e8m0", 8, True),
    "FLOAT4E2M1": ("float4e2m1", 4, True),
    **{f"{u}INT{b}": (f"{u.lower()}int{b}", b, False) for u in ("", "U") for b in (32, 16, 8, 4, 2)},
}
WIDTH = {word: bits for word, bits, _ in TYPES.values()}
# Operators that compute with stored integers (kernels, biases, zero points), by the ONNX and ONNX
# Runtime contrib schemas: the QDQ pair, the fused QLinear* and Q* operators ONNX Runtime's graph
# compile writes (QLinearConv, QGemm, QLinearAdd...), the integer ones, and the block-quantized ones.
QUANTIZED = re.compile(
    r"QuantizeLinear|DequantizeLinear|QLinear\w+|QGemm|QAttention|\w*Integer\w*|DynamicQuantize\w+|MatMulNBits|GatherBlockQuantized"
)


@dataclass(frozen=True)
class Weights:
    by_type: dict[str, int]  # weights by stored type (float32, bfloat16, int8, ...)

    @property
    def count(self) -> int:
        return sum(self.by_type.values())

    @property
    def stored_bytes(self) -> int:
        """Bytes as the file stores them: each type at its own width, sub-byte types packed."""
        return sum(at_bits(n, WIDTH[t]) for t, n in self.by_type.items())


def bits_of(data_type: int) -> int:
    """An ONNX element type's width in bits, as stored (INT4 and UINT4: 4, though NumPy holds them a
    byte each); a type the table does not name (INT64, BOOL...) at its NumPy width."""
    known = TYPES.get(_name(data_type))
    if known is not None:
        return known[1]
    return int(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(data_type)).itemsize * 8)


def at_bits(count: int, bits: int) -> int:
    """Bytes of ``count`` values at ``bits`` each, packed (int4: two to a byte)."""
    return (count * bits + 7) // 8


def weigh(model: onnx.ModelProto) -> Weights:
    """The weights of ``model`` by stored type, from dims alone (the rule is the module's)."""
    graphs = list(_graphs(model.graph))
    packed = _packed(graphs)
    read = {x for g in graphs for n in g.node if QUANTIZED.fullmatch(n.op_type) for x in n.input}
    found: dict[str, int] = {}
    for name, data_type, count in (t for g in graphs for t in _tensors(g)):
        word, bits, floating = TYPES.get(_name(data_type), ("", 0, False))
        if name in packed and word == "uint8":  # bytes holding narrower values: counted as those, at the same bytes
            word, count = packed[name], count * bits // WIDTH[packed[name]]
        if word and (floating or name in read):
            found[word] = found.get(word, 0) + count
    return Weights(dict(sorted(found.items())))


def _packed(graphs: list[onnx.GraphProto]) -> dict[str, str]:
    """``MatMulNBits``' packed kernels and zero points: unsigned values ``bits`` wide, packed into
    uint8 (ONNX Runtime's contrib schema; ``bits`` 4 by default)."""
    found = {}
    for node in (n for g in graphs for n in g.node if n.op_type == "MatMulNBits"):
        bits = next((a.i for a in node.attribute if a.name == "bits"), 4)
        if f"uint{bits}" not in WIDTH:  # 3, 5, 6 or 7 bits: a width loop has no word for, counted as bytes
            continue
        for i in (1, 3):
            if i < len(node.input) and node.input[i]:
                found[node.input[i]] = f"uint{bits}"
    return found


def _name(data_type: int) -> str:
    return TensorProto.DataType.Name(data_type) if data_type in TensorProto.DataType.values() else "?"


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == AttributeProto.GRAPH:
                yield from _graphs(attr.g)
            elif attr.type == AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    yield from _graphs(sub)


def _tensors(graph: onnx.GraphProto) -> Iterator[tuple[str, int, int]]:
    """(name, data type, elements) of every tensor ``graph`` stores."""
    for t in graph.initializer:
        yield t.name, t.data_type, _elements(t.name, t.dims)
    for s in graph.sparse_initializer:
        yield s.values.name, s.values.data_type, _elements(s.values.name, s.dims)
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.output:
            yield from _constant(node)


def _constant(node: onnx.NodeProto) -> Iterator[tuple[str, int, int]]:
    name = node.output[0]
    for attr in node.attribute:
        if attr.name == "value":
            yield name, attr.t.data_type, _elements(name, attr.t.dims)
        elif attr.name == "sparse_value":
            yield name, attr.sparse_tensor.values.data_type, _elements(name, attr.sparse_tensor.dims)
        elif attr.name == "value_float":
            yield name, TensorProto.FLOAT, 1
        elif attr.name == "value_floats":
            yield name, TensorProto.FLOAT, len(attr.floats)


def _elements(name: str, dims: Iterable[int]) -> int:
    count = 1
    for d in dims:
        if d < 0:  # a stored tensor has a fixed shape; a negative one is a damaged file
            raise LoopError(f"tensor '{name}' has a negative dimension ({d})")
        count *= d
    return count
