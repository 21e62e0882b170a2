"""The shared vocabulary: the plain values every role passes to every other.

Artifacts and their tensor layouts, layer fingerprints, compile options and results, the
frames a device is fed. Anything here may be imported by any part of loop; it imports no
other part of loop.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from loop.core.facts import CompileFacts

# Controlled frames: one input's as an array (N, *shape[1:]); several inputs', by input name.
Frames = np.ndarray | dict[str, np.ndarray]


@dataclass(frozen=True)
class TensorLayout:
    """One input or output as the device sees it. ``x = (q - zero_point) * scale``.

    ``shape`` is the device's own, for one frame (a batch of 1, wherever it sits: a CTC head's
    ``[T, 1, C]`` has it second); ``frame_bytes`` is one frame, the whole tensor."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    scale: float | None = None
    zero_point: int | None = None
    channels_last: bool = False  # NHWC frames (a HEF's), while the ONNX model is NCHW

    @cached_property
    def frame_bytes(self) -> int:
        return int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize

    @property
    def quantized(self) -> bool:
        return self.scale is not None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TensorLayout:
        """The one decoder of a layout as :meth:`to_json` wrote it (a cache entry, an artifact's metadata)."""
        return cls(**{**data, "shape": tuple(data["shape"])})

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Artifact:
    """A deployable compiled model, carried by value and keyed by content."""

    backend: str
    data: bytes
    suffix: str
    inputs: tuple[TensorLayout, ...]
    outputs: tuple[TensorLayout, ...]
    extras: dict[str, bytes] = field(default_factory=dict)
    path: str | None = None  # where it was stored; ``data`` may then be left empty (spilled)
    stored_sha: str | None = None
    extras_sha: dict[str, str] = field(default_factory=dict)  # of spilled extras, checked when read back

    @cached_property
    def sha(self) -> str:
        # once per artifact: its bytes never change, and at a gigabyte of weights a hash is 0.5 s
        return self.stored_sha or hashlib.sha256(self.data).hexdigest()

    @property
    def bytes_in(self) -> int:
        return sum(t.frame_bytes for t in self.inputs)

    @property
    def bytes_out(self) -> int:
        return sum(t.frame_bytes for t in self.outputs)


@dataclass(frozen=True)
class LayerPrint:
    """Backend-neutral fingerprint of one quantized layer.

    ``kernel_sha`` covers the integer kernel together with its weight scale(s) and zero
    point(s); ``bias_sha`` covers the bias integers and their scale. ``bias`` is the
    dequantized bias and ``bias_step`` the step of its grid, so the audit can tell
    requantization rounding from a real change. A layer without weights (an activation x
    activation MatMul, as in attention) has no kernel: ``kernel_sha`` is None and only its
    scales are recorded. The defaults are for a print read back from an older record, which
    kept fewer fields; a compiler gives every one.
    """

    name: str
    op: str = ""
    kernel_sha: str | None = None
    bias_sha: str | None = None
    weight_scale: tuple[float, ...] = ()
    weight_zero_point: tuple[int, ...] = ()
    in_tensor: str | None = None
    in_scale: float | None = None
    in_zero_point: int | None = None
    out_tensor: str | None = None
    out_scale: float | None = None
    out_zero_point: int | None = None
    bias: tuple[float, ...] | None = None
    bias_step: tuple[float, ...] | None = None  # None beside a bias: the compiler keeps it in float
    # What the kernel stands for, so the audit can tell rounding from re-derivation: the hash
    # of the float kernel the compiler quantized (after its own fusing), and how many kernel
    # values are not that float value rounded (to nearest, or clipped at the grid's end) on
    # the layer's own weight grid. None: the compiler does not say (an older record).
    float_sha: str | None = None
    off_grid: int | None = None
    # Bit widths read from the compiled layer (None: 8). A 16-bit activation's range spans
    # 65,535 steps, not 255.
    in_bits: int | None = None
    out_bits: int | None = None
    weight_bits: int | None = None
    # A compiler that names layers its own way (the DFC's ``net/conv1``) keeps its name here;
    # ``name`` is then the ONNX node the sweep names, and ``onnx_names`` every ONNX node the
    # layer stands for (a fused Conv+BatchNorm+Relu lists each). A compiled layer that lists
    # no ONNX node is unmapped: ``name`` is its compiled name and ``onnx_names`` is empty.
    compiled_name: str | None = None
    onnx_names: tuple[str, ...] = ()
    # The integers alone (kernel with its zero points; bias), without their scales: a scale-only
    # edit (``scale_grid``) must leave them equal to the base's. None: an older record.
    kernel_int_sha: str | None = None
    bias_int_sha: str | None = None

    @property
    def unmapped(self) -> bool:
        return self.compiled_name is not None and not self.onnx_names

    @property
    def answers_to(self) -> tuple[str, ...]:
        """Every name a footprint rule or an ``expect:`` glob may match this layer by."""
        return tuple(dict.fromkeys((self.name, *self.onnx_names)))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LayerPrint:
        """The one decoder of a print as :meth:`to_json` wrote it (the ledger, the cache, a
        compile child): keys it does not know are a newer writer's, and left out."""
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {k: _values(v) for k, v in data.items() if k in known}
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        """The print as loop stores it (the ledger, the cache, a compile child's answer): a long
        run of floats (per-channel scales, biases, their steps) as its float64 bytes in base64,
        exact, and a fraction of the cost of writing and reading thousands of decimal numbers
        for every candidate of a search (issue 43). ``loop runs --json`` shows plain numbers."""
        return {f.name: _packed(getattr(self, f.name)) for f in fields(self)}


