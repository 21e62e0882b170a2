"""Whether a model's weights fit the device at bf16, int8 and int4, and what loading them costs on a
link: the seed's first number ("8 GB is the number that decides everything else") for any model
(``loop fit``, issue 44).

On Hailo-10H HailoRT sends the whole HEF when the model is created and the device holds it in one
buffer: a HEF that fits stays resident, one that does not fails then, and nothing streams
(docs/hailo.md, "Residency"; a compiled run's HEF is priced the same way, :func:`weight_load`). A
HEF holds at least its weights at their compiled precision, so weights that do not fit rule
that precision out, and their one crossing of the link is a lower bound on the load. A HEF itself is
weighed as compiled: its size is what crosses and what the device holds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from loop.core.links import LinkModel
from loop.core.record import RunRecord
from loop.judge.weights import Weights, at_bits

PRECISIONS = {"bf16": 16, "int8": 8, "int4": 4}  # int4 packed two to a byte


@dataclass(frozen=True)
class Memory:
    device: str
    bytes: int | None  # what the device can allocate for a model (None: no figure for it)
    source: str  # where the figure comes from, and how sure it is


@dataclass(frozen=True)
class Fit:
    bytes: int
    fits: bool | None  # None: no figure for the device
    load_ms: float | None  # one crossing of the link when the model is created; None: it never loads

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RunFit:
    """A compiled run's own mix of precisions, as its compile recorded it (``info.weights``)."""

    id: int
    fit: Fit | None  # None: the run recorded no weights
    by_bits: dict[str, int]  # weights by their bits
    hef_bytes: int | None

    def to_json(self) -> dict[str, Any]:
        fit = self.fit.to_json() if self.fit else {"bytes": None, "fits": None, "load_ms": None}
        return {"id": self.id, **fit, "weights_by_bits": self.by_bits, "hef_bytes": self.hef_bytes}


@dataclass(frozen=True)
class FitReport:
    model: str
    memory: Memory
    link: LinkModel
    weights: Weights | None  # None for a HEF: its weights are compiled in
    as_stored: Fit | None  # an ONNX model's weights at the types its file stores
    precisions: dict[str, Fit]  # bf16, int8, int4 (none for a HEF)
    as_compiled: Fit | None  # a HEF: the file itself
    refused: str | None = None  # why the device refuses this HEF whatever its size
    run: RunFit | None = None

    def to_json(self) -> dict[str, Any]:
        """What ``loop fit --json`` prints."""
        return {
            "model": self.model,
            "device": self.memory.device,
            "device_bytes": self.memory.bytes,
            "device_bytes_from": self.memory.source,
            "link": self.link.to_json(),
            "weights": None if self.weights is None else self.weights.count,
            "weights_by_type": None if self.weights is None else dict(self.weights.by_type),
            "as_stored": self.as_stored and self.as_stored.to_json(),
            "precisions": {name: f.to_json() for name, f in self.precisions.items()},
            "as_compiled": self.as_compiled and self.as_compiled.to_json(),
            "refused": self.refused,
            "run": self.run and self.run.to_json(),
        }


def fit_of(nbytes: int, memory: Memory, link: LinkModel) -> Fit:
    """``nbytes`` against the device, and their one crossing of ``link`` where they fit."""
    fits = None if memory.bytes is None else nbytes <= memory.bytes
    return Fit(nbytes, fits, None if fits is False else link.busy_s(nbytes) * 1e3)


def weighed(model: str, weights: Weights, memory: Memory, link: LinkModel) -> FitReport:
    """An ONNX model's weights as stored, and at each precision."""
    at = {name: fit_of(at_bits(weights.count, bits), memory, link) for name, bits in PRECISIONS.items()}
    return FitReport(model, memory, link, weights, fit_of(weights.stored_bytes, memory, link), at, None)


def compiled(model: str, hef_bytes: int, refused: str | None, memory: Memory, link: LinkModel) -> FitReport:
    """A HEF: its weights are at their compiled precision already, so only its own size applies."""
    return FitReport(model, memory, link, None, None, {}, fit_of(hef_bytes, memory, link), refused)


def with_run(report: FitReport, run: RunRecord) -> FitReport:
    """``report`` with ``run``'s recorded mix beside the precisions (none where it recorded none)."""
    weights, hef = run.compiled.weights or {}, run.compiled.hef_residency or {}
    fit = None if run.weight_bytes is None else fit_of(run.weight_bytes, report.memory, report.link)
    mix = {str(k): v for k, v in (weights.get("weights_by_bits") or {}).items()}
    return replace(report, run=RunFit(run.id, fit, mix, hef.get("hef_bytes")))


