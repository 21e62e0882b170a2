"""The compiler interface and the plain values that cross it.

Contract for every compiler:

* ``optimize(model, calibration, options)`` quantizes a float ONNX model against
  calibration frames (float32, the model's own layout, shape ``(N, *input_shape[1:])``; a
  mapping of such arrays by input name for a model with several inputs)
  and returns a :class:`Quantized`. The model is its file (a :class:`~pathlib.Path`, its external
  data beside it, as the sweep gives it), or its bytes where it is small and self-contained (tests, a
  model sent to another host); a compiler never writes to a model it was given.
* ``compile(quantized)`` turns it into a deployable :class:`Artifact`, by value (bytes),
  so that it can be compiled on one host and run on another.
* ``fingerprint(quantized)`` returns one :class:`LayerPrint` per quantized layer in graph
  order; the hashes must be stable across hosts and runs.
* ``rescale(quantized, edits)`` (optional) patches a quantized model's scales, its integers
  untouched (``scale_grid``): no calibration, no bias correction, no re-quantization. It returns
  a new :class:`Quantized` and leaves its argument as it was (one quantized model serves many
  edits). A backend without it refuses in one line.
* ``noise(quantized, frames)`` (optional) measures where quantization loses, per quantized tensor.
* ``describe()`` names the compiler and the versions of the tools behind it.
* ``available()`` says whether the tools are installed, and why not; it must not raise.
* ``options_model`` (optional) declares the backend's own ``compile:`` keys, and
  ``refused_compile_keys`` the common ones it would ignore; neither may need the backend's tools.

Implementations may raise anything: :func:`run_compile` turns every failure into a
:class:`CompileResult` carrying the stage, the error line and the captured stderr, so a
bad variant never ends a sweep.
"""

from __future__ import annotations

import socket
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from loop.core.capture import STDERR_TAIL, captured_stderr
from loop.core.options import BackendOptions
from loop.core.vocab import Artifact, CompileOptions, CompileResult, Frames, LayerPrint, Quantized, Rescale

if TYPE_CHECKING:
    from loop.judge.noise import TensorNoise


class RescaleRefused(NotImplementedError):
    """A backend that cannot patch a quantized model's scales; the message is one line."""


class Compiler(ABC):
    """See the module docstring for the contract."""

    name: ClassVar[str]
    # this backend's own compile keys, typed: the sweep file's schema adds them to ``compile:``
    # (only with this backend), and they reach ``optimize`` in ``options.backend_options``
    options_model: ClassVar[type[BackendOptions] | None] = None
    # common compile keys this backend would silently ignore, with why: a sweep file that sets one is refused
    refused_compile_keys: ClassVar[Mapping[str, str]] = {}
    # whether the layer prints are read from the compiled artifact itself (so an edit they show
    # is an edit that runs); False where they are read from the compiler's parameters, which a
    # compile may not carry into what runs (the Dataflow Compiler's translated params)
    prints_from_artifact: ClassVar[bool] = False
    # Whether a patch of a quantized model (scale_grid) is compiled in a child kept across patches
    # (loop.flow.patch_child), which holds the base and what the compiler derives from it: a patch
    # costing milliseconds is not worth a fork. False: each is forked as any compile is.
    patches_warm: ClassVar[bool] = False

    @classmethod
    @abstractmethod
    def available(cls) -> tuple[bool, str]: ...

    @classmethod
    def target_chip(cls, options: CompileOptions) -> str | None:
        """The chip a compile with ``options`` targets, as ``loop inspect --device`` names it
        (None: a backend that compiles for no chip, such as the host's ONNX Runtime)."""
        return None

    @abstractmethod
    def describe(self) -> dict[str, str]: ...

    @abstractmethod
    def optimize(self, model: bytes | Path, calibration: Frames, options: CompileOptions) -> Quantized: ...

    @abstractmethod
    def compile(self, quantized: Quantized, options: CompileOptions) -> Artifact: ...

    @abstractmethod
    def fingerprint(self, quantized: Quantized) -> list[LayerPrint]: ...

    def rescale(self, quantized: Quantized, edits: Sequence[Rescale]) -> Quantized:
        """``quantized`` with each edit's scales multiplied, every integer as it was."""
        raise RescaleRefused(f"the {self.name} backend cannot edit a quantized model's scales (scale_grid)")

    def noise(self, quantized: Quantized, frames: Frames) -> list[TensorNoise] | None:
        """Per quantized tensor of ``quantized`` (as ``optimize`` returned it) on ``frames``: its
        accumulated and local SNR against the float model, named as the sweep names layers, in
        graph order (:mod:`loop.judge.noise`). None: this backend has no such analysis."""
        return None

    @classmethod
    def analyses_noise(cls) -> bool:
        """Whether this backend has ``noise`` of its own: asked before anything is optimized."""
        return cls.noise is not Compiler.noise