PACKED = "f64le"  # a stored print's key for a tuple of floats kept as little-endian float64 bytes
PACK_FROM = 16  # tuples shorter than this stay a JSON list


def _packed(value: Any) -> Any:
    if isinstance(value, tuple) and len(value) >= PACK_FROM and all(type(v) is float for v in value):
        return {PACKED: base64.b64encode(np.asarray(value, "<f8").tobytes()).decode("ascii")}
    return value


def _values(value: Any) -> Any:
    """A stored field as the print holds it: a list as a tuple, packed floats unpacked."""
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, Mapping) and set(value) == {PACKED}:
        return tuple(np.frombuffer(base64.b64decode(value[PACKED], validate=True), "<f8").tolist())
    return value


@dataclass(frozen=True)
class RangeOverride:
    """A forced activation range on the tensor carrying ``layer``'s input or output."""

    layer: str
    side: str  # "out" or "in"
    tensor: str  # the tensor actually quantized (resolved through removed activations)
    lo: float
    hi: float


@dataclass(frozen=True)
class Rescale:
    """A scale-only edit of a quantized model (``scale_grid``): ``of="weights"`` multiplies
    ``layer``'s weight scales (one factor for all channels, or one per output channel) and its
    int32 bias's scale with them; ``of="output"`` multiplies the scale of the grid ``layer``'s
    output is quantized on, wherever it appears (``tensors``: every float tensor on that grid, past
    removed activations and through ops that share it), and its readers' bias scales. Every
    integer stays as quantization left it."""

    layer: str
    of: Literal["weights", "output"]
    factors: tuple[float, ...]
    tensors: tuple[str, ...] = ()


@dataclass(frozen=True)
class Precision:
    """A layer's output activations at ``bits``: 16 (a wider grid), or 32 (the layer kept in
    float, where the backend allows)."""

    layer: str
    bits: int
    tensor: str  # the tensor actually quantized for the layer's output (after removed activations)


@dataclass(frozen=True)
class WeightPrecision:
    """A weighted layer's kernel quantized at ``bits`` (4, 8 or 16) rather than 8: the precision
    op's ``weights:``, the lever that decides whether a large model fits its device."""

    layer: str
    bits: int
    tensor: str  # the kernel's initializer (ONNX Runtime quantizes it by that name)


