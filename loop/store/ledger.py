"""The SQLite ledger: every run, with what reproduces it.

WAL mode, ``synchronous=FULL``, a busy timeout, and every write in ``BEGIN IMMEDIATE``.
The schema version lives in ``PRAGMA user_version``; a newer one than this code knows is
refused. A run row is inserted ``running`` (pid, host, heartbeat) before work starts and
finished ``ok`` or ``failed``. Only the sweep's parent process writes.

A run goes in and comes out as one :class:`loop.core.record.RunRecord`, through the matching
pair :func:`to_row` and :func:`from_row`; no database row leaves the store. The resume and the
doctor, which also need to know whose a ``running`` row is, read :class:`LedgerEntry` values.
"""

from __future__ import annotations

import errno
import json
import math
import os
import socket
import sqlite3
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from loop.core import jsondepth
from loop.core.errors import LoopError
from loop.core.facts import CompileFacts, Facts, Failure, Judgement, Where, read
from loop.core.kinds import Flag, Kind, Stage, Status, Verdict
from loop.core.leftovers import process_alive
from loop.core.record import Change, Measurement, RunRecord, Scores
from loop.core.vocab import LayerPrint
from loop.store.files import NETWORK_FILESYSTEMS, StoreFault, filesystem_type, nearly_full

