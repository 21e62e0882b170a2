"""``link-sim``: a simulated link in front of a real device, to check the link model's arithmetic.

``link-sim:300MB/s+0.9ms`` (or ``link-sim:NAME`` for a shipped link such as
``hailo10h-usb-1.5a``) wraps the host's ONNX Runtime device. Each inference first crosses
the link: its frames are really copied into a staging buffer, then the caller waits until
the link would have finished (bytes over the bandwidth, plus the per-transfer cost), then
for the round trip; then it computes. The link is one resource (transfers queue for it) and
so is compute (one frame at a time, as an accelerator runs a network); queued frames overlap
one frame's transfer and round trip with another's compute.

``link-sim:40MB/s+1ms@2ms`` also paces compute: each frame really computes, then holds the
device until 2 ms have passed since it began, as an accelerator's fixed schedule would. A
host CPU's compute swings by 20-40 % within a second on a shared machine (benchmarks/README.md,
noise); a paced one does not, so a check of the link arithmetic is not a check of the host.
A frame whose real compute overruns the pace is late, as it ran, never cut short.

This validates the arithmetic of :mod:`loop.measure.link`, not a real USB link: the waits
are timed sleeps, and the real copies cost the host's memory bandwidth, not a bus's.
"""

from __future__ import annotations

import queue
import re
import statistics
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from loop.core.errors import LoopError
from loop.core.vocab import Artifact
from loop.devices.base import Device, Health, RuntimeOptions, Session, check_frames
from loop.devices.onnxruntime import OnnxRuntimeDevice
from loop.measure.link import LinkModel, load

SPLIT = ("copy_in_ms", "compute_ms", "copy_out_ms")


class Link:
    """The link's clock: transfers take turns, each busy for its cost after the last one ends.

    Waiting on a virtual end time (not ``sleep(cost)``) keeps a late wake-up from one transfer
    out of the next one's: over many frames the rate is the modelled one, not sleep's."""

    def __init__(self, model: LinkModel) -> None:
        self.model = model
        self._lock = threading.Lock()
        self._free_at = 0.0

    def cross(self, arrays: Sequence[np.ndarray], staging: Sequence[np.ndarray], busy_s: float) -> float:
        """Copy ``arrays`` into ``staging`` through the link, which stays busy ``busy_s``;
        returns when (on the link's clock) the transfer ended."""
        asked = time.perf_counter()  # a transfer queued behind a late wake-up starts on time
        with self._lock:
            start = max(asked, self._free_at)
            for src, dst in zip(arrays, staging, strict=True):
                np.copyto(dst, np.asarray(src).reshape(dst.shape))
            self._free_at = end = start + busy_s
            _wait_until(end)
        return end

    def to_device(self, frames: Sequence[np.ndarray], staging: Sequence[np.ndarray], nbytes: int) -> None:
        """Frames in: their bytes, the per-transfer cost, then the round trip (not the link's)."""
        self.cross(frames, staging, self.model.busy_s(nbytes))
        _wait_until(time.perf_counter() + self.model.round_trip_ms / 1e3)

    def to_host(self, outputs: Sequence[np.ndarray], staging: Sequence[np.ndarray], nbytes: int) -> None:
        self.cross(outputs, staging, nbytes / (self.model.bandwidth_mb_s * 1e6))


SPIN_S = 2e-4  # a sleep on this kind of host wakes 50-100 us late; the last stretch is spun


def _wait_until(deadline: float) -> None:
    """Sleep, then spin the last ``SPIN_S``: late wake-ups would add to every lone frame (four
    waits a frame) an overhead no link has. ``sleep(0)`` gives up the GIL on each turn."""
    left = deadline - time.perf_counter()
    if left > SPIN_S:
        time.sleep(left - SPIN_S)
    while time.perf_counter() < deadline:
        time.sleep(0)


