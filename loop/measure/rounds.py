"""A generation measured together: its reference and candidates in interleaved rounds.

Every artifact is opened in one process and timed in short chunks at the protocol's depth, all
sides within each round (the order rotating), so a burst of host load or a drift lands on all
alike. At depth 1 a round's figure for a side is the rate at the lower quartile of its frame
times (load only ever slows a frame down, and only the frames it preempts); deeper, its best
pipelined chunk, with the single-frame rate kept beside it (``single``, ``single_ratios``). The
frames that pay for the device switching to a side are run untimed (:mod:`loop.measure.sides`),
counted in ``discarded``, their median extra cost in ``switch_ms``. Each candidate's rate ratio to the
reference is the geometric mean of its per-round ratios with a 95% interval.

Each candidate leaves the rounds on its own, and why is kept (``stopped``): its interval (widened
by the A/A floor below) is within ``target_pct`` (``target``); one more round would cut that
interval by less than ``NARROWING_SHARE`` (``not narrowing``: the spread it has, or the floor,
will not come down in rounds worth running); short of its target, its whole interval lies below
the best's (``beaten``, as racing does; the round is kept in ``dropped``); or ``budget_s`` is
spent (``budget``). A
candidate that stopped runs no further rounds, so one candidate stuck near the target never holds
the others; the reference and its control run until the last candidate stops.

A second session of the reference runs as one more side, an A/A control: its ratio to the
first says how far two sessions of one artifact differ in this very call (``floor_pct``, the
outer edge of its interval), which no round-to-round interval can show.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from loop.author.schema import MeasureSpec
from loop.core.vocab import Artifact
from loop.devices.base import Device
from loop.measure.hostload import LoadProbe, busy_flags
from loop.measure.interleave import one_round, shared_options
from loop.measure.sides import Side, Switches, figures, switch_ms
from loop.measure.stats import ratio_ci95, t95, widened

MIN_ROUNDS = 3
# At depth 1, a side's round is three chunks of single frames, each chunk about 20 ms, interleaved with the
# other sides'; its figure is the rate at the lower quartile of its frame times. A busy host
# preempts some frames and slows those alone; the quartile is past them. (squeezenet at 64 px,
# 13 identical candidates, 20 rounds, load average 4.6 on 2 cores: widest interval +-14% as the
# best chunk's frames / seconds, +-4.8% at the quartile; quiet, +-1.6% and under +-1%. Three
# chunks a round rather than five: the same intervals in fewer seconds; 10 ms chunks took more rounds.)
CHUNKS = 3  # whatever the protocol's min_duration_s: rounds, not long chunks, narrow a ratio
QUANTILE = 0.25
# A round that would narrow a candidate's interval by less than this share is not run for it. At
# the same spread and no A/A floor, the 13th round is the first that would not (Student's t and
# 1/sqrt(n) together: the 4th round cuts 36%, the 13th 4.9%), so no candidate runs more than 12
# rounds; a floor that does not come down in rounds stops it sooner. (Issue 42: one candidate whose
# widened interval sat at +-2.9-3.1% held an 8-candidate generation for 37 rounds.)
NARROWING_SHARE = 0.05

TARGET, NOT_NARROWING, BUDGET, BEATEN = "target", "not narrowing", "budget", "beaten"
Interval = tuple[float, float, float]  # (geometric mean, 95% low, 95% high)


@dataclass
class Race:
    """Per side (side 0: the reference) the fps of every round it ran, and per candidate its
    ratio to the reference (geometric mean, 95% low, 95% high) over the rounds both ran, and
    why it left the rounds (``stopped``)."""

    fps: list[list[float]] = field(default_factory=list)
    ratios: list[Interval | None] = field(default_factory=list)
    dropped: list[int | None] = field(default_factory=list)  # the round a side was beaten in
    stopped: list[str | None] = field(default_factory=list)  # per candidate: target, not narrowing, budget, beaten
    rounds: int = 0
    control: Interval | None = None  # the reference's second session over its first
    floor_pct: float | None = None
    wall_s: float = 0.0
    host: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    depth: list[int] = field(default_factory=list)  # per side, the depth it raced at
    single: list[list[float]] = field(default_factory=list)  # per side, each round's single-frame rate
    single_ratios: list[Interval | None] = field(default_factory=list)
    discarded: list[int] = field(default_factory=list)  # per side, frames run untimed after a switch to it
    switch_ms: list[float | None] = field(default_factory=list)  # per side, the median extra a switch cost


def half_width_pct(ratio: Interval) -> float:
    mid, lo, hi = ratio
    return 100.0 * (hi - lo) / 2 / mid


def floor_pct(control: Interval) -> float:
    """How far two sessions of one artifact may differ: the outer edge of the control's interval."""
    _, lo, hi = control
    return 100.0 * max(1.0 - lo, hi - 1.0, 0.0)


