"""What a QDQ model's weights weigh, and which layers ``weights_4bit_share`` puts at 4 bits.

A model fits its device at some weight precision or not at all (the seed: "8 GB decides
everything"). ONNX Runtime stores an INT4 kernel two values to a byte (its QDQ ops take INT4 and
UINT4 since opset 21, and in its ``com.microsoft`` domain before), so bytes are counted packed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx

from loop.core.vocab import WeightPrecision
from loop.judge.structure import QUANTIZED_OPS, Structure, constants
from loop.judge.weights import at_bits, bits_of

SHARE_RULE = (
    "layers by their kernel's relative error at 4 bits (per output channel, symmetric) per weight, "
    "least first, each taken while the share of weights by count stays within the asked one"
)


def weighed(model: onnx.ModelProto) -> dict[str, Any]:
    """The run's ``info.weights`` (the shape the hailo backend records): every initializer that is
    a value of the network (kernels, biases, weights left in float), not a Q/DQ node's scale or
    zero point, at its stored width, 4-bit ones packed two to a byte."""
    grid = {x for n in model.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear") for x in n.input[1:]}
    by_bits: dict[str, int] = {}
    total = count = 0
    for t in model.graph.initializer:
        if t.name in grid:
            continue
        n, bits = int(np.prod(t.dims, dtype=np.int64)), bits_of(t.data_type)
        count += n
        by_bits[str(bits)] = by_bits.get(str(bits), 0) + n
        total += at_bits(n, bits)
    return {
        "weights": count,
        "weights_by_bits": dict(sorted(by_bits.items(), key=lambda kv: int(kv[0]))),
        "bytes": total,
        "from": "the QDQ model's initializers, Q/DQ scales and zero points aside; 4-bit packed two to a byte",
    }


def held_apart(model: onnx.ModelProto, asked: Sequence[WeightPrecision]) -> list[dict[str, Any]]:
    """Where every layer's weights were asked at another width, the quantized constants that stayed
    at theirs: each tensor a ``DequantizeLinear`` reads that is no asked layer's kernel (int32 biases
    aside: their grid is the input's scale times the kernel's), with its reader and why it was not
    asked. Where a layer's kernel was not asked (one layer at 4 bits), nothing: the rest is as asked."""
    if not asked:
        return []
    kernels = {w.tensor for w in asked}
    readers = {x: n.op_type for n in model.graph.node for x in n.input}
    sizes = {t.name: (int(np.prod(t.dims, dtype=np.int64)), bits_of(t.data_type)) for t in model.graph.initializer}
    found = []
    for node in model.graph.node:
        x = node.input[0] if node.op_type == "DequantizeLinear" and node.input else ""
        if x not in sizes or sizes[x][1] == 32 or _source(x) in kernels:
            continue
        reader = readers.get(node.output[0], "nothing")
        found.append({"tensor": x, "reader": reader, "weights": sizes[x][0], "bits": sizes[x][1], "why": _why(reader)})
    if any(f["reader"] in QUANTIZED_OPS for f in found):
        return []  # a layer not asked: some layers were asked, not every weight; the rest is as asked
    return found


def apart_line(found: Sequence[dict[str, Any]], asked: Sequence[WeightPrecision]) -> str | None:
    """One line naming the weights that stayed at another width than asked, by reader."""
    if not found:
        return None
    widths = sorted({w.bits for w in asked})
    by_reader: dict[str, int] = {}
    for f in found:
        by_reader[f["reader"]] = by_reader.get(f["reader"], 0) + f["weights"]
    named = "; ".join(f"{n:,} read by {r} ({_why(r)})" for r, n in sorted(by_reader.items(), key=lambda kv: -kv[1]))
    return f"weights asked at {'/'.join(map(str, widths))} bits; {sum(by_reader.values()):,} stay as quantized: {named}"


def _source(tensor: str) -> str:
    """The float initializer a quantized constant was made from (ONNX Runtime's ``NAME_quantized``)."""
    return tensor.split("_quantized")[0]


def _why(reader: str) -> str:
    if reader == "BatchNormalization":
        return "a BatchNormalization's scale the quantizer quantizes as a weight; no layer to set a width for"
    if reader in ("Add", "Mul", "Sub", "Div"):
        return "an elementwise constant; no layer to set a width for"
    return f"read by {reader}, which loop sets no width for"


def share_layers(
    model: onnx.ModelProto, structure: Structure, share: float, given: Sequence[WeightPrecision]
) -> tuple[tuple[WeightPrecision, ...], dict[str, Any]]:
    """The layers ``weights_4bit_share`` puts at 4 bits (:data:`SHARE_RULE`), and what the run
    records of the choice. Layers a ``precision`` op set already keep its width and count
    toward the share at it."""
    consts = constants(model.graph)
    kernels = {lp.name: (lp.weight, consts[lp.weight]) for lp in structure.layers if lp.weight in consts}
    total = sum(k.size for _, k in kernels.values())
    fixed = {w.layer: w.bits for w in given}
    done = sum(kernels[name][1].size for name, bits in fixed.items() if bits == 4 and name in kernels)
    ranked = sorted(
        (name for name in kernels if name not in fixed),
        key=lambda name: _error4(kernels[name][1]) / kernels[name][1].size,
    )
    chosen: list[WeightPrecision] = []
    over: dict[str, Any] | None = None
    for name in ranked:  # never past the share: a layer that would overshoot it is passed over
        size = kernels[name][1].size
        if done + size <= share * total:
            chosen.append(WeightPrecision(name, 4, kernels[name][0]))
            done += size
        elif over is None or size > over["weights"]:
            over = {"layer": name, "weights": size, "share": size / total}
    info = {"asked": share, "share": done / total if total else 0.0, "layers": [w.layer for w in chosen]}
    return tuple(chosen), {**info, "rule": SHARE_RULE, **({"passed_over": over} if over else {})}


def _error4(kernel: np.ndarray) -> float:
    """The kernel's relative squared error rounded to 4 bits, one symmetric scale per output
    channel (axis 0: a Conv's, and a Gemm's or MatMul's kernel is ranked the same way)."""
    w = np.asarray(kernel, np.float64).reshape(kernel.shape[0], -1) if kernel.ndim > 1 else kernel.reshape(1, -1)
    scale = np.abs(w).max(axis=1, keepdims=True) / 7
    q = np.clip(np.rint(w / np.where(scale > 0, scale, 1)), -8, 7) * scale
    energy = float(np.sum(w * w))
    return float(np.sum((w - q) ** 2)) / energy if energy > 0 else 0.0


__all__ = ["SHARE_RULE", "apart_line", "held_apart", "share_layers", "weighed"]
