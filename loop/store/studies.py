"""A study's state, in the ledger's own tables and transactions (issue 34): the study's settings,
its generations (claimed, done or abandoned), each generation's candidates (content key, the run
that answers it, the generation a reused one came from) and the ratios measured in interleaved
rounds. The one contract a study reads and writes, as Optuna's storage is its studies' contract;
the generation YAML files are written for people and never read back.

A generation number is claimed in one ``BEGIN IMMEDIATE`` transaction, so two processes never
write the same one. A generation whose process died before it was done is resumed by the next
``evaluate`` of the same candidates (its sweep resumes from the ledger; its ratios are measured
again), and abandoned by one of other candidates.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from loop.core.errors import LoopError
from loop.core.leftovers import process_alive
from loop.store.ledger import Ledger, is_live

CLAIMED, DONE, ABANDONED = "claimed", "done", "abandoned"
SHORT = ("not narrowing", "budget")  # how a race's rounds stop short of their target (loop.measure.rounds)


class Ratio(NamedTuple):
    """A rate ratio to the reference and its 95% interval."""

    value: float
    low: float
    high: float


@dataclass(frozen=True)
class Asked:
    """One candidate of a generation as asked: its position, content key and run name."""

    idx: int
    key: str
    variant: str


@dataclass(frozen=True)
class Answered:
    """A candidate of a done generation: the run that answers it (and its reference)."""

    generation: int
    idx: int
    key: str
    run_id: int
    ref_run_id: int | None
    reused_from: int | None  # the generation whose run it reuses (None: run in its own)


@dataclass(frozen=True)
class RatioRow:
    """A candidate run's ratio from interleaved rounds, and its own rate from the same rounds."""

    run_id: int
    ref_run_id: int
    ratio: Ratio
    rounds: int | None
    floor_pct: float | None
    dropped: int | None  # the round it left the race (beaten), or None
    flags: tuple[str, ...]
    fps: Ratio | None  # its median frames per second in those rounds, with its interval
    target_pct: float | None = None  # the half-width its interval was raced to (measure.target_ratio_pct)
    stopped: str | None = None  # why its rounds ended: target, not narrowing, budget, beaten (None: not recorded)

    @property
    def met(self) -> bool:
        """Whether the rounds' interval is within the target the race ran to: a ratio to trust,
        whatever else the host ran, since load both sides share cancels in it. One whose rounds
        stopped short of the target (not narrowing, or the budget spent) never met it."""
        if self.target_pct is None or self.stopped in SHORT:
            return False
        return (self.ratio.high - self.ratio.low) / 2 / self.ratio.value * 100 <= self.target_pct


