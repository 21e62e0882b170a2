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

POLL_S = 0.2
EXIT_GRACE_S = 5.0  # how long a child whose socket closed gets to exit with its own code


class DeviceProcess:
    """One device's child process: started on first use, replaced after it dies or hangs."""

    def __init__(self, module: str = "loop.flow.device_child") -> None:
        self._module = module  # what the child runs (a test runs a misbehaving one)
        self._child: supervise.Child | None = None
        self._conn: supervise.Connection | None = None

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None and self._child.poll() is None else None

    def start(self) -> None:
        self._child, self._conn = supervise.connected(self._module)

    def call(self, job: DeviceJob, timeouts: StageTimeouts) -> RunResult:
        """The job's result, or a failure naming the stage where the child died or hung."""
        if self.pid is None:
            self.stop()
            self.start()
        assert self._conn is not None and self._child is not None
        self._child.clear()  # a failure's tail is this job's, not an earlier variant's
        self._conn.send(job)
        stage, started, kept = "open", time.monotonic(), None
        while True:
            limit = timeouts.of(stage, job.protocol, job.race)
            if time.monotonic() - started > limit:
                return self._ended(stage, f"device process timed out after {limit:g} s in stage {stage}", kept)
            try:
                ready = self._conn.poll(POLL_S)
                message = self._conn.recv() if ready else None
            except (EOFError, OSError):
                message = None
            if message is None:
                if self._child.poll() is not None or ready:
                    # its socket closes before it has exited: its own exit code, not our kill's
                    self._child.wait(EXIT_GRACE_S)
                    died = supervise.how_it_died(self._child.kill())
                    return self._ended(stage, f"device process died ({died}) in stage {stage}", kept)
                continue
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
        tail = self._child.tail() if self._child is not None else ""
        self.stop()
        if kept is None or stage != "vendor-benchmark":
            return RunResult.failed(Stage(stage), error, host=socket.gethostname(), detail=tail)
        kept.detail = tail
        kept.vendor = {"error": error, "agree": None, "comparable": False}
        return kept

    def stop(self) -> None:
        """Kill the child, its group and its keeper; a no-op when there is none."""
        supervise.end(self._child, self._conn)
        self._child = self._conn = None


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
            child = self._children.setdefault(name, DeviceProcess())
            if child.pid is None:
                child.stop()
                child.start()

    def pids(self) -> list[int]:
        return [p for c in self._children.values() if (p := c.pid) is not None]

    def close(self) -> None:
        for child in self._children.values():  # first: a task still running then fails at once
            child.stop()
        super().close()
