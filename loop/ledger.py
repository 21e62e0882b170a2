"""The SQLite ledger: every run, with what reproduces it.

WAL mode, ``synchronous=FULL``, a busy timeout, and every write in ``BEGIN IMMEDIATE``.
The schema version lives in ``PRAGMA user_version``; a newer one than this code knows is
refused. A run row is inserted ``running`` (pid, host, heartbeat) before work starts and
finished ``ok`` or ``failed``. Only the sweep's parent process writes.
"""
from __future__ import annotations

import json
import math
import os
import socket
import sqlite3
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from loop.errors import LoopError

SCHEMA_VERSION = 2
BUSY_TIMEOUT_MS = 60_000
# The newest schema, for a new ledger; an older ledger is brought up by MIGRATIONS[v] (v -> v+1).
SCHEMA = [
    """CREATE TABLE IF NOT EXISTS runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        sweep TEXT NOT NULL, sweep_key TEXT NOT NULL, variant TEXT NOT NULL,
        generation INTEGER, status TEXT NOT NULL, error TEXT, stage TEXT,
        pid INTEGER, host TEXT, heartbeat REAL, started REAL, finished REAL,
        spec_sha TEXT, onnx_sha TEXT, calib_sha TEXT, kernel_sha TEXT, bias_sha TEXT,
        backend TEXT, device TEXT, artifact TEXT, verdict TEXT, flags TEXT NOT NULL DEFAULT '[]',
        record TEXT NOT NULL DEFAULT '{}', compiled_on TEXT, cache_hit INTEGER NOT NULL DEFAULT 0)""",
    "CREATE INDEX IF NOT EXISTS runs_by_sweep ON runs (sweep_key, variant, status)",
]
MIGRATIONS: dict[int, list[str]] = {
    1: ["ALTER TABLE runs ADD COLUMN compiled_on TEXT",
        "ALTER TABLE runs ADD COLUMN cache_hit INTEGER NOT NULL DEFAULT 0"],
}
COLUMNS = ("error", "stage", "onnx_sha", "calib_sha", "kernel_sha", "bias_sha", "device", "artifact", "verdict",
           "compiled_on", "cache_hit")
NETWORK_FILESYSTEMS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "9p", "afs", "ceph", "glusterfs",
                       "lustre", "fuse.gcsfuse", "fuse.s3fs", "davfs")


class LedgerWarning(UserWarning):
    """Something about the ledger a user should know, that does not stop the work."""


def filesystem_type(path: Path, mounts: str | None = None) -> str | None:
    """The type of the filesystem holding ``path``, from /proc/mounts (longest mount point)."""
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text()
        except OSError:
            return None
    target, best, kind = str(Path(path).resolve()), "", None
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best):
            best, kind = point, parts[2]
    return kind


