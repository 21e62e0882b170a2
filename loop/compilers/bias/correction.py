"""Bias correction, layer by layer, as the Dataflow Compiler's does.

Each quantized layer's bias is moved by minus the per-channel mean of (quantized output -
float output) over the calibration frames. Layers are corrected in topological order, each
measured on the quantized model with every earlier correction applied: correcting them all
from one run of the uncorrected model compounds the corrections (docs/onnxruntime.md has
the figures: EfficientNet-Lite0 4.7 dB uncorrected, -4.9 dB one-shot, 19.8 dB in order).

It stays near the cost of one run. Layers of equal depth (no corrected layer between them)
are corrected together, and the quantized graph is run in segments, one per depth: segment
``d`` holds the nodes that only corrections shallower than ``d`` can reach, so its outputs
are final once computed and are kept, never recomputed. Only the short chain from each
layer to its quantized output is run twice (to measure it, then again downstream).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import onnx
from onnx import helper

from loop.compilers.bias import guard as bias_guard
from loop.compilers.bias import rules as bias_rules
from loop.compilers.bias.rules import Rule
from loop.compilers.qdq import QdqGraph
from loop.core.sessions import Optimization, session


@dataclass(frozen=True)
class Target:
    """One layer to correct: its node, bias integers, where its quantized output is read
    in the quantized model, and the same tensor's name in the float model."""

    node: str
    bias: str
    bias_scale: str
    q_out: str
    f_out: str
    bias_zero_point: str | None = None  # an Add's constant: on a uint8 grid of its own
    channels_last: bool = False  # a MatMul's channels are its output's last axis
    in_place: bool = True  # the layer's own output carries the bias (not a later Add)


DEFAULT_RULE: Rule = "holdout"
GUARD_WORSE = "the corrections together did not lower the model's output error on every held-out fold"
GUARD_REFERENCE = "the reference's guard dropped the pass (decided once, on the reference)"


@dataclass
class Correction:
    """What bias correction did, per layer: corrected; clipped (corrected only as far as its
    bias's grid reaches, and by how much not); or skipped, and why. ``regridded``: corrected
    layers whose Add constant got a wider grid to hold the correction."""

    rule: Rule = DEFAULT_RULE
    frames: int = 0
    corrected: list[str] = field(default_factory=list)
    clipped: dict[str, str] = field(default_factory=dict)
    regridded: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    depths: int = 0
    # the output guard: "kept" or "dropped" the pass, "off" (not asked), "too few frames",
    # "nothing to correct" (no layer has a bias the pass can move)
    guard: str = "off"
    guard_gain: float | None = None  # held-out squared error the pass removed (negative: added)
    guard_folds: tuple[float, ...] = ()  # each fold's share of its held-out error removed
    guard_from: str = "here"  # "reference": the decision was the reference's, not estimated here

    def to_dict(self) -> dict[str, object]:
        return {
            "rule": self.rule,
            "frames": self.frames,
            "depths": self.depths,
            "guard": self.guard,
            "guard_gain": self.guard_gain,
            "guard_folds": [round(f, 6) for f in self.guard_folds],
            "guard_from": self.guard_from,
            "corrected": list(self.corrected),
            "clipped": dict(self.clipped),
            "regridded": dict(self.regridded),
            "skipped": dict(self.skipped),
        }


def targets(g: QdqGraph, correction: Correction) -> list[Target]:
    found = []
    for node in g.layers():
        why, target = _target(g, node)
        if target is None:
            correction.skipped[node.name] = why
        else:
            found.append(target)
    return found


def _target(g: QdqGraph, node: onnx.NodeProto) -> tuple[str, Target | None]:
    if g.weight(node) is None:
        return "no weights (activation x activation)", None
    if node.op_type == "MatMul":
        return _add_target(g, node)
    if len(node.input) < 3 or not node.input[2]:
        return "no bias", None
    bias = g.dq_param(node.input[2])
    if bias is None:
        return "bias not quantized", None
    if not np.all(g.required(bias.scale)):
        return "bias scale is zero", None
    _, dq = g.out_q(node.output[0])
    f_out = g.float_out_name(node.output[0])
    if dq is None or f_out is None:
        return "output not quantized", None
    return "", Target(node.name, bias.values, bias.scale, dq.output[0], f_out)


def _add_target(g: QdqGraph, node: onnx.NodeProto) -> tuple[str, Target | None]:
    """A linear layer as exporters write it, MatMul then Add: its bias is the Add's constant,
    read where the Add's output is quantized."""
    found = g.add_bias(node)
    if found is None:
        return "no bias", None
    add, bias = found
    if bias.zero_point is None or not np.all(g.required(bias.scale)):
        return "bias not quantized", None
    _, dq = g.out_q(add.output[0])
    f_out = g.float_out_name(add.output[0])
    if dq is None or f_out is None:
        return "output not quantized", None
    channels = g.required(bias.values).size
    if int(np.prod(g.required(bias.values).shape)) != channels or channels <= 1:
        return "bias not per channel", None
    return "", Target(node.name, bias.values, bias.scale, dq.output[0], f_out, bias.zero_point, True, False)


