"""The local runner's child side: one device, in a process of its own, reused across variants.

A segfault in a driver, a shim or an execution provider, or a native call that never returns,
then costs one run: the supervisor (:mod:`loop.flow.local_runner`) sees this process die or a
stage outlive its timeout, kills its whole process group and starts another for the next task.
A child that lives keeps its device made across variants (each task opens its own sessions).

Run as ``python -m loop.flow.device_child FD PARENT`` by :func:`loop.flow.supervise.connected`:
it reads jobs from the socket ``FD`` (never its stdout, where native libraries print), tells the
supervisor each stage as it starts, answers with a :class:`~loop.flow.runner.RunResult`, and
dies with its parent. Its stderr goes to a log whose tail a failure carries (faulthandler's
stacks too).
"""

from __future__ import annotations

import socket
import sys
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from loop.author import frames as frames_mod
from loop.author.schema import MeasureSpec
from loop.core import registry
from loop.core.errors import BufferSizeError, LoopError
from loop.core.kinds import Stage
from loop.core.leftovers import scratch
from loop.core.record import Measurement
from loop.core.vocab import Artifact, Frames, TensorLayout
from loop.devices.base import Device, RuntimeOptions
from loop.flow import supervise
from loop.flow.runner import DeviceRun, RaceSpec, RunResult, Stages, with_bytes
from loop.measure.protocol import measure, measuring_stick
from loop.measure.rounds import race


@dataclass(frozen=True)
class DeviceJob:
    """One device's part of a task: the first device is measured, the others answer the inputs."""

    device: str
    artifact: Artifact
    inputs: Frames
    protocol: MeasureSpec
    measure: bool
    device_refs: tuple[tuple[str, str], ...] = ()
    race: RaceSpec | None = None  # a generation measured together instead of the protocol


# ---- in the child -------------------------------------------------------------------------


def device_frame(inputs: Frames, index: int, layouts: tuple[TensorLayout, ...]) -> list[np.ndarray]:
    """Frame ``index`` of every input, each as its device layout takes it."""
    by_name = frames_mod.feed(inputs, index, [t.name for t in layouts])
    return [frames_mod.quantize(by_name[t.name], t) for t in layouts]


def _checked(outputs: list[np.ndarray], layouts: tuple[TensorLayout, ...]) -> list[np.ndarray]:
    """The outputs, copied, each exactly its layout's size: a device that returns too few or
    too many bytes is caught here, before a score is made of what it returned."""
    if len(outputs) != len(layouts):
        raise BufferSizeError(f"the device returned {len(outputs)} outputs, its layout has {len(layouts)}")
    for out, layout in zip(outputs, layouts, strict=True):
        if out.nbytes != layout.frame_bytes:
            raise BufferSizeError(
                f"output '{layout.name}': the device returned {out.nbytes} bytes, its layout says {layout.frame_bytes}"
            )
    return [o.copy() for o in outputs]


def answer(device: Device, artifact: Artifact, inputs: Frames, stage: Callable[[str], None]) -> DeviceRun:
    """Each controlled input through the device, and whether a repeat of the first matched."""
    stage("open")
    # nothing here is timed: idle threads sleep rather than spin against the compiles beside it
    with device.open(artifact, RuntimeOptions(spin=False)) as session:
        stage("inputs")
        layouts, outs = tuple(session.inputs), tuple(session.outputs)
        run = lambda j: _checked(session.infer(device_frame(inputs, j, layouts)), outs)  # noqa: E731
        raw = [run(j) for j in range(frames_mod.count(inputs))]
        again = run(0)
        same = all(np.array_equal(a, b) for a, b in zip(raw[0], again, strict=True))
        return DeviceRun(raw, same, layouts, outs)


def _artifact_file(artifact: Artifact, folder: Path) -> Path:
    """The artifact's file on this host: where it was stored if that file still holds these
    bytes, else a copy here (a worker on another host has no such file)."""
    from loop.store.artifacts import regular_sha

    if artifact.path and Path(artifact.path).is_file():
        try:
            if regular_sha(Path(artifact.path)).startswith(artifact.sha):
                return Path(artifact.path)
        except OSError:
            pass
    if not artifact.data:
        raise LoopError(f"{artifact.path}: no longer the artifact checked (hash {artifact.sha[:12]})")
    path = folder / f"{artifact.sha}{artifact.suffix}"
    if not path.exists():
        path.write_bytes(artifact.data)
    return path


def vendor_check(device: Device, job: DeviceJob, measured: Measurement, folder: Path) -> dict[str, Any] | None:
    """The vendor's benchmark beside a run already measured: whatever goes wrong in it is recorded
    with the run (``error``, flagged ``vendor-check-failed``), never a failure of the run."""
    try:
        return measuring_stick(device, _artifact_file(job.artifact, folder), measured, job.protocol)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}", "agree": None, "comparable": False}


def execute(
    job: DeviceJob,
    devices: dict[str, Device],
    folder: Path,
    tell: Callable[[str], None],
    keep: Callable[[RunResult], None] = lambda _: None,
) -> RunResult:
    """One device's stages in this process; every failure is a value naming its stage. ``keep``
    gets the run as measured before the vendor's benchmark, which a supervisor keeps should
    that tool hang: a vendor check never fails a measured run."""
    stages = Stages(tell)
    result = RunResult(True, host=socket.gethostname())
    try:
        job = with_bytes(job, folder)  # here, in the device's process: the sweep's never holds them
    except LoopError as exc:  # a stored artifact swapped or damaged since: never measured as the variant
        return RunResult.failed(Stage.STORE, str(exc), host=result.host)
    try:
        for kind, ref in job.device_refs:  # runners registered in the parent, seen here too
            registry.DEVICES.setdefault(kind, ref)
        device = devices.get(job.device) or devices.setdefault(job.device, registry.make_device(job.device))
        if job.race is not None:
            stages("measure")
            spec = job.race
            result.race = asdict(
                race(device, (job.artifact, *spec.others), job.protocol, spec.target_pct, spec.budget_s)
            )
        else:
            result.devices[job.device] = answer(device, job.artifact, job.inputs, stages)
        if job.measure and job.race is None:
            stages("measure")
            frame = device_frame(job.inputs, 0, result.devices[job.device].inputs)
            result.measure = measure(device, job.artifact, frame, job.protocol)
            if type(device).vendor_benchmark is not Device.vendor_benchmark:  # a tool that may hang
                keep(replace(result, stages=dict(stages.seconds)))  # measured: kept should it hang
            stages("vendor-benchmark")
            result.vendor = vendor_check(device, job, result.measure, folder)
        stages("health")
        result.health = asdict(device.health())
    except Exception as exc:
        error, detail = f"{type(exc).__name__}: {exc}", traceback.format_exc(8)
        result = RunResult.failed(Stage(stages.now), error, host=result.host, detail=detail)
    stages.finish()
    result.stages = stages.seconds
    return result


def main(fd: int, parent: int) -> None:
    supervise.as_child(parent)
    conn = supervise.Connection(fd)
    devices: dict[str, Device] = {}
    with scratch("device") as folder:
        while True:
            try:
                job = conn.recv()
            except (EOFError, OSError):
                return
            tell = lambda s: conn.send(("stage", s))  # noqa: E731
            keep = lambda r: conn.send(("kept", r))  # noqa: E731
            conn.send(("done", execute(job, devices, Path(folder), tell, keep)))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