class StudyStore:
    """A study's rows in the ledger ``ledger`` (opened writable to claim or record)."""

    def __init__(self, ledger: Ledger, name: str) -> None:
        self.ledger, self.name = ledger, name

    # -- the study ------------------------------------------------------------------------

    def settings(self) -> dict[str, Any] | None:
        """As the study was started: ``{"base", "backend", "settings"}``; None if it was not."""
        rows = self.ledger.query("SELECT base, backend, settings FROM studies WHERE name=?", (self.name,))
        if not rows:
            return None
        return {"base": rows[0]["base"], "backend": rows[0]["backend"], "settings": json.loads(rows[0]["settings"])}

    def start(self, asked: Mapping[str, Any], base_sha: str | None) -> dict[str, Any]:
        """Write the study down unless another process did first; what it holds either way."""
        with self.ledger.write() as db:
            db.execute(
                "INSERT OR IGNORE INTO studies (name, base, base_sha, backend, settings, created) VALUES (?,?,?,?,?,?)",
                (
                    self.name,
                    asked["base"],
                    base_sha,
                    asked["backend"],
                    json.dumps(asked["settings"], sort_keys=True, default=str),
                    time.time(),
                ),
            )
        found = self.settings()
        assert found is not None  # written just now, in this ledger
        return found

    # -- generations ----------------------------------------------------------------------

    def claim(self, asked: Sequence[Asked], number: int | None = None) -> tuple[int, bool]:
        """The generation these candidates run as, claimed for this process, and whether it
        resumes one a dead process left: the latest generation, if not done, of the same keys,
        whose process is gone (or is this one). Another one not done is left to its process;
        a dead one of other keys is abandoned. ``number``: that number, refused if taken."""
        keys = [a.key for a in asked]
        with self.ledger.write() as db:
            rows = db.execute(
                "SELECT number, state, pid, host FROM generations WHERE study=? ORDER BY number", (self.name,)
            ).fetchall()
            taken = {int(r["number"]) for r in rows}
            for r in rows:
                if r["state"] != CLAIMED or not _gone(r["pid"], r["host"]):
                    continue
                theirs = [
                    c["key"]
                    for c in db.execute(
                        "SELECT key FROM candidates WHERE study=? AND generation=? ORDER BY idx",
                        (self.name, r["number"]),
                    )
                ]
                if theirs == keys and number in (None, r["number"]):
                    self._own(db, int(r["number"]))
                    return int(r["number"]), True
                db.execute(
                    "UPDATE generations SET state=? WHERE study=? AND number=?", (ABANDONED, self.name, r["number"])
                )
            if number is not None and number in taken:
                raise LoopError(f"study '{self.name}' has a generation {number} already: leave generation out")
            found = max(taken, default=-1) + 1 if number is None else number
            db.execute(
                "INSERT INTO generations (study, number, state, pid, host, claimed) VALUES (?,?,?,?,?,?)",
                (self.name, found, CLAIMED, os.getpid(), socket.gethostname(), time.time()),
            )
            db.executemany(
                "INSERT INTO candidates (study, generation, idx, key, variant, state) VALUES (?,?,?,?,?,?)",
                [(self.name, found, a.idx, a.key, a.variant, CLAIMED) for a in asked],
            )
        return found, False

    def _own(self, db: Any, number: int) -> None:
        db.execute(
            "UPDATE generations SET pid=?, host=?, claimed=? WHERE study=? AND number=?",
            (os.getpid(), socket.gethostname(), time.time(), self.name, number),
        )

    def answer(self, number: int, rows: Iterable[tuple[int, str | None, int, int | None, int | None]]) -> None:
        """Each candidate's run: ``(idx, sweep, run_id, ref_run_id, reused_from)``."""
        with self.ledger.write() as db:
            db.executemany(
                "UPDATE candidates SET sweep=?, run_id=?, ref_run_id=?, reused_from=?, state=? "
                "WHERE study=? AND generation=? AND idx=?",
                [(sweep, run, ref, reused, DONE, self.name, number, idx) for idx, sweep, run, ref, reused in rows],
            )

    def finish(self, number: int) -> None:
        with self.ledger.write() as db:
            db.execute("UPDATE generations SET state=? WHERE study=? AND number=?", (DONE, self.name, number))

    def states(self) -> dict[int, str]:
        rows = self.ledger.query("SELECT number, state FROM generations WHERE study=? ORDER BY number", (self.name,))
        return {int(r["number"]): str(r["state"]) for r in rows}

    def numbers(self) -> list[int]:
        """Every generation number claimed, in order."""
        rows = self.ledger.query("SELECT number FROM generations WHERE study=? ORDER BY number", (self.name,))
        return [int(r["number"]) for r in rows]

    def interrupt_dead(self) -> list[int]:
        """Mark ``interrupted`` this study's runs left ``running`` by a process that is gone, as a
        sweep's resume does for its own (pid on this host, heartbeat elsewhere): a generation
        abandoned, or one a rerun never asks again, is never resumed by a sweep that would. The
        ids marked."""
        own = re.compile(re.escape(self.name) + r"-g(\d+)(-o[0-9a-f]{8})?")
        with self.ledger.write() as db:
            numbers = {int(r[0]) for r in db.execute("SELECT number FROM generations WHERE study=?", (self.name,))}
            found = self.ledger.running(_like(self.name) + "-g%")
            dead = [
                e.run.id
                for e in found
                if e.run.id is not None
                and (m := own.fullmatch(e.run.sweep)) is not None
                and int(m[1]) in numbers
                and not is_live(e)
            ]
            self.ledger.mark_interrupted(dead)
        return dead

    def answered(self) -> list[Answered]:
        """Every candidate of every done generation, in generation and candidate order."""
        rows = self.ledger.query(
            "SELECT c.generation, c.idx, c.key, c.run_id, c.ref_run_id, c.reused_from FROM candidates c "
            "JOIN generations g ON g.study=c.study AND g.number=c.generation "
            "WHERE c.study=? AND g.state=? AND c.run_id IS NOT NULL ORDER BY c.generation, c.idx",
            (self.name, DONE),
        )
        return [
            Answered(
                int(r["generation"]),
                int(r["idx"]),
                str(r["key"]),
                int(r["run_id"]),
                None if r["ref_run_id"] is None else int(r["ref_run_id"]),
                None if r["reused_from"] is None else int(r["reused_from"]),
            )
            for r in rows
        ]

    # -- ratios ---------------------------------------------------------------------------

    def put_ratios(self, rows: Iterable[RatioRow]) -> None:
        """A race's rows, in one transaction (a run raced again keeps its latest)."""
        with self.ledger.write() as db:
            db.executemany(
                "INSERT OR REPLACE INTO ratios (run_id, ref_run_id, ratio, low, high, rounds, floor_pct, dropped,"
                " flags, fps, fps_low, fps_high, target_pct, stopped) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [_row(r) for r in rows],
            )


