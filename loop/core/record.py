"""One run as the ledger holds it: a typed record every reader uses by attribute.

The ledger builds a :class:`RunRecord` when it reads a row; readers (the report, compare,
ladders, the API) use attributes, and JSON is written only at the edges, by
:meth:`RunRecord.to_json`, in the shape ``loop runs --json`` pins. The measure figures and
scores are open sets (a backend's extras, a user scorer's keys): their parts type what the
readers use and keep the JSON as recorded in ``data``, which is what they write back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any


def _num(value: Any) -> float | None:
    """A recorded number; the ledger writes inf and nan, which JSON lacks, as strings."""
    if value is None:
        return None
    return float(value)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True)
class Rate:
    """Frames/s over the repeats: the median, its range and its 95% interval."""

    median: float
    min: float | None = None
    max: float | None = None
    ci95: tuple[float, float] | None = None
    repeats: int | None = None
    data: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Rate | None:
        if not data or data.get("median") is None:
            return None
        ci = data.get("ci95")
        return cls(
            float(data["median"]),
            _num(data.get("min")),
            _num(data.get("max")),
            (float(ci[0]), float(ci[1])) if ci else None,
            _int(data.get("repeats")),
            data,
        )

    def to_json(self) -> dict[str, Any]:
        return dict(self.data)


@dataclass(frozen=True)
class DepthRate:
    """The rate at one queue depth of a depth ladder."""

    depth: int
    rate: Rate
    spread_pct: float


def _depth_rate(data: Mapping[str, Any]) -> DepthRate:
    rate = Rate.from_json(data["rate_fps"])
    if rate is None:
        raise ValueError(f"depth {data['depth']} has no rate")
    return DepthRate(int(data["depth"]), rate, float(data["spread_pct"]))


@dataclass(frozen=True)
class Figures:
    """What the measure protocol recorded: the rate, time to first output, bytes per frame,
    flags and the host's load. Empty for a run that was never measured."""

    rate: Rate | None = None
    ttfo_ms: float | None = None
    spread_pct: float | None = None
    depth: int | None = None
    by_depth: tuple[DepthRate, ...] = ()
    bytes_in: int | None = None
    bytes_out: int | None = None
    flags: tuple[str, ...] = ()
    others_core_pct: float | None = None  # share of a core other processes used meanwhile
    data: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Figures:
        data = data or {}
        return cls(
            rate=Rate.from_json(data.get("rate_fps")),
            ttfo_ms=_num(data.get("ttfo_ms")),
            spread_pct=_num(data.get("spread_pct")),
            depth=_int(data.get("depth")),
            by_depth=tuple(_depth_rate(d) for d in data.get("by_depth") or ()),
            bytes_in=_int(data.get("bytes_in")),
            bytes_out=_int(data.get("bytes_out")),
            flags=tuple(data.get("flags") or ()),
            others_core_pct=_num((data.get("host") or {}).get("others_core_pct")),
            data=data,
        )

    @property
    def median_fps(self) -> float | None:
        return self.rate.median if self.rate else None

    def to_json(self) -> dict[str, Any]:
        return dict(self.data)


@dataclass(frozen=True)
class DeviceAgreement:
    """How far a further device's outputs are from the first device's, on the same inputs."""

    device: str
    snr_db_vs_first: float | None
    max_abs_diff: float | None
    values_differ: int
    values_total: int


@dataclass(frozen=True)
class Scores:
    """The built-in scores the report prints; a user scorer's own keys stay in ``data``."""

    output_mean: float | None = None
    snr_db: float | None = None
    bytes_differ: int | None = None
    bytes_total: int | None = None
    devices: tuple[DeviceAgreement, ...] = ()
    data: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Scores:
        data = data or {}
        devices = tuple(
            DeviceAgreement(
                name,
                _num(d.get("snr_db_vs_first")),
                _num(d.get("max_abs_diff")),
                int(d["values_differ"]),
                int(d["values_total"]),
            )
            for name, d in (data.get("devices") or {}).items()
        )
        return cls(
            _num(data.get("output_mean")),
            _num(data.get("snr_db")),
            _int(data.get("bytes_differ")),
            _int(data.get("bytes_total")),
            devices,
            data,
        )

    def to_json(self) -> dict[str, Any]:
        return dict(self.data)


@dataclass(frozen=True)
class RecordedLayer:
    """One quantized layer's fingerprint as a run shows it."""

    name: str
    kernel_sha: str | None = None
    bias_sha: str | None = None
    in_scale: float | None = None
    out_scale: float | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RecordedLayer:
        get = data.get
        return cls(data["name"], get("kernel_sha"), get("bias_sha"), get("in_scale"), get("out_scale"))


@dataclass(frozen=True)
class RecordedChange:
    """One change the audit observed against the base; ``allowed``: inside the footprint."""

    layer: str
    what: str
    detail: str
    allowed: bool = True

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RecordedChange:
        return cls(data["layer"], data["what"], data["detail"], bool(data.get("allowed", True)))


@dataclass(frozen=True)
class RunRecord:
    """One run. The fields' order is the pinned key order of ``loop runs --json``."""

    id: int
    sweep: str
    variant: str
    status: str
    error: str | None = None
    stage: str | None = None
    generation: int | None = None
    onnx_sha: str | None = None
    kernel_sha: str | None = None
    bias_sha: str | None = None
    artifact: str | None = None
    backend: str | None = None
    device: str | None = None
    stages: Mapping[str, float] = field(default_factory=dict)
    layers: tuple[RecordedLayer, ...] = ()
    measure: Figures = field(default_factory=Figures)
    scores: Scores = field(default_factory=Scores)
    verdict: str | None = None
    flags: tuple[str, ...] = ()
    changes: tuple[RecordedChange, ...] = ()
    compiled_on: str | None = None
    cache_hit: bool = False
    perturb: tuple[Mapping[str, Any], ...] = ()  # the ops as the sweep file gave them
    warnings: tuple[str, ...] = ()
    no_reference: str | None = None  # why a ``no-reference`` run had none, where recorded

    @property
    def why_apart(self) -> str | None:
        """Why the run is kept out of comparisons, in one line; ``None`` for a comparable run."""
        if self.status == "running":
            return None  # not apart: not finished yet
        if self.status != "ok":
            return self.status + (f" at {self.stage}" if self.stage else "") + (f": {self.error}" if self.error else "")
        if self.verdict == "no-reference":
            return self.no_reference or "the base it is audited against did not finish"
        if self.verdict == "confounded":
            outside = [f"{c.layer} {c.what}" for c in self.changes if not c.allowed]
            return "outside the footprint: " + ", ".join(outside) if outside else "confounded"
        return None

    @property
    def perturbed_layers(self) -> list[str]:
        return [str(op["layer"]) for op in self.perturb if op.get("layer")]

    def layer(self, name: str | None) -> RecordedLayer | None:
        return next((lp for lp in self.layers if lp.name == name), None)

    def to_json(self, keys: Iterable[str] | None = None) -> dict[str, Any]:
        """The pinned JSON shape (``loop runs --json``), or only ``keys`` of it."""
        wanted = None if keys is None else set(keys)
        return {f.name: _json(getattr(self, f.name)) for f in fields(self) if wanted is None or f.name in wanted}


def _json(value: Any) -> Any:
    if isinstance(value, (Figures, Scores, Rate)):
        return value.to_json()
    if isinstance(value, (RecordedLayer, RecordedChange)):
        return asdict(value)
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    if isinstance(value, Mapping):
        return dict(value)
    return value
