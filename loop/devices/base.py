"""The device interface. ``loop/measure/protocol.py`` drives every device through it alone.

Contract:

* ``Device.open(artifact, options)`` returns a :class:`Session`; opening includes loading
  and configuring, so timing ``open`` is the load part of time to first output.
* A session exposes its layout (``inputs``/``outputs``: :class:`TensorLayout`, frames in
  the device's own dtype, so a uint8 frame counts one byte a value).
* ``Session.infer(frames, out=None)`` runs one frame per input synchronously and returns
  one array per output. Frames whose size or dtype do not match the layout, and output
  buffers in ``out`` that are too small, are refused with :class:`BufferSizeError`
  before anything runs: never read or written past.
* ``Session.pipelined(frames, count, depth)`` runs ``count`` inferences of the same frames
  keeping ``depth`` in flight, and returns the elapsed seconds.
* ``Session.hw_latency_ms()`` is the device's own hardware latency if it measures one,
  else None (never invented). ``Session.split_ms(frames, count)`` likewise times copy in,
  compute and copy out apart where the device can (execution providers, ``link-sim``).
* ``Device.health()`` reads temperature, ids and the runtime's warnings since the last
  call; anything it cannot read is None.
* ``Device.select(options)`` names the runtime options calls that take none (``health``) use to
  pick the device: a device shared by group (HailoRT's ``group_id``) is read in that group.
* ``Device.vendor_benchmark(path, fps, options)`` runs the vendor's own benchmark tool on the
  same artifact file, where the device has one, and returns what it found beside loop's rate,
  the tool's name as ``tool`` (recorded with the run as it is, under ``measure.vendor_benchmark``;
  a tool that failed as ``{"tool": ..., "error": ...}``); None where there is no such tool here
  (the default).
"""

from __future__ import annotations

import statistics
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from loop.core.errors import BufferSizeError
from loop.core.vocab import Artifact, DeviceSettings, TensorLayout

# The flags of a run whose vendor benchmark (recorded in its measurement) disagrees, or failed.
VENDOR_DISAGREES = "hailortcli-disagrees"
VENDOR_CHECK_FAILED = "vendor-check-failed"  # the tool failed on a measured run: flagged, never a failure


class RuntimeOptions(DeviceSettings):
    """The measure settings a session opens with (A/B-testable on one artifact): the sweep
    file's (:class:`~loop.core.vocab.DeviceSettings`), and how the harness drives them."""

    # Idle threads spin-wait for work: quickest for one session, but several sessions timed in
    # turn in one process (an interleaved A/B, a race) then steal each other's cores.
    spin: bool = True


@dataclass(frozen=True)
class Health:
    temperature_c: float | None = None
    device_id: str | None = None
    device_path: str | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)


SPLIT = ("copy_in_ms", "compute_ms", "copy_out_ms")  # the parts of Session.split_ms


def back_to_back(call: Callable[[], object], count: int) -> float:
    """Seconds of ``count`` calls of ``call``, each after the last: a queue depth of 1."""
    t0 = time.perf_counter()
    for _ in range(count):
        call()
    return time.perf_counter() - t0


def median_split(parts: Sequence[Sequence[float]]) -> dict[str, float]:
    """Median ms of each :data:`SPLIT` part over ``parts`` (seconds, one triple an inference)."""
    return {k: 1e3 * statistics.median(p[i] for p in parts) for i, k in enumerate(SPLIT)}


