"""Reading a QDQ model as ONNX Runtime's quantizer writes it (see docs/onnxruntime.md), and what it
reveals of the quantizer: the ranges it actually used, the clamps it removed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from loop.core.hashing import array_sha, array_shas
from loop.core.vocab import LayerPrint, RangeOverride
from loop.judge.structure import FOLDED_ACTIVATIONS, QUANTIZED_OPS, clip_bounds, constants, consumers_of
from loop.judge.weights import bits_of


@dataclass(frozen=True)
class QParam:
    """The integers behind a DequantizeLinear, with their scale and zero point names."""

    values: str
    scale: str
    zero_point: str | None


class QdqGraph:
    """Index over a QDQ graph: producers, consumers and initializers by name."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        self.inits = {t.name: t for t in model.graph.initializer}
        self.producer = {o: n for n in model.graph.node for o in n.output}
        self.consumers = consumers_of(model.graph)

    def array(self, name: str | None) -> np.ndarray | None:
        return numpy_helper.to_array(self.inits[name]) if name in self.inits else None

    def required(self, name: str) -> np.ndarray:
        """An initializer the QDQ format guarantees (a DequantizeLinear's integers or scale)."""
        if name not in self.inits:
            raise ValueError(f"the quantized model has no initializer '{name}'")
        return numpy_helper.to_array(self.inits[name])

    def set_array(self, name: str, value: np.ndarray) -> None:
        self.inits[name].CopyFrom(numpy_helper.from_array(value, name))

    def dq_param(self, tensor: str) -> QParam | None:
        node = self.producer.get(tensor)
        if node is None or node.op_type != "DequantizeLinear":
            return None
        zp = node.input[2] if len(node.input) > 2 else None
        return QParam(node.input[0], node.input[1], zp)

    def out_q(self, tensor: str) -> tuple[onnx.NodeProto | None, onnx.NodeProto | None]:
        """The QuantizeLinear after ``tensor`` (through kept activations) and its DequantizeLinear."""
        while True:
            after = self.consumers.get(tensor, [])
            q = next((n for n in after if n.op_type == "QuantizeLinear"), None)
            if q is not None:
                dq = next((n for n in self.consumers.get(q.output[0], []) if n.op_type == "DequantizeLinear"), None)
                return q, dq
            acts = [n for n in after if n.op_type in FOLDED_ACTIVATIONS]
            if len(acts) != 1:
                return None, None
            tensor = acts[0].output[0]

    def float_name(self, tensor: str) -> str:
        """The float tensor a DequantizeLinear output stands for (its QuantizeLinear's input)."""
        dq = self.producer.get(tensor)
        if dq is None or dq.op_type != "DequantizeLinear":
            return tensor
        q = self.producer.get(dq.input[0])
        return q.input[0] if q is not None and q.op_type == "QuantizeLinear" else tensor

    def float_out_name(self, tensor: str) -> str | None:
        """The float name of a layer's quantized output; graph outputs keep the DQ's name."""
        q, dq = self.out_q(tensor)
        if q is None:
            return None
        outputs = {o.name for o in self.model.graph.output}
        return dq.output[0] if dq is not None and dq.output[0] in outputs else q.input[0]

    def weight(self, node: onnx.NodeProto) -> QParam | None:
        """The quantized kernel of a layer: a DequantizeLinear over an initializer."""
        w = self.dq_param(node.input[1]) if len(node.input) > 1 else None
        return w if w is not None and w.values in self.inits else None

    def add_bias(self, node: onnx.NodeProto) -> tuple[onnx.NodeProto, QParam] | None:
        """A MatMul's bias written as the exporters write a linear layer: ``MatMul`` then an
        ``Add`` of a constant, which the quantizer keeps apart (the constant on its own uint8
        grid, the MatMul's output quantized before it). The Add and its constant's grid."""
        if node.op_type != "MatMul" or self.weight(node) is None:
            return None
        _, dq = self.out_q(node.output[0])
        readers = self.consumers.get(dq.output[0], []) if dq is not None else self.consumers.get(node.output[0], [])
        if len(readers) != 1 or readers[0].op_type != "Add":
            return None
        add = readers[0]
        other = next((x for x in add.input if x not in (node.output[0], dq.output[0] if dq else "")), None)
        bias = self.dq_param(other) if other else None
        if bias is None or bias.values not in self.inits:
            return None
        return add, bias

    def layers(self) -> list[onnx.NodeProto]:
        """Quantized layers in graph order: weighted ones, and MatMuls over two quantized
        activations (attention), which have scales but no kernel."""
        return [
            n
            for n in self.model.graph.node
            if n.op_type in QUANTIZED_OPS
            and len(n.input) > 1
            and (self.weight(n) or (n.op_type == "MatMul" and self.dq_param(n.input[0]) and self.dq_param(n.input[1])))
        ]

    def scalar(self, name: str | None) -> float | None:
        a = self.array(name)
        return None if a is None else float(np.asarray(a).reshape(-1)[0])


