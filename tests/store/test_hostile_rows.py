"""Ledger rows written by something other than loop (a tamperer, another tool, a bad disk): each
is read as corrupt, naming its run and column, and every other row still reads."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from loop.core.kinds import Status
from loop.core.record import RunRecord, Scores
from loop.store.doctor import examine, repair_all
from loop.store.ledger import Ledger


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


# column, the value written over run 2's, and the words its corrupt reason must hold
HOSTILE = {
    "record-3000-deep": ("record", '{"info": ' + nested(3_000) + "}", "its record does not parse (nested 3001 deep"),
    "record-50000-deep": ("record", '{"x": ' + nested(50_000) + "}", "its record does not parse (nested 50001 deep"),
    "flags-3000-deep": ("flags", nested(3_000), "its flags does not parse (nested 3000 deep"),
    "sweep-blob": ("sweep", b"s", "its sweep is a blob, not text"),
    "heartbeat-blob": ("heartbeat", b"\x00", "its heartbeat is a blob, not real"),
    "pid-text": ("pid", "one", "its pid is text, not integer"),
    "status-unknown": ("status", "exploded", "its status is not a status loop knows"),
    "verdict-unknown": ("verdict", "great", "its verdict is not a verdict loop knows"),
    "stages-a-list": ("record", '{"stages": [1]}', "its stages is not a dict"),
    "perturb-of-numbers": ("record", '{"perturb": [1, 2]}', "its perturb is not a list of mappings"),
}


def hostile_ledger(path: Path, column: str, value: object) -> None:
    """Three ok runs, run 2's ``column`` then overwritten with ``value`` straight in SQLite."""
    with Ledger(path) as ledger:
        for i in range(3):
            run = ledger.begin("s", "k", f"v{i}", "spec", "onnxruntime")
            ledger.finish(run, RunRecord(run, "s", f"v{i}", Status.OK, scores=Scores.from_json({"snr_db": 30.0})))
    db = sqlite3.connect(path)
    db.execute(f"UPDATE runs SET {column}=? WHERE id=2", (value,))
    db.commit()
    db.close()


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_row_is_corrupt_naming_its_column_and_the_rest_read(tmp_path: Path, case: str) -> None:
    column, value, words = HOSTILE[case]
    path = tmp_path / "ledger.sqlite"
    hostile_ledger(path, column, value)
    with Ledger(path, readonly=True) as ledger:
        runs = ledger.records()
        entries = ledger.entries()
    assert [(r.id, r.status) for r in runs] == [(1, "ok"), (2, "corrupt"), (3, "ok")]
    assert words in (runs[1].error or ""), runs[1].error
    assert all(isinstance(r.sweep, str) and isinstance(r.variant, str) for r in runs)
    assert [e.corrupt is not None for e in entries] == [False, True, False]
    json.dumps([r.to_json() for r in runs])  # every reader's JSON, without a RecursionError


@pytest.mark.parametrize("case", HOSTILE)
def test_the_doctor_counts_a_hostile_row_and_repairs_it(tmp_path: Path, case: str) -> None:
    column, value, words = HOSTILE[case]
    runs = tmp_path / "runs"
    runs.mkdir()
    hostile_ledger(runs / "ledger.sqlite", column, value)
    exam = examine(runs)
    assert [p.where for p in exam.problems] == ["run 2"] and words in exam.problems[0].what
    said = repair_all(runs, exam)
    assert len(said) == 1 and "repaired" in said[0], said
    assert examine(runs).problems == []
    assert (runs / "quarantine" / "run-2.txt").is_file()
    with Ledger(runs / "ledger.sqlite", readonly=True) as ledger:
        assert [r.status for r in ledger.records()] == ["ok", "failed", "ok"]
