"""Small rewrites around ONNX Runtime's quantizer: zero biases before it, and the ranges it
actually used after it."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from loop.compilers.qdq import QdqGraph
from loop.core.modelfile import tensor_array
from loop.core.vocab import RangeOverride
from loop.judge.structure import FOLDED_ACTIVATIONS, clip_bounds, constants

UINT8_MAX = 255


def _out_channels(node: onnx.NodeProto, weight: np.ndarray) -> int | None:
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "Conv":
        return int(weight.shape[0])
    if node.op_type == "ConvTranspose":
        return int(weight.shape[1]) * int(attrs.get("group", 1))
    if node.op_type == "Gemm" and weight.ndim == 2:
        return int(weight.shape[0] if attrs.get("transB", 0) else weight.shape[1])
    return None


def add_zero_biases(model: onnx.ModelProto) -> list[str]:
    """Give each Conv, ConvTranspose and Gemm over an initializer kernel and without a bias
    a zero bias, in place; return their names. The function is unchanged."""
    inits = {t.name: t for t in model.graph.initializer}
    given = []
    for node in model.graph.node:
        if node.op_type not in ("Conv", "ConvTranspose", "Gemm") or len(node.input) < 2:
            continue
        if (len(node.input) > 2 and node.input[2]) or node.input[1] not in inits:
            continue
        weight = tensor_array(inits[node.input[1]])
        channels = _out_channels(node, weight)
        if channels is None or not np.issubdtype(weight.dtype, np.floating):
            continue
        name = f"{node.name}.loop_zero_bias"
        model.graph.initializer.append(numpy_helper.from_array(np.zeros(channels, weight.dtype), name))
        if len(node.input) == 2:
            node.input.append(name)
        else:
            node.input[2] = name
        given.append(node.name)
    return given


def used_ranges(
    quantized: onnx.ModelProto, overrides: tuple[RangeOverride, ...]
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """For each forced range, the range asked and the one the quantizer used (it widens a
    range to hold 0, and rounds it to its grid); a warning for each that moved."""
    g = QdqGraph(quantized)
    ranges: dict[str, dict[str, Any]] = {}
    warnings = []
    for o in overrides:
        grid = _grid(g, o.tensor)
        used = None if grid is None else [float((0 - grid[1]) * grid[0]), float((UINT8_MAX - grid[1]) * grid[0])]
        ranges[o.tensor] = {"layer": o.layer, "side": o.side, "asked": [o.lo, o.hi], "used": used}
        label = f"force_range_{o.side}({o.layer})"
        if grid is None or used is None:
            warnings.append(f"{label}: tensor '{o.tensor}' is not quantized; nothing forced")
        elif abs(used[0] - o.lo) > grid[0] or abs(used[1] - o.hi) > grid[0]:
            warnings.append(
                f"{label}: asked [{o.lo:g}, {o.hi:g}], the quantizer used "
                f"[{used[0]:.4g}, {used[1]:.4g}] (a range must hold 0)"
            )
    return ranges, warnings


def _grid(g: QdqGraph, tensor: str) -> tuple[float, float] | None:
    """(scale, zero point) of the QuantizeLinear over ``tensor``; a graph output's DQ keeps
    the output's name, so there the Q is found behind it."""
    q = next((n for n in g.consumers.get(tensor, []) if n.op_type == "QuantizeLinear"), None)
    dq = g.producer.get(tensor)
    if q is None and dq is not None and dq.op_type == "DequantizeLinear":
        q = g.producer.get(dq.input[0])
    if q is None or q.op_type != "QuantizeLinear":
        return None
    return g.scalar(q.input[1]) or 0.0, g.scalar(q.input[2] if len(q.input) > 2 else None) or 0.0


def removed_clamps(float_model: onnx.ModelProto, quantized: onnx.ModelProto) -> dict[str, list[float | None]]:
    """Each Relu or Clip the quantizer removed, as the tensor whose grid now does its work
    (its output, which the quantizer moved upstream) and its bounds [lo, hi] (None:
    unbounded). Read from what is gone from ``quantized``, not predicted from op names."""
    kept = {n.name for n in quantized.graph.node}
    consts = constants(float_model.graph)
    found: dict[str, tuple[float, float]] = {}
    for node in float_model.graph.node:
        if node.op_type not in FOLDED_ACTIVATIONS or node.name in kept:
            continue
        lo, hi = (0.0, np.inf) if node.op_type == "Relu" else clip_bounds(node, consts)
        before = found.pop(node.input[0], (-np.inf, np.inf))  # a Relu then a Clip: both removed
        found[node.output[0]] = (max(lo, before[0]), min(hi, before[1]))
    return {t: [float(b) if np.isfinite(b) else None for b in pair] for t, pair in found.items()}
