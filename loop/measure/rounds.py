"""A generation measured together: its reference and candidates in interleaved rounds.

Every artifact is opened in one process and timed in short chunks at the protocol's depth, all
sides within each round (the order rotating), so a burst of host load or a drift lands on all
alike. At depth 1 a round's figure for a side is the rate at the lower quartile of its frame
times (load only ever slows a frame down, and only the frames it preempts); deeper, its best
pipelined chunk, with the single-frame rate kept beside it (``single``, ``single_ratios``). The
frames that pay for the device switching to a side are run untimed (:mod:`loop.measure.sides`),
counted in ``discarded``, their median extra cost in ``switch_ms``. Each candidate's rate ratio to the
reference is the geometric mean of its per-round ratios with a 95% interval. Rounds go on until
every candidate still racing has an interval (widened by the A/A floor below) within
``target_pct`` of its ratio, or the ``budget_s`` is spent; a candidate whose whole interval lies
below the best's is clearly beaten and leaves the race (its ratio so far is kept, marked ``dropped``), as racing does.

A second session of the reference runs as one more side, an A/A control: its ratio to the
first says how far two sessions of one artifact differ in this very call (``floor_pct``, the
outer edge of its interval), which no round-to-round interval can show.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from loop.author.sweepfile import MeasureSpec
from loop.core.vocab import Artifact
from loop.devices.base import Device
from loop.measure.hostload import LoadProbe, busy_flags
from loop.measure.interleave import one_round, shared_options
from loop.measure.sides import Side, Switches, figures, switch_ms
from loop.measure.stats import ratio_ci95, widened

MIN_ROUNDS = 3
# At depth 1, a side's round is three chunks of single frames, each chunk about 20 ms, interleaved with the
# other sides'; its figure is the rate at the lower quartile of its frame times. A busy host
# preempts some frames and slows those alone; the quartile is past them. (squeezenet at 64 px,
# 13 identical candidates, 20 rounds, load average 4.6 on 2 cores: widest interval +-14% as the
# best chunk's frames / seconds, +-4.8% at the quartile; quiet, +-1.6% and under +-1%. Three
# chunks a round rather than five: the same intervals in fewer seconds; 10 ms chunks took more rounds.)
CHUNKS = 3  # whatever the protocol's min_duration_s: rounds, not long chunks, narrow a ratio
QUANTILE = 0.25


@dataclass
class Race:
    """Per side (side 0: the reference) the fps of every round it ran, and per candidate its
    ratio to the reference (geometric mean, 95% low, 95% high) over the rounds both ran."""

    fps: list[list[float]] = field(default_factory=list)
    ratios: list[tuple[float, float, float] | None] = field(default_factory=list)
    dropped: list[int | None] = field(default_factory=list)  # the round a side left the race
    rounds: int = 0
    control: tuple[float, float, float] | None = None  # the reference's second session over its first
    floor_pct: float | None = None
    wall_s: float = 0.0
    host: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    depth: list[int] = field(default_factory=list)  # per side, the depth it raced at
    single: list[list[float]] = field(default_factory=list)  # per side, each round's single-frame rate
    single_ratios: list[tuple[float, float, float] | None] = field(default_factory=list)
    discarded: list[int] = field(default_factory=list)  # per side, frames run untimed after a switch to it
    switch_ms: list[float | None] = field(default_factory=list)  # per side, the median extra a switch cost


def half_width_pct(ratio: tuple[float, float, float]) -> float:
    mid, lo, hi = ratio
    return 100.0 * (hi - lo) / 2 / mid


def _ratios(race: Race) -> None:
    ref = race.fps[0]
    *candidates, control = [ratio_ci95(side, ref[: len(side)]) for side in race.fps[1:]]
    race.ratios, race.control = [None, *candidates], control
    _, lo, hi = control
    race.floor_pct = 100.0 * max(1.0 - lo, hi - 1.0, 0.0)
    single = race.single[0]
    race.single_ratios = [None, *(ratio_ci95(side, single[: len(side)]) for side in race.single[1:-1])]


def _settled(race: Race, active: list[int], target_pct: float) -> bool:
    """Whether every candidate still racing is measured closely enough; drops the beaten."""
    ratios = race.ratios
    racing = [i for i in active if 0 < i < len(ratios)]  # the reference and its control stay
    full = {i: widened(r, race.floor_pct) for i in racing if (r := ratios[i]) is not None}
    best_lo = max((r[1] for r in full.values()), default=0.0)
    for i in racing:
        r = full.get(i)
        if r is not None and r[2] < best_lo:  # wholly below the best: beaten
            active.remove(i)
            race.dropped[i] = race.rounds
    apart = 100.0 * abs(race.control[0] - 1.0) if race.control else 0.0
    return all(_close_enough(ratios[i], race.floor_pct, apart, target_pct) for i in active if 0 < i < len(ratios))


def _close_enough(
    ratio: tuple[float, float, float] | None, floor_pct: float | None, apart_pct: float, target: float
) -> bool:
    """Within the target once widened by the A/A floor; or, where the two sessions alone are
    about as far apart as the target, once the rounds' part is a third of that (more rounds
    would barely narrow it)."""
    if ratio is None:
        return False
    return half_width_pct(widened(ratio, floor_pct)) <= target or half_width_pct(ratio) <= apart_pct / 3


def race(device: Device, artifacts: Sequence[Artifact], spec: MeasureSpec, target_pct: float, budget_s: float) -> Race:
    """Measure ``artifacts`` (the reference first) together, in rounds, as the module says."""
    options = shared_options(spec)
    sessions = [device.open(a, options) for a in (*artifacts, artifacts[0])]  # the last: the A/A control
    try:
        switches = Switches()
        sides = [Side(s, spec, switches) for s in sessions]
        out = Race(fps=[[] for _ in sides], dropped=[None] * len(artifacts), depth=[s.depth for s in sides])
        out.single = [[] for _ in sides]
        active = list(range(len(sides)))
        probe, t0 = LoadProbe.start(), time.perf_counter()
        while True:
            picked = one_round([sides[i] for i in active], CHUNKS, out.rounds, lambda c: figures(c, QUANTILE))
            for i, (fps, single) in zip(active, picked, strict=True):
                out.fps[i].append(fps)
                out.single[i].append(single)
            out.rounds += 1
            if out.rounds < MIN_ROUNDS:
                continue
            _ratios(out)
            if _settled(out, active, target_pct) or time.perf_counter() - t0 >= budget_s:
                break
        out.host, out.wall_s = probe.stop(), time.perf_counter() - t0
        out.flags = [str(f) for f in busy_flags(out.host, spec.host_busy_pct)]
        out.discarded = list(switches.frames)
        out.switch_ms = [switch_ms(switches, i) for i in range(len(sides))]
        return out
    finally:
        for s in sessions:
            s.close()