class LinkSimSession(Session):
    def __init__(self, inner: Session, link: Link, engine: threading.Lock, pace_s: float = 0.0) -> None:
        self._inner, self._link, self._engine, self._pace_s = inner, link, engine, pace_s
        self.inputs, self.outputs = inner.inputs, inner.outputs
        paced = f"; compute paced to {pace_s * 1e3:g} ms a frame" if pace_s else ""
        self.notes = (f"link-sim: {link.model.name} ({link.model.source}); simulated, not a real link{paced}",)
        self._bytes = sum(t.frame_bytes for t in self.inputs), sum(t.frame_bytes for t in self.outputs)
        self._computed: list[float] = []  # seconds of compute per frame, every queued frame so far

    def _one(self, frames: Sequence[np.ndarray]) -> Callable[[], tuple[float, float, float]]:
        """One inference with its own staging buffers (one set per thread in flight); returns
        the seconds of its three parts."""
        staged_in = [np.empty_like(f) for f in frames]
        staged_out: list[np.ndarray] = []  # shaped as the device returns its outputs, on first use
        compute, link, engine, (nin, nout) = self._inner.bound(frames), self._link, self._engine, self._bytes

        def call() -> tuple[float, float, float]:
            t0 = time.perf_counter()
            link.to_device(frames, staged_in, nin)
            with engine:  # one frame at a time, as an accelerator runs a network
                t1 = time.perf_counter()
                outs = [np.asarray(o) for o in compute()]  # type: ignore[attr-defined]
                t2 = self._paced(t1)
            staged_out[:] = staged_out or [np.empty_like(o) for o in outs]
            link.to_host(outs, staged_out, nout)
            return t1 - t0, t2 - t1, time.perf_counter() - t2

        return call

    def infer(self, frames: Sequence[np.ndarray], out: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
        check_frames(self.inputs, frames, "input")
        staged = [np.empty_like(f) for f in frames]
        self._link.to_device(frames, staged, self._bytes[0])
        with self._engine:
            began = time.perf_counter()
            results = self._inner.infer(staged, out)  # computes on what crossed
            self._paced(began)
        self._link.to_host(results, [np.empty_like(r) for r in results], self._bytes[1])
        return results

    def split_ms(self, frames: Sequence[np.ndarray], count: int) -> dict[str, float] | None:
        """Copies from ``count`` single frames; compute as it ran queued where frames were
        queued: the compute stage's mean time a frame, its own overhead included, over every
        queued frame so far (a rate is frames over time, so a mean predicts one, not a median),
        with a lone frame's as ``lone_compute_ms``: on a shared host a network of many small
        ops computes a lone frame, its caches cold after a wait, up to 2x slower than a queued one
        (shufflenet_v2 at 64x64: 1.2-1.9x)."""
        call = self.bound(frames)
        parts = [call() for _ in range(count)]
        split = {k: 1e3 * statistics.median(p[i] for p in parts) for i, k in enumerate(SPLIT)}
        if self._computed:
            split["lone_compute_ms"] = split["compute_ms"]
            split["compute_ms"] = 1e3 * statistics.fmean(self._computed)
        return split

    def bound(self, frames: Sequence[np.ndarray]) -> Callable[[], tuple[float, float, float]]:
        check_frames(self.inputs, frames, "input")
        return self._one(frames)

    def pipelined(self, frames: Sequence[np.ndarray], count: int, depth: int) -> float:
        check_frames(self.inputs, frames, "input")
        if depth <= 1:
            call = self._one(frames)
            t0 = time.perf_counter()
            for _ in range(count):
                call()
            return time.perf_counter() - t0
        return self._staged(frames, count, depth)

    def _staged(self, frames: Sequence[np.ndarray], count: int, depth: int) -> float:
        """Two stages on their own threads, as a device with a DMA engine runs: the link moves
        frame i+1 while compute runs frame i, with at most ``depth`` frames in flight. Outputs
        are charged to the link with their inputs (the same busy time per frame, in one go)."""
        staged, compute = [np.empty_like(f) for f in frames], self._inner.bound(frames)
        slots, ready = threading.Semaphore(depth), queue.SimpleQueue[float | None]()
        busy, trip = self._link.model.busy_s(sum(self._bytes)), self._link.model.round_trip_ms / 1e3
        computed: list[float] = []
        failed: list[BaseException] = []  # a stage that fails stops the other, then is raised

        def link() -> None:
            try:
                for _ in range(count):
                    slots.acquire()
                    if failed:
                        return
                    ready.put(self._link.cross(frames, staged, busy) + trip)
            except BaseException as exc:
                failed.append(exc)
                ready.put(None)

        def device() -> None:
            ended: float | None = None  # when the previous frame's compute ended
            try:
                for _ in range(count):
                    at = ready.get()
                    if at is None:
                        return
                    _wait_until(at)  # FIFO: nothing else could run before this frame anyway
                    with self._engine:  # shared with every session of the device, as in _one
                        began = time.perf_counter()
                        compute()
                        done = self._paced(began)
                    # the stage's time for this frame, its own overhead included: from when it
                    # could have started (the frame there, the one before done) until done
                    computed.append(done - (at if ended is None else max(at, ended)))
                    ended = done
                    slots.release()
            except BaseException as exc:
                failed.append(exc)
                slots.release()  # the link stage wakes, sees the failure and stops

        stages = [threading.Thread(target=link), threading.Thread(target=device)]
        t0 = time.perf_counter()
        for t in stages:
            t.start()
        for t in stages:
            t.join()
        elapsed = time.perf_counter() - t0
        if failed:
            raise failed[0]
        self._computed += computed
        return elapsed

    def _paced(self, began: float) -> float:
        """Hold the engine until the pace has passed since ``began``; returns the time it did."""
        _wait_until(began + self._pace_s)
        return time.perf_counter()

    def close(self) -> None:
        self._inner.close()


class LinkSimDevice(Device):
    """A device name's argument is the link: a shipped or inline one (see the module doc)."""

    name = "link-sim"
    takes_arg = True

    def __init__(self, arg: str | None = None) -> None:
        if not arg:
            raise LoopError("link-sim needs a link: 'link-sim:hailo10h-usb-1.5a' or 'link-sim:300MB/s+0.9ms'")
        link, _, pace = arg.partition("@")
        self.link, self._inner = Link(load(None, link)), OnnxRuntimeDevice()
        self.pace_s = _pace_s(pace) if pace else 0.0
        self._engine = threading.Lock()  # the simulated device's compute: one frame at a time

    @classmethod
    def available(cls) -> tuple[bool, str]:
        ok, why = OnnxRuntimeDevice.available()
        return ok, why if not ok else "simulated link in front of the host CPU (validates arithmetic, not USB)"

    def open(self, artifact: Artifact, options: RuntimeOptions) -> Session:
        return LinkSimSession(self._inner.open(artifact, options), self.link, self._engine, self.pace_s)

    def health(self) -> Health:
        return self._inner.health()

    def describe(self) -> dict[str, str]:
        m = self.link.model
        return {
            **self._inner.describe(),
            "device": f"{self.name}:{m.name}",
            "link": f"{m.bandwidth_mb_s:.1f} MB/s + {m.per_transfer_ms:.3f} ms per transfer, {m.round_trip_ms:.3f} ms",
            **({"compute_pace": f"{self.pace_s * 1e3:g} ms a frame"} if self.pace_s else {}),
        }


def _pace_s(text: str) -> float:
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*ms\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise LoopError(f"link-sim compute pace '{text}': expected a time like '@2ms' after the link")
    return float(m.group(1)) / 1e3
