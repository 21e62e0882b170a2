"""Where quantization loses: per quantized tensor, how far its quantized value is from the float
model's, accumulated and local, named as a sweep names layers.

* accumulated SNR: the tensor in the quantized model (everything before it quantized) against the
  same tensor in the float model;
* local SNR: the tensor with only its own layer quantized (its weights and its output grid; its
  inputs taken from the float model) against the float model's.

A compiler measures both (``Compiler.noise``); this module names, orders and words them. Pure:
ONNX graphs and numbers in, values out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import onnx

from loop.judge.structure import FOLDED_ACTIVATIONS
from loop.judge.widen import Widening, precision_line

EPS = float.fromhex("0x1.0p-52")  # numpy.finfo(float).eps, qdq_loss_debug's floor on both norms
WORST = 3  # how many layers a flag names
INPUT = "input"  # the op of a graph input's grid, named after the input itself


def snr_db(signal: float, noise: float) -> float:
    """``10 log10(signal / noise)`` from energies (sums of squares), with the floor qdq_loss_debug's
    ``compute_signal_to_quantization_noice_ratio`` puts under both norms: the same figure, summed
    frame by frame instead of over one concatenation."""
    return 10 * math.log10(max(signal, EPS * EPS) / max(noise, EPS * EPS))


@dataclass(frozen=True)
class TensorNoise:
    """One quantized tensor: the layer that makes it, as a sweep names it, and its figures (dB)."""

    layer: str
    op: str
    tensor: str
    index: int  # graph order: where the layer's node stands in the float model (graph inputs first)
    accumulated_snr_db: float
    local_snr_db: float
    weight_snr_db: float | None = None  # the layer's kernel, dequantized against its float values
    bits: int | None = None  # of the tensor's grid
    # the accumulated SNR lost at this layer: the lowest of the quantized tensors it reads, less its own
    # (None when it reads none); where the signal is lost, which local SNR alone does not show
    fall_db: float | None = None

    def line(self) -> str:
        weight = "" if self.weight_snr_db is None else f"  weights {self.weight_snr_db:6.1f} dB"
        bits = "" if self.bits is None else f"  {self.bits:>2} bit"
        fall = "" if self.fall_db is None else f"  falls {self.fall_db:6.1f} dB"
        return (
            f"{self.layer}  ({self.op}, {self.tensor})  local {self.local_snr_db:6.1f} dB"
            f"  accumulated {self.accumulated_snr_db:6.1f} dB{fall}{weight}{bits}"
        )


@dataclass(frozen=True)
class Fall:
    """A layer at which the accumulated SNR dropped, from the worst of the tensors it reads."""

    layer: str
    tensor: str
    before_db: float  # the lowest accumulated SNR of the quantized tensors it reads (through unquantized ones)
    after_db: float  # its own accumulated SNR
    region: tuple[str, ...]  # the layers whose grids to widen, in graph order: from the dominator to the fall

    @property
    def fall_db(self) -> float:
        return self.before_db - self.after_db

    def line(self) -> str:
        own = self.region == (self.layer,)
        widen = "its own grid" if own else f"{len(self.region)} layers from its inputs' common source"
        return f"  {self.layer}: {self.before_db:.1f} -> {self.after_db:.1f} dB (widen {widen})"

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "fall_db": self.fall_db}


def regions_in_order(chosen: Iterable[Fall]) -> list[str]:
    """The layers of every fall's region, each once, in the order the falls were given."""
    return list(dict.fromkeys(layer for f in chosen for layer in f.region))


