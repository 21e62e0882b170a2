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


V1_SCHEMA = """CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    sweep TEXT NOT NULL, sweep_key TEXT NOT NULL, variant TEXT NOT NULL,
    generation INTEGER, status TEXT NOT NULL, error TEXT, stage TEXT,
    pid INTEGER, host TEXT, heartbeat REAL, started REAL, finished REAL,
    spec_sha TEXT, onnx_sha TEXT, calib_sha TEXT, kernel_sha TEXT, bias_sha TEXT,
    backend TEXT, device TEXT, artifact TEXT, verdict TEXT, flags TEXT NOT NULL DEFAULT '[]',
    record TEXT NOT NULL DEFAULT '{}')"""

OPEN_AND_COUNT = """
import sys
from loop.ledger import Ledger
Ledger(sys.argv[1]).close()
"""


def test_old_schema_migrates_once_under_concurrent_opens(tmp_path: Path):
    import subprocess
    import sys
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute(V1_SCHEMA)
    db.execute("INSERT INTO runs (sweep, sweep_key, variant, status) VALUES ('s', 'k', 'v', 'ok')")
    db.execute("PRAGMA user_version=1")
    db.commit()
    db.close()
    procs = [subprocess.Popen([sys.executable, "-c", OPEN_AND_COUNT, str(path)], stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    errors = [p.communicate()[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, errors
    db = sqlite3.connect(path)
    columns = [r[1] for r in db.execute("PRAGMA table_info(runs)")]
    assert columns.count("compiled_on") == 1 and columns.count("cache_hit") == 1
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert db.execute("SELECT variant, status, cache_hit FROM runs").fetchall() == [("v", "ok", 0)]


def test_network_filesystem_is_detected():
    from loop.ledger import filesystem_type
    mounts = "/dev/vda / ext4 rw 0 0\nserver:/export /mnt/shared nfs4 rw 0 0\n"
    assert filesystem_type(Path("/mnt/shared/runs"), mounts) == "nfs4"
    assert filesystem_type(Path("/home/me/runs"), mounts) == "ext4"
    assert filesystem_type(Path("/mnt/sharedother"), mounts) == "ext4"


def test_ledger_on_network_filesystem_warns(tmp_path: Path, monkeypatch):
    import loop.ledger as ledger_mod
    monkeypatch.setattr(ledger_mod, "filesystem_type", lambda path, mounts=None: "nfs")
    with pytest.warns(ledger_mod.LedgerWarning, match="network filesystem"):
        Ledger(tmp_path / "l.sqlite").close()