LEDGER_FILE = "ledger.sqlite"  # in a runs folder
SCHEMA_VERSION = 4
BUSY_TIMEOUT_MS = 60_000
SQLITE_FULL = getattr(sqlite3, "SQLITE_FULL", 13)
ERROR_CHARS = 1 << 16  # of a run's error, read back
CUT_MARK = " [cut]"
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
# Studies (loop.store.studies): what was asked, generation by generation, and the ratios measured.
STUDY_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS studies (
        name TEXT PRIMARY KEY, base TEXT, base_sha TEXT, backend TEXT NOT NULL,
        settings TEXT NOT NULL, created REAL NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS generations (
        study TEXT NOT NULL, number INTEGER NOT NULL, state TEXT NOT NULL,
        pid INTEGER, host TEXT, claimed REAL, PRIMARY KEY (study, number))""",
    """CREATE TABLE IF NOT EXISTS candidates (
        study TEXT NOT NULL, generation INTEGER NOT NULL, idx INTEGER NOT NULL, key TEXT NOT NULL,
        sweep TEXT, variant TEXT NOT NULL, run_id INTEGER, ref_run_id INTEGER, reused_from INTEGER,
        state TEXT NOT NULL, PRIMARY KEY (study, generation, idx))""",
    """CREATE TABLE IF NOT EXISTS ratios (
        run_id INTEGER PRIMARY KEY, ref_run_id INTEGER NOT NULL, ratio REAL NOT NULL, low REAL NOT NULL,
        high REAL NOT NULL, rounds INTEGER, floor_pct REAL, dropped INTEGER, flags TEXT NOT NULL DEFAULT '[]',
        fps REAL, fps_low REAL, fps_high REAL, target_pct REAL)""",
]
RATIO_STOPPED = ["ALTER TABLE ratios ADD COLUMN stopped TEXT"]  # why a candidate's rounds ended (issue 42)
SCHEMA += STUDY_SCHEMA + RATIO_STOPPED
MIGRATIONS: dict[int, list[str]] = {
    1: [
        "ALTER TABLE runs ADD COLUMN compiled_on TEXT",
        "ALTER TABLE runs ADD COLUMN cache_hit INTEGER NOT NULL DEFAULT 0",
    ],
    2: STUDY_SCHEMA,
    3: RATIO_STOPPED,
}


class LedgerWarning(UserWarning):
    """Something about the ledger a user should know, that does not stop the work."""


_PLAIN = (int, str, bool, type(None))


def _finite(value: Any) -> Any:
    """Plain JSON values: numpy scalars and arrays (a user scorer's, say) become Python ones,
    and inf/nan, which JSON lacks, strings a reader can still tell apart."""
    kind = type(value)  # a record's values are mostly floats: those first, without the ABC checks
    if kind is float:
        return value if math.isfinite(value) else str(value)
    if kind in _PLAIN:
        return value
    if isinstance(value, np.generic):
        value = value.item()
    elif isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


class LedgerFault(StoreFault):
    """SQLite failed under the ledger (a damaged file, a full disk): one line, not a traceback."""

    def __init__(self, message: str, full: bool = False) -> None:
        super().__init__(message)
        self.full = full


def is_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk (or the database's size limit) is full."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
    return getattr(exc, "sqlite_errorcode", None) == SQLITE_FULL or "database or disk is full" in str(exc)


def _refuse_links(path: Path) -> None:
    """SQLite would write through a link at the ledger (or its WAL) to wherever it points."""
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{path}{suffix}").is_symlink():
            raise LoopError(f"{path}{suffix} is a symbolic link; loop does not write through links", field="--runs")


class Garbled(str):
    """Text whose bytes in the file are not UTF-8 (flipped bytes): shown with replacement
    characters, and its row read as corrupt, rather than failing the whole query."""


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return Garbled(raw.decode("utf-8", "replace"))


class Ledger:
    """The ledger file. ``readonly`` (every command that only reads) opens it with SQLite's
    ``mode=ro``: never migrated, never written, readable in a read-only runs folder."""

    def __init__(self, path: Path, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self._select: str | None = None
        self._db = self._connect()
        with self._faults():
            if readonly:
                self._check_schema()
            else:
                self._wal()
                self._db.execute("PRAGMA synchronous=FULL")
                self._migrate()
        kind = filesystem_type(self.path.parent)
        if kind in NETWORK_FILESYSTEMS:
            warnings.warn(
                f"ledger {self.path} is on a network filesystem ({kind}); SQLite's locking is not "
                "safe there: keep --runs on a local disk",
                LedgerWarning,
                stacklevel=2,
            )

    def _connect(self, immutable: bool = False) -> sqlite3.Connection:
        try:
            if self.readonly:
                uri = self.path.resolve().as_uri() + ("?mode=ro&immutable=1" if immutable else "?mode=ro")
                db = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                _refuse_links(self.path)
                db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        except (OSError, sqlite3.Error) as exc:
            raise LoopError(f"cannot open the ledger {self.path}: {exc}", field="--runs") from None
        db.row_factory = sqlite3.Row
        db.text_factory = _text
        return db

    def _version(self) -> int:
        try:
            return int(self._db.execute("PRAGMA user_version").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if "unable to open" not in str(exc) or not self.readonly:
                raise
        # A read-only folder holding a WAL ledger without its -shm file, which a reader cannot
        # create: read the main file as it is (what a finished sweep left there).
        self._db.close()
        self._db = self._connect(immutable=True)
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def _check_schema(self) -> None:
        """A reader takes the schema as it finds it: a newer one is refused, an older one read
        as it is (a sweep upgrades it), and a file without runs is not a ledger."""
        version = self._known(self._version())
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "runs" not in tables:
            raise LoopError(f"{self.path} is not a loop ledger (it has no runs table)")
        if version < SCHEMA_VERSION:
            warnings.warn(
                f"ledger {self.path} has schema version {version}, older than this loop's "
                f"({SCHEMA_VERSION}): read as it is; the next sweep on it upgrades it",
                LedgerWarning,
                stacklevel=3,
            )

    def _known(self, version: int) -> int:
        """``version``, a schema this code knows: a newer one is refused."""
        if version > SCHEMA_VERSION:
            raise LoopError(
                f"ledger {self.path} has schema version {version}, newer than this loop "
                f"knows ({SCHEMA_VERSION}); upgrade loop to read it"
            )
        return version

    @contextmanager
    def _faults(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as exc:
            # SQLite reports some out-of-space writes (growing the WAL or its index) as I/O errors
            full = is_full(exc) or ("disk I/O error" in str(exc) and nearly_full(self.path.parent))
            hint = (
                "the disk is full: free space, then run the sweep again to finish it"
                if full
                else f"'loop doctor --runs {self.path.parent}' says more"
            )
            raise LedgerFault(f"ledger {self.path}: {exc}: {hint}", full=full) from None

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
    def of_runs(cls, runs: Path, readonly: bool = False, existing: bool = False) -> Ledger:
        """The ledger of runs folder ``runs``; ``existing``: one line, and no new file, where there is none."""
        path = Path(runs) / LEDGER_FILE
        if existing and not path.exists():
            raise LoopError(f"no ledger at {path} (run 'loop sweep' first, or pass --runs)")
        return cls(path, readonly=readonly)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction; a write inside another joins it."""
        if self._db.in_transaction:
            yield self._db
            return
        with self._faults():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise

    def _rollback(self) -> None:
        if not self._db.in_transaction:  # SQLite may have rolled back itself (a full disk)
            return
        try:
            self._db.execute("ROLLBACK")
        except sqlite3.Error:  # the error being raised says more than this one
            pass

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """Rows of a read; SQLite's failures as :class:`LedgerFault`."""
        with self._faults():
            return list(self._db.execute(sql, args))

    def query(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """A read of a table beside the runs (loop.store.studies); empty where the table does not
        exist yet (a ledger of an older schema, opened read-only)."""
        try:
            return self._query(sql, args)
        except LedgerFault as exc:
            if "no such table" in str(exc):
                return []
            raise

    def integrity(self) -> list[str]:
        """``PRAGMA integrity_check``: ``["ok"]``, or what is wrong."""
        return [str(r[0]) for r in self._query("PRAGMA integrity_check")]

    def _migrate(self) -> None:
        if self._version() == SCHEMA_VERSION:  # nothing to write (so a full disk still opens)
            return
        with self.write() as db:
            version = self._known(db.execute("PRAGMA user_version").fetchone()[0])
            steps = [SCHEMA] if version == 0 else [MIGRATIONS[v] for v in range(version, SCHEMA_VERSION)]
            for statement in (s for step in steps for s in step):
                db.execute(statement)
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def begin(
        self, sweep: str, sweep_key: str, variant: str, spec_sha: str, backend: str, generation: int | None = None
    ) -> int:
        now = time.time()
        with self.write() as db:
            cur = db.execute(
                "INSERT INTO runs (sweep, sweep_key, variant, generation, status, pid, host, heartbeat, started,"
                " spec_sha, backend) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sweep,
                    sweep_key,
                    variant,
                    generation,
                    Status.RUNNING,
                    os.getpid(),
                    socket.gethostname(),
                    now,
                    now,
                    spec_sha,
                    backend,
                ),
            )
            return int(cur.lastrowid or 0)

    def heartbeat(self, run_ids: list[int]) -> None:
        with self.write() as db:
            db.executemany(
                "UPDATE runs SET heartbeat=? WHERE id=? AND status=?",
                [(time.time(), i, Status.RUNNING) for i in run_ids],
            )

    def amend(self, run_id: int, change: Callable[[RunRecord], RunRecord]) -> bool:
        """Write finished run ``run_id`` as ``change`` makes it into its stored record, touching nothing
        else of the row (status, error, times); False, and nothing written, where the row is not an
        ``ok`` run that reads (a corrupt row is left for ``loop doctor``)."""
        with self.write() as db:
            found = db.execute(f"SELECT {self._columns()} FROM runs WHERE id=?", (run_id,)).fetchone()
            run = None if found is None else from_row(found)
            if run is None or run.status != Status.OK:
                return False
            # only the parts ``change`` moved are rewritten: what this loop does not read (a newer
            # loop's keys, a depth's extra figures) stays in the row as it was
            before, after = (json.loads(to_row(r)["record"]) for r in (run, change(run)))
            (raw,) = db.execute("SELECT record FROM runs WHERE id=?", (run_id,)).fetchone()
            record = {**json.loads(raw), **{k: v for k, v in after.items() if before.get(k) != v}}
            db.execute("UPDATE runs SET record=? WHERE id=?", (json.dumps(record, allow_nan=False), run_id))
            return True

    def finish(self, run_id: int, run: RunRecord) -> None:
        """Write ``run``, finished, into row ``run_id`` (see :func:`to_row` for what it writes)."""
        row = to_row(run)
        with self.write() as db:
            db.execute(
                f"UPDATE runs SET finished=?, {', '.join(f'{c}=?' for c in row)} WHERE id=?",
                (time.time(), *row.values(), run_id),
            )

    def latest_key(self, spec_sha: str) -> str | None:
        rows = self._query(
            "SELECT sweep_key FROM runs WHERE sweep_key=? OR sweep_key LIKE ? ORDER BY id DESC LIMIT 1",
            (spec_sha, spec_sha + "/%"),
        )
        return rows[0][0] if rows else None

    def mark_interrupted(self, run_ids: list[int]) -> None:
        if not run_ids:
            return
        with self.write() as db:
            db.executemany(
                "UPDATE runs SET status=?, finished=? WHERE id=? AND status=?",
                [(Status.INTERRUPTED, time.time(), i, Status.RUNNING) for i in run_ids],
            )

    def _rows(self, where: str = "", args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        return self._query(f"SELECT {self._columns()} FROM runs{' WHERE ' + where if where else ''} ORDER BY id", args)

    def _columns(self) -> str:
        """Every column, an error cut in SQLite to ``ERROR_CHARS``: fetched whole, a 100 MB
        error cost every reader 300 MB (readers show a line of it at most)."""
        if self._select is None:
            names = ['"' + str(r[1]).replace('"', '""') + '"' for r in self._query("PRAGMA table_info(runs)")]
            cut = (
                f"CASE WHEN typeof(error) = 'text' AND length(error) > {ERROR_CHARS} "
                f"THEN substr(error, 1, {ERROR_CHARS}) || '{CUT_MARK}' ELSE error END AS error"
            )
            self._select = ", ".join(cut if n == '"error"' else n for n in names)
        return self._select

    def record(self, run_id: int) -> RunRecord:
        """Run ``run_id`` (a row that cannot be read: status ``corrupt``)."""
        rows = self._rows("id=?", (run_id,))
        if not rows:
            raise LoopError(f"no run {run_id} in {self.path}")
        return from_row(rows[0])

    def records(self, sweep: str | None = None) -> list[RunRecord]:
        """Every run (of ``sweep``), in id order."""
        return [from_row(r) for r in (self._rows("sweep=?", (sweep,)) if sweep else self._rows())]

    def latest(self, sweep: str, keep: Callable[[RunRecord], bool] = lambda run: True) -> dict[str, RunRecord]:
        """The latest run (of those ``keep`` takes) of each variant of ``sweep``, by variant."""
        return {run.variant: run for run in self.records(sweep) if keep(run)}  # id order: the last one wins

    def running(self, sweep_like: str = "%") -> list[LedgerEntry]:
        """Every run still ``running`` whose sweep name is LIKE ``sweep_like`` (``\\`` escapes), with whose it is."""
        return [_entry(r) for r in self._rows("status=? AND sweep LIKE ? ESCAPE '\\'", (Status.RUNNING, sweep_like))]

    def entries(self, sweep_key: str | None = None) -> list[LedgerEntry]:
        """Every run (of the sweep keyed ``sweep_key``), in id order, with whose it is."""
        return [_entry(r) for r in (self._rows("sweep_key=?", (sweep_key,)) if sweep_key else self._rows())]

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def record_in(runs: Path, run_id: int) -> RunRecord:
    """Run ``run_id`` of the ledger in ``runs``, which must exist."""
    with Ledger.of_runs(runs, readonly=True, existing=True) as book:
        return book.record(run_id)


def to_row(run: RunRecord) -> dict[str, Any]:
    """The columns a finished ``run`` sets: its outcome, and the JSON ``record`` of the rest (its
    keys in the order readers have always found them). Its identity (sweep, variant, generation,
    backend) is the row's from :meth:`Ledger.begin`; :func:`from_row` reads both back."""
    record = {
        "options": run.options,
        "versions": run.compiled.versions,
        "host": run.host,
        "compiled_on": run.compiled_on,
        "cache_hit": run.cache_hit,
        "stages": run.stages,
        "layers": [lp.to_json() for lp in run.layers],
        "measure": run.measure.to_dict(),
        "scores": run.scores.to_json(),
        "changes": [c.to_json() for c in run.changes],
        "perturb": list(run.perturb),
        "stderr_tail": run.stderr_tail,
        "artifact_sha": run.artifact_sha,
        "info": _info_json(run),
    }
    return {
        "status": run.status,
        "error": run.error,
        "stage": run.stage,
        "onnx_sha": run.onnx_sha,
        "calib_sha": run.calib_sha,
        "kernel_sha": run.kernel_sha,
        "bias_sha": run.bias_sha,
        "device": run.device,
        "artifact": run.artifact,
        "verdict": run.verdict,
        "compiled_on": run.compiled_on,
        "cache_hit": int(run.cache_hit),
        "flags": json.dumps(list(run.flags)),
        "record": _record_json(record),
    }


def _record_json(record: dict[str, Any]) -> str:
    """The record as JSON. Most are plain already, and walking a record's per-layer prints to
    make them so cost more than writing it (issue 43): JSON is tried first, and only a record
    that holds numpy values or inf/nan, which it refuses, is walked by :func:`_finite`."""
    try:
        return json.dumps(record, allow_nan=False)
    except (TypeError, ValueError):
        return json.dumps(_finite(record), default=repr)


_TEXT, _INT, _REAL = (str,), (int,), (int, float)
# Each column's Python types as read back (SQLite keeps whatever type a writer gave, a BLOB in a
# TEXT column included), and whether it may be NULL. A row with anything else is corrupt.
COLUMNS: dict[str, tuple[tuple[type, ...], bool]] = {
    "id": (_INT, False),
    **dict.fromkeys(("sweep", "sweep_key", "variant", "status", "flags", "record"), (_TEXT, False)),
    **dict.fromkeys(("generation", "pid"), (_INT, True)),
    **dict.fromkeys(("heartbeat", "started", "finished"), (_REAL, True)),
    **dict.fromkeys(
        ("error", "stage", "host", "spec_sha", "onnx_sha", "calib_sha", "kernel_sha", "bias_sha", "backend"),
        (_TEXT, True),
    ),
    **dict.fromkeys(("device", "artifact", "verdict", "compiled_on"), (_TEXT, True)),
    "cache_hit": (_INT, False),
}
SQL_TYPES = {str: "text", int: "integer", float: "real"}
_WORDS: dict[str, type[Kind]] = {"status": Status, "stage": Stage, "verdict": Verdict}


def _stored(value: Any) -> str:
    return {bytes: "a blob", str: "text", int: "an integer", float: "a real", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def _column_reason(key: str, value: Any) -> str | None:
    """Why column ``key`` holding ``value`` cannot be read as a run's, or None."""
    if isinstance(value, Garbled):
        return f"its {key} is not valid UTF-8"
    kinds, nullable = COLUMNS.get(key, ((object,), True))
    if not isinstance(value, kinds) and not (value is None and nullable):
        return f"its {key} is {_stored(value)}, not {SQL_TYPES[kinds[-1]]}"
    if key in _WORDS and value is not None and value not in {k.value for k in _WORDS[key]}:
        return f"its {key} is not a {key} loop knows"
    return None


def _parsed_or_why(row: sqlite3.Row) -> str | dict[str, Any]:
    """Why ``row`` cannot be read as a run (flipped bytes, a torn record, a column of another
    type, JSON nested past :data:`loop.core.jsondepth.MAX_DEPTH`); else its ``record`` and
    ``flags`` as parsed, by column (parsed once: a record of per-layer prints is large)."""
    for key in row.keys():  # noqa: SIM118 - iterating a sqlite3.Row gives its values
        reason = _column_reason(key, row[key])
        if reason is not None:
            return reason
    parsed: dict[str, Any] = {}
    for key, kind in (("record", dict), ("flags", list)):
        try:
            parsed[key] = jsondepth.loads(row[key])
        except (TypeError, ValueError) as exc:
            return f"its {key} does not parse ({exc})"
        if not isinstance(parsed[key], kind):
            return f"its {key} is not a JSON {kind.__name__}"
    return parsed


def _column(row: sqlite3.Row, name: str) -> Any:
    return row[name] if name in row.keys() else None  # noqa: SIM118 - a column an older schema lacks; `in row` tests values


def from_row(row: sqlite3.Row) -> RunRecord:
    """The run :func:`to_row` wrote (and :meth:`Ledger.begin` began); a row that cannot be read
    comes back with status ``corrupt``, its id and why (naming the column), so one bad row never
    hides the rest, and no reader past this one meets its values."""
    found = _parsed_or_why(row)
    if isinstance(found, str):
        return _corrupt(row, found)
    try:
        return _run(row, found["record"], found["flags"])
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        return _corrupt(row, f"its record has an unexpected shape ({type(exc).__name__}: {exc})")


def _corrupt(row: sqlite3.Row, reason: str) -> RunRecord:
    """What a corrupt row still says for sure: its id, and its names and artifact where they are
    text (the doctor keeps the artifact a corrupt row records); the rest stays out."""

    def text(key: str) -> str | None:
        value = _column(row, key)
        return value if isinstance(value, str) and not isinstance(value, Garbled) else None

    return RunRecord(
        id=int(row["id"]),
        sweep=text("sweep") or "",
        variant=text("variant") or "",
        status=Status.CORRUPT,
        error=reason,
        backend=text("backend"),
        artifact=_column(row, "artifact") if isinstance(_column(row, "artifact"), str) else None,
    )


K = TypeVar("K", bound=Kind)


def _word(kind: type[K], value: Any) -> K | None:
    """A column's word as its kind (a damaged page's bytes as their text)."""
    return None if value is None else kind(str(value))


P = TypeVar("P")


def _part(record: Mapping[str, Any], key: str, kind: type[P], empty: P) -> P:
    """``record[key]`` where it is a ``kind`` (``empty`` where missing or null): a part of another
    type would fail a reader far from the row, so it fails the row here."""
    value = record.get(key)
    if value is None:
        return empty
    if not isinstance(value, kind):
        raise TypeError(f"its {key} is not a {kind.__name__}")
    return value


def _maps(record: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    items = _part(record, key, list, [])
    if not all(isinstance(i, dict) for i in items):
        raise TypeError(f"its {key} is not a list of mappings")
    return items


def _run(row: sqlite3.Row, record: dict[str, Any], flags: list[str]) -> RunRecord:
    return RunRecord(
        id=row["id"],
        sweep=row["sweep"],
        variant=row["variant"],
        status=Status(str(row["status"])),
        error=row["error"],
        stage=_word(Stage, row["stage"]),
        generation=row["generation"],
        onnx_sha=row["onnx_sha"],
        kernel_sha=row["kernel_sha"],
        bias_sha=row["bias_sha"],
        artifact=row["artifact"],
        backend=row["backend"],
        device=row["device"],
        stages=_part(record, "stages", dict, {}),
        layers=tuple(LayerPrint.from_json(lp) for lp in _maps(record, "layers")),
        measure=Measurement.from_dict(_part(record, "measure", dict, {})),
        scores=Scores.from_json(_part(record, "scores", dict, {})),
        verdict=_word(Verdict, row["verdict"]),
        flags=tuple(Flag(f) for f in flags),
        changes=tuple(Change.from_json(c) for c in _maps(record, "changes")),
        compiled_on=_column(row, "compiled_on"),
        cache_hit=bool(_column(row, "cache_hit")),
        perturb=tuple(_maps(record, "perturb")),
        calib_sha=row["calib_sha"],
        options=_part(record, "options", dict, {}),
        host=_part(record, "host", str, None),
        stderr_tail=_part(record, "stderr_tail", str, ""),
        artifact_sha=_part(record, "artifact_sha", str, None),
        **_facts(_part(record, "info", dict, {}), _part(record, "versions", dict, {})),
    )


# A run's facts lie side by side in its ``info``, each under its own key (loop.core.facts), with the
# scoring frames' hash and authoring's notes; the compile's tools are the record's own ``versions``.
_BESIDE = ("inputs_sha", "notes")
_GROUPS: dict[str, type[Facts]] = {"where": Where, "judged": Judgement, "failure": Failure}


def _info_json(run: RunRecord) -> dict[str, Any]:
    parts = (run.compiled, *(getattr(run, name) for name in _GROUPS))
    found = {k: v for part in parts for k, v in part.to_json().items() if k != "versions"}
    return {**{k: getattr(run, k) for k in _BESIDE if getattr(run, k)}, **found}


def _facts(info: Mapping[str, Any], versions: Mapping[str, Any]) -> dict[str, Any]:
    """The record's facts as :func:`_info_json` wrote them; a key no group holds is kept with the
    compile's, as read (one an older or newer loop wrote), and written back."""
    theirs = {*_BESIDE, *(f.name for group in _GROUPS.values() for f in fields(group))}
    compiled = CompileFacts.of({**{k: v for k, v in info.items() if k not in theirs}, "versions": versions})
    groups = {name: group.of(info) for name, group in _GROUPS.items()}
    return {**groups, **read(RunRecord, info, _BESIDE), "compiled": compiled}


@dataclass(frozen=True)
class LedgerEntry:
    """A run as the ledger's own bookkeeping holds it: the run, and the sweep process that
    holds it while it is ``running`` (so a resume and the doctor tell a live sweep from a dead one)."""

    run: RunRecord
    status: Status  # as written, also where ``run`` is corrupt (its own status then says so)
    pid: int | None
    host: str | None
    heartbeat: float | None

    @property
    def corrupt(self) -> str | None:
        """Why the row cannot be read as a run, or None."""
        return self.run.error if self.run.status == Status.CORRUPT else None


def _entry(row: sqlite3.Row) -> LedgerEntry:
    run = from_row(row)
    if run.status != Status.CORRUPT:
        return LedgerEntry(run, run.status, row["pid"], row["host"], row["heartbeat"])
    # a corrupt row's sweep may be alive too: its bookkeeping as written, where it is of its type
    status = row["status"] if _column_reason("status", row["status"]) is None else Status.CORRUPT
    kept = [row[k] if _column_reason(k, row[k]) is None else None for k in ("pid", "host", "heartbeat")]
    return LedgerEntry(run, Status(status), *kept)


STALE_HEARTBEAT_S = 300.0  # a running row whose heartbeat is older belongs to a dead sweep


def is_live(entry: LedgerEntry, now: float | None = None) -> bool:
    """A ``running`` row belongs to a live sweep: its heartbeat is recent and, on this host,
    its pid still exists (a heartbeat alone covers other hosts; the pid alone could have been
    reused by another process)."""
    fresh = (now or time.time()) - float(entry.heartbeat or 0) < STALE_HEARTBEAT_S
    if entry.host == socket.gethostname():
        return fresh and entry.pid != os.getpid() and entry.pid is not None and process_alive(int(entry.pid))
    return fresh
