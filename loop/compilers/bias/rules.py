"""Which bias corrections to keep, and how a kept one is placed on its bias's grid.

A layer's correction is minus the mean, per channel, of its quantized output's error against
the float output. From a few calibration frames that mean can be mostly noise: applied
anyway, it makes the layer worse (on a text-orientation classifier with 16 frames, the
correction after its global pool cost 3 dB on its own). So a correction is weighed on frames
it was not estimated from, or shrunk by its own standard error.

Every rule reads ``error``: the per-frame, per-channel mean error of the layer's output,
shape (frames, channels). Adding ``d`` to a channel's bias moves that channel's mean squared
error by ``d**2 + 2*d*m``, ``m`` its mean error on the frames weighed, so the change over a
layer's output is a sum over its channels (every channel has as many values).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

Rule = Literal["holdout", "shrink", "holdout_shrink", "holdout_channel", "always"]
RULES: tuple[Rule, ...] = ("holdout", "shrink", "holdout_shrink", "holdout_channel", "always")
HELD_OUT_WORSE = "did not lower the held-out error"
TOO_FEW_FRAMES = "too few calibration frames to hold any out"


@dataclass(frozen=True)
class Decision:
    """The bias move to make per channel (None: keep the bias), or why not."""

    move: np.ndarray | None
    why: str = ""


def decide(error: np.ndarray, rule: Rule) -> Decision:
    """The move of one layer's bias from ``error`` (frames x channels) under ``rule``."""
    mean = error.mean(axis=0)
    if rule == "always":
        return Decision(-mean)
    if rule == "shrink":
        return Decision(-shrunk(error))
    return held_out(error, shrink=rule == "holdout_shrink", per_channel=rule == "holdout_channel")


def held_out(error: np.ndarray, shrink: bool = False, per_channel: bool = False) -> Decision:
    """Leave one frame out, in turn: the correction from the other frames is weighed on it.
    Kept, as estimated from every frame, only where together they lower the layer's error.
    No split of the frames to choose, so no frame order can bias it."""
    n = len(error)
    if n < 2:
        return Decision(None, TOO_FEW_FRAMES)
    total = error.sum(axis=0)
    change = np.zeros_like(total)
    for i in range(n):
        rest = np.delete(error, i, axis=0)
        move = -shrunk(rest) if shrink else -(total - error[i]) / (n - 1)
        change += move**2 + 2 * move * error[i]
    if per_channel:
        if (change >= 0).all():
            return Decision(None, HELD_OUT_WORSE)
        return Decision(np.where(change < 0, -total / n, 0.0))
    if change.sum() >= 0:
        return Decision(None, HELD_OUT_WORSE)
    return Decision(-shrunk(error) if shrink else -total / n)


def shrunk(error: np.ndarray) -> np.ndarray:
    """The mean error per channel, shrunk by its own standard error (``m * m**2 / (m**2 +
    se**2)``): a mean well above its noise is kept whole, one within it mostly dropped."""
    mean = error.mean(axis=0)
    if len(error) < 2:
        return np.zeros_like(mean)
    se2 = error.var(axis=0, ddof=1) / len(error)
    power = mean**2
    with np.errstate(invalid="ignore", divide="ignore"):
        factor = np.where(power + se2 > 0, power / (power + se2), 0.0)
    return np.asarray(mean * factor)


@dataclass(frozen=True)
class Placed:
    """A bias after its move: the integers, its grid if that had to move, and how far each
    channel actually moved (dequantized)."""

    ints: np.ndarray
    moved: np.ndarray
    clipped: int = 0  # channels whose wanted value lay off the grid, pinned at its end
    grid: tuple[np.ndarray, np.ndarray] | None = None  # a new (scale, zero point), shaped as the old


def place(ints: np.ndarray, scale: np.ndarray, zero: np.ndarray | None, move: np.ndarray, regrid: bool) -> Placed:
    """Move a bias held as ``ints`` on its grid by ``move`` (per channel). An int32 bias is
    clipped at its grid's ends (it never is in practice). With ``regrid`` (an Add's constant,
    on a uint8 grid of its own spanning just its values and 0), a value that would fall off
    the grid widens the grid to hold it rather than being pinned at the end."""
    scale = scale.astype(np.float64)
    zp = zero.astype(np.float64) if zero is not None else np.zeros_like(scale)
    limits = np.iinfo(ints.dtype)
    old = (ints.astype(np.float64) - zp) * scale
    wanted = old + move.reshape(ints.shape)
    new = np.round(wanted / scale + zp)
    grid = None
    if regrid and scale.size == 1 and ((new < limits.min) | (new > limits.max)).any():
        s, z = _grid(wanted, limits.min, limits.max)
        scale, zp = np.full_like(scale, s), np.full_like(zp, z)
        new = np.round(wanted / scale + zp)
        grid = (scale, zp)
    clipped = int(((new < limits.min) | (new > limits.max)).sum())
    new = np.clip(new, limits.min, limits.max)
    moved = (new - zp) * scale - old
    return Placed(new.astype(ints.dtype), moved.reshape(-1), clipped, grid)


def _grid(values: np.ndarray, lo_int: int, hi_int: int) -> tuple[float, float]:
    """A scale and zero point as ONNX Runtime's quantizer gives a constant: a range holding
    ``values`` and 0, spread over the integers [lo_int, hi_int]."""
    lo, hi = min(float(values.min()), 0.0), max(float(values.max()), 0.0)
    scale = (hi - lo) / (hi_int - lo_int) if hi > lo else 1.0
    zp = float(np.clip(np.round(lo_int - lo / scale), lo_int, hi_int))
    # the zero point is rounded, so the scale is widened to keep both ends on the grid
    ends = [hi / (hi_int - zp)] if hi > 0 and zp < hi_int else []
    ends += [lo / (lo_int - zp)] if lo < 0 and zp > lo_int else []
    return max(ends, default=scale), zp
