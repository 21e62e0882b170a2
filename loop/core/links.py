"""The link as a model: three numbers, and how they are fitted from a ladder.

Here, below both rooms, because devices simulate a link (``link-sim``) and ``measure`` fits
and predicts with one; :mod:`loop.measure.link` keeps the fitted links under ``runs/links``
and reads ladders from the ledger, :mod:`loop.devices.links` holds the shipped ones.

A link is three numbers, each with a plain meaning:

* ``bandwidth_mb_s``: bytes move at this rate while the link is busy;
* ``per_transfer_ms``: a fixed cost each inference adds to the link's busy time;
* ``round_trip_ms``: latency a lone frame pays on top (queueing frames hides it).

So one inference keeps the link busy for ``L = bytes / bandwidth + per_transfer`` and a lone
frame takes ``L + round_trip + C`` where ``C`` is the compute time. At queue depth ``d`` the
pipelined rate is the slower stage's, ``1 / max(L, C)``, capped by Little's law at
``d / (L + round_trip + C)``: that cap is where a depth ladder's knee comes from. Compute is a
serial stage (one frame at a time, as an accelerator runs a network).

``fit`` takes a frame ladder (compute negligible, so ``1 / fps = L`` is a straight line in
bytes) and, where rungs were also measured at depth 1, the round trip: seconds per frame at
depth 1 less those at the best depth.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from loop.core.errors import LoopError


@dataclass(frozen=True)
class Rung:
    """One frame size of a ladder: bytes per inference and seconds per frame at ``depth``;
    ``lone_s`` is seconds per frame at depth 1 where the rung was measured there."""

    name: str
    bytes: int
    per_frame_s: float
    depth: int
    lone_s: float | None = None
    compute_s: float = 0.0  # a lone frame's compute, where the device timed it (else taken as nil)


@dataclass(frozen=True)
class LinkModel:
    name: str
    bandwidth_mb_s: float
    per_transfer_ms: float
    round_trip_ms: float
    source: str
    residuals_pct: dict[str, float]

    def busy_s(self, nbytes: float) -> float:
        """Seconds the link is busy per inference of ``nbytes`` (in plus out)."""
        return nbytes / (self.bandwidth_mb_s * 1e6) + self.per_transfer_ms / 1e3

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def fit(name: str, rungs: Sequence[Rung], source: str) -> LinkModel:
    """Least squares of seconds per frame on bytes; the round trip from rungs with depth 1."""
    if len({r.bytes for r in rungs}) < 2:
        sizes = len({r.bytes for r in rungs})
        raise LoopError(f"link '{name}': a fit needs rungs of two frame sizes or more, got {len(rungs)} of {sizes}")
    xs, ys = [float(r.bytes) for r in rungs], [r.per_frame_s for r in rungs]
    slope, fixed = _line(xs, ys)
    if slope <= 0:
        raise LoopError(f"link '{name}': seconds per frame do not grow with bytes; the rungs are compute-bound")
    if fixed < 0:  # noise around no fixed cost, not a gain: the line through the origin that fits best
        slope, fixed = _through_origin(xs, ys), 0.0
    model = LinkModel(name, 1e-6 / slope, fixed * 1e3, 0.0, source, {})
    # the seed's own arithmetic: what a lone frame pays beyond a queued one (1/724 - 1/2094 s),
    # less its compute where the device timed it, on the quickest rung (the least compute to hide)
    timed = [r for r in rungs if r.lone_s is not None]
    quick = min(timed, key=lambda r: r.lone_s or 0.0) if timed else None
    residuals = {r.name: round(100 * (model.busy_s(r.bytes) / r.per_frame_s - 1), 2) for r in rungs}
    trip = max(0.0, (quick.lone_s or 0.0) - quick.per_frame_s - quick.compute_s) * 1e3 if quick else 0.0
    return LinkModel(name, model.bandwidth_mb_s, model.per_transfer_ms, trip, source, residuals)


RESIDUAL_WARN_PCT = 10.0  # a rung the fitted line misses by more: the rungs are not on one line


def fit_warnings(model: LinkModel) -> list[str]:
    """What makes a fitted link doubtful, one line each: rungs the line misses by more than
    :data:`RESIDUAL_WARN_PCT`, and a round trip of zero (nothing measured it)."""
    said = []
    far = {k: v for k, v in model.residuals_pct.items() if abs(v) > RESIDUAL_WARN_PCT}
    if far:
        worst = ", ".join(f"{k} {v:+.1f}%" for k, v in sorted(far.items(), key=lambda kv: -abs(kv[1])))
        said.append(
            f"the line misses {len(far)} of {len(model.residuals_pct)} rungs by more than {RESIDUAL_WARN_PCT:.0f}% "
            f"({worst}): they are not one link's time (compute-bound rungs, or a busy host), and predictions "
            "from this fit are no closer than that"
        )
    if model.round_trip_ms == 0:
        said.append(
            "round trip 0 ms: no rung was timed as a lone frame at depth 1, or its lone frame was no slower "
            "than a queued one; time-to-first-output predictions from this link leave the round trip out"
        )
    return said


def _line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Slope and intercept minimizing relative residuals (weights 1/y): a ladder spans 32x
    in bytes, and plain least squares would fit the biggest frame and ignore the small ones."""
    import numpy as np

    y = np.asarray(ys, dtype=float)
    slope, intercept = np.polyfit(np.asarray(xs, dtype=float), y, 1, w=1 / y)  # polyfit weighs residuals by w
    return float(slope), float(intercept)


def _through_origin(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The slope minimizing relative residuals with no intercept: sum (1 - s x / y)^2."""
    ratios = [x / y for x, y in zip(xs, ys, strict=True)]
    return sum(ratios) / sum(r * r for r in ratios)


def parse_inline(text: str) -> LinkModel:
    """``300MB/s+0.9ms`` (bandwidth, then an optional round trip) as a link model."""
    num = r"([0-9]+(?:\.[0-9]*)?)"
    m = re.fullmatch(rf"\s*{num}\s*MB/s\s*(?:\+\s*{num}\s*ms)?\s*", text)
    if not m or not math.isfinite(float(m.group(1))) or float(m.group(1)) <= 0:
        raise LoopError(f"link '{text}': expected a link name or BANDWIDTH like '300MB/s+0.9ms'")
    return LinkModel(text.strip(), float(m.group(1)), 0.0, float(m.group(2) or 0), "given inline", {})
