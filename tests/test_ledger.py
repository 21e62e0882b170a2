import json
import sqlite3
from pathlib import Path

import pytest

from loop.errors import LoopError
from loop.ledger import SCHEMA_VERSION, Ledger, run_json


def test_pragmas_and_schema(tmp_path: Path):
    ledger = Ledger(tmp_path / "l.sqlite")
    db = sqlite3.connect(tmp_path / "l.sqlite")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    ledger.close()


def test_run_lifecycle(tmp_path: Path):
    ledger = Ledger(tmp_path / "l.sqlite")
    run = ledger.begin("s", "key", "v", "spec", "onnxruntime")
    row = ledger.get(run)
    assert row["status"] == "running" and row["pid"] and row["host"] and row["heartbeat"]
    ledger.finish(run, "ok", ["power-limited"], {"scores": {"snr_db": float("inf")}, "stages": {"optimize_s": 1.0}},
                  verdict="clean", kernel_sha="abc")
    out = run_json(ledger.get(run))
    assert out["status"] == "ok" and out["verdict"] == "clean" and out["flags"] == ["power-limited"]
    assert out["scores"]["snr_db"] == "inf" and out["stages"]["optimize_s"] == 1.0
    json.dumps(out)


def test_newer_schema_is_refused(tmp_path: Path):
    path = tmp_path / "l.sqlite"
    Ledger(path).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(LoopError, match="newer than this loop knows"):
        Ledger(path)


def test_open_existing_refuses_missing(tmp_path: Path):
    with pytest.raises(LoopError, match="no ledger"):
        Ledger.open_existing(tmp_path / "nope.sqlite")
    assert not (tmp_path / "nope.sqlite").exists()