def study_names(ledger: Ledger) -> list[str]:
    """Every study the ledger holds, in the order they were started (none in a ledger older than studies)."""
    return [str(r["name"]) for r in ledger.query("SELECT name FROM studies ORDER BY created, name")]


def ratios(ledger: Ledger, run_ids: Iterable[int] | None = None) -> dict[int, RatioRow]:
    """The raced runs' rows, by run id (of ``run_ids``, or every one)."""
    rows = ledger.query("SELECT * FROM ratios")
    wanted = None if run_ids is None else set(run_ids)
    return {int(r["run_id"]): _ratio(r) for r in rows if wanted is None or int(r["run_id"]) in wanted}


def _row(r: RatioRow) -> tuple[Any, ...]:
    fps = r.fps or Ratio(None, None, None)  # type: ignore[arg-type]
    flags = json.dumps(list(r.flags))
    return (r.run_id, r.ref_run_id, *r.ratio, r.rounds, r.floor_pct, r.dropped, flags, *fps, r.target_pct, r.stopped)


def _ratio(r: Any) -> RatioRow:
    fps = None if r["fps"] is None else Ratio(float(r["fps"]), float(r["fps_low"]), float(r["fps_high"]))
    return RatioRow(
        int(r["run_id"]),
        int(r["ref_run_id"]),
        Ratio(float(r["ratio"]), float(r["low"]), float(r["high"])),
        r["rounds"],
        r["floor_pct"],
        r["dropped"],
        tuple(str(f) for f in json.loads(r["flags"] or "[]")),
        fps,
        r["target_pct"],
        # a ledger of schema 3 read as it is has no such column (``in`` on a Row looks at values)
        r["stopped"] if "stopped" in r.keys() else None,  # noqa: SIM118
    )


def _like(text: str) -> str:
    """``text`` as a LIKE pattern that matches it alone (``\\`` escapes)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _gone(pid: int | None, host: str | None) -> bool:
    """Whether the process that claimed a generation is gone: this process (a generation it
    left unfinished by an exception) counts as gone; another host's process is never presumed so."""
    if pid is None or host != socket.gethostname():
        return False
    return pid == os.getpid() or not process_alive(int(pid))  # a zombie is gone too


__all__ = ["Answered", "Asked", "Ratio", "RatioRow", "StudyStore", "ratios"]
