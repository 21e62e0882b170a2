"""What a sweep finds in the ledger when it starts: finished runs to skip, live runs of
another process to leave alone, and dead ones to mark ``interrupted`` and redo.

A sweep claims its variants in the same transaction as it reads them (:func:`claim`), so two
sweeps of one file started together can never both take a variant: the second reads the
first one's ``running`` rows. A run that failed for a reason outside the variant (the disk
was full when its artifact or row was written, a record found corrupt) is redone, and so is
an ``ok`` row whose record no longer parses.

A sweep's key covers the content of what it authored (:func:`loop.flow.sweep.identity`), so a
base or frame file rewritten in place makes a new sweep that runs afresh; :func:`moved` says
in one line what changed since the runs it no longer resumes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from loop.core.errors import LoopError
from loop.core.kinds import Stage, Status
from loop.core.record import RunRecord
from loop.store.ledger import Ledger, LedgerEntry, is_live

SHA_SHOWN = 8
HEARTBEAT_S = 30.0
FINISHED = (Status.OK, Status.FAILED)
RETRIED_STAGES = (Stage.STORE, Stage.LEDGER)  # failed where the variant is not to blame: redone on resume


@dataclass
class ResumeState:
    finished: dict[str, RunRecord] = field(default_factory=dict)
    live: set[str] = field(default_factory=set)
    interrupted: list[int] = field(default_factory=list)


def sweep_key(ledger: Ledger, spec_sha: str, fresh: bool) -> str:
    """The key of the sweep to continue, or a new one with ``fresh``."""
    if fresh:
        return f"{spec_sha}/{time.time_ns()}"
    latest = ledger.latest_key(spec_sha)
    return latest or spec_sha


def finished(run: RunRecord) -> bool:
    """Whether ``run`` settles its variant for good (a resume skips it); a row that cannot be
    read is read back ``corrupt``, so it never does."""
    return run.status in FINISHED and not (run.status == Status.FAILED and run.stage in RETRIED_STAGES)


def scan(ledger: Ledger, key: str) -> ResumeState:
    """Read the runs of ``key`` and mark the dead ones ``interrupted``, in one transaction."""
    state = ResumeState()
    with ledger.write():
        for entry in ledger.entries(key):
            _sort(state, entry)
        ledger.mark_interrupted(state.interrupted)
    return state


def _sort(state: ResumeState, entry: LedgerEntry) -> None:
    """Into ``state``: a finished run (the first of its variant), a live one, or a dead one."""
    name = entry.run.variant
    if finished(entry.run):
        state.finished.setdefault(name, entry.run)
    elif entry.status == Status.RUNNING:  # as written: a corrupt row's sweep may be alive too
        if is_live(entry):
            state.live.add(name)
        else:
            state.interrupted.append(entry.run.id)


class ContentChanged(UserWarning):
    """A base or frame file changed under its path since earlier runs: they are not reused."""


@dataclass(frozen=True)
class Content:
    """What a reference's figures stand on besides its settings: its base as authored and its
    calibration and scoring frames, each by hash (None: not recorded, by an older loop)."""

    onnx_sha: str | None
    calib_sha: str | None
    inputs_sha: str | None

    @classmethod
    def of(cls, run: RunRecord) -> Content:
        return cls(run.onnx_sha, run.calib_sha, run.inputs_sha)


@dataclass(frozen=True)
class Named:
    """How to name a reference's content to a person: its base, and its frame files (None: seeded)."""

    base: str
    calibration: str | None = None
    inputs: str | None = None


def moved(before: Content, now: Content, names: Named, since: str) -> str | None:
    """One line saying what of ``before`` differs in ``now``, or None where nothing recorded
    does. Seeded frames change with the base's shapes, so they are named only where the base
    did not change."""
    parts = [("base " + names.base, before.onnx_sha, now.onnx_sha)]
    for what, file, old, new in (
        ("calibration", names.calibration, before.calib_sha, now.calib_sha),
        ("scoring", names.inputs, before.inputs_sha, now.inputs_sha),
    ):
        if file is not None or before.onnx_sha == now.onnx_sha:
            parts.append((f"{what} frames {file}" if file else f"seeded {what} frames", old, new))
    said = [
        f"{what} changed since {since} (sha {_short(old)} -> {_short(new)})"
        for what, old, new in parts
        if old != new and old
    ]
    return "; ".join(said) + ": measured afresh" if said else None


def _short(sha: str | None) -> str:
    return (sha or "-")[:SHA_SHOWN]


def moved_since(ledger: Ledger, sweep: str, now: Mapping[str, Content], names: Mapping[str, Named]) -> list[str]:
    """For a sweep about to start afresh: what changed in each reference (``now``, by variant)
    since the latest finished run of that variant under the same sweep name."""
    latest = ledger.latest(sweep, lambda run: run.variant in now and run.status == Status.OK)
    found = (moved(Content.of(run), now[v], names[v], f"run {run.id}") for v, run in latest.items())
    return [line for line in found if line]


@dataclass(frozen=True)
class Claim:
    """What a sweep asks for: its key and the variants (name, spec hash) it wants to run."""

    sweep: str
    identity: str
    fresh: bool
    variants: tuple[tuple[str, str], ...]
    backend: str
    generation: int | None = None


def claim(ledger: Ledger, want: Claim) -> tuple[str, ResumeState, dict[str, int]]:
    """The sweep's key, what the ledger holds for it, and a ``running`` row (its id) for every
    variant neither finished nor live elsewhere: all read and written in one transaction."""
    with ledger.write():
        key = sweep_key(ledger, want.identity, want.fresh)
        state = scan(ledger, key)
        ids = {
            name: ledger.begin(want.sweep, key, name, sha, want.backend, want.generation)
            for name, sha in want.variants
            if name not in state.finished and name not in state.live
        }
    return key, state, ids


class Heartbeat:
    """Refreshes this process's running rows from a thread with its own connection."""

    def __init__(self, path: str, run_ids: list[int], every_s: float = HEARTBEAT_S) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, args=(path, run_ids, every_s), daemon=True)

    def _beat(self, path: str, run_ids: list[int], every_s: float) -> None:
        ledger = Ledger(Path(path))
        try:
            while not self._stop.wait(every_s):
                try:
                    ledger.heartbeat(run_ids)
                except LoopError:  # a full disk or a busy ledger: the next beat tries again
                    pass
        finally:
            ledger.close()

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