def _channel_mean(x: np.ndarray, last: bool = False) -> np.ndarray:
    channel = x.ndim - 1 if last else 1
    axes = tuple(a for a in range(x.ndim) if a != channel) if x.ndim > 1 else (0,)
    return x.astype(np.float64).mean(axis=axes)


def frame_means(
    model: onnx.ModelProto,
    names: list[str],
    frames: list[dict[str, np.ndarray]],
    threads: int,
    optimize: Optimization = "all",
    last: frozenset[str] = frozenset(),
) -> dict[str, np.ndarray]:
    """Per-frame, per-channel means (frames x channels) of the model's tensors ``names``, in
    one run. A float model may be optimized; a QDQ model must not be, or its Q/DQ pairs are
    fused into integer kernels."""
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    present = {o.name for o in exposed.graph.output}
    exposed.graph.output.extend(
        helper.make_empty_tensor_value_info(n) for n in dict.fromkeys(names) if n not in present
    )
    run = session(exposed, threads, optimize=optimize)
    unique = list(dict.fromkeys(names))
    means: dict[str, list[np.ndarray]] = {n: [] for n in unique}
    for feed in frames:
        for name, value in zip(unique, run.run(unique, feed), strict=True):
            means[name].append(_channel_mean(value, name in last))
    return {n: np.stack(m) for n, m in means.items()}


class FloatMeans:
    """The float model's per-frame channel means, run once over every frame a pass and its guard's
    folds read: a fold's pass reads its own frames' rows, the values a run on them alone makes (a
    frame's outputs do not depend on the others run beside it). Two float runs for a guarded
    pass, where each fold ran the float model again."""

    def __init__(self, model: onnx.ModelProto, frames: list[dict[str, np.ndarray]], threads: int) -> None:
        self.model, self.frames, self.threads = model, frames, threads
        self._rows: dict[str, np.ndarray] = {}
        self._at = {id(f): i for i, f in enumerate(frames)}

    def rows(
        self, names: list[str], frames: list[dict[str, np.ndarray]], last: frozenset[str]
    ) -> dict[str, np.ndarray]:
        missing = [n for n in dict.fromkeys(names) if n not in self._rows]
        if missing:
            self._rows.update(frame_means(self.model, missing, self.frames, self.threads, last=last))
        if not all(id(f) in self._at for f in frames):  # frames it was not made on: run them
            return frame_means(self.model, names, frames, self.threads, last=last)
        at = [self._at[id(f)] for f in frames]
        return {n: self._rows[n][at] for n in names}


def correct(
    float_model: onnx.ModelProto | FloatMeans,
    quantized: onnx.ModelProto,
    frames: list[dict[str, np.ndarray]],
    threads: int = 0,
    rule: Rule = DEFAULT_RULE,
    guard: bool = True,
    given: Literal["kept", "dropped"] | None = None,
) -> Correction:
    """Correct ``quantized``'s biases in place against ``float_model`` on ``frames``, each
    layer's correction kept or shrunk by ``rule`` (see ``rules``). With ``guard``, only
    if the pass lowers the model's output error on held-out frames (see ``guard``);
    ``given``: the guard's decision, already made on the reference, is followed, not estimated."""
    means = float_model if isinstance(float_model, FloatMeans) else FloatMeans(float_model, frames, threads)
    nothing = Correction(rule, len(frames), guard="nothing to correct" if guard and given is None else "off")
    if not targets(QdqGraph(quantized), nothing):
        return nothing  # no bias to correct (MatMuls without one, each skipped with why): nothing to guard
    if given is not None:
        if given == "dropped":
            dropped = Correction(rule, len(frames), guard="dropped", guard_from="reference")
            return _dropped(quantized, dropped, GUARD_REFERENCE)
        followed = Correction(rule, len(frames), guard="kept", guard_from="reference")
        return _corrected(means, quantized, frames, threads, followed)
    if guard:

        def fit(model: onnx.ModelProto, part: list[dict[str, np.ndarray]]) -> object:
            return correct(means, model, part, threads, rule, guard=False)

        found = bias_guard.estimate(means.model, quantized, frames, threads, fit)
        if found is None:
            return _corrected(means, quantized, frames, threads, Correction(rule, len(frames), guard="too few frames"))
        decided = Correction(
            rule,
            len(frames),
            guard="kept" if found.keeps() else "dropped",
            guard_gain=found.gain,
            guard_folds=found.relative,
        )
        if decided.guard == "dropped":
            return _dropped(quantized, decided, GUARD_WORSE)
        return _corrected(means, quantized, frames, threads, decided)
    return _corrected(means, quantized, frames, threads, Correction(rule, len(frames)))


