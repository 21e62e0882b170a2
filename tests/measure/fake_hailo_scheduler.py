"""FAKE Hailo device under HailoRT's scheduler, in virtual time: a test double for Hailo hardware,
which cannot run here. Nothing in it is HailoRT; each behaviour is HailoRT's as its source says:

* one device, several network groups: whichever session's frames come next while another
  session's core op is the device's current one pays a switch first (``CoreOpsScheduler::switch_core_op``
  calls ``VdmaConfigManager::set_core_op`` when the core op differs, hailo-ai/hailort v5.2.0,
  ``libhailort/src/vdevice/scheduler/scheduler.cpp``), and the frames queued then wait for it;
* ``depth`` frames in flight pipeline up to the session's async queue size
  (``ConfiguredInferModel::get_async_queue_size``, ``hailo/infer_model.hpp``): a burst of ``count``
  frames takes one frame's latency, then one frame per ``1 / fps`` at that depth;
* a single frame (``run``: ``run_async`` and a wait, ``infer_model.cpp``) takes the latency;
* a multi-context network (``dynamic_batch``) runs at a hardware batch of the frames ready, and a
  change of batch reconfigures the device as a network switch does (``switch_core_op``: "core_op_handle
  != current_core_op_handle || !has_same_hw_batch_size_as_previous", ``use_dynamic_batch_flow``): single
  frames run at batch 1, a pipelined burst at its depth.

``pipelined`` and ``frame_times`` return these virtual seconds: no absolute time is measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from loop.core.vocab import Artifact
from loop.devices.base import Device, Health, RuntimeOptions, Session


@dataclass(frozen=True)
class Net:
    """A HEF as the fake runs it: single-frame latency, pipelined rate, and its switch's cost (ms)."""

    latency_ms: float
    pipelined_fps: float
    switch_ms: float
    dynamic_batch: bool = False  # multi-context: a change of hardware batch reconfigures too

    def artifact(self) -> Artifact:
        text = f"{self.latency_ms} {self.pipelined_fps} {self.switch_ms} {int(self.dynamic_batch)}"
        return Artifact("hailo", text.encode(), ".hef", (), ())


class FakeHailoSession(Session):
    def __init__(self, device: FakeHailoDevice, net: Net) -> None:
        self.inputs, self.outputs, self.max_depth = (), (), FakeHailoDevice.QUEUE
        self.device, self.net = device, net

    def _switch_s(self, batch: int) -> float:
        rebatched = self.net.dynamic_batch and self.device.batch != batch
        switched = self.device.current is not self or rebatched
        self.device.current, self.device.batch = self, batch
        return self.net.switch_ms / 1e3 if switched else 0.0

    def infer(self, frames: Sequence[np.ndarray], out: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
        return []

    def frame_times(self, frames: Sequence[np.ndarray], count: int) -> list[float]:
        times = [self.net.latency_ms / 1e3] * count
        times[0] += self._switch_s(1) if count else 0.0
        return times

    def pipelined(self, frames: Sequence[np.ndarray], count: int, depth: int) -> float:
        latency = self.net.latency_ms / 1e3
        fps = min(self.net.pipelined_fps, min(depth, self.max_depth or depth) / latency)
        return self._switch_s(min(depth, self.max_depth or depth)) + latency + (count - 1) / fps


class FakeHailoDevice(Device):
    """FAKE: one Hailo device shared by every session it opens (see the module)."""

    name: ClassVar[str] = "fake-hailo-scheduler"
    QUEUE: ClassVar[int] = 8

    def __init__(self) -> None:
        self.current: FakeHailoSession | None = None
        self.batch = 0  # the hardware batch the device was last configured for

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return True, "FAKE"

    def open(self, artifact: Artifact, options: RuntimeOptions) -> FakeHailoSession:
        latency, fps, switch, dynamic = (float(x) for x in artifact.data.decode().split())
        return FakeHailoSession(self, Net(latency, fps, switch, bool(dynamic)))

    def health(self) -> Health:
        return Health()
