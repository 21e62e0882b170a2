"""The local runner's parent side: a supervisor per device child, and the runner over them.

See :mod:`loop.flow.device_child` for what runs in the child and why it is a child.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import IO

from loop.core import registry
from loop.core.capture import STDERR_TAIL
from loop.core.kinds import Stage
from loop.flow.compile_child import _child_env, _kill_group, how_it_died
from loop.flow.device_child import DeviceJob
from loop.flow.runner import Runner, RunResult, RunTask, StageTimeouts
from loop.measure import hostlock

POLL_S = 0.2


# Lives beside the device child while its parent, the sweep, does; once the sweep is gone (a
# kill -9 runs no cleanup) it kills the child's process group: whatever a driver or vendor tool
# started there. The child itself dies at once by its parent-death signal, which leaves no
# thread of its own to do this.
KEEPER = """
import os, signal, sys, time
while os.getppid() == int(sys.argv[1]):
    time.sleep(0.1)
try:
    os.killpg(int(sys.argv[2]), signal.SIGKILL)
except OSError:
    pass
"""


class DeviceProcess:
    """One device's child process: started on first use, replaced after it dies or hangs."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._keeper: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def start(self) -> None:
        mine, theirs = socket.socketpair()
        self._log = tempfile.TemporaryFile(prefix=f"loop-device-{os.getpid()}-")  # noqa: SIM115  # lives as the child does
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "loop.flow.device_child", str(theirs.fileno()), str(os.getpid())],
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                pass_fds=(theirs.fileno(),),
                env=_child_env(),
                start_new_session=True,  # its own group: a kill takes whatever it started too
            )
        finally:
            theirs.close()
        self._conn = Connection(mine.detach())
        quiet = subprocess.DEVNULL
        self._keeper = subprocess.Popen(
            [sys.executable, "-S", "-c", KEEPER, str(os.getpid()), str(self._proc.pid)],
            stdin=quiet,
            stdout=quiet,
            stderr=quiet,
        )

    def call(self, job: DeviceJob, timeouts: StageTimeouts) -> RunResult:
        """The job's result, or a failure naming the stage where the child died or hung."""
        if self.pid is None:
            self.stop()
            self.start()
        assert self._conn is not None and self._proc is not None and self._log is not None
        self._log.seek(0)
        self._log.truncate()  # a failure's tail is this job's, not an earlier variant's
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
                if self._proc.poll() is not None or ready:
                    code = self._proc.wait()
                    return self._ended(stage, f"device process died ({how_it_died(code)}) in stage {stage}", kept)
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
        if kept is None or stage != "vendor-benchmark":
            return self._failed(stage, error)
        kept.detail = self._tail()
        self.stop()
        kept.vendor = {"error": error, "agree": None, "comparable": False}
        return kept

    def _failed(self, stage: str, error: str) -> RunResult:
        tail = self._tail()
        self.stop()
        return RunResult.failed(Stage(stage), error, host=socket.gethostname(), detail=tail)

    def _tail(self) -> str:
        if self._proc is not None and self._proc.poll() is None and hasattr(signal, "SIGUSR1"):
            try:  # a hung child: ask where it is stuck (faulthandler prints its stacks)
                os.kill(self._proc.pid, signal.SIGUSR1)
                time.sleep(0.5)
            except ProcessLookupError:
                pass
        if self._log is None:
            return ""
        self._log.seek(0, os.SEEK_END)
        self._log.seek(max(0, self._log.tell() - STDERR_TAIL))
        return self._log.read().decode("utf-8", "replace")

    def stop(self) -> None:
        """Kill the child and its group; a no-op when there is none."""
        if self._conn is not None:
            self._conn.close()
        if self._proc is not None:
            _kill_group(self._proc.pid)
            self._proc.wait()
        if self._keeper is not None:
            self._keeper.kill()
            self._keeper.wait()
        if self._log is not None:
            self._log.close()
        self._proc = self._keeper = self._conn = self._log = None


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
        with hostlock.measuring(timed_on, overlap=self.overlap):
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