def _tuple(a: np.ndarray | None, kind: type) -> tuple:
    return () if a is None else tuple(kind(v) for v in np.asarray(a).reshape(-1))


def _kernel(g: QdqGraph, node: onnx.NodeProto) -> tuple[str | None, str | None, tuple[float, ...], tuple[int, ...]]:
    """The kernel hash (integers with their scale and zero point), the integers' alone (with their
    zero point), and the weight grid."""
    w = g.weight(node)
    if w is None:
        return None, None, (), ()
    kernel, w_scale, w_zp = g.required(w.values), g.required(w.scale), g.array(w.zero_point)
    zps: list[np.ndarray] = [w_zp] if w_zp is not None else []
    with_grid, integers = array_shas(kernel, (w_scale, *zps), tuple(zps))
    return with_grid, integers, _tuple(w_scale, float), _tuple(w_zp, int)


def _per_axis(a: np.ndarray, like: np.ndarray, axis: int) -> np.ndarray:
    """A per-channel scale or zero point shaped to broadcast over ``like`` along ``axis``."""
    if a.size <= 1:
        return a.reshape(())
    shape = [1] * like.ndim
    shape[axis % like.ndim] = a.size
    return a.reshape(shape)


def off_grid(q: np.ndarray, w: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None, axis: int) -> int:
    """How many integers of ``q`` are not their float value ``w`` rounded to the nearest step
    of their own grid (or held at the grid's end when the float lies past it). Zero means the
    kernel is only the float kernel rounded: a moved scale can change it, nothing else has.
    In float64 (float32 moves a count at the tolerance's edge), in place: every patch of a
    search is fingerprinted."""
    s = _per_axis(np.asarray(scale, np.float64), q, axis)
    zp = _per_axis(np.asarray(zero_point if zero_point is not None else 0, np.float64), q, axis)
    exact = np.divide(w, np.where(s > 0, s, np.inf), dtype=np.float64)
    exact += zp
    gap = q.astype(np.float64)
    gap -= exact
    np.abs(gap, out=gap)
    # float32 arithmetic in the quantizer may round a value lying a hair from a half step either way
    far = np.flatnonzero(~(gap <= 0.5 + 1e-3))  # a NaN is off the grid, as before
    if far.size == 0:
        return 0
    info = int_info(q.dtype)
    qf, ef = q.reshape(-1)[far], exact.reshape(-1)[far]
    clipped = ((qf == info.min) & (ef < info.min)) | ((qf == info.max) & (ef > info.max))
    return int(far.size - np.count_nonzero(clipped))


def int_info(dtype: np.dtype) -> Any:
    """The range of an integer dtype, 4-bit ones included (``ml_dtypes``, which ONNX reads INT4
    and UINT4 as, and which ``np.iinfo`` does not know)."""
    try:
        return np.iinfo(dtype)
    except ValueError:
        import ml_dtypes

        return ml_dtypes.iinfo(dtype)


