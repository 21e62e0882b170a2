"""A run's facts beside its figures, typed by what they describe: what its compile found, where it was
measured, what judging it found beside its verdict, and how it failed. The ledger keeps them side by
side in a run's ``info`` (the docs' ``info.KEY``); a group reads its keys by its fields' annotations,
so a value of another shape fails where it is read (the row reads as corrupt), never in a reader."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar


def num(value: Any) -> float | None:
    """A recorded number; the ledger writes inf and nan, which JSON lacks, as strings."""
    return None if value is None else float(value)


def integer(value: Any) -> int | None:
    return None if value is None else int(value)


def mapping(value: Any) -> Mapping[str, Any]:
    """A recorded mapping; another shape makes the row unreadable (the ledger reads it as corrupt)."""
    if not isinstance(value, Mapping):
        raise TypeError(f"a mapping was recorded as {type(value).__name__}")
    return value


def words(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"a list of words was recorded as {value!r:.60}")
    return tuple(value)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"text was recorded as {value!r:.60}")
    return value


def _sized(value: Any) -> Mapping[str, Any]:
    """A recorded mapping whose byte counts, and counts by bits, are integers: readers add them up."""
    found = mapping(value)
    counts = [found.get(k) for k in ("bytes", "hef_bytes", "device_bytes", "device_memory_bytes")]
    counts += mapping(found.get("weights_by_bits") or {}).values()
    if any(c is not None and type(c) is not int for c in counts):
        raise TypeError(f"a count of bytes was recorded as {counts!r:.60}")
    return found


_BY_TYPE: dict[str, Any] = {"str | None": _text, "int | None": integer, "float | None": num, "tuple[str, ...]": words}
_BY_NAME = {"weights": _sized, "hef_residency": _sized}


def read(
    cls: Any, data: Mapping[str, Any], names: Iterable[str] | None = None, by_type: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``data``'s values for ``cls``'s fields (``names`` of them), each read as its annotation says
    (``by_type``: a record's own types, beside these); a field kept out of its repr (what it keeps
    as read) is never read."""
    kinds = {f.name: str(f.type) for f in fields(cls) if f.repr}
    own = {**_BY_TYPE, **(by_type or {})}
    reader = lambda k: _BY_NAME.get(k) or (mapping if kinds[k].startswith("Mapping") else own.get(kinds[k]))  # noqa: E731
    return {k: (reader(k) or (lambda v: v))(data[k]) for k in names or kinds if data.get(k) is not None}


F = TypeVar("F", bound="Facts")


@dataclass(frozen=True)
class Facts:
    """A group of facts: read from, and written as, the keys the ledger's ``info`` holds them under."""

    @classmethod
    def of(cls: type[F], data: Mapping[str, Any]) -> F:
        return cls(**read(cls, data))

    def to_json(self) -> dict[str, Any]:
        """Each fact under its name, but those at their default (never found, so never written)."""
        blank = type(self)()
        return {f.name: v for f in fields(self) if f.repr and (v := getattr(self, f.name)) != getattr(blank, f.name)}


@dataclass(frozen=True)
class CompileFacts(Facts):
    """What a compile found on the way, as its backend and its process recorded it."""

    versions: Mapping[str, Any] = field(default_factory=dict)  # the backend's tools (the record's ``versions``)
    host: str | None = None  # where it compiled
    peak_bytes: int | None = None  # the compile process's own peak (loop.flow.budget)
    quantized_from: str | None = None  # "optimize", or "cache": a stored quantized model, not optimized here
    quantized_stages: Mapping[str, float] = field(default_factory=dict)  # that stored model's own optimize
    warnings: tuple[str, ...] = ()  # what the compiler warned about, as it said it
    weights: Mapping[str, Any] | None = None  # what the weights weigh at the compiled precision
    rescaled: Any = None  # what each scale_grid edit moved
    zero_bias_added: tuple[str, ...] = ()  # onnxruntime: layers given a zero bias, for bias correction
    weights_4bit_share: Mapping[str, Any] | None = None  # onnxruntime: the layers a 4-bit share chose
    overrides: Mapping[str, Any] | None = None  # onnxruntime: each forced range, asked and used
    removed_clamps: Mapping[str, Any] | None = None  # onnxruntime: None where it did not say
    wide_grids: Mapping[str, Any] = field(default_factory=dict)  # onnxruntime: grids wider than 8 bits
    bias_correction: Mapping[str, Any] | None = None  # onnxruntime: what the pass and its guard did
    model_script: str | None = None  # hailo: the script given to the DFC
    param_keys: tuple[str, ...] = ()  # hailo: the params read
    param_source: str | None = None
    hw_arch: str | None = None
    net_name: str | None = None
    workdir: str | None = None  # hailo: where its ONNX, HAR and HEF lie
    optimization_level: Mapping[str, Any] | None = None  # hailo: asked, and what the DFC used
    activation_bits: Mapping[str, int] = field(default_factory=dict)  # hailo: those not at 8 bits
    layer_bits: Mapping[str, Any] = field(default_factory=dict)
    onnx_layers: Mapping[str, Any] = field(default_factory=dict)  # hailo: what each DFC layer stands for
    onnx_outputs: Mapping[str, Any] = field(default_factory=dict)  # hailo: which node makes each output
    cut: Mapping[str, Any] | None = None
    equalization: Mapping[str, Any] | None = None
    kernel_causes: Mapping[str, str] = field(default_factory=dict)  # hailo: a pass that moved a kernel
    weights_4bit: Mapping[str, Any] | None = None  # hailo: the layers the DFC holds at 4 bits
    scale_from: Mapping[str, str] = field(default_factory=dict)  # hailo: each scale's source
    hef_residency: Mapping[str, Any] | None = None  # hailo: the HEF against what the device can hold
    layout_source: str | None = None
    output_names: Mapping[str, str] = field(default_factory=dict)  # compiled output -> the model's
    # keys this loop does not type (an older or newer loop's): kept as read and written back
    more: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> CompileFacts:
        known = {f.name for f in fields(cls)}
        return cls(**read(cls, data), more={k: v for k, v in data.items() if k not in known})

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), **self.more}

    @property
    def bias_guard(self) -> str | None:
        """What the output guard did with the compile's bias correction, where it ran."""
        return (self.bias_correction or {}).get("guard")


@dataclass(frozen=True)
class Where(Facts):
    """Where a run was measured, beside its device and host."""

    runner: Mapping[str, Any] = field(default_factory=dict)  # the host and Dask worker that held the device
    device_identity: Mapping[str, Any] = field(default_factory=dict)  # the device's own id and path


@dataclass(frozen=True)
class Judgement(Facts):
    """What judging a run found beside its verdict and flags."""

    no_reference: str | None = None  # why a no-reference run had none
    below_reference: Mapping[str, Any] | None = None  # the figures behind the flag
    quantization_ruined: Mapping[str, Any] | None = None  # the figures, the falls and the fix (loop.flow.widen)


@dataclass(frozen=True)
class Failure(Facts):
    """How a failed run failed, beside its error and stage."""

    traceback: str | None = None  # where its exception was raised (a compile's, or loop's own)
    detail: str | None = None  # a device run's: its traceback, or a dead device process's last words
