"""ONNX Runtime as a device: a CPU session on the compiled artifact.

Pipelining keeps ``depth`` inferences in flight on one session from ``depth`` host threads;
ONNX Runtime releases the GIL inside ``run`` and a session is safe to run concurrently.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence

import numpy as np

from loop.core.sessions import session
from loop.core.vocab import Artifact
from loop.devices.base import Device, Health, RuntimeOptions, Session, back_to_back, check_frames, into
from loop.devices.inflight import threaded


class OnnxRuntimeSession(Session):
    def __init__(self, artifact: Artifact, options: RuntimeOptions) -> None:
        # every optimization: the artifact is measured as a user's own session would run it
        self._session = session(artifact.data, options.threads, "all", spin=options.spin)
        self.inputs, self.outputs = artifact.inputs, artifact.outputs
        self._in_names = [t.name for t in self.inputs]
        self._out_names = [t.name for t in self.outputs]

    def _feed(self, frames: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        check_frames(self.inputs, frames, "input")
        return {n: f.reshape(t.shape) for n, f, t in zip(self._in_names, frames, self.inputs, strict=True)}

    def bound(self, frames: Sequence[np.ndarray]) -> Callable[[], object]:
        feed, run, names = self._feed(frames), self._session.run, self._out_names
        return lambda: run(names, feed)

    def infer(self, frames: Sequence[np.ndarray], out: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
        if out is not None:
            check_frames(self.outputs, out, "output", exact=False)
        return into(out, self._session.run(self._out_names, self._feed(frames)))

    def pipelined(self, frames: Sequence[np.ndarray], count: int, depth: int) -> float:
        call = self.bound(frames)
        return back_to_back(call, count) if depth <= 1 else threaded(call, count, depth)


class OnnxRuntimeDevice(Device):
    """The host CPU; ``onnxruntime:PROVIDER`` runs on that execution provider instead, through
    IOBinding, with copies in and out timed apart from compute (:mod:`loop.devices.providers`)."""

    name = "onnxruntime"
    takes_arg = True

    def __init__(self, provider: str | None = None) -> None:
        if provider is not None:
            from loop.devices.providers import check_provider

            check_provider(provider)
        self.provider = provider

    @classmethod
    def available(cls) -> tuple[bool, str]:
        from loop.core.registry import importable

        ok, why = importable("onnxruntime")
        return ok, why or "host CPU"

    @classmethod
    def variants(cls) -> list[tuple[str, bool, str]]:
        from loop.devices.providers import provider_status

        return [(f"{cls.name}:{p}", ok, why) for p, ok, why in provider_status()]

    def open(self, artifact: Artifact, options: RuntimeOptions) -> Session:
        if self.provider is None:
            return OnnxRuntimeSession(artifact, options)
        from loop.devices.providers import ProviderSession

        return ProviderSession(artifact, options, self.provider)

    def health(self) -> Health:
        return Health(temperature_c=host_temperature(), device_id=f"cpu:{socket.gethostname()}")

    def describe(self) -> dict[str, str]:
        import onnxruntime

        named = f"{self.name}:{self.provider}" if self.provider else self.name
        return {"device": named, "onnxruntime": onnxruntime.__version__}


def host_temperature() -> float | None:
    """The hottest thermal zone the host exposes, or None where it exposes none."""
    temps = []
    base = "/sys/class/thermal"
    for zone in sorted(os.listdir(base)) if os.path.isdir(base) else ():
        try:
            with open(os.path.join(base, zone, "temp")) as f:
                temps.append(int(f.read().strip()) / 1000.0)
        except (OSError, ValueError):
            continue
    return max(temps) if temps else None
