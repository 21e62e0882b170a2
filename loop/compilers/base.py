"""The compiler interface and the plain values that cross it.

Contract for every compiler:

* ``optimize(model, calibration, options)`` quantizes a float ONNX model (bytes) against
  calibration frames (float32, the model's own layout, shape ``(N, *input_shape[1:])``; a
  mapping of such arrays by input name for a model with several inputs)
  and returns a :class:`Quantized`.
* ``compile(quantized)`` turns it into a deployable :class:`Artifact`, by value (bytes),
  so that it can be compiled on one host and run on another.
* ``fingerprint(quantized)`` returns one :class:`LayerPrint` per quantized layer in graph
  order; the hashes must be stable across hosts and runs.
* ``describe()`` names the compiler and the versions of the tools behind it.
* ``available()`` says whether the tools are installed, and why not; it must not raise.

Implementations may raise anything: :func:`run_compile` turns every failure into a
:class:`CompileResult` carrying the stage, the error line and the captured stderr, so a
bad variant never ends a sweep.
"""
from __future__ import annotations

import hashlib
import io
import os
import sys
import tempfile
import time
import traceback
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar, Iterator, Union

import numpy as np


# Controlled frames: one input's as an array (N, *shape[1:]); several inputs', by input name.
Frames = Union[np.ndarray, dict[str, np.ndarray]]


@dataclass(frozen=True)
class TensorLayout:
    """One input or output as the device sees it. ``x = (q - zero_point) * scale``.

    ``shape`` is the device's own (with a leading batch of 1); ``frame_bytes`` is one frame."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    scale: float | None = None
    zero_point: int | None = None
    channels_last: bool = False  # NHWC frames (a HEF's), while the ONNX model is NCHW

    @cached_property
    def frame_bytes(self) -> int:
        count = int(np.prod(self.shape[1:] if len(self.shape) > 1 else self.shape))
        return count * np.dtype(self.dtype).itemsize

    @property
    def quantized(self) -> bool:
        return self.scale is not None


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

    @property
    def sha(self) -> str:
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
    scales are recorded.
    """

    name: str
    op: str
    kernel_sha: str | None
    bias_sha: str | None
    weight_scale: tuple[float, ...]
    weight_zero_point: tuple[int, ...]
    in_tensor: str | None
    in_scale: float | None
    in_zero_point: int | None
    out_tensor: str | None
    out_scale: float | None
    out_zero_point: int | None
    bias: tuple[float, ...] | None = None
    bias_step: tuple[float, ...] | None = None


@dataclass(frozen=True)
class RangeOverride:
    """A forced activation range on the tensor carrying ``layer``'s input or output."""

    layer: str
    side: str  # "out" or "in"
    tensor: str  # the tensor actually quantized (resolved through removed activations)
    lo: float
    hi: float


@dataclass(frozen=True)
class CompileOptions:
    """Everything that changes what a compile produces (and so its cache key)."""

    bias_correction: bool = True
    io: str = "uint8"
    calibration_method: str = "minmax"
    calibration_bins: int = 2048  # histogram bins (entropy, percentile, distribution)
    calibration_quantized_bins: int = 128  # entropy: bins of the quantized distribution (8 bits: 128)
    calibration_percentile: float = 99.99  # percentile: the share of values the range keeps
    per_channel: bool = False
    overrides: tuple[RangeOverride, ...] = ()
    threads: int = 0
    timeout_s: float | None = None
    backend_options: tuple[tuple[str, Any], ...] = ()

    def backend_option(self, key: str, default: Any = None) -> Any:
        return dict(self.backend_options).get(key, default)


@dataclass
class Quantized:
    """A quantized model as the compiler holds it, plus what it discovered on the way."""

    backend: str
    data: bytes
    info: dict[str, Any] = field(default_factory=dict)
    stages: dict[str, float] = field(default_factory=dict)


@dataclass
class CompileResult:
    """What one compile produced, or where and why it failed. Never raised."""

    ok: bool
    stage: str | None = None
    error: str | None = None
    stderr_tail: str = ""
    stages: dict[str, float] = field(default_factory=dict)
    artifact: Artifact | None = None
    layers: list[LayerPrint] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    compiled_on: str = "local"
    cache_hit: bool = False


class Compiler(ABC):
    """See the module docstring for the contract."""

    name: ClassVar[str]

    @classmethod
    @abstractmethod
    def available(cls) -> tuple[bool, str]: ...

    @abstractmethod
    def describe(self) -> dict[str, str]: ...

    @abstractmethod
    def optimize(self, model: bytes, calibration: Frames, options: CompileOptions) -> Quantized: ...

    @abstractmethod
    def compile(self, quantized: Quantized, options: CompileOptions) -> Artifact: ...

    @abstractmethod
    def fingerprint(self, quantized: Quantized) -> list[LayerPrint]: ...


STDERR_TAIL = 4000


@contextmanager
def captured_stderr() -> Iterator[io.StringIO]:
    """Capture both Python's and the C runtime's stderr (native tools write to fd 2)."""
    buf = io.StringIO()
    sys.stderr.flush()
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        old, sys.stderr = sys.stderr, io.TextIOWrapper(os.fdopen(os.dup(2), "wb"), write_through=True)
        try:
            yield buf
        finally:
            sys.stderr.flush()
            sys.stderr.close()
            sys.stderr = old
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            buf.write(tmp.read().decode("utf-8", "replace"))


def _error_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


def run_compile(compiler: Compiler, model: bytes, calibration: Frames,
                options: CompileOptions) -> CompileResult:
    """Optimize, fingerprint and compile, timing each stage; failures become values."""
    result = CompileResult(ok=False)
    stage: str | None = "optimize"
    with captured_stderr() as err:
        try:
            t0 = time.perf_counter()
            quantized = compiler.optimize(model, calibration, options)
            result.stages["optimize_s"] = time.perf_counter() - t0
            result.stages.update(quantized.stages)
            result.info.update(quantized.info)
            stage = "fingerprint"
            result.layers = compiler.fingerprint(quantized)
            stage = "compile"
            t0 = time.perf_counter()
            result.artifact = compiler.compile(quantized, options)
            result.stages["compile_s"] = time.perf_counter() - t0
            result.info.update(quantized.info)  # compile may add what it found (where a layout came from)
            result.ok, stage = True, None
        except Exception as exc:  # noqa: BLE001 - a failed variant is a value, not a crash
            result.error = _error_line(exc)
            result.info["traceback"] = traceback.format_exc(limit=8)
    result.stage = stage
    result.stderr_tail = err.getvalue()[-STDERR_TAIL:]
    return result
