"""The local runner's parent side: a supervisor per device child, and the runner over them.

See :mod:`loop.flow.device_child` for what runs in the child and why it is a child.
"""

from __future__ import annotations

import socket
import time
from dataclasses import replace

from loop.core import registry
from loop.core.kinds import Stage
from loop.flow import supervise
from loop.flow.device_child import DeviceJob
from loop.flow.runner import Runner, RunResult, RunTask, StageTimeouts
from loop.measure import hostlock


class DeviceProcess(supervise.Connected):
    """One device's child process: started on first use, replaced after it dies or hangs."""

    def __init__(self, module: str = "loop.flow.device_child") -> None:
        super().__init__(module)  # what the child runs (a test runs a misbehaving one)

    def call(self, job: DeviceJob, timeouts: StageTimeouts) -> RunResult:
        """The job's result, or a failure naming the stage where the child died or hung."""
        self.ensure().send(job)
        stage, started, kept = "open", time.monotonic(), None
        while True:
            limit = timeouts.of(stage, job.protocol, job.race)
            if (message := self.receive(started + limit, supervise.Connection.recv)) is None:
                why = f"died ({self.died})" if self.died else f"timed out after {limit:g} s"
                return self._ended(stage, f"device process {why} in stage {stage}", kept)
            kind, value = message
            if kind == "done":
                return value
            if kind == "kept":
                kept = value
                continue
            stage, started = value, time.monotonic()

    def _ended(self, stage: str, error: str, kept: RunResult | None) -> RunResult:
        """A child that died or hung: a failure of its stage, except in the vendor's benchmark
        after the run was measured, where the run stands and the check is recorded failed."""
        tail = self.ended()
        if kept is None or stage != "vendor-benchmark":
            return RunResult.failed(Stage(stage), error, host=socket.gethostname(), detail=tail)
        kept.detail = tail
        kept.vendor = {"error": error, "agree": None, "comparable": False}
        return kept


class LocalRunner(Runner):
    """Devices of this host, each in a child process of its own; one task at a time, under
    this host's measuring lock (``overlap``: the sweep measures while it compiles, flagged)."""

    def __init__(self, overlap: bool = False) -> None:
        self.overlap = overlap
        self._children: dict[str, DeviceProcess] = {}
        self._timed_on: dict[str, str] = {}  # device name -> the lock it measures under, made once

    def hosts(self) -> set[str]:
        return {socket.gethostname()}

    def run(self, task: RunTask) -> RunResult:
        try:
            for kind, ref in task.device_refs:  # devices the sweep registered, known here too
                registry.DEVICES.setdefault(kind, ref)
            first = task.devices[0]
            if first not in self._timed_on:
                self._timed_on[first] = registry.make_device(first).timed_on
            timed_on = self._timed_on[first]
        except Exception as exc:
            return RunResult.failed(Stage.OPEN, f"{type(exc).__name__}: {exc}", host=socket.gethostname())
        timed = task.measure or task.race is not None
        with hostlock.measuring(timed_on, overlap=self.overlap) if timed else hostlock.answering(timed_on):
            return self._run(task)

    def _run(self, task: RunTask) -> RunResult:
        merged: RunResult | None = None
        for i, name in enumerate(task.devices[:1] if task.race else task.devices):  # a race: the first only
            measured = task.measure and i == 0
            job = DeviceJob(name, task.artifact, task.inputs, task.protocol, measured, task.device_refs, task.race)
            if name not in self._children:
                self._children[name] = DeviceProcess()
            result = self._children[name].call(job, task.timeouts)
            if not result.ok:
                return result if i == 0 else replace(result, error=f"{name}: {result.error}")
            if merged is None:
                merged = result
            else:
                merged.devices.update(result.devices)
                merged.stages.update({f"{name}.{k}": v for k, v in result.stages.items()})
        assert merged is not None
        return merged

    def warm(self, devices: tuple[str, ...]) -> None:
        """Start the devices' children now, so their imports overlap whatever comes first
        (the compiles); the first task then finds them ready."""
        for name in devices:
            self._children.setdefault(name, DeviceProcess()).ensure()

    def pids(self) -> list[int]:
        return [p for c in self._children.values() if (p := c.pid) is not None]

    def close(self) -> None:
        for child in self._children.values():  # first: a task still running then fails at once
            child.stop()
        super().close()
