"""``link-sim``: a simulated link in front of a real device, to check the link model's arithmetic.

``link-sim:300MB/s+0.9ms`` (or ``link-sim:NAME`` for a shipped link such as
``hailo10h-usb-1.5a``) wraps the host's ONNX Runtime device, or the one named after ``>``.
Each inference first crosses the link: its frames are really copied into a staging buffer,
then the caller waits until the link would have finished (bytes over the bandwidth, plus the
per-transfer cost), then for the round trip; then it computes. The link is one resource
(transfers queue for it) and so is compute (one frame at a time, as an accelerator runs a
network); queued frames overlap one frame's transfer and round trip with another's compute.

``link-sim:300MB/s+0.9ms>onnxruntime:CUDAExecutionProvider`` puts the link in front of another
device (any a sweep may name, but ``link-sim``): its compute is timed and paced as the host's is,
and includes whatever the device moves itself (an execution provider's own copies to its memory).

``link-sim:40MB/s+1ms@2ms`` also paces compute: each frame really computes, then holds the
device until 2 ms have passed since it began, as an accelerator's fixed schedule would. A
host CPU's compute swings by 20-40 % within a second on a shared machine (benchmarks/README.md,
noise); a paced one does not, so a check of the link arithmetic is not a check of the host.
A frame whose real compute overruns the pace is late, as it ran, never cut short.

This validates the arithmetic of :mod:`loop.core.links`, not a real USB link: the waits
are timed sleeps, and the real copies cost the host's memory bandwidth, not a bus's.
"""

from __future__ import annotations

import re
import statistics
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from loop.core.errors import LoopError
from loop.core.links import LinkModel
from loop.core.vocab import Artifact
from loop.devices.base import Device, Health, RuntimeOptions, Session, check_frames, median_split
from loop.devices.links import link as shipped_link
from loop.devices.onnxruntime import OnnxRuntimeDevice


class Link:
    """The link's clock: transfers take turns, each busy for its cost after the last one ends.

    Waiting on a virtual end time (not ``sleep(cost)``) keeps a late wake-up from one transfer
    out of the next one's: over many frames the rate is the modelled one, not sleep's."""

    def __init__(self, model: LinkModel) -> None:
        self.model = model
        self._lock = threading.Lock()
        self._free_at = 0.0

    def cross(
        self, arrays: Sequence[np.ndarray], staging: Sequence[np.ndarray], busy_s: float, asked: float | None = None
    ) -> float:
        """Copy ``arrays`` into ``staging`` through the link, which stays busy ``busy_s`` from
        when it is free and the transfer was ``asked`` for (now, unless a schedule says when);
        returns when (on the link's clock) the transfer ended, once it has."""
        asked = time.perf_counter() if asked is None else asked  # queued behind a late wake-up, on time
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
    """Sleep, then spin the last ``SPIN_S``: late wake-ups would add to every lone frame an
    overhead no link has. The spin holds the GIL (a turn of ``sleep(0)`` took 56 us on this
    VM, a late wake-up of its own); no thread of the simulation needs it meanwhile."""
    left = deadline - time.perf_counter()
    if left > SPIN_S:
        time.sleep(left - SPIN_S)
    while time.perf_counter() < deadline:
        pass


