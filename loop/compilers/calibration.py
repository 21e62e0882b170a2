"""Calibration as ONNX Runtime's ``quantize_static`` runs it, with the knobs it does not pass on.

``quantize_static`` hands a calibrator only some of its options (docs/onnxruntime.md): the
bin counts never reach it, so Entropy with its default 128 bins over 128 quantized bins
equals MinMax byte for byte. These context managers set what it leaves out, for the
duration of one call, in this process only (compiles run one at a time in their own
process); with another ORT version that lacks the hook, nothing is changed.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from onnxruntime.quantization import CalibrationMethod, calibrate

from loop.core.sessions import session
from loop.core.vocab import CompileOptions

# The module, not the function of the same name that the package exports over it.
ort_quantize: Any = importlib.import_module("onnxruntime.quantization.quantize")
METHODS = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile", "distribution": "Distribution"}


def method(name: str) -> Any:
    return getattr(CalibrationMethod, METHODS[name])


@contextmanager
def method_options(options: CompileOptions) -> Iterator[None]:
    """Pass the bin counts and the percentile to the calibrator, and calibrate activations
    asymmetrically (they are uint8): Percentile's default symmetric range would waste half
    the grid on values a post-ReLU tensor never takes."""
    original = getattr(ort_quantize, "create_calibrator", None)
    if original is None or options.calibration_method == "minmax":
        yield
        return
    extra = {
        "num_bins": options.calibration_bins,
        "num_quantized_bins": options.calibration_quantized_bins,
        "percentile": options.calibration_percentile,
        "symmetric": False,
    }

    def create_calibrator(*args: Any, **kwargs: Any) -> Any:
        kwargs["extra_options"] = {**(kwargs.get("extra_options") or {}), **extra}
        return original(*args, **kwargs)

    ort_quantize.create_calibrator = create_calibrator
    try:
        yield
    finally:
        ort_quantize.create_calibrator = original


class Reader:
    """Calibration feeds for ONNX Runtime's CalibrationDataReader protocol."""

    def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
        self._feeds: Iterator[dict[str, np.ndarray]] = iter(feeds)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._feeds, None)


@contextmanager
def threads(count: int) -> Iterator[None]:
    """Give quantize_static's calibration session ``count`` intra-op threads.

    quantize_static offers no knob for it and builds that session with default options,
    which take every core: two compiles side by side (``--jobs 2`` on two cores) then halve
    each other. The method is replaced for the duration of one call, in this process only
    (compiles run one at a time in their own process); without the method (another ORT
    version), nothing is changed."""
    original = getattr(calibrate.CalibraterBase, "create_inference_session", None)
    if not count or original is None:
        yield
        return

    def create_inference_session(self: Any) -> None:
        # as ORT's own, less the threads: unoptimized, its providers, its log level
        self.infer_session = session(
            self.augmented_model_path, count, "none", providers=self.execution_providers, quiet=False
        )

    calibrate.CalibraterBase.create_inference_session = create_inference_session
    try:
        yield
    finally:
        calibrate.CalibraterBase.create_inference_session = original
