"""Where the signal is lost: the layers at which the accumulated SNR falls, and the part of the
graph whose grids that fall amplifies.

A layer's local SNR (its own quantization, float inputs) says what its grid costs on its own. It
does not say what the layers after it make of that noise: LayerNorm written out as
``E[x^2] - E[x]^2`` subtracts two nearly equal 8-bit values, and a reciprocal square root of a
small variance multiplies its relative error. On magika (a file-type classifier from the index)
the three layers with the worst local SNR are not the cause (16 bits there: 1.9 -> 1.9 dB); the
fall is where ``accumulated`` drops 20 dB at once, in LayerNorm_0's variance, and the grids it
amplifies are the ones between that layer and the tensor every path to it comes through (its
immediate dominator). Pure: an ONNX graph and the figures in, values out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import onnx

from loop.judge.noise import INPUT, WORST, Fall, NoiseReport, TensorNoise, regions_in_order
from loop.judge.widen import EVERY

FALL_DB = 6.0  # a layer that quadruples the noise power relative to the signal it is given
AMPLIFIED_DB = 3.0  # its own grid explains under half the noise it holds: the rest came from upstream, amplified
REGION_MAX = 12  # more quantized tensors than this between a fall and its dominator: name only the fall's own
ROOT = ""  # the graph's float inputs (and anything made from constants or integers alone) hang off it

FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE}


def float_inputs(model: onnx.ModelProto) -> dict[str, list[str]]:
    """For every float activation tensor, the float activation tensors its node reads (ROOT for a
    graph input or a tensor made from constants and integers alone): the graph the signal flows in."""
    graph = model.graph
    inferred = onnx.shape_inference.infer_shapes(model).graph
    types = {v.name: v.type.tensor_type.elem_type for v in (*inferred.value_info, *inferred.input, *inferred.output)}
    constants = {t.name for t in graph.initializer} | {
        o for n in graph.node if n.op_type == "Constant" for o in n.output
    }

    def is_float(name: str) -> bool:  # a tensor inference could not type is kept: it may carry the signal
        return bool(name) and name not in constants and types.get(name, onnx.TensorProto.FLOAT) in FLOAT_TYPES

    found: dict[str, list[str]] = {v.name: [ROOT] for v in graph.input if is_float(v.name) and v.name not in constants}
    for node in graph.node:
        reads = [name for name in node.input if is_float(name) and name in found]
        for out in node.output:
            if is_float(out):
                found[out] = reads or [ROOT]
    return found


def dominators(reads: dict[str, list[str]]) -> dict[str, str]:
    """Each tensor's immediate dominator: the nearest tensor every path from the graph's inputs to it
    comes through (ROOT when none). ``reads`` is in graph order, as ONNX requires nodes to be, so one
    pass of Cooper, Harvey and Kennedy's intersection suffices on a graph without cycles."""
    order = _order(reads)
    idom: dict[str, str] = {ROOT: ROOT}
    for name, preds in reads.items():
        known = [p for p in preds if p in idom]
        found = known[0] if known else ROOT
        for p in known[1:]:
            found = _meet(found, p, idom, order)
        idom[name] = found
    return idom


def _order(reads: dict[str, list[str]]) -> dict[str, int]:
    return {ROOT: -1, **{name: i for i, name in enumerate(reads)}}


def _meet(a: str, b: str, idom: dict[str, str], order: dict[str, int]) -> str:
    """The nearest tensor that dominates both (either one, when it dominates the other)."""
    while a != b:
        while order[a] > order[b]:
            a = idom[a]
        while order[b] > order[a]:
            b = idom[b]
    return a


def with_falls(found: Sequence[TensorNoise], reads: dict[str, list[str]]) -> list[TensorNoise]:
    """``found`` with each tensor's ``fall_db``: the lowest accumulated SNR of the quantized tensors
    it reads less its own (None when it reads none: its grid is the first the signal meets).
    ``reads``: :func:`float_inputs` of the float model, inferred once for this and :func:`falls`."""
    by_tensor = {t.tensor: t for t in found}
    out = []
    for t in found:
        before = [by_tensor[u].accumulated_snr_db for u in _nearest_quantized(t.tensor, reads, by_tensor)]
        fall = min(*before, ideal_db(t.bits)) - t.accumulated_snr_db if before else None
        out.append(replace(t, fall_db=fall))
    return out


def ideal_db(bits: int | None) -> float:
    """The SNR of a full-scale uniform signal on a grid of ``bits`` (6.02 bits + 1.76 dB): what a
    tensor read from a lossless one (a one-hot, an integer input) can be expected to keep; a fall is
    counted from here, not from the hundreds of dB of an exact upstream."""
    return 6.02 * (bits or 8) + 1.76


def falls(
    found: Sequence[TensorNoise], reads: dict[str, list[str]], count: int = 3, least_db: float = FALL_DB
) -> list[Fall]:
    """The ``count`` largest falls of at least ``least_db`` among ``found`` (as :func:`with_falls`
    gives them), largest first, each with its region."""
    idom = dominators(reads)
    by_tensor = {t.tensor: t for t in found}
    chosen = sorted(
        (t for t in found if t.fall_db is not None and t.fall_db >= least_db), key=lambda t: -(t.fall_db or 0)
    )
    out = []
    for t in chosen[:count]:
        amplified = t.local_snr_db - t.accumulated_snr_db >= AMPLIFIED_DB
        region = _region(t.tensor, reads, idom, by_tensor) if amplified else {t.tensor}
        ordered = sorted(region, key=lambda x: (by_tensor[x].index, x))
        # a graph input's grid is the frames' own, not a node's: the precision op names nodes
        layers = tuple(dict.fromkeys(by_tensor[x].layer for x in ordered if by_tensor[x].op != INPUT))
        out.append(Fall(t.layer, t.tensor, t.accumulated_snr_db + (t.fall_db or 0), t.accumulated_snr_db, layers))
    return out