@dataclass
class NoiseReport:
    """``loop noise``: every quantized tensor of one variant, the layers that lose most first."""

    sweep: str
    variant: str
    backend: str
    frames: int
    layers: list[TensorNoise]
    notes: list[str] = field(default_factory=list)  # one line each: the run whose quantization differs
    falls: list[Fall] = field(default_factory=list)  # where the signal is lost, largest first (loop.judge.falls)
    widening: Widening | None = None  # the variants measured from the falls on (loop.judge.widen)

    def worst(self, count: int = WORST) -> list[TensorNoise]:
        return self.layers[:count]

    def to_try(self) -> list[str]:
        """The sweep entries that would put the falls' regions at 16 bits (the worst layers when
        nothing falls)."""
        layers = regions_in_order(self.falls) or [t.layer for t in self.layers if t.op != INPUT][:WORST]
        return [precision_line(layer) for layer in layers]

    def in_graph_order(self) -> list[TensorNoise]:
        return sorted(self.layers, key=lambda t: (t.index, t.tensor))

    def series(self) -> list[list[Any]]:
        """The rows a run stores to be drawn again: ``[layer, accumulated, local]`` in graph order,
        to 0.1 dB, an infinite figure as None (JSON has no infinity)."""
        kept = lambda v: round(v, 1) if math.isfinite(v) else None  # noqa: E731
        return [[t.layer, kept(t.accumulated_snr_db), kept(t.local_snr_db)] for t in self.in_graph_order()]

    def to_json(self) -> dict[str, Any]:
        return {
            "sweep": self.sweep,
            "variant": self.variant,
            "backend": self.backend,
            "frames": self.frames,
            "notes": list(self.notes),
            "layers": [_finite(asdict(t)) for t in self.layers],
            "falls": [f.to_json() for f in self.falls],
            "sixteen_bits": self.to_try(),  # the first guess; "widening" holds what was measured
            **({"widening": self.widening.to_json()} if self.widening is not None else {}),
        }

    def lines(self) -> list[str]:
        """The notes, where the signal is lost, the variants measured from there (or, unmeasured,
        the entries to try), then one line per layer, worst first."""
        found = [f.line() for f in self.falls]
        found = ["where the signal is lost:", *found] if found else []
        if self.widening is not None:
            found += self.widening.lines()
        elif found:
            found += ["to try 16 bits there, a variant with (unmeasured):", *(f"  - {e}" for e in self.to_try())]
        return [*self.notes, *found, *(t.line() for t in self.layers)]


def _finite(row: dict[str, Any]) -> dict[str, Any]:
    """JSON has no infinity: a lossless tensor's SNR is written as null."""
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()}


def worst_first(found: Iterable[TensorNoise]) -> list[TensorNoise]:
    """By what the accumulated SNR falls at the layer (the signal lost there, whatever amplified
    it), then by local SNR (what its own grid loses), then graph order. A tensor that reads no
    quantized one (a graph input's grid) ranks as one that lost nothing upstream of itself."""
    return sorted(found, key=lambda t: (-(t.fall_db or 0.0), t.local_snr_db, t.accumulated_snr_db, t.index, t.tensor))


@dataclass(frozen=True)
class Producer:
    """The layer a quantized tensor is named after, and where it stands in graph order."""

    layer: str
    op: str
    index: int


def producers(model: onnx.ModelProto, quantized: Sequence[str]) -> dict[str, Producer]:
    """For each quantized tensor of float ``model``, the node that makes it, as ``loop layers`` and
    the sweep name layers: a removed Relu or Clip is walked back to the layer before it (its grid is
    that layer's output grid), and a graph input is named after itself."""
    graph = model.graph
    made_by = {out: (i, node) for i, node in enumerate(graph.node) for out in node.output}
    marked = set(quantized)
    found: dict[str, Producer] = {}
    for tensor in quantized:
        name = tensor
        while name in made_by and made_by[name][1].op_type in FOLDED_ACTIVATIONS:
            before = made_by[name][1].input[0]
            if before in marked or before not in made_by:
                break  # the clamp's input has a grid of its own: the clamp is a layer of its own
            name = before
        if name not in made_by:
            found[tensor] = Producer(tensor, INPUT, -1)
            continue
        index, node = made_by[name]
        found[tensor] = Producer(node.name or node.output[0], node.op_type, index)
    return found
