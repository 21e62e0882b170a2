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
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from loop.core.facts import CompileFacts, Failure, Judgement, Where, integer, num, read, words
from loop.core.kinds import Flag, Kind, Stage, Status, Verdict
from loop.core.vocab import LayerPrint


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
        return cls(**read(cls, data, by_type=_READ), data=data)

    @property
    def frames(self) -> int | None:
        """How many frames were timed (the protocol's; older records lack it)."""
        return integer(self.data.get("frames"))

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
    chunks: tuple[float, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DepthRate:
        rate = Rate.from_json(data["rate_fps"])
        if rate is None:
            raise ValueError(f"depth {data['depth']} has no rate")
        return cls(int(data["depth"]), rate, float(data["spread_pct"]))

    def to_json(self) -> dict[str, Any]:
        return {"depth": self.depth, "rate_fps": self.rate.to_json(), "spread_pct": self.spread_pct}


# A measurement's JSON key for a field, where it is not the field's own name.
MEASURE_KEYS = {"rate": "rate_fps"}
# Rows written before issue 42 keyed the vendor's benchmark by the one tool there was (HailoRT's CLI);
# such a row is read, and written back, under its own key. The tool's name is now the device's to
# record, inside the benchmark (``tool``).
LEGACY_KEYS = {"vendor_benchmark": "hailortcli"}


@dataclass(frozen=True)
class Measurement:
    """What the measure protocol recorded on a device: the three quantities (time to first
    output, the steady rate, bytes per frame) and beside them what spoils them (flags, health,
    the host's load, drift). One type from the device child to the ledger and back, through
    :meth:`to_dict`/:meth:`from_dict` on itself: a run's ``measure``. Empty for a run that was
    never measured.

    ``more`` keeps what the protocol does not write (a ledger of a newer loop's keys) as
    recorded; ``given`` is the keys a read-back record held, so it is written back as read."""

    ttfo_ms: float | None = None
    ttfo_parts: Mapping[str, float | None] = field(default_factory=dict)
    first_infer_ms: float | None = None
    rate: Rate | None = None
    spread_pct: float | None = None
    depth: int | None = None
    by_depth: tuple[DepthRate, ...] = ()
    basis: str | None = None
    duration_s: float | None = None
    bytes_in: int | None = None
    bytes_out: int | None = None
    mb_s: Mapping[str, float] = field(default_factory=dict)
    latency_ms: Mapping[str, float] = field(default_factory=dict)
    hw_latency_ms: float | None = None
    health_before: Mapping[str, Any] = field(default_factory=dict)
    health_after: Mapping[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    flags: tuple[Flag, ...] = ()
    host: Mapping[str, Any] = field(default_factory=dict)
    drift: Mapping[str, Any] | None = None
    notes: tuple[str, ...] = ()  # what the device did other than asked, and why
    split_ms: Mapping[str, float] | None = None  # copy in, compute, copy out apart (Session.split_ms)
    compute_ms: float | None = None  # the split's compute: what a link model adds its transfer to
    vendor_benchmark: Mapping[str, Any] | None = None  # the device's own benchmark beside it, where it has one
    more: Mapping[str, Any] = field(default_factory=dict, repr=False)
    given: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    @property
    def median_fps(self) -> float | None:
        return self.rate.median if self.rate else None

    @property
    def others_core_pct(self) -> float | None:
        """The share of a core other processes used while it ran."""
        return num(self.host.get("others_core_pct"))

    @classmethod
    def none(cls) -> Measurement:
        """A run that was never measured: it records nothing (``{}``)."""
        return cls(given=())

    def with_vendor(self, found: Mapping[str, Any] | None) -> Measurement:
        """With the vendor's benchmark beside it (None: the device has none, recorded as such)."""
        if self.given is None:
            return replace(self, vendor_benchmark=found)
        held = [k for k in self.given if k != LEGACY_KEYS["vendor_benchmark"]]  # now under its own key
        return replace(self, vendor_benchmark=found, given=tuple(dict.fromkeys((*held, "vendor_benchmark"))))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Measurement:
        data = data or {}
        keys = _keys(data)
        found = read(cls, {f: data[k] for f, k in keys.items() if k in data}, by_type=_READ)
        more = {k: v for k, v in data.items() if k not in keys.values()}
        return cls(**found, more=more, given=tuple(data))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON, as the protocol wrote it (a read-back record: the keys it held)."""
        out = {k: plain(getattr(self, f)) for f, k in _keys(self.given or ()).items()}
        out.update(self.more)
        return out if self.given is None else {k: out.get(k) for k in self.given}


_MEASURE_FIELDS = tuple(f.name for f in fields(Measurement) if f.name not in ("more", "given"))


def _keys(held: Iterable[str]) -> dict[str, str]:
    """Each field's JSON key: its own name, or MEASURE_KEYS', or the legacy key a row was written with."""
    have = set(held)
    keys = {f: MEASURE_KEYS.get(f, f) for f in _MEASURE_FIELDS}
    for name, old in LEGACY_KEYS.items():
        if old in have and keys[name] not in have:
            keys[name] = old
    return keys


def plain(value: Any) -> Any:
    """``value`` as JSON holds it (lists, not tuples; a kind's word): what a measurement keeps,
    so it equals itself read back."""
    if isinstance(value, (Rate, DepthRate)):
        return value.to_json()
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, Kind):
        return value.value
    return {k: plain(v) for k, v in value.items()} if isinstance(value, Mapping) else value


# the types of a run's figures, beside those every record reads alike (loop.core.facts.read)
_READ: dict[str, Any] = {
    "float": float,
    "int": int,
    "tuple[float, float] | None": lambda ci: (float(ci[0]), float(ci[1])) if ci else None,
    "tuple[DeviceAgreement, ...]": lambda v: tuple(_agreement(name, d) for name, d in v.items()),
    "Rate | None": Rate.from_json,
    "tuple[DepthRate, ...]": lambda v: tuple(DepthRate.from_json(d) for d in v),
    "tuple[Flag, ...]": lambda v: tuple(Flag(f) for f in words(v)),
}


@dataclass(frozen=True)
class DeviceAgreement:
    """How far a further device's outputs are from the first device's, on the same inputs."""

    device: str
    values_differ: int
    values_total: int
    snr_db_vs_first: float | None = None  # a null recorded reads as None, never as a corrupt row
    max_abs_diff: float | None = None


def _agreement(device: str, data: Mapping[str, Any]) -> DeviceAgreement:
    return DeviceAgreement(**read(DeviceAgreement, {**data, "device": device}, by_type=_READ))


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
        return cls(**read(cls, data, by_type=_READ), data=data)

    def to_json(self) -> dict[str, Any]:
        return dict(self.data)

    def interval(self, key: str) -> tuple[float, float] | None:
        """Score ``key``'s 95% interval over the scoring frames, where it has one (``KEY_ci95``)."""
        found = self.data.get(f"{key}_ci95")
        if not isinstance(found, (list, tuple)) or len(found) != 2:
            return None
        low, high = num(found[0]), num(found[1])
        return None if low is None or high is None else (low, high)


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
    "weight_bytes",
)
# what ``loop runs --json`` shows of a layer print: the hashes and the scales a reader compares,
# and the integers' own hashes, which a scale-only edit (scale_grid) must leave as the base's
LAYER_KEYS = ("name", "kernel_sha", "bias_sha", "kernel_int_sha", "bias_int_sha", "in_scale", "out_scale")


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
    measure: Measurement = field(default_factory=Measurement.none)
    scores: Scores = field(default_factory=Scores)
    verdict: Verdict | None = None
    flags: tuple[Flag, ...] = ()
    changes: tuple[Change, ...] = ()
    compiled_on: str | None = None
    cache_hit: bool = False
    perturb: tuple[Mapping[str, Any], ...] = ()  # the ops as the sweep file gave them
    # the ledger's alone: what reproduces the run, and what was found on the way (loop.core.facts)
    calib_sha: str | None = None
    inputs_sha: str | None = None  # the scoring frames', beside the ONNX and calibration hashes
    options: Mapping[str, Any] = field(default_factory=dict)  # the compile options, as JSON
    host: str | None = None  # where it was measured
    stderr_tail: str = ""  # a failed compile's last words
    artifact_sha: str | None = None  # the artifact's whole hash (its file is named by a prefix)
    notes: tuple[str, ...] = ()  # what authoring changed in the model on the way, and why
    compiled: CompileFacts = field(default_factory=CompileFacts)  # with the backend's tools (``versions``)
    where: Where = field(default_factory=Where)
    judged: Judgement = field(default_factory=Judgement)
    failure: Failure = field(default_factory=Failure)

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the compiler warned about, as it said it."""
        return self.compiled.warnings

    @property
    def no_reference(self) -> str | None:
        """Why a ``no-reference`` run had none, where recorded."""
        return self.judged.no_reference

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
        runner, ident = self.where.runner, self.where.device_identity
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
    def weight_bytes(self) -> int | None:
        """What the run's weights weigh at their compiled precision (4-bit ones packed two to a
        byte), as its compile recorded them (``info.weights.bytes``); None where it did not."""
        return (self.compiled.weights or {}).get("bytes")

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
    if isinstance(value, Measurement):
        return value.to_dict()
    if isinstance(value, (Scores, Rate, Change)):
        return value.to_json()
    if isinstance(value, LayerPrint):
        return {k: getattr(value, k) for k in LAYER_KEYS}
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    if isinstance(value, Mapping):
        return dict(value)
    return value
