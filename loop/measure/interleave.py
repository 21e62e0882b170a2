"""Interleaved A/B measurement with an A/A control: the only trustworthy ratio on a shared host.

Separate processes, or the same process minutes apart, differ by tens of percent on a busy
machine, and background load comes in bursts. So both artifacts are opened in ONE process,
with a second session of A as a control, and measured in short chunks, A B A' B A' A ...,
for ``rounds`` rounds of equal length. A round's figure is each side's best chunk: load from
other processes only ever slows a chunk down, so the fastest one is the least disturbed, and a
steady difference between artifacts moves it as much as any other. (On this 2-core host with
1.4 cores busy elsewhere, the A/A floor fell from 4-19% with the median chunk to 0.3-1.7% with
the best; benchmarks/RETIRED.md.) The paired ratios B/A and A'/A per round give the effect and
the noise floor of this very call."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from loop.author.frames import quantize, seeded
from loop.author.schema import MeasureSpec
from loop.core.kinds import Flag
from loop.core.vocab import Artifact
from loop.devices.base import Device, RuntimeOptions, Session
from loop.measure.hostload import LoadProbe, busy_flags
from loop.measure.protocol import one_repeat, runtime_options

CHUNK_S = 0.1  # one timed chunk: short enough that A and B see the same bursts
Rate = Callable[[], float]
T = TypeVar("T")
U = TypeVar("U")


def one_round(sides: Sequence[Callable[[], T]], chunks: int, shift: int, pick: Callable[[list[T]], U]) -> list[U]:
    """``chunks`` short measurements of every side, interleaved; ``pick`` of each side's.
    The order rotates every chunk so no side always goes first (or always follows a burst)."""
    rates: list[list[T]] = [[] for _ in sides]
    for j in range(chunks):
        k = (j + shift) % len(sides)
        for i in list(range(k, len(sides))) + list(range(k)):
            rates[i].append(sides[i]())
    return [pick(r) for r in rates]


@dataclass
class Interleaved:
    """Per-side median fps of every round; side 0 is A, side 1 is B, side 2 the A/A control."""

    rounds: list[list[float]] = field(default_factory=list)
    frames_per_chunk: list[int] = field(default_factory=list)
    chunks: int = 0
    wall_s: float = 0.0
    host: dict[str, Any] = field(default_factory=dict)
    flags: list[Flag] = field(default_factory=list)

    def side(self, i: int) -> list[float]:
        return [r[i] for r in self.rounds]


def device_frames(session: Session, seed: int = 1) -> list[np.ndarray]:
    """One seeded frame per input in the session's own layout: a rate needs real-sized
    frames, not particular ones."""
    return [quantize(seeded(t.shape, 1, seed, i), t) for i, t in enumerate(session.inputs)]


def shared_options(spec: MeasureSpec) -> RuntimeOptions:
    """The sweep's device knobs for several sessions timed in turn in one process: none spins
    while another is timed, and none asks the device to time itself."""
    return runtime_options(spec).model_copy(update={"spin": False, "hw_latency": False})


def chunk_rate(session: Session, frames: Sequence[np.ndarray], spec: MeasureSpec, depth: int) -> tuple[Rate, int]:
    """A side: a warmed-up session timed over a fixed frame count lasting about ``CHUNK_S``.

    Each chunk follows another side's (the order rotates), and on a device that holds one network
    group at a time the first frames after it pay the switch (HailoRT's scheduler reconfigures
    for the next core op: ``CoreOpsScheduler::switch_core_op``, see ``loop.measure.sides``). So a
    queue-full (``depth`` frames) runs untimed first: the chunk times the network, not the switch."""
    session.pipelined(frames, max(spec.warmup, depth), depth)
    fps, _ = one_repeat(session, frames, max(depth, 4), CHUNK_S / 4, depth)
    count = max(depth, int(CHUNK_S * fps))

    def timed() -> float:
        session.pipelined(frames, depth, depth)  # untimed: the switch from the side before
        return count / session.pipelined(frames, count, depth)

    return timed, count


def interleave(
    device: Device, artifacts: Sequence[Artifact], spec: MeasureSpec, rounds: int, depths: Sequence[int] | None = None
) -> Interleaved:
    """Open every artifact (repeat one to get a control) and time them interleaved, each at its
    own queue depth (a depth knob is an A/B too); each side gets about ``spec.min_duration_s``
    per round."""
    sessions = [device.open(a, shared_options(spec)) for a in artifacts]
    try:
        depths = depths or [1] * len(sessions)
        sides = [
            chunk_rate(s, device_frames(s), spec, min(d, s.max_depth or d))
            for s, d in zip(sessions, depths, strict=True)
        ]
        out = Interleaved(frames_per_chunk=[n for _, n in sides], chunks=max(1, round(spec.min_duration_s / CHUNK_S)))
        probe, t0 = LoadProbe.start(), time.perf_counter()
        out.rounds = [one_round([r for r, _ in sides], out.chunks, i, max) for i in range(rounds)]
        out.host, out.wall_s = probe.stop(), time.perf_counter() - t0
        out.flags = busy_flags(out.host, spec.host_busy_pct)
        return out
    finally:
        for s in sessions:
            s.close()
