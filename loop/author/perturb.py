"""Perturbation ops. Each says what it does to the model or the compile, and its footprint:
what it is allowed to change (docs/audit.md, "Footprints"). An op is its sweep-file model
(:mod:`loop.author.schema`: its parameters, bounds and descriptions, declared there once) with
its behaviour added here.

A footprint is a set of :class:`~loop.core.footprint.Allow` rules over observed changes
(:mod:`loop.core.footprint` says what each kind of change is).
"""

from __future__ import annotations

import difflib
import fnmatch
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import onnx
from onnx import numpy_helper

from loop.author import schema
from loop.core.errors import LoopError
from loop.core.footprint import WHATS, Allow, Expect, parse_expect  # noqa: F401 - re-exported beside the ops
from loop.core.modelfile import load_model
from loop.core.vocab import CompileOptions, Precision, RangeOverride, Rescale, WeightPrecision
from loop.judge.structure import Structure, constants, follow_activations


class Op:
    """Base of all perturbation ops: behaviour only; each op's fields are its schema model's."""

    name: ClassVar[str]
    rewrites_model: ClassVar[bool] = False  # True for ops that change the float model itself
    if TYPE_CHECKING:  # every op has one (None: the op names no layer); not a field here

        @property
        def layer(self) -> str | None: ...

    @property
    def label(self) -> str:
        """The op's name as a sweep file writes it."""
        return self.name

    def record(self) -> dict[str, Any]:
        """The op as the ledger records it (``op`` first); a field given as an array, by its
        reference (the array is kept under ``runs/arrays``, :meth:`arrays`)."""
        found: dict[str, Any] = {**self.model_dump(), **self.array_refs()}  # type: ignore[attr-defined]
        return {"op": self.label, **{k: v for k, v in found.items() if k != "op"}}

    def array_refs(self) -> dict[str, dict[str, Any]]:
        """The reference of each field given as an array, by field."""
        return {k: v.ref for k, v in vars(self).items() if isinstance(v, schema.ArrayValues)}

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays its fields were given as, by hash: what a run's record needs kept."""
        return {v.ref["array"]: v.source for v in vars(self).values() if isinstance(v, schema.ArrayValues)}

    def check(self, structure: Structure) -> None:
        if self.layer is not None and structure.layer(self.layer) is None:
            raise LoopError(unknown_layer(self.layer, [lp.name for lp in structure.layers]), field="layer")

    def apply(self, model: onnx.ModelProto, structure: Structure, folder: Path | None = None) -> None:
        """Change the float model in place (weights ops only); ``folder`` holds its external data."""

    def overrides(self, structure: Structure) -> tuple[RangeOverride, ...]:
        return ()

    def precisions(self, structure: Structure) -> tuple[Precision, ...]:
        return ()

    def weight_bits(self, structure: Structure) -> tuple[WeightPrecision, ...]:
        """Kernels quantized at another width than 8 bits (``precision`` with ``weights:``)."""
        return ()

    def rescales(self, structure: Structure) -> tuple[Rescale, ...]:
        """Scale-only edits of the quantized model (``scale_grid``), made after ``optimize``."""
        return ()

    def footprint(self, structure: Structure, options: CompileOptions) -> list[Allow]:
        """What this op may change, given the compile it goes through."""
        raise NotImplementedError


def unknown_layer(name: str, known: list[str]) -> str:
    """One line: the closest few layer names, not all of them."""
    if not known:
        return f"unknown layer '{name}': the model has no quantized layers"
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = (
        f"did you mean {', '.join(repr(c) for c in close)}?"
        if close
        else f"layers are ONNX node names, e.g. {known[0]!r}"
    )
    return f"unknown layer '{name}' ({len(known)} quantized layers; {hint}); `loop layers BASE` lists them"


def _own_kernel(model: onnx.ModelProto, layer: str) -> onnx.TensorProto:
    """The layer's kernel initializer, copied first if another node reads it too (exports
    share equal tensors), so that changing it changes this layer alone."""
    node = next(n for n in model.graph.node if n.name == layer)
    name = node.input[1]
    tensor = next(t for t in model.graph.initializer if t.name == name)
    readers = sum(name in n.input for n in model.graph.node)
    if readers == 1:
        return tensor
    own = onnx.TensorProto()
    own.CopyFrom(tensor)
    own.name = f"{name}.{layer}"
    model.graph.initializer.append(own)
    node.input[1] = own.name
    return own


