"""Whether bias correction, all layers together, lowers the model's own output error on
frames it was not estimated from.

Each layer's correction is weighed on that layer alone (``bias_rules``); that cannot see what
it does downstream. On a speech detector (Silero VAD) corrections that lower every early
layer's own error raise the error of the LSTM's state outputs by more than they lower the
rest (-1.1 dB at its outputs). So the whole pass is tried on two folds, end to end: corrected
on the even frames and scored on the odd, and the reverse.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from loop.core.sessions import session

Fit = Callable[[onnx.ModelProto, list[dict[str, np.ndarray]]], object]
FOLDS_NEED = 4  # frames: two folds of two


def output_gain(
    float_model: onnx.ModelProto,
    quantized: onnx.ModelProto,
    frames: list[dict[str, np.ndarray]],
    threads: int,
    fit: Fit,
) -> float | None:
    """How much correcting (``fit`` on a copy of ``quantized``) lowers the summed squared error
    of every model output, summed over both folds' held-out frames; None: too few frames."""
    if len(frames) < FOLDS_NEED:
        return None
    reference = _outputs(float_model, frames, threads)
    plain = _outputs(quantized, frames, threads)
    gain = 0.0
    for fold in (0, 1):
        trial = onnx.ModelProto()
        trial.CopyFrom(quantized)
        fit(trial, frames[fold::2])
        held = list(range(1 - fold, len(frames), 2))
        corrected = _outputs(trial, [frames[i] for i in held], threads)
        gain += sum(_sse(reference[i], plain[i]) - _sse(reference[i], c) for i, c in zip(held, corrected, strict=True))
    return gain


def _outputs(model: onnx.ModelProto, frames: list[dict[str, np.ndarray]], threads: int) -> list[list[np.ndarray]]:
    run = session(model, threads, optimize="all")
    return [run.run(None, feed) for feed in frames]


def _sse(reference: list[np.ndarray], actual: list[np.ndarray]) -> float:
    pairs = zip(reference, actual, strict=True)
    return float(sum(np.sum((r.astype(np.float64) - a.astype(np.float64)) ** 2) for r, a in pairs))