def _dropped(quantized: onnx.ModelProto, correction: Correction, why: str) -> Correction:
    for t in targets(QdqGraph(quantized), correction):
        correction.skipped[t.node] = why
    return correction


def _corrected(
    means: FloatMeans,
    quantized: onnx.ModelProto,
    frames: list[dict[str, np.ndarray]],
    threads: int,
    correction: Correction,
) -> Correction:
    """The pass itself, layer by layer in depth order, recorded in ``correction``."""
    rule = correction.rule
    g = QdqGraph(quantized)
    todo = targets(g, correction)
    if not todo or not frames:
        return correction
    last = frozenset(t.f_out for t in todo if t.channels_last)
    expected = means.rows([t.f_out for t in todo], frames, last)
    runner = _Segments(g, {t.node for t in todo}, frames, threads)
    by_depth: dict[int, list[Target]] = {}
    for t in todo:
        by_depth.setdefault(runner.depth[t.node], []).append(t)
    for depth in sorted(by_depth):
        layers = by_depth[depth]
        measured = runner.advance(
            depth,
            [t.q_out for t in layers],
            [t.node for t in layers],
            frozenset(t.q_out for t in layers if t.channels_last),
        )
        for t in layers:
            decision = bias_rules.decide(measured[t.q_out] - expected[t.f_out], rule)
            if decision.move is None:
                correction.skipped[t.node] = decision.why
                continue
            moved = _apply(g, t, decision.move, correction)
            if t.in_place:  # an Add's bias is read when the Add runs again, after the layer's kept output
                runner.shift(t.node, moved)
    correction.depths = len(by_depth)
    return correction


def _apply(g: QdqGraph, t: Target, move: np.ndarray, correction: Correction | None = None) -> np.ndarray:
    """Move one bias by ``move`` on its own grid (int32 for a layer's, an Add constant's uint8
    with its zero point, widened if the move needs it); record how it went in ``correction``
    and return how far the dequantized bias moved, per channel."""
    ints, scale = g.required(t.bias), g.required(t.bias_scale)
    zero = g.required(t.bias_zero_point) if t.bias_zero_point else None
    placed = bias_rules.place(ints, scale, zero, move, regrid=t.bias_zero_point is not None)
    g.set_array(t.bias, placed.ints)
    if placed.grid is not None and zero is not None and t.bias_zero_point:
        _set_grid(g, t, placed.grid[0].astype(scale.dtype), placed.grid[1].astype(zero.dtype))
    if correction is None:
        return placed.moved
    if placed.grid is not None:
        step, zp, ends = float(placed.grid[0].max()), float(placed.grid[1].max()), np.iinfo(ints.dtype)
        lo, hi = (ends.min - zp) * step, (ends.max - zp) * step
        correction.regridded[t.node] = f"its constant's grid widened to [{lo:.4g}, {hi:.4g}] to hold the correction"
    if placed.clipped:
        off = float(np.max(np.abs(move - placed.moved)))
        correction.clipped[t.node] = (
            f"{placed.clipped} of {placed.ints.size} channels pinned at the end of the bias's grid, "
            f"up to {off:.4g} short of the correction"
        )
    else:
        correction.corrected.append(t.node)
    return placed.moved


def _set_grid(g: QdqGraph, t: Target, scale: np.ndarray, zero: np.ndarray) -> None:
    """Give an Add constant's DequantizeLinear a new scale and zero point: its own, new
    initializers where the old ones are read by anything else."""
    dq = next(n for n in g.consumers[t.bias] if n.op_type == "DequantizeLinear")
    for slot, name, value in ((1, t.bias_scale, scale), (2, t.bias_zero_point or "", zero)):
        if len(g.consumers.get(name, [])) > 1:
            fresh = f"{name}.loop_{dq.name or t.node}"
            g.model.graph.initializer.append(onnx.numpy_helper.from_array(value, fresh))
            g.inits[fresh] = g.model.graph.initializer[-1]
            dq.input[slot] = fresh
        else:
            g.set_array(name, value)