def _error_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


SHARE_SLACK = 0.01  # of the weights: a share given this close under the one asked is the one asked


def share_said(found: Mapping[str, Any] | None) -> str | None:
    """One line where ``weights_4bit_share`` gave another share than asked (``info.weights_4bit_share``,
    as both backends record it: ``asked``, ``share``, ``layers``, and ``passed_over`` where known)."""
    if not found or found.get("asked") is None:
        return None
    asked, given = float(found["asked"]), float(found.get("share") or 0.0)
    if abs(asked - given) <= SHARE_SLACK:
        return None
    said = f"weights_4bit_share: asked {asked:g}, given {given:.3f} ({len(found.get('layers') or [])} layers at 4 bits)"
    over = found.get("passed_over")
    if over:
        said += f"; {over['layer']} ({over['share']:.0%} of the weights) would pass the share, so it stays at 8 bits"
    return said


def run_compile(
    compiler: Compiler,
    model: bytes | Path,
    calibration: Frames,
    options: CompileOptions,
    quantized: Quantized | None = None,
) -> CompileResult:
    """Optimize, rescale (``options.rescales``), fingerprint and compile, timing each stage;
    failures become values. ``quantized``: the model already optimized with these options (a
    cached one), so ``optimize`` is not run; one optimized here comes back in ``result.quantized``.
    Its facts say the compiler's versions and this host."""
    result = CompileResult(ok=False)
    stage: str | None = "optimize"
    how: dict[str, Any] = {"quantized_from": "optimize"}
    with captured_stderr() as err:
        try:
            if quantized is None:
                t0 = time.perf_counter()
                quantized = compiler.optimize(model, calibration, options.quantizing())
                result.stages["optimize_s"] = time.perf_counter() - t0
                result.quantized = _copy(quantized)
            else:  # its optimize's figures are the base's, kept apart: this compile ran none
                how = {"quantized_from": "cache", "quantized_stages": dict(quantized.stages)}
                quantized = replace(_copy(quantized), stages={})
            result.stages.update(quantized.stages)
            result.info = replace(quantized.info, **how)
            if options.rescales:
                stage = "rescale"
                t0 = time.perf_counter()
                quantized = compiler.rescale(quantized, options.rescales)
                result.stages["rescale_s"] = time.perf_counter() - t0
                result.info = replace(quantized.info, **how)
            stage = "fingerprint"
            t0 = time.perf_counter()
            result.layers = compiler.fingerprint(quantized)
            result.stages["fingerprint_s"] = time.perf_counter() - t0
            stage = "compile"
            t0 = time.perf_counter()
            result.artifact = compiler.compile(quantized, options)
            result.stages["compile_s"] = time.perf_counter() - t0
            # a backend that timed its own calls apart from its overhead (hailo) says so in its stages
            result.stages.update(quantized.stages)
            result.info = replace(quantized.info, **how)  # compile may add what it found (where a layout came from)
            result.ok, stage = True, None
        except Exception as exc:
            if stage == "compile":  # what the compile found before it failed (the HEF's size it was refused for)
                result.stages.update(quantized.stages)  # type: ignore[union-attr]
                result.info = replace(quantized.info, **how)  # type: ignore[union-attr]
            result.error = _error_line(exc)
            result.traceback = traceback.format_exc(limit=8)
    result.stage = stage
    result.stderr_tail = err.getvalue()[-STDERR_TAIL:]
    result.info = replace(result.info, versions=compiler.describe(), host=socket.gethostname())
    return result


def _copy(quantized: Quantized) -> Quantized:
    """The quantized model as optimize left it: fingerprint and compile may add to its info and stages."""
    return replace(quantized, stages=dict(quantized.stages))