class DeviceSettings(BaseModel):
    """The measure settings a device takes (no recompile when these change), each declared here
    once with its bounds, default and the README's description: the sweep file's ``measure:``
    (:class:`loop.author.schema.Measure`) holds them with the protocol's own, and a device opens a
    session with them (:class:`loop.devices.base.RuntimeOptions`)."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)

    threads: int = Field(default=0, ge=0, le=1024, description="device threads (0: the runtime's choice)")
    power_mode: str | None = Field(
        default=None, max_length=64, description="the device's power mode, on devices that have one"
    )
    dma_map: bool = Field(default=False, description="map buffers for DMA once, on devices that copy by DMA")
    # 0: the runtime's own default (HailoRT's HAILO_DEFAULT_BATCH_SIZE, as hailortcli)
    batch_size: int = Field(
        default=0, ge=0, le=4096, description="frames per transfer (0: the device's own default batch)"
    )
    # HailoRT refuses to measure its own latency for some models
    hw_latency: bool = Field(
        default=False, description="read the device's own latency figure, on devices that report one"
    )
    # a HailoRT VDevice group: processes with the same one share a Hailo-10H
    group_id: str | None = Field(
        default=None,
        pattern=r"^[^;]{1,64}$",
        description="on devices shared by group: processes with the same group share one accelerator",
    )


class CompileSettings(BaseModel):
    """``compile:``: the compile options a user sets (a sweep file, the API), each declared here
    once with its bounds, default and the README's description; everything that changes what a
    compile produces, and so its cache key. A backend's own keys are its compiler's
    ``options_model`` (:mod:`loop.core.options`)."""

    # As the sweep file's schema validates: no coercion, no unknown keys, no NaN or infinity.
    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)
    # Defaults given as ``default=``: mypy (no pydantic plugin) takes a positional one for none.

    bias_correction: bool = Field(default=True, description="re-derive biases layer by layer from calibration")
    io: Literal["uint8", "float32"] = Field(default="uint8", description="the artifact's input/output type")
    calibration_method: Literal["minmax", "entropy", "percentile", "distribution"] = Field(
        default="minmax", description="how activation ranges are taken from calibration"
    )
    # histogram bins of entropy, percentile and distribution
    calibration_bins: int = Field(default=2048, ge=16, le=1 << 16, description="histogram bins")
    calibration_quantized_bins: int = Field(default=128, ge=16, le=1 << 16, description="entropy: quantized bins")
    calibration_percentile: float = Field(default=99.99, ge=50, le=100, description="percentile: share of values kept")
    # measured: at or above a plain per-tensor quantize_static on every real export
    per_channel: bool = Field(
        default=True,
        description="one weight scale per output channel (per-tensor: false; benchmarks/RETIRED.md says why)",
    )
    # ONNX Runtime raises a channel's weight scale where its int32 bias would overflow at the
    # input's scale (QDQDisableWeightAdjustForInt32Bias off): its default, so kept on.
    int32_bias_weight_adjust: bool = Field(
        default=True,
        description="raise a weight scale where its int32 bias would overflow (ONNX Runtime's default; rounding, "
        "not a confound, when an input scale moves it)",
    )
    # bias correction kept only where, end to end, it lowers the output error on every held-out
    # fold (benchmarks/RETIRED.md); decided once on the reference, which its variants follow
    bias_correction_guard: bool = Field(
        default=True,
        description="keep bias correction only where it lowers the output error on held-out frames, decided on the "
        "reference and followed by its variants (false: always keep it)",
    )
    # loop's counterpart of the DFC's auto_4bit_weights_ratio: that share of the weights at 4 bits
    weights_4bit_share: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="put that share of the weights (by count) at 4 bits, the layers chosen by the backend "
        "(onnxruntime: the rule in docs/precision.md; hailo: the DFC's auto_4bit_weights_ratio)",
    )
    threads: int = Field(default=0, ge=0, le=1024, description="compile threads (0: the tool's choice)")
    timeout_s: float | None = Field(default=None, gt=0, le=7 * 86_400, description="kill a compile running longer")


class CompileOptions(CompileSettings):
    """Everything that changes what a compile produces (and so its cache key): the settings, what
    authoring derives from a variant's perturbations, and the backend's own keys (its compiler's
    ``options_model``, sorted by key). Frozen, so hashable and compared by value."""

    overrides: tuple[RangeOverride, ...] = ()
    precisions: tuple[Precision, ...] = ()
    weight_bits: tuple[WeightPrecision, ...] = ()
    # scale-only edits applied after quantization: never an input of ``optimize``
    rescales: tuple[Rescale, ...] = ()
    backend_options: tuple[tuple[str, Any], ...] = ()
    # the bias-correction guard's decision, made once on the variant's reference and followed
    # here (None: decided by this compile); a variant never differs from its reference by it
    bias_guard_given: Literal["kept", "dropped"] | None = None

    def backend_option(self, key: str, default: Any = None) -> Any:
        return dict(self.backend_options).get(key, default)

    def quantizing(self) -> CompileOptions:
        """What ``optimize`` reads: these options less the edits made after it."""
        return self.model_copy(update={"rescales": ()}) if self.rescales else self


@dataclass
class Quantized:
    """A quantized model as the compiler holds it, plus what it discovered on the way."""

    backend: str
    data: bytes
    info: CompileFacts = field(default_factory=CompileFacts)
    stages: dict[str, float] = field(default_factory=dict)
    # The float model it was quantized from, as the compiler was given it: its bytes, or its file's
    # path (str) where it came as a file. The fingerprint reads each kernel's float values from it.
    source: bytes | str = b""
    # Layer prints made against ``source`` (its compile's): a patch's fingerprint takes each
    # layer's float hash, and the off-grid count of integers and a grid it has seen, from these
    # rather than reading the float kernels again (4.5 s of a first patch at 1.1 GB of weights).
    prints: tuple[LayerPrint, ...] = ()
    # The model parsed, where a stage in this process left it so (a patch's rescale) and ``data``
    # empty: the next stages read it, and its bytes are made only where it must travel
    # (:meth:`serialized`). Serializing 268 MB of QDQ model took 0.8-1.9 s of a patch's 2.5.
    parsed: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.info, CompileFacts):  # a compiler written when facts were a free dict
            self.info = CompileFacts.of(self.info)

    def serialized(self) -> bytes:
        """The quantized model's bytes, made from its parsed form where it has no others."""
        return self.data if self.data or self.parsed is None else self.parsed.SerializeToString()


@dataclass(frozen=True)
class QuantizedInCache:
    """A quantized model its worker left in the compile cache (the folder ``folder``) under
    ``keys``: whoever starts from it reads it there (a patch child), so it never crosses a
    process boundary whole."""

    folder: str
    keys: tuple[str, ...]


@dataclass
class CompileResult:
    """What one compile produced, or where and why it failed. Never raised."""

    ok: bool
    stage: str | None = None
    error: str | None = None
    stderr_tail: str = ""
    traceback: str | None = None  # where a failure's exception was raised
    stages: dict[str, float] = field(default_factory=dict)
    artifact: Artifact | None = None
    layers: list[LayerPrint] = field(default_factory=list)
    info: CompileFacts = field(default_factory=CompileFacts)
    compiled_on: str = "local"
    cache_hit: bool = False
    # the quantized model this compile optimized, before any rescale: carried back to the parent
    # for its quantized-model cache, never kept in a compile's own entry
    quantized: Quantized | QuantizedInCache | None = None