def _finite(value: Any) -> Any:
    """Plain JSON values: numpy scalars and arrays (a user scorer's, say) become Python ones,
    and inf/nan, which JSON lacks, strings a reader can still tell apart."""
    if isinstance(value, np.generic):
        value = value.item()
    elif isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            self._db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        except (OSError, sqlite3.Error) as exc:
            raise LoopError(f"cannot open the ledger {self.path}: {exc}", field="--runs") from None
        self._db.row_factory = sqlite3.Row
        self._wal()
        self._db.execute("PRAGMA synchronous=FULL")
        self._migrate()
        kind = filesystem_type(self.path.parent)
        if kind in NETWORK_FILESYSTEMS:
            warnings.warn(f"ledger {self.path} is on a network filesystem ({kind}); SQLite's locking is not "
                          "safe there: keep --runs on a local disk", LedgerWarning, stacklevel=2)

    def _wal(self) -> None:
        """Switch to WAL. The switch needs the database to itself and SQLite does not wait for
        it through the busy timeout, so several processes opening a new ledger at once retry."""
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        delay = 0.01
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    @classmethod
    def open_existing(cls, path: Path) -> "Ledger":
        if not Path(path).exists():
            raise LoopError(f"no ledger at {path} (run 'loop sweep' first, or pass --runs)")
        return cls(path)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _migrate(self) -> None:
        with self.write() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise LoopError(f"ledger {self.path} has schema version {version}, newer than this loop "
                                f"knows ({SCHEMA_VERSION}); upgrade loop to read it")
            steps = [SCHEMA] if version == 0 else [MIGRATIONS[v] for v in range(version, SCHEMA_VERSION)]
            for statement in (s for step in steps for s in step):
                db.execute(statement)
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def begin(self, sweep: str, sweep_key: str, variant: str, spec_sha: str, backend: str,
              generation: int | None = None) -> int:
        now = time.time()
        with self.write() as db:
            cur = db.execute(
                "INSERT INTO runs (sweep, sweep_key, variant, generation, status, pid, host, heartbeat, started,"
                " spec_sha, backend) VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?)",
                (sweep, sweep_key, variant, generation, os.getpid(), socket.gethostname(), now, now, spec_sha, backend))
            return int(cur.lastrowid or 0)

    def heartbeat(self, run_ids: list[int]) -> None:
        with self.write() as db:
            db.executemany("UPDATE runs SET heartbeat=? WHERE id=? AND status='running'",
                           [(time.time(), i) for i in run_ids])

    def finish(self, run_id: int, status: str, flags: list[str], record: dict[str, Any], **columns: Any) -> None:
        unknown = set(columns) - set(COLUMNS)
        if unknown:
            raise ValueError(f"unknown ledger columns {sorted(unknown)}")
        sets = ", ".join(f"{c}=?" for c in columns)
        with self.write() as db:
            db.execute(f"UPDATE runs SET status=?, finished=?, flags=?, record=?{', ' + sets if sets else ''} WHERE id=?",
                       (status, time.time(), json.dumps(flags), json.dumps(_finite(record), default=repr),
                        *columns.values(), run_id))

    def latest_key(self, spec_sha: str) -> str | None:
        row = self._db.execute("SELECT sweep_key FROM runs WHERE sweep_key=? OR sweep_key LIKE ? ORDER BY id DESC LIMIT 1",
                               (spec_sha, spec_sha + "/%")).fetchone()
        return row[0] if row else None

    def rows_for_key(self, key: str) -> list[sqlite3.Row]:
        return list(self._db.execute("SELECT * FROM runs WHERE sweep_key=? ORDER BY id", (key,)))

    def mark_interrupted(self, run_ids: list[int]) -> None:
        if not run_ids:
            return
        with self.write() as db:
            db.executemany("UPDATE runs SET status='interrupted', finished=? WHERE id=? AND status='running'",
                           [(time.time(), i) for i in run_ids])

    def rows(self, sweep: str | None = None) -> list[sqlite3.Row]:
        query, args = "SELECT * FROM runs", tuple[str, ...]()
        if sweep:
            query, args = query + " WHERE sweep=?", (sweep,)
        return list(self._db.execute(query + " ORDER BY id", args))

    def get(self, run_id: int) -> sqlite3.Row:
        row = self._db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        if row is None:
            raise LoopError(f"no run {run_id} in {self.path}")
        return row

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_json(row: sqlite3.Row) -> dict[str, Any]:
    """The pinned JSON shape of one run (``loop runs --json``)."""
    record = json.loads(row["record"])
    measure = record.get("measure") or {}
    return {
        "id": row["id"], "sweep": row["sweep"], "variant": row["variant"], "status": row["status"],
        "error": row["error"], "stage": row["stage"], "generation": row["generation"],
        "onnx_sha": row["onnx_sha"], "kernel_sha": row["kernel_sha"], "bias_sha": row["bias_sha"],
        "artifact": row["artifact"], "backend": row["backend"], "device": row["device"],
        "stages": record.get("stages", {}),
        "layers": [{k: l.get(k) for k in ("name", "kernel_sha", "bias_sha", "in_scale", "out_scale")}
                   for l in record.get("layers", [])],
        "measure": measure,
        "scores": record.get("scores", {}),
        "verdict": row["verdict"], "flags": json.loads(row["flags"]),
        "changes": record.get("changes", []),
        "compiled_on": row["compiled_on"], "cache_hit": bool(row["cache_hit"]),
        "perturb": record.get("perturb", []),
        "warnings": (record.get("info") or {}).get("warnings", []),
    }