def _downstream(structure: Structure, layer: str) -> list[Allow]:
    start = structure.layer(layer).index  # type: ignore[union-attr]
    rules = [Allow(layer, "kernel"), Allow(layer, "bias")]
    for later in structure.layers[start:]:
        rules += [Allow(later.name, w) for w in ("bias", "in_scale", "out_scale")]
    return rules


class WeightOp(Op):
    """An op that rewrites one layer's float kernel; its footprint is the layer and all after it."""

    rewrites_model: ClassVar[bool] = True

    def kernel(self, w: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def check(self, structure: Structure) -> None:
        super().check(structure)
        layer = structure.layer(self.layer)  # type: ignore[arg-type]
        if layer is not None and layer.weight is None:
            raise LoopError(
                f"layer '{self.layer}' has no weights ({layer.op} of two activations); "
                f"{self.name} needs a weighted layer",
                field="layer",
            )

    def apply(self, model: onnx.ModelProto, structure: Structure, folder: Path | None = None) -> None:
        tensor = _own_kernel(model, self.layer)  # type: ignore[arg-type]
        new = self.kernel(numpy_helper.to_array(tensor, str(folder or "")))
        tensor.CopyFrom(numpy_helper.from_array(new, tensor.name))

    def footprint(self, structure: Structure, options: CompileOptions) -> list[Allow]:
        return _downstream(structure, self.layer)  # type: ignore[arg-type]


class ScaleWeights(schema.ScaleWeightsOp, WeightOp):
    name: ClassVar[str] = "scale_weights"

    def kernel(self, w: np.ndarray) -> np.ndarray:
        return w * np.asarray(self.factor, w.dtype)


class AddWeightNoise(schema.AddWeightNoiseOp, WeightOp):
    """Gaussian noise of standard deviation ``std`` (in the kernel's own units), seeded."""

    name: ClassVar[str] = "add_weight_noise"

    def kernel(self, w: np.ndarray) -> np.ndarray:
        return w + np.random.default_rng(self.seed).normal(0.0, self.std, w.shape).astype(w.dtype)


class ForceRange(schema.ForceRangeOp, Op):
    """Force the range of the tensor carrying the layer's quantized output (or input)."""

    name: ClassVar[str] = "force_range_out"

    def __hash__(self) -> int:  # its range is a list, as the sweep file writes it
        return hash((self.op, self.layer, tuple(self.range)))

    @property
    def lo(self) -> float:
        return float(self.range[0])

    @property
    def hi(self) -> float:
        return float(self.range[1])

    @property
    def side(self) -> str:
        return "out" if self.op == "force_range_out" else "in"

    @property
    def label(self) -> str:
        return self.op

    def record(self) -> dict[str, Any]:
        """As the ledger has recorded a forced range all along: its bounds and side by name."""
        held = {"op": self.op, "layer": self.layer, "lo": self.lo, "hi": self.hi, "side": self.side}
        return {**held, **self.array_refs()}  # a range given as an array: its file too

    def tensor(self, structure: Structure) -> str:
        """The tensor actually quantized: after removed activations, and at the head of any
        chain of ops that share one grid (a pool, a reshape, a slice)."""
        layer = structure.layer(self.layer)
        return structure.grid(layer.out_tensor if self.side == "out" else layer.in_tensor)  # type: ignore[union-attr]

    def overrides(self, structure: Structure) -> tuple[RangeOverride, ...]:
        return (RangeOverride(self.layer, self.side, self.tensor(structure), self.lo, self.hi),)

    def footprint(self, structure: Structure, options: CompileOptions) -> list[Allow]:
        tensor = self.tensor(structure)
        rules = [Allow(lp.name, "out_scale") for lp in structure.producer_of(tensor)]
        for consumer in structure.consumers_of(tensor):
            rules += [Allow(consumer.name, "in_scale"), Allow(consumer.name, "bias-rounding")]
        return rules


class ScaleGrid(schema.ScaleGridOp, Op):
    """Multiply scales of the quantized model, its integers frozen: the layer's weight scales (and
    its int32 bias's, which is input scale times weight scale), or the scale of the grid its output
    lands on, wherever it appears (and its readers' bias scales). Nothing is re-derived: the
    float model, calibration and compile options are the base's, so is its quantized model.
    ``layer`` may be a glob over the quantized layers."""

    name: ClassVar[str] = "scale_grid"

    def __hash__(self) -> int:  # its factors are a list, as the sweep file writes them
        return hash((self.op, self.layer, self.of, self.factor, tuple(self.factors or ())))

    @property
    def scales(self) -> tuple[float, ...]:
        return tuple(self.factors) if self.factors is not None else (float(self.factor or 1.0),)

    def names(self, structure: Structure) -> list[str]:
        return [lp.name for lp in structure.layers if fnmatch.fnmatchcase(lp.name, self.layer)]

    def check(self, structure: Structure) -> None:
        names = self.names(structure)
        if not names:
            raise LoopError(unknown_layer(self.layer, [lp.name for lp in structure.layers]), field="layer")
        for name in names:
            layer = structure.layer(name)
            assert layer is not None
            if self.of == "weights" and layer.weight is None:
                raise LoopError(f"layer '{name}' has no weights; scale_grid of: weights needs a kernel", field="of")
            if self.factors is not None and layer.channels != len(self.factors):
                raise LoopError(
                    f"{len(self.factors)} factors for layer '{name}', which has {layer.channels} output channels",
                    field="factors",
                )

    def grid(self, structure: Structure, name: str) -> str:
        """The tensor the layer's output is quantized on: past removed activations, at the head
        of a chain sharing one grid (as :meth:`ForceRange.tensor`)."""
        return structure.grid(structure.layer(name).out_tensor)  # type: ignore[union-attr]

    def rescales(self, structure: Structure) -> tuple[Rescale, ...]:
        found = []
        for name in self.names(structure):
            tensors: tuple[str, ...] = ()
            if self.of == "output":
                head = self.grid(structure, name)
                on = (structure.writes[n] for n in structure.on_grid(head) if n in structure.writes)
                tensors = tuple(dict.fromkeys([head, *on]))
            found.append(Rescale(name, self.of, self.scales, tensors))
        return tuple(found)

    def footprint(self, structure: Structure, options: CompileOptions) -> list[Allow]:
        """Only the named scales, by the factors asked; every integer is the base's."""
        rules: list[Allow] = []
        for name in self.names(structure):
            if self.of == "weights":
                rules += [Allow(name, "kernel-scale", self.scales), Allow(name, "bias-scale", self.scales)]
                continue
            head = self.grid(structure, name)
            rules += [Allow(lp.name, "out_scale", self.scales) for lp in structure.producer_of(head)]
            for reader in structure.consumers_of(head):
                rules += [Allow(reader.name, "in_scale", self.scales), Allow(reader.name, "bias-scale", self.scales)]
        return list(dict.fromkeys(rules))


class Calibration(schema.CalibrationOp, Op):
    """Change the calibration set: its size and its seed."""

    name: ClassVar[str] = "calibration"

    @property
    def layer(self) -> None:
        """It names no layer."""
        return None

    def record(self) -> dict[str, Any]:
        """As the ledger has recorded it all along (with its layer, none)."""
        return {"op": self.op, "layer": None, "count": self.count, "seed": self.seed}

    def footprint(self, structure: Structure, options: CompileOptions) -> list[Allow]:
        # Bias correction re-derives every bias from the calibration frames, so a new set
        # must move them: that is this op's own effect. Without it, only rounding follows.
        bias = "bias" if options.bias_correction else "bias-rounding"
        return [Allow("*", "in_scale"), Allow("*", "out_scale"), Allow("*", bias)]


class LayerPrecision(schema.PrecisionOp, Op):
    """Put the activations a node writes at 16 bits, or keep it in float (32 bits). ``layer`` is
    a quantized layer or any other node whose output is quantized (a LayerNorm's Mul, as
    ``loop noise`` names them), or a glob over their names, as in ``expect:``."""

    name: ClassVar[str] = "precision"

    def names(self, structure: Structure) -> list[str]:
        """The nodes it names: quantized layers first, then any other node, in graph order; for
        ``weights:``, the weighted layers only (a node with no kernel has no weights to narrow)."""
        layers = [lp.name for lp in structure.layers if fnmatch.fnmatchcase(lp.name, self.layer or "")]
        if self.weights is not None:
            return [name for name in layers if structure.layer(name).weight]  # type: ignore[union-attr]
        others = [n for n in structure.node_names if fnmatch.fnmatchcase(n, self.layer or "") and n not in layers]
        return layers + others

    def check(self, structure: Structure) -> None:
        if self.names(structure):
            return
        known = [lp.name for lp in structure.layers]
        if self.weights is not None and structure.layer(self.layer or "") is not None:
            raise LoopError(
                f"layer '{self.layer}' has no kernel; precision weights: needs a weighted layer", field="layer"
            )
        if any(c in (self.layer or "") for c in "*?[") and known:
            raise LoopError(
                f"'{self.layer}' matches none of the {len(known)} quantized layers nor any other node "
                f"(e.g. {known[0]!r}); `loop layers BASE` lists the layers",
                field="layer",
            )
        raise LoopError(unknown_layer(self.layer or "", known), field="layer")

    def weight_bits(self, structure: Structure) -> tuple[WeightPrecision, ...]:
        if self.weights is None:
            return ()
        return tuple(
            WeightPrecision(name, self.weights, structure.layer(name).weight or "")  # type: ignore[union-attr]
            for name in self.names(structure)
        )

    def precisions(self, structure: Structure) -> tuple[Precision, ...]:
        """One per node named; a node that is not a layer has its tensor left "" for
        :func:`with_tensors`, which reads the model (the structure keeps layers' tensors only)."""
        if self.bits is None:
            return ()
        found = []
        for name in self.names(structure):
            lp = structure.layer(name)
            found.append(Precision(name, self.bits, structure.grid(lp.out_tensor) if lp is not None else ""))
        return tuple(found)

    def footprint(self, structure: Structure, options: CompileOptions) -> list[Allow]:
        if self.weights is not None:
            return self._weights_footprint(structure, options)
        names = set(self.names(structure))
        mine = [p for p in options.precisions if p.layer in names and p.bits == self.bits]
        order = {n: i for i, n in enumerate(structure.node_names)}
        rules: list[Allow] = []
        for p in mine or [p for p in self.precisions(structure) if p.tensor]:
            rules += _grid_rules(structure, p)
            if self.bits == 16:  # on Hailo a16_w16: the layer writing the grid gets 16-bit weights too
                writers = [p.layer, *(lp.name for lp in structure.producer_of(p.tensor))]
                rules += [Allow(n, "kernel-bits") for n in dict.fromkeys(writers)]
            if self.bits == 32:  # the node leaves the quantized graph: a layer's kernel and grids with it
                rules += [Allow(p.layer, w) for w in ("kernel", "bias", "in_scale", "out_scale")]
            if options.bias_correction:
                # every layer from this node on is corrected against an error the new grid changed
                at = order.get(p.layer, 0)
                rules += [Allow(lp.name, "bias") for lp in structure.layers if order.get(lp.name, 0) >= at]
        return list(dict.fromkeys(rules))

    def _weights_footprint(self, structure: Structure, options: CompileOptions) -> list[Allow]:
        return weights_footprint(structure, options, self.names(structure), self.weights or 8)


def weights_footprint(structure: Structure, options: CompileOptions, names: list[str], bits: int) -> list[Allow]:
    """Kernels at another width: each named layer's kernel on its new grid (``kernel-bits``: the
    same float kernel rounded at that width; re-derived integers stay outside) and its int32 bias,
    whose grid is the input's scale times the weight's; with bias correction, every layer's bias
    from the first named on, corrected against an error the new kernel changed. The footprint of
    ``precision`` with ``weights:``, and of the layers a ``weights_4bit_share`` put at 4 bits."""
    rules = [Allow(name, what) for name in names for what in ("kernel-bits", "bias")]
    if bits == 16:  # on Hailo, a16_w16: the only public mode with 16-bit weights widens the output too
        for name in names:
            for tensor in _tail(structure, name):
                rules += _grid_rules(structure, Precision(name, 16, structure.grid(tensor)))
    if options.bias_correction and names:
        order = {n: i for i, n in enumerate(structure.node_names)}
        first = min(order.get(n, 0) for n in names)
        rules += [Allow(lp.name, "bias") for lp in structure.layers if order.get(lp.name, 0) >= first]
    return list(dict.fromkeys(rules))


def _tail(structure: Structure, layer: str) -> list[str]:
    """The layer's output, and what the nodes after it write up to the next layer in graph order
    (a BatchNorm and a Relu a compiler fuses into the layer, whose output grid is then the fused
    layer's): where a 16-bit output may land. On a branching graph it may name a little more."""
    lp = structure.layer(layer)
    assert lp is not None
    layers = {x.name for x in structure.layers}
    order = list(structure.node_names)
    found = [lp.out_tensor]
    for node in order[order.index(layer) + 1 :] if layer in order else []:
        if node in layers:
            break
        if node in structure.writes:
            found.append(structure.writes[node])
    return found


def _grid_rules(structure: Structure, p: Precision) -> list[Allow]:
    """A node's output grid at another width: every node on that grid (where the node is not a
    layer, a Reshape shares its input's), the layer writing it, and each reader's input scale and
    bias rounding."""
    rules = [Allow(n, "out_scale") for n in dict.fromkeys([p.layer, *structure.on_grid(p.tensor)])]
    rules += [Allow(lp.name, "out_scale") for lp in structure.producer_of(p.tensor)]
    for consumer in structure.consumers_of(p.tensor):
        rules += [Allow(consumer.name, "in_scale"), Allow(consumer.name, "bias-rounding")]
    return rules


def with_tensors(precisions: tuple[Precision, ...], model: bytes | Path, structure: Structure) -> tuple[Precision, ...]:
    """Each precision on the tensor its node's output is quantized as: past a removed Relu or
    Clip, at the head of a chain that shares one grid (as :meth:`ForceRange.tensor`)."""
    if not all(p.tensor for p in precisions):
        graph = load_model(model, data=False).graph
        outputs = {n.name: n.output[0] for n in graph.node if n.output}
        consts = constants(graph)
        precisions = tuple(
            p if p.tensor else replace(p, tensor=structure.grid(follow_activations(outputs[p.layer], graph, consts)[0]))
            for p in precisions
        )
    # a layer and the Relu after it name one tensor: one 16-bit grid (32 bits leaves out each node)
    wide: dict[str, Precision] = {}
    for p in precisions:
        if p.bits == 16:
            wide.setdefault(p.tensor, p)
    return tuple(p for p in precisions if p.bits != 16 or wide[p.tensor] is p)


def parse_op(raw: Any) -> Op:
    """Build an op from its sweep-file mapping; errors name the offending field."""
    from pydantic import ValidationError

    try:
        return op_from(schema.op_adapter().validate_python(raw, strict=True))
    except ValidationError as exc:
        raise schema.locate(exc, raw) from None


# Each op with its behaviour, by the name its schema model answers to.
OPS: dict[str, type[Any]] = {
    name: op
    for op in (ScaleWeights, AddWeightNoise, ForceRange, ScaleGrid, Calibration, LayerPrecision)
    for name, model in schema.OPS.items()
    if issubclass(op, model)
}


def op_from(model: Any) -> Op:
    """The op a validated :mod:`loop.author.schema` op model describes: the same fields."""
    if isinstance(model, schema.ForceRangeOp):
        _range(model.range)
    op: Op = OPS[model.op](**dict(model))  # its values as validated: an array's stays beside its numbers
    return op


def _range(value: list[float]) -> tuple[float, float]:
    lo, hi = float(value[0]), float(value[1])
    if not lo < hi:
        raise LoopError(f"inverted range [{lo}, {hi}]: lo must be below hi", field="range")
    return lo, hi
