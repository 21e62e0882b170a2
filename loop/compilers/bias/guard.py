"""Whether bias correction, all layers together, lowers the model's own output error on
frames it was not estimated from, by more than the estimate's own noise.

Each layer's correction is weighed on that layer alone (``rules``); that cannot see what
it does downstream. On a speech detector (Silero VAD) corrections that lower every early
layer's own error raise the error of the LSTM's state outputs by more than they lower the
rest (-1.1 dB at its outputs). So the whole pass is tried end to end on ``FOLDS`` interleaved
folds: corrected on the other folds' frames and scored on the fold's own.

A near tie is not a gain. With two folds and "any gain keeps it", a text recogniser's pass was
kept on a 2% held-out gain from 16 calibration frames and cost 1.1 dB on frames it never saw
(issue 42). The pass is kept only where the folds agree it helps (``keeps``); the rule was
chosen on real models, scored on frames the decision never saw (benchmarks/RETIRED.md).

The decision must be the same on every CPU. Run with its Q/DQ pairs fused, a QDQ model computes
in ONNX Runtime's integer kernels, and those differ by CPU: without VNNI, u8 x s8 products are
summed in pairs by ``vpmaddubsw``, which saturates at int16 (ONNX Runtime's quantization docs,
"U8S8 ... might suffer from saturation"). On such a CPU one test's held-out error read 1.08
where a VNNI CPU reads 0.017, and the guard kept what it drops elsewhere (issue 50). So both
models run unfused (``basic``: constants folded, Q/DQ pairs left as float ops), where every CPU
computes the same values up to float rounding, and a fold must gain by ``MARGIN`` of its error,
far above what that rounding moves (docs/onnxruntime.md has the figures).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx

from loop.core.sessions import session

Fit = Callable[[onnx.ModelProto, list[dict[str, np.ndarray]]], object]
FOLDS = 4
FOLDS_NEED = 4  # frames: two folds of two at the least
MARGIN = 1e-3  # a share of a fold's error: a gain smaller than this is a tie, whatever the CPU


@dataclass(frozen=True)
class Estimate:
    """Per fold, the held-out summed squared error of every model output, uncorrected and corrected."""

    plain: tuple[float, ...]
    corrected: tuple[float, ...]

    @property
    def gain(self) -> float:
        """Squared error the pass removed over every fold's held-out frames (negative: added)."""
        return float(sum(self.plain) - sum(self.corrected))

    @property
    def relative(self) -> tuple[float, ...]:
        """Each fold's share of its error the pass removed."""
        return tuple((p - c) / p if p > 0 else 0.0 for p, c in zip(self.plain, self.corrected, strict=True))

    def keeps(self) -> bool:
        """Every fold gains more than ``MARGIN``, and the mean gain stands one standard error
        clear of ``MARGIN``."""
        shares = self.relative
        if min(shares) <= MARGIN:
            return False
        mean = sum(shares) / len(shares)
        spread = math.sqrt(sum((s - mean) ** 2 for s in shares) / (len(shares) - 1))
        return mean - spread / math.sqrt(len(shares)) > MARGIN

    def to_dict(self) -> dict[str, object]:
        return {"folds": [round(s, 6) for s in self.relative]}


def estimate(
    float_model: onnx.ModelProto,
    quantized: onnx.ModelProto,
    frames: list[dict[str, np.ndarray]],
    threads: int,
    fit: Fit,
) -> Estimate | None:
    """The pass (``fit`` on a copy of ``quantized``) done without each fold and scored on it;
    None: too few frames for two folds of two."""
    if len(frames) < FOLDS_NEED:
        return None
    folds = min(FOLDS, len(frames) // 2)
    reference = _outputs(float_model, frames, threads)
    plain = _outputs(quantized, frames, threads)
    plain_sse, corrected_sse = [], []
    for fold in range(folds):
        held = list(range(fold, len(frames), folds))
        trial = onnx.ModelProto()
        trial.CopyFrom(quantized)
        fit(trial, [f for i, f in enumerate(frames) if i % folds != fold])
        corrected = _outputs(trial, [frames[i] for i in held], threads)
        plain_sse.append(sum(_sse(reference[i], plain[i]) for i in held))
        corrected_sse.append(sum(_sse(reference[i], c) for i, c in zip(held, corrected, strict=True)))
    return Estimate(tuple(plain_sse), tuple(corrected_sse))


def _outputs(model: onnx.ModelProto, frames: list[dict[str, np.ndarray]], threads: int) -> list[list[np.ndarray]]:
    run = session(model, threads, optimize="basic")  # unfused: the same values on every CPU
    return [run.run(None, feed) for feed in frames]


def _sse(reference: list[np.ndarray], actual: list[np.ndarray]) -> float:
    pairs = zip(reference, actual, strict=True)
    return float(sum(np.sum((r.astype(np.float64) - a.astype(np.float64)) ** 2) for r, a in pairs))