def shrink(n: int) -> float:
    """What one more round multiplies an interval of ``n`` rounds by, at the spread it has."""
    return t95(n) / t95(n - 1) * math.sqrt(n / (n + 1))


def narrowed(ratio: Interval, n: int) -> Interval:
    """``ratio``'s interval as one more round at the same spread would leave it (in logs, where
    it is symmetric about the geometric mean)."""
    mid, _, hi = ratio
    half = math.log(hi / mid) * shrink(n)
    return mid, mid * math.exp(-half), mid * math.exp(half)


def why_stop(ratio: Interval, n: int, control: Interval, rounds: int, target_pct: float) -> str | None:
    """Why a candidate with ``ratio`` over its ``n`` rounds leaves the rounds, or None to go on:
    its interval widened by the control's floor (the control over ``rounds`` rounds) is within
    the target, or one more round would cut it by less than ``NARROWING_SHARE`` (the floor is
    projected too: the part of it that is the control's own spread narrows, an offset between the
    two sessions does not)."""
    now = half_width_pct(widened(ratio, floor_pct(control)))
    if now <= target_pct:
        return TARGET
    then = half_width_pct(widened(narrowed(ratio, n), floor_pct(narrowed(control, rounds))))
    return NOT_NARROWING if then > now * (1.0 - NARROWING_SHARE) else None


def _ratios(race: Race) -> None:
    ref = race.fps[0]
    *candidates, control = [ratio_ci95(side, ref[: len(side)]) for side in race.fps[1:]]
    race.ratios, race.control = [None, *candidates], control
    race.floor_pct = floor_pct(control)
    single = race.single[0]
    race.single_ratios = [None, *(ratio_ci95(side, single[: len(side)]) for side in race.single[1:-1])]


def _stop(race: Race, active: list[int], i: int, why: str) -> None:
    active.remove(i)
    race.stopped[i] = why
    if why == BEATEN:
        race.dropped[i] = race.rounds


def stop_rounds(race: Race, active: list[int], target_pct: float) -> None:
    """Take out of ``active`` each candidate that leaves the rounds now, saying why: at its
    target; beaten, against the best low end of every candidate's interval (one that stopped
    still ranks); or not narrowing."""
    control = race.control
    assert control is not None  # set with the ratios
    full = {i: widened(r, race.floor_pct) for i, r in enumerate(race.ratios) if r is not None}
    best_lo = max((r[1] for r in full.values()), default=0.0)
    for i in [i for i in active if i in full]:  # the reference and its control have no ratio
        ratio = race.ratios[i]
        assert ratio is not None
        why = why_stop(ratio, len(race.fps[i]), control, race.rounds, target_pct)
        if why != TARGET and full[i][2] < best_lo:
            why = BEATEN
        if why is not None:
            _stop(race, active, i, why)


def race(device: Device, artifacts: Sequence[Artifact], spec: MeasureSpec, target_pct: float, budget_s: float) -> Race:
    """Measure ``artifacts`` (the reference first) together, in rounds, as the module says."""
    options = shared_options(spec)
    sessions = [device.open(a, options) for a in (*artifacts, artifacts[0])]  # the last: the A/A control
    try:
        switches = Switches()
        sides = [Side(s, spec, switches) for s in sessions]
        out = Race(fps=[[] for _ in sides], dropped=[None] * len(artifacts), depth=[s.depth for s in sides])
        out.single, out.stopped = [[] for _ in sides], [None] * len(artifacts)
        active = list(range(len(sides)))
        probe, t0 = LoadProbe.start(), time.perf_counter()
        while any(0 < i < len(artifacts) for i in active):
            picked = one_round([sides[i] for i in active], CHUNKS, out.rounds, lambda c: figures(c, QUANTILE))
            for i, (fps, single) in zip(active, picked, strict=True):
                out.fps[i].append(fps)
                out.single[i].append(single)
            out.rounds += 1
            if out.rounds < MIN_ROUNDS:
                continue
            _ratios(out)
            stop_rounds(out, active, target_pct)
            if time.perf_counter() - t0 >= budget_s:
                for i in [i for i in active if 0 < i < len(artifacts)]:
                    _stop(out, active, i, BUDGET)
        out.host, out.wall_s = probe.stop(), time.perf_counter() - t0
        out.flags = [str(f) for f in busy_flags(out.host, spec.host_busy_pct)]
        out.discarded = list(switches.frames)
        out.switch_ms = [switch_ms(switches, i) for i in range(len(sides))]
        return out
    finally:
        for s in sessions:
            s.close()
