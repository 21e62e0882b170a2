"""A race's side: one warmed-up session timed at the protocol's depth, a chunk at a time.

Two things make a chunk measure what the device does:

* **The protocol's depth.** The protocol's rate is pipelined (``depth`` frames in flight), and a
  device with a queue pipelines: the seed's Hailo-10H ran 1168 fps pipelined against about 253 fps
  single-frame, so a race of single frames ranks candidates by latency, not by rate. A side races
  at the deepest of ``measure.depth`` its session takes; single frames are timed as well, after
  each chunk, and kept as their own figure (at depth 1 the two are the same frames).
* **No network switch inside a timed chunk.** Sessions interleaved on one device are network
  groups the device switches between: HailoRT's scheduler reconfigures the device whenever the
  next frames belong to another core op than the one it holds (``CoreOpsScheduler::switch_core_op``
  calls ``VdmaConfigManager::set_core_op``, hailo-ai/hailort v5.2.0,
  ``libhailort/src/vdevice/scheduler/scheduler.cpp``), and the frames queued at that moment wait
  for it. So the first ``depth`` frames (at least the batch size) after another side ran are run
  untimed and counted (``discarded``); as many again run after them, and the difference is what
  the switch cost (``switch_ms``). On ONNX Runtime the same rule costs a frame or two and keeps a
  cold cache out of the figure.
* **No change of batch inside a timed chunk.** The scheduler also reconfigures a multi-context
  network when its hardware batch changes (``switch_core_op``: another core op, or
  ``!has_same_hw_batch_size_as_previous`` under ``use_dynamic_batch_flow``), and a side's single
  frames run at batch 1: so a pipelined chunk that follows its own side's single frames runs a
  queue-full untimed first too (counted in ``discarded``, not in ``switch_ms``).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import numpy as np

from loop.author.schema import MeasureSpec
from loop.devices.base import Session
from loop.measure.interleave import device_frames

# Single frames: a chunk of about 20 ms, its figure the lower quartile of the frames' times (see rounds).
RACE_CHUNK_S = 0.02
# Pipelined: a chunk of at least FILLS queue-fulls, so filling and draining the queue once is a
# small part of it, and about PIPELINED_CHUNK_S.
PIPELINED_CHUNK_S = 0.05
FILLS = 16
SINGLE_FRAMES = 4  # per pipelined chunk, timed after it on the same session (no switch between)


@dataclass
class Chunk:
    """One chunk: its pipelined rate (None at depth 1) and its single frames' seconds."""

    rate: float | None
    frames: list[float]


@dataclass
class Switches:
    """Which side ran last on the device, and per side the frames discarded after a switch."""

    last: int | None = None
    frames: list[int] = field(default_factory=list)
    seconds: list[list[float]] = field(default_factory=list)  # per side, each switch's discarded frames

    def add_side(self) -> int:
        self.frames.append(0)
        self.seconds.append([])
        return len(self.frames) - 1


def race_depth(spec: MeasureSpec, session: Session) -> int:
    """The deepest of the protocol's depths the session takes (HailoRT's async queue size caps it)."""
    deepest = max(spec.depth, default=1)
    return max(1, min(deepest, session.max_depth or deepest))


class Side:
    """A session's chunks at its race depth; a call is one chunk, after any switch's frames."""

    def __init__(self, session: Session, spec: MeasureSpec, switches: Switches) -> None:
        self.session, self.switches, self.index = session, switches, switches.add_side()
        self.depth = race_depth(spec, session)
        self.discard = max(self.depth, spec.batch_size)
        self.frames = device_frames(session)
        self.rebatched = False  # single frames ran since the last pipelined chunk
        session.pipelined(self.frames, max(spec.warmup, self.depth), self.depth)
        switches.last = self.index
        if self.depth == 1:
            typical = statistics.median(session.frame_times(self.frames, 8))
            self.count = max(1, int(RACE_CHUNK_S / max(typical, 1e-6)))
        else:
            probe = FILLS * self.depth
            fps = probe / max(session.pipelined(self.frames, probe, self.depth), 1e-9)
            self.count = max(probe, int(PIPELINED_CHUNK_S * fps))

    def _burst(self) -> float:
        """Seconds of ``discard`` frames at the side's depth."""
        if self.depth == 1:
            return sum(self.session.frame_times(self.frames, self.discard))
        return self.session.pipelined(self.frames, self.discard, self.depth)

    def _switched_in(self) -> None:
        """The frames that pay for a switch to this side, run and kept apart, and as many again
        unswitched: the difference is what the switch cost."""
        if self.switches.last == self.index:
            return
        switched = self._burst()
        self.switches.last = self.index
        self.switches.frames[self.index] += self.discard
        self.switches.seconds[self.index].append(switched - self._burst())

    def __call__(self) -> Chunk:
        if self.switches.last != self.index:
            self._switched_in()
        elif self.rebatched:  # back from batch 1: the queue-full that pays for it, untimed
            self._burst()
            self.switches.frames[self.index] += self.discard
        if self.depth == 1:
            return Chunk(None, self.session.frame_times(self.frames, self.count))
        rate = self.count / self.session.pipelined(self.frames, self.count, self.depth)
        self.rebatched = True
        return Chunk(rate, self.session.frame_times(self.frames, SINGLE_FRAMES))


def figures(chunks: list[Chunk], quantile: float) -> tuple[float, float]:
    """A side's round: (rate at the race depth, single-frame rate). Single frames: the rate at the
    low quantile of their times (host load slows only the frames it preempts); pipelined: the best
    chunk (load only ever slows a chunk down)."""
    single = 1.0 / float(np.quantile(np.concatenate([c.frames for c in chunks]), quantile))
    rates = [c.rate for c in chunks if c.rate is not None]
    return (max(rates) if rates else single), single


def switch_ms(switches: Switches, index: int) -> float | None:
    """The median time a switch to side ``index`` added (its discarded frames' time over as many
    frames right after them); None where none was seen."""
    seen = switches.seconds[index]
    return 1e3 * statistics.median(seen) if seen else None
