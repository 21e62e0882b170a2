"""One run as the ledger holds it: a typed record from the sweep that builds it to every reader.

The sweep builds one :class:`RunRecord` per finished run and the store writes and reads it
(``loop.store.ledger.to_row``/``from_row``); readers (the report, compare, ladders, the API) use
attributes, and JSON is written only at the edges, by :meth:`RunRecord.to_json`, in the shape
``loop runs --json`` pins. The measure figures and scores are open sets (a backend's extras, a
user scorer's keys): their parts type what the readers use and keep the JSON as recorded in
``data``, which is what they write back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from loop.core.kinds import Flag, Kind, Stage, Status, Verdict
from loop.core.vocab import LayerPrint


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
        if self.data:
            return dict(self.data)
        # a rate made in code rather than read from JSON: its JSON is its own figures
        ci = None if self.ci95 is None else list(self.ci95)
        made = {"median": self.median, "min": self.min, "max": self.max, "ci95": ci, "repeats": self.repeats}
        return {k: v for k, v in made.items() if v is not None}


@dataclass(frozen=True)
class DepthRate:
    """The rate at one queue depth of a depth ladder; ``chunks``, the rate of each repeat (or
    chunk) it summarizes, only where it was just measured (the ledger keeps the summary)."""

    depth: int
    rate: Rate
    spread_pct: float
    chunks: tuple[float, ...] = field(default=(), repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DepthRate:
        rate = Rate.from_json(data["rate_fps"])
        if rate is None:
            raise ValueError(f"depth {data['depth']} has no rate")
        return cls(int(data["depth"]), rate, float(data["spread_pct"]))

    def to_json(self) -> dict[str, Any]:
        return {"depth": self.depth, "rate_fps": self.rate.to_json(), "spread_pct": self.spread_pct}


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
    flags: tuple[Flag, ...] = ()
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
            by_depth=tuple(DepthRate.from_json(d) for d in data.get("by_depth") or ()),
            bytes_in=_int(data.get("bytes_in")),
            bytes_out=_int(data.get("bytes_out")),
            flags=tuple(Flag(f) for f in data.get("flags") or ()),
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
class Change:
    """One change the audit observed against the base; ``allowed``: inside the footprint."""

    layer: str
    what: str
    detail: str
    allowed: bool = True

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Change:
        return cls(data["layer"], data["what"], data["detail"], bool(data.get("allowed", True)))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# The keys of ``loop runs --json``, in their pinned order. The other fields are the ledger's
# alone (what reproduces a run: its options, tool versions, host, the compile's stderr...).
PINNED = (
    "id",
    "sweep",
    "variant",
    "status",
    "error",
    "stage",
    "generation",
    "onnx_sha",
    "kernel_sha",
    "bias_sha",
    "artifact",
    "backend",
    "device",
    "stages",
    "layers",
    "measure",
    "scores",
    "verdict",
    "flags",
    "changes",
    "compiled_on",
    "cache_hit",
    "perturb",
    "warnings",
    "no_reference",
)
# what ``loop runs --json`` shows of a layer print: the hashes and the scales a reader compares
LAYER_KEYS = ("name", "kernel_sha", "bias_sha", "in_scale", "out_scale")


@dataclass(frozen=True)
class RunRecord:
    """One run: what the sweep recorded, and what a reader uses. ``PINNED`` names the fields
    (and two properties) ``loop runs --json`` shows, in its order; the rest are the ledger's.

    A finished run is written whole by the sweep (``Ledger.finish``); ``id``, ``sweep``,
    ``variant``, ``generation`` and ``backend`` are the ledger's from when the run began."""

    id: int
    sweep: str
    variant: str
    status: Status
    error: str | None = None
    stage: Stage | None = None
    generation: int | None = None
    onnx_sha: str | None = None
    kernel_sha: str | None = None
    bias_sha: str | None = None
    artifact: str | None = None
    backend: str | None = None
    device: str | None = None
    stages: Mapping[str, float] = field(default_factory=dict)
    layers: tuple[LayerPrint, ...] = ()
    measure: Figures = field(default_factory=Figures)
    scores: Scores = field(default_factory=Scores)
    verdict: Verdict | None = None
    flags: tuple[Flag, ...] = ()
    changes: tuple[Change, ...] = ()
    compiled_on: str | None = None
    cache_hit: bool = False
    perturb: tuple[Mapping[str, Any], ...] = ()  # the ops as the sweep file gave them
    # the ledger's alone: what reproduces the run
    calib_sha: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)  # the compile options, as JSON
    versions: Mapping[str, Any] = field(default_factory=dict)  # the backend's tools
    host: str | None = None
    stderr_tail: str = ""  # a failed compile's last words
    artifact_sha: str | None = None  # the artifact's whole hash (its file is named by a prefix)
    info: Mapping[str, Any] = field(default_factory=dict)  # what the compile and the run found on the way

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the compiler warned about, as it said it."""
        return tuple(self.info.get("warnings", ()))

    @property
    def no_reference(self) -> str | None:
        """Why a ``no-reference`` run had none, where recorded."""
        return self.info.get("no_reference")

    @property
    def why_apart(self) -> str | None:
        """Why the run is kept out of comparisons, in one line; ``None`` for a comparable run."""
        if self.status == Status.RUNNING:
            return None  # not apart: not finished yet
        if self.status != Status.OK:
            return self.status + (f" at {self.stage}" if self.stage else "") + (f": {self.error}" if self.error else "")
        if self.verdict == Verdict.NO_REFERENCE:
            return self.no_reference or "the base it is audited against did not finish"
        if self.verdict == Verdict.CONFOUNDED:
            outside = [f"{c.layer} {c.what}" for c in self.changes if not c.allowed]
            return "outside the footprint: " + ", ".join(outside) if outside else "confounded"
        return None

    @property
    def measured_on(self) -> str:
        """The device that measured the run, as far as the record says: its name, its host, the
        Dask worker that held it and the device's own id. Rates are compared within one; a
        comparison across two is flagged as such."""
        runner, ident = self.info.get("runner") or {}, self.info.get("device_identity") or {}
        parts = [self.device or "an unnamed device", f"on {runner.get('host') or self.host or 'an unnamed host'}"]
        if ident.get("device_id"):  # the device's own id: the same stick whichever worker held it
            parts.append(str(ident["device_id"]))
        elif runner.get("worker") is not None:
            parts.append(f"worker {runner['worker']}")
        return " ".join(parts)

    def in_sweep(self, name: str) -> bool:
        """Whether the run belongs to sweep ``name``: that sweep, or one of its generations
        (``NAME-gN``, and ``NAME-gN-o<hash>`` for a study's group of compile options)."""
        if self.sweep == name:
            return True
        rest = self.sweep[len(name) + 2 :] if self.sweep.startswith(f"{name}-g") else ""
        number = rest.split("-o", 1)[0]
        return number.isdigit() and (rest == number or len(rest.split("-o", 1)[1]) == 8)

    @property
    def perturbed_layers(self) -> list[str]:
        return [str(op["layer"]) for op in self.perturb if op.get("layer")]

    def layer(self, name: str | None) -> LayerPrint | None:
        return next((lp for lp in self.layers if lp.name == name), None)

    def to_json(self, keys: Iterable[str] | None = None) -> dict[str, Any]:
        """The pinned JSON shape (``loop runs --json``), or only ``keys`` of it."""
        wanted = None if keys is None else set(keys)
        return {k: _json(getattr(self, k)) for k in PINNED if wanted is None or k in wanted}


def _json(value: Any) -> Any:
    if isinstance(value, Kind):
        return value.value  # plain JSON, for writers stricter than json (YAML's)
    if isinstance(value, (Figures, Scores, Rate, Change)):
        return value.to_json()
    if isinstance(value, LayerPrint):
        return {k: getattr(value, k) for k in LAYER_KEYS}
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    if isinstance(value, Mapping):
        return dict(value)
    return value