@dataclass(frozen=True)
class WeightLoad:
    weight_bytes: int  # at the compiled precision
    hef_bytes: int | None  # what crosses the link: the whole file (None: not recorded)
    device_bytes: int | None  # what the device can allocate for it (None: no figure for the chip)
    resident: str  # yes, no (refused at compile), unknown (no figure)
    load_ms: float | None  # the one crossing, when the model is created: a cold start, not per inference

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def weight_load(model: LinkModel, run: RunRecord) -> WeightLoad | None:
    """The run's weights and HEF against its device, and the one crossing of the HEF on
    ``model``; None when the compile recorded no weights (a backend that does not)."""
    weights, fit = run.compiled.weights or {}, run.compiled.hef_residency or {}
    if run.weight_bytes is None:
        return None
    hef = fit.get("hef_bytes")
    resident = str(fit.get("resident") or weights.get("resident") or "unknown")
    device = fit.get("device_bytes", weights.get("device_memory_bytes"))
    load_ms = None if hef is None else model.busy_s(hef) * 1e3
    return WeightLoad(run.weight_bytes, hef, device, resident, load_ms)


def describe_load(load: WeightLoad, link: str) -> str:
    """``loop link predict``'s line on a run's weights."""
    head = f"weights {load.weight_bytes / 1e9:.3f} GB at the compiled precision"
    if load.hef_bytes is None:
        return f"{head}; no HEF size recorded: resident {load.resident}"
    memory = "an unknown allocation" if load.device_bytes is None else f"{load.device_bytes:,} B"
    head = f"{head}, HEF {load.hef_bytes:,} B against {memory}: resident {load.resident}"
    if load.load_ms is None:
        return head
    once = f"{load.load_ms:,.1f} ms when the model is created (not per inference)"
    return f"{head}; loading it crosses {link} once, {once}"


def describe(report: FitReport) -> list[str]:
    """``loop fit``'s text: what was weighed, the device, one row per way of holding the weights
    (a HEF's own size exact, weights a lower bound on any HEF of them), and the link loads cross."""
    rows = [(f"as stored ({_types(report.weights)})", report.as_stored)] if report.weights else []
    rows += [(name, f) for name, f in report.precisions.items()]
    run = report.run
    rows += [(f"run {run.id}", run.fit)] if run and run.fit else []
    width = max([len(label) for label, _ in rows] + [len("as compiled")])
    lines = [_head(report), _device(report.memory)]
    if report.as_compiled:
        lines.append(f"  {'as compiled':<{width}}  {_row(report.as_compiled, report.memory, '')}")
    lines += [f"  {label:<{width}}  {_row(f, report.memory, 'at least ')}" for label, f in rows if f is not None]
    lines += [f"  but {report.refused}"] if report.refused else []
    lines += [_run_line(run)] if run else []
    lines += [f"  the device's figure: {report.memory.source}"] if report.memory.source else []
    return [*lines, _link(report)]


def _types(weights: Weights | None) -> str:
    return ", ".join(weights.by_type) if weights and weights.by_type else "no weights"


def _head(report: FitReport) -> str:
    if report.weights is None:
        return (
            f"{report.model}: a HEF, its weights compiled in at their own precisions: bf16, int8 and int4 "
            "do not apply; the file is what crosses and what the device holds"
        )
    count = report.weights.count
    return f"{report.model}: {count:,} weights ({count / 1e9:.4g} billion), stored as {_types(report.weights)}"


def _device(memory: Memory) -> str:
    if memory.bytes is None:
        return f"on {memory.device}: no figure for what it can hold; fit not judged"
    return f"on {memory.device}: {memory.bytes:,} B ({memory.bytes / 2**30:g} GiB)"


def _row(fit: Fit, memory: Memory, bound: str) -> str:
    head = f"{fit.bytes:>16,} B {fit.bytes / 1e9:9.3f} GB"
    if fit.fits is None or memory.bytes is None:
        return f"{head}  fit not judged; loads once, in {bound}{_ms(fit.load_ms)}"
    share = f"{fit.bytes / memory.bytes * 100:.3g}% of the device"
    if not fit.fits:
        return f"{head}  {share}: does not fit (HailoRT would fail to create the model)"
    return f"{head}  {share}: fits; loads once, in {bound}{_ms(fit.load_ms)}"


def _ms(ms: float | None) -> str:
    if ms is None:
        return "?"
    return f"{ms / 1e3:,.1f} s" if ms >= 1e3 else f"{ms:.1f} ms"


def _run_line(run: RunFit) -> str:
    if run.fit is None:
        return f"  run {run.id} recorded no weights (its compile does not record them)"
    mix = ", ".join(f"{n:,} at {bits} bits" for bits, n in run.by_bits.items()) or "its mix not recorded"
    hef = f"; its HEF {run.hef_bytes:,} B" if run.hef_bytes is not None else ""
    return f"  run {run.id}'s weights as compiled: {mix}{hef}"


def _link(report: FitReport) -> str:
    link = report.link
    line = (
        f"a load is one crossing of {link.name} ({link.bandwidth_mb_s:.1f} MB/s + {link.per_transfer_ms:.3f} ms) "
        "when the model is created, never per inference: HailoRT sends the whole HEF and nothing streams"
    )
    return line if report.weights is None else f"{line}; a HEF holds at least its weights, so each is a lower bound"
