"""What a sweep finds in the ledger when it starts: finished runs to skip, live runs of
another process to leave alone, and dead ones to mark ``interrupted`` and redo."""
from __future__ import annotations

import os
import socket
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from loop.ledger import Ledger
from loop.leftovers import process_alive

STALE_HEARTBEAT_S = 300.0
HEARTBEAT_S = 30.0
FINISHED = ("ok", "failed")


def is_live(row: sqlite3.Row, now: float | None = None) -> bool:
    """A ``running`` row belongs to a live sweep: its heartbeat is recent and, on this host,
    its pid still exists (a heartbeat alone covers other hosts; the pid alone could have been
    reused by another process)."""
    fresh = (now or time.time()) - float(row["heartbeat"] or 0) < STALE_HEARTBEAT_S
    if row["host"] == socket.gethostname():
        return fresh and row["pid"] != os.getpid() and process_alive(int(row["pid"]))
    return fresh


@dataclass
class ResumeState:
    finished: dict[str, sqlite3.Row] = field(default_factory=dict)
    live: set[str] = field(default_factory=set)
    interrupted: list[int] = field(default_factory=list)


def sweep_key(ledger: Ledger, spec_sha: str, fresh: bool) -> str:
    """The key of the sweep to continue, or a new one with ``fresh``."""
    if fresh:
        return f"{spec_sha}/{time.time_ns()}"
    latest = ledger.latest_key(spec_sha)
    return latest or spec_sha


def scan(ledger: Ledger, key: str) -> ResumeState:
    state = ResumeState()
    for row in ledger.rows_for_key(key):
        name = row["variant"]
        if row["status"] in FINISHED:
            state.finished.setdefault(name, row)
        elif row["status"] == "running":
            if is_live(row):
                state.live.add(name)
            else:
                state.interrupted.append(row["id"])
    ledger.mark_interrupted(state.interrupted)
    return state


class Heartbeat:
    """Refreshes this process's running rows from a thread with its own connection."""

    def __init__(self, path: str, run_ids: list[int], every_s: float = HEARTBEAT_S) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, args=(path, run_ids, every_s), daemon=True)

    def _beat(self, path: str, run_ids: list[int], every_s: float) -> None:
        ledger = Ledger(Path(path))
        try:
            while not self._stop.wait(every_s):
                ledger.heartbeat(run_ids)
        finally:
            ledger.close()

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
