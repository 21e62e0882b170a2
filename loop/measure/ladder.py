"""Ladders: where a rate stops climbing, across frame sizes or queue depths."""

from __future__ import annotations

from collections.abc import Sequence

from loop.core.kinds import Status, Verdict
from loop.core.record import DepthRate, RunRecord

NOISE_FLOOR_PCT = 2.0
LINK_PLATEAU_PCT = 10.0


def depth_knee(by_depth: Sequence[DepthRate]) -> int | None:
    """The smallest depth whose median rate is within noise of the best: max(2%, the two
    spreads). Deeper queues past it buy nothing."""
    if not by_depth:
        return None
    best = max(by_depth, key=lambda d: d.rate.median)
    for row in sorted(by_depth, key=lambda d: d.depth):
        bar = max(NOISE_FLOOR_PCT, row.spread_pct, best.spread_pct)
        if row.rate.median >= best.rate.median * (1 - bar / 100):
            return row.depth
    return None


def link_rate(run: RunRecord) -> float:
    """MB/s through the link: bytes in plus out per frame, times frames/s (0 where unmeasured)."""
    m = run.measure
    return ((m.bytes_in or 0) + (m.bytes_out or 0)) * (m.median_fps or 0.0) / 1e6


def link_plateau(runs: Sequence[RunRecord]) -> tuple[str, float, float] | None:
    """The first rung from which MB/s stays within max(10%, spread) of the best, with the
    plateau's lowest and highest MB/s."""
    rated = [(r.variant, link_rate(r), r.measure.spread_pct or 0.0) for r in runs]
    if len(rated) < 2:
        return None
    top = max(v for _, v, _ in rated)
    for i, (name, _, _) in enumerate(rated):
        rest = rated[i:]
        if all(v >= top * (1 - max(LINK_PLATEAU_PCT, s) / 100) for _, v, s in rest) and len(rest) >= 2:
            return name, min(v for _, v, _ in rest), max(v for _, v, _ in rest)
    return None


def network_of(run: RunRecord) -> tuple[str, ...]:
    """A network's identity across frame sizes: its quantized layers' names (a frame size
    changes the bytes, not the names)."""
    return tuple(sorted(layer.name for layer in run.layers))


def frame_ladder(runs: Sequence[RunRecord]) -> list[RunRecord]:
    """The rungs of a frame ladder among ``runs``: one sweep's runs of one network on one device
    at two frame sizes or more (the variants on their own bases, and the sweep's reference at
    the base's size), the largest such group. Networks of their own (a zoo swept side by side)
    are no ladder: their rates are compute, not the link; nor is one network through two links."""
    groups: dict[tuple[str, str | None, tuple[str, ...]], list[RunRecord]] = {}
    for r in runs:
        if r.verdict in (Verdict.NA, Verdict.REFERENCE) and r.status == Status.OK and r.measure.median_fps:
            groups.setdefault((r.sweep, r.device, network_of(r)), []).append(r)
    ladders = [g for g in groups.values() if len({r.measure.bytes_in for r in g}) >= 2]
    return max(ladders, key=len, default=[])