class LinkSimSession(Session):
    def __init__(self, inner: Session, link: Link, engine: threading.Lock, pace_s: float = 0.0) -> None:
        self._inner, self._link, self._engine, self._pace_s = inner, link, engine, pace_s
        self.inputs, self.outputs = inner.inputs, inner.outputs
        paced = f"; compute paced to {pace_s * 1e3:g} ms a frame" if pace_s else ""
        self.notes = (f"link-sim: {link.model.name} ({link.model.source}); simulated, not a real link{paced}",)
        self._bytes = sum(t.frame_bytes for t in self.inputs), sum(t.frame_bytes for t in self.outputs)
        self._computed: list[float] = []  # seconds of compute per frame, every queued frame so far
        self._alone: list[float] = []  # and every lone frame's (depth 1) so far

    def _one(self, frames: Sequence[np.ndarray]) -> Callable[[], tuple[float, float, float]]:
        """One inference with its own staging buffers; returns the seconds of its three parts."""
        staged_in = [np.empty_like(f) for f in frames]
        # the outputs' bytes cross back as buffers of their size: a device's bound call returns
        # what suits its own timing (an IOBinding step, a shim status), not outputs, and an
        # inference here to get some would warm the device before its first output is timed
        outs = [np.zeros(t.frame_bytes, np.uint8) for t in self.outputs]
        staged_out = [np.empty_like(o) for o in outs]
        compute, link, engine, (nin, nout) = self._inner.bound(frames), self._link, self._engine, self._bytes

        def call() -> tuple[float, float, float]:
            t0 = time.perf_counter()
            link.to_device(frames, staged_in, nin)
            with engine:  # one frame at a time, as an accelerator runs a network
                t1 = time.perf_counter()
                compute()
                t2 = self._paced(t1)
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
        (shufflenet_v2 at 64x64: 1.2-1.9x). A lone frame's is the mean over the session's
        depth-1 frames, where it ran some (the rate's own, with the few of its warm-up and probe):
        a fit subtracts it from that rate's time a frame, and a median of other frames taken
        later missed it by up to 0.2 ms, which a round trip of 1 ms fitted from it carried whole."""
        call = self.bound(frames)
        split = median_split([call() for _ in range(count)])
        if self._computed or self._alone:
            split["lone_compute_ms"] = 1e3 * statistics.fmean(self._alone) if self._alone else split["compute_ms"]
        if self._computed:
            split["compute_ms"] = 1e3 * statistics.fmean(self._computed)
        return split

    def bound(self, frames: Sequence[np.ndarray]) -> Callable[[], tuple[float, float, float]]:
        check_frames(self.inputs, frames, "input")
        return self._one(frames)

    def pipelined(self, frames: Sequence[np.ndarray], count: int, depth: int) -> float:
        check_frames(self.inputs, frames, "input")
        return self._staged(frames, count, max(1, depth))

    def _staged(self, frames: Sequence[np.ndarray], count: int, depth: int) -> float:
        """Frames through the link and compute with at most ``depth`` in flight, as a device
        with a DMA engine runs: frame i crosses the link once it is free and a slot is (frame
        i - depth done), on the link's clock, so the link moves it while compute runs an earlier
        frame. One thread runs the schedule: the link's clock needs no thread of its own, and
        on this VM a hand-off between two threads woke 0.3-1.4 ms late for 2-13 frames in 28, a
        wait no link has, which held a shallow queue up to 14 % under the model's rate. Outputs
        are charged to the link with their inputs (the same busy time per frame, in one go).
        The real copy into staging runs on this thread between computes, so a queued frame's
        compute time carries it (a 16 MB frame's copy doubled a 2 ms pace; the benchmark's
        frames are 307 kB at most)."""
        staged, compute = [np.empty_like(f) for f in frames], self._inner.bound(frames)
        busy, trip = self._link.model.busy_s(sum(self._bytes)), self._link.model.round_trip_ms / 1e3
        # queued, the compute stage's time a frame from when it could start; lone, compute from
        # its start (a lone frame's stage waits on the link, which is not compute)
        times: list[float] = []
        done: list[float] = []
        t0 = time.perf_counter()
        for i in range(count):
            at = self._link.cross(frames, staged, busy, done[i - depth] if i >= depth else t0) + trip
            _wait_until(at)
            with self._engine:  # shared with every session of the device, as in _one
                began = time.perf_counter()
                compute()
                ended = self._paced(began)
            times.append(ended - (began if depth == 1 else max(at, done[-1] if done else at)))
            done.append(ended)
        elapsed = time.perf_counter() - t0
        (self._alone if depth == 1 else self._computed).extend(times)
        return elapsed

    def _paced(self, began: float) -> float:
        """Hold the engine until the pace has passed since ``began``; returns the time it did."""
        _wait_until(began + self._pace_s)
        return time.perf_counter()

    def close(self) -> None:
        self._inner.close()


class LinkSimDevice(Device):
    """A device name's argument is the link (a shipped or inline one), then an optional pace and
    device behind it: ``LINK[@PACE][>DEVICE]`` (see the module doc)."""

    name = "link-sim"
    takes_arg = True

    def __init__(self, arg: str | None = None) -> None:
        if not arg:
            raise LoopError("link-sim needs a link: 'link-sim:hailo10h-usb-1.5a' or 'link-sim:300MB/s+0.9ms'")
        spec, behind, inner = arg.partition(">")
        if behind and not inner.strip():
            raise LoopError(f"link-sim:{arg}: name the device after '>', or leave '>' out for the host's")
        link, _, pace = spec.partition("@")
        self.link, self._inner = Link(shipped_link(link)), _inner_device(inner.strip())
        self.pace_s = _pace_s(pace) if pace else 0.0
        self._engine = threading.Lock()  # the simulated device's compute: one frame at a time

    @classmethod
    def available(cls) -> tuple[bool, str]:
        ok, why = OnnxRuntimeDevice.available()
        here = "simulated link in front of the host CPU or the device after '>' (validates arithmetic, not USB)"
        return ok, why if not ok else here

    def open(self, artifact: Artifact, options: RuntimeOptions) -> Session:
        return LinkSimSession(self._inner.open(artifact, options), self.link, self._engine, self.pace_s)

    def health(self) -> Health:
        return self._inner.health()

    @property
    def timed_on(self) -> str:
        return self._inner.timed_on  # a simulated link times the device behind it

    def describe(self) -> dict[str, str]:
        m, inner = self.link.model, self._inner.describe()
        return {
            **inner,
            "device": f"{self.name}:{m.name}>{inner['device']}",
            "link": f"{m.bandwidth_mb_s:.1f} MB/s + {m.per_transfer_ms:.3f} ms per transfer, {m.round_trip_ms:.3f} ms",
            **({"compute_pace": f"{self.pace_s * 1e3:g} ms a frame"} if self.pace_s else {}),
        }


def _inner_device(name: str) -> Device:
    """The device behind the link: ``>NAME`` names any device a sweep may, else the host's
    ONNX Runtime."""
    if not name:
        return OnnxRuntimeDevice()
    from loop.core.registry import make_device, split_device

    if split_device(name)[0] == LinkSimDevice.name:
        raise LoopError(f"link-sim '>{name}': a link in front of a simulated link; name the device behind both")
    return make_device(name)


def _pace_s(text: str) -> float:
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*ms\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise LoopError(f"link-sim compute pace '{text}': expected a time like '@2ms' after the link")
    return float(m.group(1)) / 1e3
