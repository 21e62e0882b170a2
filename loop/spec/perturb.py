"""Perturbation ops. Each says what it does to the model or the compile, and its footprint:
what it is allowed to change (DESIGN.md, "Fingerprint and audit").

A footprint is a set of :class:`~loop.core.footprint.Allow` rules over observed changes
(:mod:`loop.core.footprint` says what each kind of change is).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import onnx
from onnx import numpy_helper

from loop.core.errors import LoopError
from loop.core.footprint import WHATS, Allow, Expect, parse_expect  # noqa: F401 - re-exported beside the ops
from loop.core.vocab import CompileOptions, RangeOverride
from loop.judge.structure import Structure

SCALES = ("in_scale", "out_scale")


@dataclass(frozen=True)
class Op:
    """Base of all perturbation ops; subclasses are dataclasses of their fields."""

    name: ClassVar[str]
    rewrites_model: ClassVar[bool] = False  # True for ops that change the float model itself
    layer: str | None = None

    @property
    def label(self) -> str:
        """The op's name as a sweep file writes it."""
        return self.name

    def check(self, structure: Structure) -> None:
        if self.layer is not None and structure.layer(self.layer) is None:
            raise LoopError(unknown_layer(self.layer, [lp.name for lp in structure.layers]), field="layer")

    def apply(self, model: onnx.ModelProto, structure: Structure) -> None:
        """Change the float model in place (weights ops only)."""

    def overrides(self, structure: Structure) -> tuple[RangeOverride, ...]:
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


@dataclass(frozen=True)
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

    def apply(self, model: onnx.ModelProto, structure: Structure) -> None:
        tensor = _own_kernel(model, self.layer)  # type: ignore[arg-type]
        new = self.kernel(numpy_helper.to_array(tensor))
        tensor.CopyFrom(numpy_helper.from_array(new, tensor.name))

    def footprint(self, structure: Structure, options: CompileOptions) -> list[Allow]:
        return _downstream(structure, self.layer)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ScaleWeights(WeightOp):
    name: ClassVar[str] = "scale_weights"
    factor: float = 1.0

    def kernel(self, w: np.ndarray) -> np.ndarray:
        return w * np.asarray(self.factor, w.dtype)


@dataclass(frozen=True)
class AddWeightNoise(WeightOp):
    """Gaussian noise of standard deviation ``std`` (in the kernel's own units), seeded."""

    name: ClassVar[str] = "add_weight_noise"
    std: float = 0.0
    seed: int = 0

    def kernel(self, w: np.ndarray) -> np.ndarray:
        return w + np.random.default_rng(self.seed).normal(0.0, self.std, w.shape).astype(w.dtype)


@dataclass(frozen=True)
class ForceRange(Op):
    """Force the range of the tensor carrying the layer's quantized output (or input)."""

    name: ClassVar[str] = "force_range_out"
    lo: float = 0.0
    hi: float = 0.0
    side: str = "out"

    @property
    def label(self) -> str:
        return f"force_range_{self.side}"

    def tensor(self, structure: Structure) -> str:
        """The tensor actually quantized: after removed activations, and at the head of any
        chain of ops that share one grid (a pool, a reshape, a slice)."""
        layer = structure.layer(self.layer)  # type: ignore[arg-type]
        return structure.grid(layer.out_tensor if self.side == "out" else layer.in_tensor)  # type: ignore[union-attr]

    def overrides(self, structure: Structure) -> tuple[RangeOverride, ...]:
        return (RangeOverride(self.layer, self.side, self.tensor(structure), self.lo, self.hi),)  # type: ignore[arg-type]

    def footprint(self, structure: Structure, options: CompileOptions) -> list[Allow]:
        tensor = self.tensor(structure)
        rules = [Allow(lp.name, "out_scale") for lp in structure.producer_of(tensor)]
        for consumer in structure.consumers_of(tensor):
            rules += [Allow(consumer.name, "in_scale"), Allow(consumer.name, "bias-rounding")]
        return rules


@dataclass(frozen=True)
class Calibration(Op):
    """Change the calibration set: its size and its seed."""

    name: ClassVar[str] = "calibration"
    count: int | None = None
    seed: int | None = None

    def footprint(self, structure: Structure, options: CompileOptions) -> list[Allow]:
        # Bias correction re-derives every bias from the calibration frames, so a new set
        # must move them: that is this op's own effect. Without it, only rounding follows.
        bias = "bias" if options.bias_correction else "bias-rounding"
        return [Allow("*", "in_scale"), Allow("*", "out_scale"), Allow("*", bias)]


def parse_op(raw: Any) -> Op:
    """Build an op from its sweep-file mapping; errors name the offending field."""
    from pydantic import ValidationError

    from loop.spec.schema import locate, op_adapter

    try:
        return op_from(op_adapter().validate_python(raw, strict=True))
    except ValidationError as exc:
        raise locate(exc, raw) from None


def op_from(model: Any) -> Op:
    """The op a validated :mod:`loop.spec.schema` op model describes."""
    if model.op == "scale_weights":
        return ScaleWeights(layer=model.layer, factor=float(model.factor))
    if model.op == "add_weight_noise":
        return AddWeightNoise(layer=model.layer, std=float(model.std), seed=model.seed)
    if model.op == "calibration":
        return Calibration(count=model.count, seed=model.seed)
    lo, hi = _range(model.range)
    return ForceRange(layer=model.layer, lo=lo, hi=hi, side="out" if model.op.endswith("out") else "in")


def _range(value: list[float]) -> tuple[float, float]:
    lo, hi = float(value[0]), float(value[1])
    if not lo < hi:
        raise LoopError(f"inverted range [{lo}, {hi}]: lo must be below hi", field="range")
    return lo, hi