def _nearest_quantized(tensor: str, reads: dict[str, list[str]], quantized: dict[str, TensorNoise]) -> set[str]:
    """The quantized tensors ``tensor``'s node reads, looking through unquantized ones."""
    seen, todo, found = set(), list(reads.get(tensor, [])), set()
    while todo:
        name = todo.pop()
        if name in seen or name == ROOT:
            continue
        seen.add(name)
        if name in quantized:
            found.add(name)
        else:
            todo += reads.get(name, [])
    return found


def _region(
    tensor: str, reads: dict[str, list[str]], idom: dict[str, str], quantized: dict[str, TensorNoise]
) -> set[str]:
    """The quantized tensors on the paths from the nearest tensor that every path from the fall's
    quantized inputs comes through (their common dominator, or the one input itself) down to the
    fall: the grids whose noise the layers between amplify. A region too wide to name is cut back to
    the fall and the quantized tensors it reads."""
    inputs = _nearest_quantized(tensor, reads, quantized)
    stop = _meet_all(inputs, idom, reads)
    seen, todo = set(), [tensor]
    while todo:
        name = todo.pop()
        if name in seen or name == ROOT:
            continue
        seen.add(name)
        if name != stop:
            todo += reads.get(name, [])
    region = {name for name in seen if name in quantized}
    if len(region) > REGION_MAX:
        region = {tensor} | inputs
    return region


def _meet_all(names: set[str], idom: dict[str, str], reads: dict[str, list[str]]) -> str:
    """The nearest tensor that dominates every one of ``names`` (one of them, when it dominates the rest)."""
    order = _order(reads)
    found: str | None = None
    for name in sorted(names, key=lambda n: order.get(n, -1)):
        found = name if found is None else _meet(found, name, idom, order)
    return found or ROOT


def first_guess(report: NoiseReport) -> tuple[str, tuple[str, ...]]:
    """Step 1 of the widening: the falls' regions (:meth:`NoiseReport.to_try`), or the worst local
    SNRs when nothing falls; every activation when there is no layer to name."""
    if report.falls:
        layers = tuple(regions_in_order(report.falls))
        return f"the falls' regions ({len(layers)} layers)", layers
    worst = tuple(t.layer for t in report.layers if t.op != INPUT)[:WORST]
    return (f"the {len(worst)} worst layers", worst) if worst else ("every activation", (EVERY,))


RUNGS = ("the next fall", "the neighbours", "every activation")  # each tried once, in this order


def widened(
    layers: tuple[str, ...], report: NoiseReport, reads: dict[str, list[str]], rung: int
) -> tuple[int, str, tuple[str, ...]]:
    """The step after one that put ``layers`` at 16 bits and fell short, from ``report`` (its own
    analysis): the first of the rungs from ``rung`` on that adds a layer. The next fall still
    standing adds its region; the neighbours add every quantized tensor one step from a 16-bit
    one (the grids that feed a mended region and those it feeds); then every activation. Returns
    the rung to go on from, why, and the layers (the earlier ones first)."""
    have = set(layers)
    by_tensor = {t.tensor: t for t in report.layers}
    for i in range(rung, len(RUNGS) - 1):
        found = _next_fall(report, have) if i == 0 else _neighbours(report, reads, by_tensor, have)
        if found:
            named = found[0] if i == 0 else f"{len(found[1])} layers"
            return i + 1, f"+ {RUNGS[i]} ({named})", (*layers, *found[1])
    return len(RUNGS), RUNGS[-1], (EVERY,)


def _next_fall(report: NoiseReport, have: set[str]) -> tuple[str, tuple[str, ...]] | None:
    for fall in report.falls:
        new = tuple(layer for layer in fall.region if layer not in have)
        if new:
            return fall.layer, new
    return None


def _neighbours(
    report: NoiseReport, reads: dict[str, list[str]], by_tensor: dict[str, TensorNoise], have: set[str]
) -> tuple[str, tuple[str, ...]] | None:
    wide = {t.tensor for t in report.layers if t.layer in have or (t.bits or 8) > 8}
    near = neighbours(wide, reads, by_tensor)
    ordered = sorted(near, key=lambda x: (by_tensor[x].index, x))
    new = tuple(dict.fromkeys(by_tensor[x].layer for x in ordered if by_tensor[x].op != INPUT))
    new = tuple(layer for layer in new if layer not in have)
    return ("", new) if new else None


def neighbours(tensors: set[str], reads: dict[str, list[str]], quantized: dict[str, TensorNoise]) -> set[str]:
    """The quantized tensors one step from ``tensors`` (looking through unquantized ones): those
    they read and those that read them."""
    near: set[str] = set()
    for name in quantized:
        read = _nearest_quantized(name, reads, quantized)
        if name in tensors:
            near |= read
        elif read & tensors:
            near.add(name)
    return near - tensors