class _Segments:
    """The quantized graph cut by correction depth; see the module docstring."""

    def __init__(self, g: QdqGraph, layers: set[str], frames: list[dict[str, np.ndarray]], threads: int) -> None:
        self.g, self.threads = g, threads
        self.nodes = list(g.model.graph.node)
        self.depth: dict[str, int] = {}
        self.level = self._levels(layers)
        # Nodes over initializers only (a weight's DequantizeLinear): run wherever needed,
        # never kept per frame, which would hold a copy of every weight for every frame.
        made = set(g.inits)
        self.constant: set[int] = set()
        for i, node in enumerate(self.nodes):
            if all(x in made for x in node.input if x):
                self.constant.add(i)
                made.update(node.output)
        self.kept: list[dict[str, np.ndarray]] = [dict(f) for f in frames]
        self.done: set[int] = set()

    def _levels(self, layers: set[str]) -> list[int]:
        """Per node: the depth of the deepest corrected layer it reads from (-1 for none)."""
        up: dict[str, int] = {}
        levels = []
        for node in self.nodes:
            level = max((up.get(i, -1) for i in node.input if i), default=-1)
            if node.name in layers:
                level += 1
                self.depth[node.name] = level
            up.update((o, level) for o in node.output)
            levels.append(level)
        return levels

    def advance(
        self, depth: int, measure: list[str], layers: list[str], last: frozenset[str] = frozenset()
    ) -> dict[str, np.ndarray]:
        """Run the nodes no correction at ``depth`` or deeper can reach, and the ``layers``
        about to be corrected, keeping their outputs; plus what leads from them to the
        tensors in ``measure``; return those tensors' per-frame, per-channel means.

        A layer's own output is kept from before its correction and moved by :meth:`shift`
        after it (a bias adds a constant per channel), so the layer is never run twice."""
        final = [
            i
            for i, lv in enumerate(self.level)
            if i not in self.done and i not in self.constant and (lv < depth or self.nodes[i].name in layers)
        ]
        wanted = measure + [x for i in final for x in self.nodes[i].input if x]
        chain = self._chain(wanted, set(final) | self.done)
        order = sorted(set(final) | set(chain))
        nodes = [self.nodes[i] for i in order]
        produced = {o for n in nodes for o in n.output}
        needed_later = self._read_after(set(final) | self.done)
        keep = [o for i in final for o in self.nodes[i].output if o in needed_later]
        outputs = list(dict.fromkeys(keep + measure))
        run = session(self._model(nodes, produced, outputs), self.threads)
        feeds = self._feeds(nodes, produced)
        means: dict[str, list[np.ndarray]] = {m: [] for m in measure}
        for frame in self.kept:
            values = dict(zip(outputs, run.run(outputs, {n: frame[n] for n in feeds}), strict=True))
            frame.update((k, values[k]) for k in keep)
            for m in measure:
                means[m].append(_channel_mean(values[m], m in last))
        self.done.update(final)
        still = self._read_after(self.done)
        for frame in self.kept:
            for name in [k for k in frame if k not in still]:
                del frame[name]
        return {m: np.stack(v) for m, v in means.items()}

    def shift(self, layer: str, moved: np.ndarray) -> None:
        """Add a corrected bias's movement to the kept output of ``layer``, in every frame."""
        out = next(n.output[0] for n in self.nodes if n.name == layer)
        for frame in self.kept:
            if out in frame:
                value = frame[out]
                shape = (1, -1) + (1,) * (value.ndim - 2) if value.ndim > 1 else (-1,)
                frame[out] = (value + moved.reshape(shape)).astype(value.dtype)

    def _chain(self, tensors: list[str], ready: set[int]) -> list[int]:
        """Nodes not yet run that ``tensors`` depend on."""
        producer = {o: i for i, n in enumerate(self.nodes) for o in n.output}
        stack, seen = list(tensors), set()
        while stack:
            i = producer.get(stack.pop())
            if i is None or i in seen or i in ready:
                continue
            seen.add(i)
            stack.extend(x for x in self.nodes[i].input if x)
        return sorted(seen)

    def _read_after(self, ran: set[int]) -> set[str]:
        return {x for i, n in enumerate(self.nodes) if i not in ran for x in n.input} | {
            o.name for o in self.g.model.graph.output
        }

    def _feeds(self, nodes: list[onnx.NodeProto], produced: set[str]) -> list[str]:
        return list(
            dict.fromkeys(x for n in nodes for x in n.input if x and x not in produced and x not in self.g.inits)
        )

    def _model(self, nodes: list[onnx.NodeProto], produced: set[str], outputs: list[str]) -> onnx.ModelProto:
        frame = self.kept[0]
        feeds = self._feeds(nodes, produced)
        inputs = [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(frame[n].dtype), frame[n].shape)
            for n in feeds
        ]
        used = {x for n in nodes for x in n.input}
        inits = [t for name, t in self.g.inits.items() if name in used]
        graph = helper.make_graph(
            nodes, "segment", inputs, [helper.make_empty_tensor_value_info(o) for o in outputs], inits
        )
        model = helper.make_model(graph, opset_imports=self.g.model.opset_import)
        model.ir_version = self.g.model.ir_version
        return model