class FloatSource:
    """The float model a QDQ model was quantized from, read once: each layer's float kernel (the
    float model's node of the same name, as the quantizer keeps names, and its weight input) and
    that kernel's hash, made on first use. A compiler that fingerprints many patches of one base
    keeps one (:class:`loop.compilers.onnxruntime.OnnxRuntimeCompiler`)."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.nodes = {n.name: n for n in model.graph.node}
        self.consts = constants(model.graph)
        self._shas: dict[str, str] = {}
        self._off: dict[tuple[Any, ...], int] = {}

    def kernel(self, name: str) -> np.ndarray | None:
        original = self.nodes.get(name)
        if original is None or len(original.input) < 2:
            return None
        return self.consts.get(original.input[1])

    def sha(self, name: str, kernel: np.ndarray) -> str:
        if name not in self._shas:
            self._shas[name] = array_sha(kernel.astype(np.float32))
        return self._shas[name]

    def learn(self, prints: Sequence[LayerPrint]) -> None:
        """What prints made against this float model already say: each layer's float hash, and
        the off-grid count of its integers on its grid (a patch's base's prints, so a search's
        first patch counts only the layers it moved, as its later ones do)."""
        for p in prints:
            if p.float_sha is not None:
                self._shas.setdefault(p.name, p.float_sha)
            if p.off_grid is not None and p.kernel_int_sha is not None:
                self._off.setdefault(
                    _grid_key(p.name, p.kernel_int_sha, p.weight_scale, p.weight_zero_point), p.off_grid
                )

    def off_grid(self, key: tuple[Any, ...], count: Callable[[], int]) -> int:
        """:func:`off_grid` of one layer, counted once for its integers and grid (``key``): the
        patches of a search move a few grids, and the other layers' counts stand (2.5 s of a
        patch's 3 at 1.1 GB of weights, counted again for every layer)."""
        if key not in self._off:
            if len(self._off) >= OFF_GRID_KEPT:
                self._off.clear()
            self._off[key] = count()
        return self._off[key]


OFF_GRID_KEPT = 4096  # counts a float source keeps, by layer, integers and grid


def _grid_key(name: str, int_sha: str | None, scale: tuple[float, ...], zero_point: tuple[int, ...]) -> tuple[Any, ...]:
    """A layer's integers and grid, which its off-grid count follows (the axis is the node's own,
    the same in every model quantized from one float model)."""
    return (name, int_sha, scale, zero_point)


def _float_kernel(
    g: QdqGraph, node: onnx.NodeProto, source: FloatSource | None, int_sha: str | None
) -> tuple[str | None, int | None]:
    w = g.weight(node)
    kernel = source.kernel(node.name) if source is not None else None
    if w is None or kernel is None or source is None:
        return None, None
    q = g.required(w.values)
    if kernel.shape != q.shape:
        return source.sha(node.name, kernel), None
    dq = g.producer[node.input[1]]
    axis = next((a.i for a in dq.attribute if a.name == "axis"), 1)
    scale, zero_point = g.required(w.scale), g.array(w.zero_point)
    key = _grid_key(node.name, int_sha, _tuple(scale, float), _tuple(zero_point, int))
    grid_off = source.off_grid(key, lambda: off_grid(q, kernel, scale, zero_point, axis))
    return source.sha(node.name, kernel), grid_off


def layer_print(g: QdqGraph, node: onnx.NodeProto, source: FloatSource | None = None) -> LayerPrint:
    kernel_sha, kernel_int_sha, w_scale, w_zp = _kernel(g, node)
    float_sha, grid_off = _float_kernel(g, node, source, kernel_int_sha)
    x = g.dq_param(node.input[0])
    q, _ = g.out_q(node.output[0])
    bias_sha = bias_int_sha = bias = step = None
    b = g.dq_param(node.input[2]) if len(node.input) > 2 else None
    added = g.add_bias(node) if b is None else None
    b = added[1] if added is not None else b
    if b is not None:
        b_int, b_scale, b_zp = g.required(b.values), g.required(b.scale), g.array(b.zero_point)
        # an Add's constant sits on a uint8 grid whose zero point is part of its value
        zps = [b_zp] if added is not None and b_zp is not None else []
        bias_sha, bias_int_sha = array_sha(b_int, b_scale, *zps), array_sha(b_int, *zps)
        zero = b_zp.astype(np.float64) if b_zp is not None else 0.0
        bias = _tuple((b_int.astype(np.float64) - zero) * b_scale.astype(np.float64), float)
        step = _tuple(np.broadcast_to(b_scale, b_int.shape), float)
    return LayerPrint(
        name=node.name,
        op=node.op_type,
        kernel_sha=kernel_sha,
        bias_sha=bias_sha,
        kernel_int_sha=kernel_int_sha,
        bias_int_sha=bias_int_sha,
        weight_scale=w_scale,
        weight_zero_point=w_zp,
        in_tensor=g.float_name(node.input[0]),
        in_scale=g.scalar(x.scale) if x else None,
        in_zero_point=_int(g.scalar(x.zero_point)) if x else None,
        out_tensor=g.float_out_name(node.output[0]),
        out_scale=g.scalar(q.input[1]) if q is not None else None,
        out_zero_point=_int(g.scalar(q.input[2])) if q is not None and len(q.input) > 2 else None,
        bias=bias,
        bias_step=step,
        float_sha=float_sha,
        off_grid=grid_off,
        weight_bits=_bits(g, w.values) if (w := g.weight(node)) else None,
        in_bits=_bits(g, x.zero_point) if x else None,
        out_bits=_bits(g, q.input[2]) if q is not None and len(q.input) > 2 else None,
    )


