"""The Runner: the device side's twin of the compile pool (as TVM pairs Builder and Runner).

``Runner.run(task) -> RunResult`` takes a compiled artifact, the controlled inputs and a
measure protocol, and returns a value: the devices' raw outputs, the protocol's figures, the
vendor benchmark beside them and the device's health, or the stage where it failed and why
(:data:`STAGES`, each under a timeout of its own, run by :mod:`loop.flow.device_child`).
Nothing a device does raises into the sweep.

Audit and scoring are pure steps on what a runner returns (:mod:`loop.flow.evaluate`).
Runners: :class:`loop.flow.local_runner.LocalRunner` (each device in a child process of its
own) and :class:`loop.flow.remote.DaskRunner` (the same on Dask workers holding the device).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from loop.author.schema import MeasureSpec
from loop.core.kinds import Stage
from loop.core.record import Measurement
from loop.core.registry import DEVICES, split_device
from loop.core.vocab import Artifact, Frames, TensorLayout

STAGES = ("open", "inputs", "measure", "vendor-benchmark", "health")


class Stages:
    """The stage now running, told (``tell``) as it starts, and each one's seconds, by ``NAME_s``."""

    def __init__(self, tell: Callable[[str], object] = lambda _: None, first: str = "open") -> None:
        self.now, self.seconds, self._tell, self._t = first, dict[str, float](), tell, time.perf_counter()

    def __call__(self, stage: str) -> None:
        self.finish()
        self.now = stage
        self._tell(stage)

    def finish(self) -> None:
        t = time.perf_counter()
        key = f"{self.now.replace('-', '_')}_s"
        self.seconds[key] = self.seconds.get(key, 0.0) + t - self._t
        self._t = t


@dataclass(frozen=True)
class StageTimeouts:
    """Seconds each stage may take before its device process is killed; generous, since a
    run that is slow is not a run that hangs (a measure of ``duration_s`` repeats adds its own)."""

    open: float = 120.0
    inputs: float = 600.0
    measure: float = 1800.0
    vendor_benchmark: float = 600.0
    health: float = 60.0

    def of(self, stage: str, protocol: MeasureSpec | None = None, race: RaceSpec | None = None) -> float:
        base = float(getattr(self, stage.replace("-", "_")))
        if stage == "measure" and protocol is not None and protocol.duration_s:
            base += protocol.duration_s * protocol.repeats * len(protocol.depth)
        return base + (race.budget_s if stage == "measure" and race is not None else 0.0)

    @classmethod
    def parse(cls, items: tuple[str, ...]) -> StageTimeouts:
        """``("measure=30", "open=5")`` as the CLI's ``--stage-timeout`` gives them."""
        given: dict[str, float] = {}
        for item in items:
            stage, sep, seconds = item.partition("=")
            if not sep or stage not in STAGES:
                raise ValueError(f"--stage-timeout {item!r}: expected STAGE=SECONDS, STAGE one of {', '.join(STAGES)}")
            try:
                given[stage.replace("-", "_")] = float(seconds)
            except ValueError:
                raise ValueError(f"--stage-timeout {item!r}: {seconds!r} is not a number of seconds") from None
            if not given[stage.replace("-", "_")] > 0:
                raise ValueError(f"--stage-timeout {item!r}: must be above 0")
        return cls(**given)


class _Carries(Protocol):
    @property
    def artifact(self) -> Artifact: ...
    @property
    def race(self) -> RaceSpec | None: ...


C = TypeVar("C", bound=_Carries)


def with_bytes(item: C, files: Path | None = None) -> C:
    """``item`` (a task, or one device's job) with every artifact's bytes, read from where it was
    stored and checked against its hashes (:func:`loop.store.artifacts.materialize`); ``item``
    itself where each holds its bytes already (onnx, which reading imports, is not imported then).
    ``files``: a folder of this host's where an artifact its device opens by path (a HEF) is
    linked and checked instead (:func:`~loop.store.artifacts.checked_file`), never read whole.
    Raises :class:`~loop.core.errors.LoopError` for a file swapped or damaged since."""
    if all(a.data for a in (item.artifact, *(item.race.others if item.race else ()))):
        return item
    from loop.store.artifacts import OPENED_BY_PATH, checked_file, materialize

    def ready(a: Artifact) -> Artifact:
        if files is not None and not a.data and a.path and a.suffix in OPENED_BY_PATH:
            return checked_file(a, files)
        return materialize(a)

    race = item.race and replace(item.race, others=tuple(map(ready, item.race.others)))
    return replace(item, artifact=ready(item.artifact), race=race)  # type: ignore[type-var]


