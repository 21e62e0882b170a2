"""Measure as compiled: every compiled variant goes to the runner as it arrives, as many at
once as the runner has slots, and each result is audited and scored here as it comes back.

A variant is scored against its reference's outputs, so results that come back before the
reference's wait for it; the reference is submitted first (:func:`reference_first`).
"""

from __future__ import annotations

import queue
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from loop.author.author import Authored
from loop.author.sweepfile import SweepSpec
from loop.core.facts import Failure
from loop.core.kinds import Flag, Stage, Status
from loop.core.vocab import CompileResult
from loop.flow.evaluate import Against, Prepared, Reference, RunOutcome, evaluate_variant, prepare
from loop.flow.runner import Runner, RunResult, StageTimeouts

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


def reference_first(stream: Iterable[Compiled], refs: Mapping[str, Authored]) -> Iterator[Compiled]:
    """The stream with each group's reference (those evaluated in this sweep) moved ahead of
    every variant of its group that arrives before it, so no variant is ever judged before its
    reference exists, whatever order the variants were written or compiled in."""
    pending = {group: a for group, a in refs.items()}
    waiting: list[Compiled] = []
    for item in stream:
        a = item[0]
        if pending.get(a.group) is a:
            del pending[a.group]
            yield item
            ready = [w for w in waiting if w[0].group not in pending]
            waiting = [w for w in waiting if w[0].group in pending]
            yield from ready
        elif a.group in pending:
            waiting.append(item)
        else:
            yield item
    yield from waiting  # a reference never came (a stream cut short): the rest still runs


@dataclass
class _Measuring:
    spec: SweepSpec
    runner: Runner
    against: dict[str, Against]  # by group of compile options
    scorer: Scorer | None
    pending: set[str]  # groups whose reference is still out
    running: dict[Future[RunResult], tuple[Compiled, Prepared]] = field(default_factory=dict)
    held: list[tuple[Compiled, Prepared, RunResult]] = field(default_factory=list)

    def finished(self, item: Compiled, prepared: Prepared, ran: RunResult) -> Iterator[Evaluated]:
        """The evaluated variant, or nothing yet while its reference is still out; once the
        reference is in, it and every variant held for it."""
        a, c, contended = item
        if not a.reference and a.group in self.pending:
            self.held.append((item, prepared, ran))
            return
        against = self.against.get(a.group) or Against(None, "its group of compile options has no reference")
        try:
            outcome, made = evaluate_variant(self.spec, a, c, ran, prepared, against, self.scorer)
        except Exception as exc:  # a scorer's, say: this variant's failure, never the sweep's
            outcome, made = _failed(a, Stage.SCORE, exc), None
        if contended and outcome.status == Status.OK:
            outcome.flags.append(Flag.HOST_CONTENDED)
        if a.reference:
            self.reference_settled(a.group, made, f"the reference '{a.variant.name}' {_why_failed(outcome)}")
        yield Evaluated(a, c, outcome)
        if a.reference:
            yield from self.release(a.group)

    def release(self, group: str) -> Iterator[Evaluated]:
        mine = [h for h in self.held if h[0][0].group == group]
        self.held = [h for h in self.held if h[0][0].group != group]
        for h in mine:
            yield from self.finished(*h)

    def reference_settled(self, group: str, made: Reference | None, why: str) -> None:
        self.against[group] = Against(made, "" if made else why)
        self.pending.discard(group)

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
    against: Mapping[str, Against],
    refs: Mapping[str, Authored],
    scorer: Scorer | None,
    timeouts: StageTimeouts,
    measure: bool = True,
) -> Iterator[Evaluated]:
    """Each compiled variant run and evaluated, as results come back; ``refs``: each group's
    reference when it is evaluated in this stream (else ``against`` has what it set)."""
    state = _Measuring(spec, runner, dict(against), scorer, set(refs))
    # Answering the inputs only, one task more than the runner's slots waits in its queue, so
    # the device runs the next variant while this process audits, scores and records the last;
    # a measurement never has this process busy beside it (its timing would pay for that)
    queued = runner.slots + (0 if measure else 1)
    for item in reference_first(stream, refs):
        a, c, _ = item
        try:
            prepared = prepare(a, c, tuple(spec.devices), runs, timeouts, measure)
        except OSError as exc:  # the runs folder's disk refused the artifact: redone on resume
            prepared = _failed(a, Stage.STORE, exc)
        if isinstance(prepared, RunOutcome):
            if a.reference:
                state.reference_settled(a.group, None, f"the reference '{a.variant.name}' {_why_failed(prepared)}")
            yield Evaluated(a, c, prepared)
            if a.reference:
                yield from state.release(a.group)
            continue
        state.running[runner.submit(prepared.task)] = (item, prepared)
        yield from state.settle(block=len(state.running) >= queued)
    while state.running:
        yield from state.settle(block=True)
    for group in list(state.pending):  # a reference never came back: the rest still runs
        state.pending.discard(group)
        yield from state.release(group)


def _failed(a: Authored, stage: Stage, exc: Exception) -> RunOutcome:
    failure = Failure(traceback.format_exc(limit=8))
    return RunOutcome(a.variant.name, Status.FAILED, stage, f"{type(exc).__name__}: {exc}", failure=failure)


def _why_failed(outcome: RunOutcome) -> str:
    if outcome.status == Status.OK:
        return "ran but set no reference"
    return f"failed at stage {outcome.stage}: {outcome.error}"