def _bits(g: QdqGraph, *names: str | None) -> int | None:
    """The width of a grid, from the integer type of the first of ``names`` that is an
    initializer (a kernel's integers, or an activation's zero point)."""
    init = next((g.inits[n] for n in names if n and n in g.inits), None)
    if init is None:
        return None
    return bits_of(init.data_type)


def _int(v: float | None) -> int | None:
    return None if v is None else int(v)


def fingerprint(
    model: onnx.ModelProto, source: onnx.ModelProto | FloatSource | None = None, known: Sequence[LayerPrint] = ()
) -> list[LayerPrint]:
    """One print per quantized layer; with ``source`` (the float model the quantizer was
    given) each print also says what float kernel it stands for and how far from it.
    ``known``: prints made against ``source`` before (:meth:`FloatSource.learn`)."""
    g = QdqGraph(model)
    float_source = FloatSource(source) if isinstance(source, onnx.ModelProto) else source
    if float_source is not None:
        float_source.learn(known)
    return [layer_print(g, node, float_source) for node in g.layers()]


def wide_grids(model: onnx.ModelProto) -> dict[str, dict[str, object]]:
    """Every activation grid wider than 8 bits (a 16-bit precision), by the float tensor it
    quantizes, with the node that writes it (the tensor's own name for a graph input): the audit
    reads them for nodes the fingerprint has no print of (a LayerNorm's Mul), where a wider grid
    would otherwise be no change at all."""
    g = QdqGraph(model)
    found: dict[str, dict[str, object]] = {}
    for node in model.graph.node:
        if node.op_type != "QuantizeLinear" or node.input[0] in g.inits:
            continue
        bits = _bits(g, node.input[2]) if len(node.input) > 2 else None
        if bits is None or bits <= 8:
            continue
        tensor = node.input[0].removesuffix("_QuantizeLinear_Input")  # a graph output's, as the quantizer renames it
        writer = g.producer.get(node.input[0])
        found[tensor] = {"bits": bits, "node": (writer.name or writer.output[0]) if writer is not None else tensor}
    return found


def used_ranges(
    quantized: onnx.ModelProto, overrides: tuple[RangeOverride, ...]
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """For each forced range, the range asked and the one the quantizer used (it widens a
    range to hold 0, and rounds it to its grid); a warning for each that moved."""
    g = QdqGraph(quantized)
    ranges: dict[str, dict[str, Any]] = {}
    warnings = []
    for o in overrides:
        grid = _q_grid(g, o.tensor)
        used = None if grid is None else [float((end - grid[1]) * grid[0]) for end in grid[2:]]
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


def _q_grid(g: QdqGraph, tensor: str) -> tuple[float, float, int, int] | None:
    """(scale, zero point, lowest and highest integer) of the QuantizeLinear over ``tensor``, its
    integers' range read from its zero point's type (a forced range may sit on a 16-bit grid; no
    zero point: uint8, as ONNX has it); a graph output's DQ keeps the output's name, so there the Q
    is found behind it."""
    q = next((n for n in g.consumers.get(tensor, []) if n.op_type == "QuantizeLinear"), None)
    dq = g.producer.get(tensor)
    if q is None and dq is not None and dq.op_type == "DequantizeLinear":
        q = g.producer.get(dq.input[0])
    if q is None or q.op_type != "QuantizeLinear":
        return None
    zp = q.input[2] if len(q.input) > 2 else None
    kind = g.inits[zp].data_type if zp in g.inits else onnx.TensorProto.UINT8
    bits, signed = bits_of(kind), onnx.TensorProto.DataType.Name(kind).startswith("INT")
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    return g.scalar(q.input[1]) or 0.0, g.scalar(zp) or 0.0, lo, hi


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
        lo, hi = clip_bounds(node, consts)
        before = found.pop(node.input[0], (-np.inf, np.inf))  # a Relu then a Clip: both removed
        found[node.output[0]] = (max(lo, before[0]), min(hi, before[1]))
    return {t: [float(b) if np.isfinite(b) else None for b in pair] for t, pair in found.items()}