@dataclass(frozen=True)
class RaceSpec:
    """Measure the task's artifact (a generation's reference) together with ``others`` (its
    candidates) in interleaved rounds, instead of the protocol (:mod:`loop.measure.rounds`)."""

    others: tuple[Artifact, ...]
    target_pct: float = 3.0
    budget_s: float = 120.0


@dataclass(frozen=True)
class RunTask:
    """One thing to run: the artifact (with its bytes, so it can travel to another host), the
    controlled inputs, the protocol, and the devices by name; the first is measured, the
    others only answer the inputs. ``measure=False`` runs the inputs alone (a resumed
    reference, whose outputs are compared and whose figures are already recorded)."""

    artifact: Artifact
    inputs: Frames
    protocol: MeasureSpec
    devices: tuple[str, ...]
    device_refs: tuple[tuple[str, str], ...] = ()  # kind -> "module:Class", as the parent registered them
    measure: bool = True
    timeouts: StageTimeouts = field(default_factory=StageTimeouts)
    race: RaceSpec | None = None


def device_refs(devices: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Each device kind of ``devices`` with the class this process registered for it, for a
    child that must make the same devices (a test's or a plugin's registered at run time)."""
    return tuple((k, DEVICES[k]) for k in {split_device(d)[0] for d in devices} if k in DEVICES)


@dataclass
class DeviceRun:
    """One device's answers to the controlled inputs, as its session laid them out."""

    raw: list[list[np.ndarray]]
    deterministic: bool
    inputs: tuple[TensorLayout, ...]
    outputs: tuple[TensorLayout, ...]


@dataclass
class RunResult:
    """What a runner returns for a task: ok, or the stage it failed at and why."""

    ok: bool
    stage: Stage | None = None
    error: str | None = None
    devices: dict[str, DeviceRun] = field(default_factory=dict)
    measure: Measurement | None = None  # the protocol's, as the ledger will hold it
    race: dict[str, Any] | None = None  # or a generation's interleaved rounds (loop.measure.rounds)
    vendor: dict[str, Any] | None = None
    health: dict[str, Any] | None = None
    stages: dict[str, float] = field(default_factory=dict)  # seconds per stage
    host: str | None = None  # where the device ran
    worker: str | None = None  # the Dask worker, for a remote runner
    detail: str = ""  # the traceback, or the tail of a dead device process's stderr

    @classmethod
    def failed(cls, stage: Stage, error: str, **more: Any) -> RunResult:
        return cls(False, stage=stage, error=error, **more)


class Runner(ABC):
    """Runs tasks on devices. ``slots``: how many it runs at once; ``hosts``: where it
    measures (a compile on one of them would contend with a measurement)."""

    slots: int = 1
    _pool: ThreadPoolExecutor | None = None

    @abstractmethod
    def run(self, task: RunTask) -> RunResult: ...

    @abstractmethod
    def hosts(self) -> set[str]: ...

    def submit(self, task: RunTask) -> Future[RunResult]:
        """The task running in the background (the sweep submits from one thread only)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix="loop-runner")
        return self._pool.submit(self.run, task)

    def race_against(
        self, base: Artifact, race: RaceSpec, spec: MeasureSpec, on: tuple[str, ...]
    ) -> dict[str, Any] | str:
        """``base`` raced with ``race.others`` on ``on``: the rounds' figures (side 0 the base), or why not."""
        ran = self.run(RunTask(base, {}, spec, on, device_refs(on), measure=False, race=race))
        return ran.race if ran.ok and ran.race is not None else f"{ran.stage}: {ran.error}"

    def warm(self, devices: tuple[str, ...]) -> None:
        """Get ``devices`` ready ahead of the first task, where that saves time; else nothing."""
        return None

    def lost(self) -> str | None:
        """Why tasks still out will never come back (every device gone), or None."""
        return None

    def close(self) -> None:
        """Wait for the tasks running, cancel those queued; a later ``submit`` starts afresh."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
