"""Measure as compiled: every compiled variant goes to the runner as it arrives, as many at
once as the runner has slots, and each result is audited and scored here as it comes back.

A variant is scored against its reference's outputs, so results that come back before the
reference's wait for it; the reference is submitted first (:func:`reference_first`).
"""

from __future__ import annotations

import queue
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from loop.core.kinds import Flag, Stage, Status
from loop.core.vocab import CompileResult
from loop.flow.evaluate import Against, Prepared, Reference, RunOutcome, evaluate_variant, prepare
from loop.flow.runner import Runner, RunResult, StageTimeouts
from loop.spec.author import Authored
from loop.spec.sweepfile import SweepSpec

T = TypeVar("T")
LOST_POLL_S = 5.0  # how often a sweep waiting on its runner asks whether any device is left
Compiled = tuple[Authored, CompileResult, bool]  # (variant, its compile, measured while compiles ran)
Scorer = Callable[..., dict[str, Any]]


@dataclass(frozen=True)
class Evaluated:
    authored: Authored
    compiled: CompileResult
    outcome: RunOutcome


def ahead(items: Iterator[T]) -> Iterator[T]:
    """``items``, pulled in a thread of their own: compiles go on being collected (and new ones
    started) while the sweep waits on a measurement, instead of only between measurements."""
    box: queue.Queue[tuple[bool, Any]] = queue.Queue()

    def pull() -> None:
        try:
            for item in items:
                box.put((False, item))
        except BaseException as exc:  # handed to the consumer, raised there
            box.put((True, exc))
            return
        box.put((True, None))

    threading.Thread(target=pull, name="loop-compiles", daemon=True).start()
    while True:
        last, value = box.get()
        if last:
            if value is not None:
                raise value
            return
        yield value


def reference_first(stream: Iterable[Compiled], ref: Authored | None) -> Iterator[Compiled]:
    """The stream with ``ref`` (when it is to be evaluated in this sweep) moved ahead of every
    variant that arrives before it, so no variant is ever judged before its reference exists,
    whatever order the variants were written or compiled in."""
    waiting: list[Compiled] = []
    for item in stream:
        if ref is None or item[0] is ref:
            yield item
            yield from waiting
            waiting, ref = [], None
        else:
            waiting.append(item)
    yield from waiting  # the reference never came (a stream cut short): the rest still runs


@dataclass
class _Measuring:
    spec: SweepSpec
    runner: Runner
    against: Against
    scorer: Scorer | None
    reference_pending: bool
    running: dict[Future[RunResult], tuple[Compiled, Prepared]] = field(default_factory=dict)
    held: list[tuple[Compiled, Prepared, RunResult]] = field(default_factory=list)

    def finished(self, item: Compiled, prepared: Prepared, ran: RunResult) -> Iterator[Evaluated]:
        """The evaluated variant, or nothing yet while its reference is still out; once the
        reference is in, it and every variant held for it."""
        a, c, contended = item
        if not a.reference and self.reference_pending:
            self.held.append((item, prepared, ran))
            return
        try:
            outcome, made = evaluate_variant(self.spec, a, c, ran, prepared.path, self.against, self.scorer)
        except Exception as exc:  # a scorer's, say: this variant's failure, never the sweep's
            outcome, made = _failed(a, Stage.SCORE, exc), None
        if contended and outcome.status == Status.OK:
            outcome.flags.append(Flag.HOST_CONTENDED)
        if a.reference:
            self.reference_settled(made, f"the reference '{a.variant.name}' {_why_failed(outcome)}")
        yield Evaluated(a, c, outcome)
        if not a.reference or self.reference_pending:
            return
        held, self.held = self.held, []
        for h in held:
            yield from self.finished(*h)

    def reference_settled(self, made: Reference | None, why: str) -> None:
        self.against = Against(made, "" if made else why)
        self.reference_pending = False

    def settle(self, block: bool) -> Iterator[Evaluated]:
        """What has come back; with ``block``, at least one (or, when the runner has lost
        every device, every task still out, failed with why)."""
        done: set[Future[RunResult]] = set()
        while self.running and not done:
            done, _ = wait(self.running, timeout=LOST_POLL_S if block else 0, return_when=FIRST_COMPLETED)
            lost = None if done else self.runner.lost()
            if lost:
                for future in list(self.running):
                    future.cancel()
                    item, prepared = self.running.pop(future)
                    yield from self.finished(item, prepared, RunResult.failed(Stage.OPEN, lost))
            if not block:
                break
        for future in done:
            item, prepared = self.running.pop(future)
            yield from self.finished(item, prepared, _result(future))


def _result(future: Future[RunResult]) -> RunResult:
    """A runner returns failures as values; anything it raised all the same is one too."""
    try:
        return future.result()
    except Exception as exc:
        return RunResult.failed(Stage.MEASURE, f"{type(exc).__name__}: {exc}", detail=traceback.format_exc(limit=8))


def evaluated(
    spec: SweepSpec,
    runs: Path,
    stream: Iterable[Compiled],
    runner: Runner,
    against: Against,
    ref: Authored | None,
    scorer: Scorer | None,
    timeouts: StageTimeouts,
) -> Iterator[Evaluated]:
    """Each compiled variant run and evaluated, as results come back; ``ref``: the reference
    when it is evaluated in this stream (else ``against`` is already what it set)."""
    state = _Measuring(spec, runner, against, scorer, ref is not None)
    for item in reference_first(stream, ref):
        a, c, _ = item
        try:
            prepared = prepare(a, c, tuple(spec.devices), runs, timeouts)
        except OSError as exc:  # the runs folder's disk refused the artifact: redone on resume
            prepared = _failed(a, Stage.STORE, exc)
        if isinstance(prepared, RunOutcome):
            if a.reference:
                state.reference_settled(None, f"the reference '{a.variant.name}' {_why_failed(prepared)}")
            yield Evaluated(a, c, prepared)
            continue
        state.running[runner.submit(prepared.task)] = (item, prepared)
        yield from state.settle(block=len(state.running) >= runner.slots)
    while state.running:
        yield from state.settle(block=True)
    if state.held:  # the reference never came back: the rest still runs
        state.reference_pending = False
        for h in state.held:
            yield from state.finished(*h)


def _failed(a: Authored, stage: Stage, exc: Exception) -> RunOutcome:
    info = {"traceback": traceback.format_exc(limit=8)}
    return RunOutcome(a.variant.name, Status.FAILED, stage, f"{type(exc).__name__}: {exc}", info=info)


def _why_failed(outcome: RunOutcome) -> str:
    if outcome.status == Status.OK:
        return "ran but set no reference"
    return f"failed at stage {outcome.stage}: {outcome.error}"