class Session(ABC):
    inputs: tuple[TensorLayout, ...]
    outputs: tuple[TensorLayout, ...]
    max_depth: int | None = None  # the deepest queue the device takes (HailoRT's async queue size)
    notes: tuple[str, ...] = ()  # what the session does other than asked, and why (recorded with the run)

    @abstractmethod
    def infer(self, frames: Sequence[np.ndarray], out: Sequence[np.ndarray] | None = None) -> list[np.ndarray]: ...

    @abstractmethod
    def pipelined(self, frames: Sequence[np.ndarray], count: int, depth: int) -> float: ...

    def bound(self, frames: Sequence[np.ndarray]) -> Callable[[], object]:
        """One inference of ``frames``, checked once here so that timing it times the device,
        not the checks. Sessions with a cheaper raw call override this."""
        check_frames(self.inputs, frames, "input")
        return lambda: self.infer(frames)

    def frame_times(self, frames: Sequence[np.ndarray], count: int) -> list[float]:
        """Seconds of each of ``count`` single inferences, back to back: a race's figure is a
        low quantile of them, which the frames a busy host preempted do not reach."""
        call, clock, out = self.bound(frames), time.perf_counter, []
        for _ in range(count):
            t0 = clock()
            call()
            out.append(clock() - t0)
        return out

    def hw_latency_ms(self) -> float | None:
        return None

    def split_ms(self, frames: Sequence[np.ndarray], count: int) -> dict[str, float] | None:
        """Median ms of one inference's parts over ``count`` inferences: ``copy_in_ms``,
        ``compute_ms`` and ``copy_out_ms``, where the device can time them apart; else None
        (never an even split invented from the total)."""
        return None

    def close(self) -> None:
        return None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Device(ABC):
    name: ClassVar[str]
    takes_arg: ClassVar[bool] = False  # whether a sweep may name it as 'name:argument'

    @classmethod
    @abstractmethod
    def available(cls) -> tuple[bool, str]: ...

    @classmethod
    def variants(cls) -> list[tuple[str, bool, str]]:
        """The ``name:argument`` forms worth listing in ``loop backends``, each with whether it
        can run here and why not (an execution provider that is not installed, say)."""
        return []

    @abstractmethod
    def open(self, artifact: Artifact, options: RuntimeOptions) -> Session: ...

    @abstractmethod
    def health(self) -> Health: ...

    def select(self, options: RuntimeOptions) -> None:
        """The options ``health`` and other option-less calls pick the device by (nothing by default)."""
        return None

    def describe(self) -> dict[str, str]:
        return {"device": self.name}

    @property
    def timed_on(self) -> str:
        """The hardware a measurement here times, whose lock it holds (``measure.hostlock``)."""
        return self.name

    def vendor_benchmark(self, artifact_path: Path, loop_fps: float, options: RuntimeOptions) -> dict[str, Any] | None:
        return None


def into(out: Sequence[np.ndarray] | None, results: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``results`` as returned, or copied into the caller's ``out`` buffers (checked already)."""
    if out is None:
        return list(results)
    for buf, res in zip(out, results, strict=True):
        buf.reshape(-1)[: res.size] = res.reshape(-1)
    return list(out)


def check_frames(layouts: Sequence[TensorLayout], frames: Sequence[np.ndarray], what: str, exact: bool = True) -> None:
    """Refuse buffers that do not match ``layouts`` in count, dtype or byte size.

    Input frames must match exactly; output buffers (``exact=False``) may be larger.
    """
    if len(frames) != len(layouts):
        raise BufferSizeError(f"{what}: expected {len(layouts)} buffers, got {len(frames)}")
    for layout, frame in zip(layouts, frames, strict=True):
        if frame.dtype != np.dtype(layout.dtype):
            raise BufferSizeError(f"{what} '{layout.name}': dtype {frame.dtype}, layout says {layout.dtype}")
        if frame.nbytes < layout.frame_bytes:
            raise BufferSizeError(
                f"{what} '{layout.name}': buffer of {frame.nbytes} bytes is smaller than the "
                f"frame's {layout.frame_bytes} bytes; refused"
            )
        if exact and frame.nbytes != layout.frame_bytes:
            raise BufferSizeError(
                f"{what} '{layout.name}': buffer of {frame.nbytes} bytes, frame is {layout.frame_bytes}"
            )
