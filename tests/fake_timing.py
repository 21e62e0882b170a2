"""A device whose sessions report virtual time: the statistics of measuring are tested without
timing anything (no absolute time, no dependence on how busy the test host is)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from loop.core.vocab import Artifact
from loop.devices.base import Device, Health, RuntimeOptions, Session


class VirtualSession(Session):
    """``pipelined`` returns count x the artifact's ms per frame, times seeded noise."""

    def __init__(self, ms_per_frame: float, noise: float, rng: np.random.Generator) -> None:
        self.inputs, self.outputs = (), ()
        self.ms, self.noise, self.rng = ms_per_frame, noise, rng
        self.frames_timed, self.seconds = 0, 0.0
        self.options: RuntimeOptions | None = None

    def infer(self, frames: Sequence[np.ndarray], out: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
        return []

    def frame_times(self, frames: Sequence[np.ndarray], count: int) -> list[float]:
        times = self.ms / 1e3 * np.exp(self.rng.normal(0.0, self.noise, count))
        self.frames_timed, self.seconds = self.frames_timed + count, self.seconds + float(times.sum())
        return [float(t) for t in times]

    def pipelined(self, frames: Sequence[np.ndarray], count: int, depth: int) -> float:
        s = count * self.ms / 1e3 * float(np.exp(self.rng.normal(0.0, self.noise)))
        self.frames_timed, self.seconds = self.frames_timed + count, self.seconds + s
        return s


class VirtualDevice(Device):
    """An artifact's bytes are its ms per frame as text, e.g. ``b"1.27"``."""

    name: ClassVar[str] = "virtual"

    def __init__(
        self, noise: float = 0.02, seed: int = 0, slower: Sequence[float] = (), noisier: Sequence[float] = ()
    ) -> None:
        """``slower``: per session in the order opened, a fixed factor on its time (two sessions
        of one artifact differ so on a real host: memory placement, caches); ``noisier``: per
        session, a factor on its noise (a candidate whose frames spread more than the others')."""
        self.noise, self.rng, self.opened, self.slower = noise, np.random.default_rng(seed), [], list(slower)
        self.noisier = list(noisier)

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return True, ""

    def open(self, artifact: Artifact, options: RuntimeOptions) -> VirtualSession:
        n = len(self.opened)
        factor = self.slower[n] if n < len(self.slower) else 1.0
        noise = self.noise * (self.noisier[n] if n < len(self.noisier) else 1.0)
        session = VirtualSession(float(artifact.data) * factor, noise, self.rng)
        session.options = options
        self.opened.append(session)
        return session

    def health(self) -> Health:
        return Health()


def virtual(ms_per_frame: float) -> Artifact:
    return Artifact("virtual", str(ms_per_frame).encode(), ".onnx", (), ())
