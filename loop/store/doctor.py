"""``loop doctor``: what is wrong in a runs folder, one line per problem, and the repair.

It reads the ledger read-only (``integrity_check``, rows that do not parse, rows of sweeps
that are gone), checks every recorded artifact against its hash, every cache entry in full,
and lists what no run records: artifacts left by failed or killed sweeps (or by runs lost
from the ledger, as a truncated WAL loses them), torn cache writes, the old pickled cache
format and temporary files of writers that are gone. ``--repair`` does what each line says;
it never removes an ok run's artifact (a wrong file in its place is moved to
``quarantine/``), and it refuses while a sweep is running on the folder.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from loop.core.errors import LoopError
from loop.core.kinds import Stage, Status, Verdict
from loop.store.cache import BLOB, LEGACY, META, Cache, is_quantized, verified, verified_quantized
from loop.store.codec import Damaged, body
from loop.store.files import RUNS_FOLDERS, atomic_write, read_regular, stale_temps
from loop.store.ledger import COLUMNS, LEDGER_FILE, SQL_TYPES, Garbled, Ledger, LedgerEntry, is_live
from loop.store.shared import FOLDER, TensorStore, read_whole, tensors_read


@dataclass
class Problem:
    where: str
    what: str
    repair: str = ""  # what --repair does, "" when it cannot
    fix: Callable[[], None] | None = field(default=None, repr=False)
    repaired: bool = False

    def line(self) -> str:
        if not self.repair:
            return f"{self.where}: {self.what}; no repair"
        return f"{self.where}: {self.what}; {'repaired: ' if self.repaired else '--repair would '}{self.repair}"


@dataclass
class Examination:
    problems: list[Problem] = field(default_factory=list)
    live: list[str] = field(default_factory=list)  # running rows of live sweeps: no repair meanwhile


def examine(runs: Path) -> Examination:
    runs = Path(runs)
    if not runs.is_dir():
        raise LoopError(f"no runs folder at {runs}", field="--runs")
    exam = Examination(
        [
            Problem(f"{sub}/", "is a symbolic link; loop does not write through links")
            for sub in RUNS_FOLDERS
            if (runs / sub).is_symlink()
        ]
    )
    rows = _ledger(runs, exam)
    reads: set[str] = set()  # the shared tensors (artifacts/tensors) some artifact or entry reads
    restores = _cache(runs, exam.problems, reads)
    if rows is not None:
        _artifacts(runs, rows, restores, exam.problems, reads)
        _tensors(runs, reads, exam.problems)
    for sub in RUNS_FOLDERS:
        exam.problems += [
            Problem(
                f"{sub}/{p.name}", "a temporary file its writer left (a crash or a full disk)", "remove it", _remover(p)
            )
            for p in stale_temps(runs / sub)
        ]
    return exam


def repair_all(runs: Path, exam: Examination) -> list[str]:
    if exam.live:
        raise LoopError(f"a sweep is running on {runs} ({exam.live[0]}): repair when it is done")
    lines = []
    for problem in exam.problems:
        if problem.fix is not None:
            try:
                problem.fix()
                problem.repaired = True
            except (OSError, LoopError, sqlite3.Error) as exc:
                lines.append(f"{problem.where}: could not repair: {exc}")
                continue
        lines.append(problem.line())
    return lines


def _remover(path: Path) -> Callable[[], None]:
    return lambda: path.unlink(missing_ok=True)


def _ledger(runs: Path, exam: Examination) -> list[LedgerEntry] | None:
    """The ledger's runs, or None when they cannot be read; its problems into ``exam``."""
    path = runs / LEDGER_FILE
    if not path.exists():  # then no file can be called an orphan: nothing says what runs there were
        if any((runs / "artifacts").glob("*")):
            exam.problems.append(Problem(LEDGER_FILE, "missing, so artifacts are not checked against runs"))
        return None
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        try:
            ledger = Ledger(path, readonly=True)
        except LoopError as exc:
            salvage = ("", None) if "newer" in str(exc) else (_SALVAGE, lambda: _salvage(path))
            exam.problems.append(Problem(LEDGER_FILE, _short(exc), *salvage))
            return None
    exam.problems += [
        Problem(LEDGER_FILE, str(w.message), "upgrade it, as a sweep would", lambda: Ledger(path).close())
        for w in said
        if "older" in str(w.message)
    ]
    with ledger:
        check, rows = _integrity(ledger), _rows(ledger)
    if check != ["ok"] or isinstance(rows, str):
        what = (
            f"integrity_check: {check[0]}" + (f" (and {len(check) - 1} more)" if len(check) > 1 else "")
            if check != ["ok"]
            else f"its runs cannot be read: {rows}"
        )
        exam.problems.append(Problem(LEDGER_FILE, what, _SALVAGE, lambda: _salvage(path)))
    if isinstance(rows, str):
        return None
    for row in rows:
        _row(runs, row, exam)
    return rows


def _short(exc: Exception) -> str:
    """The error without the path and the hint, which a doctor line already gives."""
    return str(exc).split(": 'loop doctor")[0].split(f"{LEDGER_FILE}: ", 1)[-1]


def _integrity(ledger: Ledger) -> list[str]:
    try:
        return ledger.integrity()
    except LoopError as exc:  # a page too damaged for the check to finish
        return [_short(exc)]


def _rows(ledger: Ledger) -> list[LedgerEntry] | str:
    try:
        return ledger.entries()
    except LoopError as exc:
        return _short(exc)


def _row(runs: Path, row: LedgerEntry, exam: Examination) -> None:
    run_id = row.run.id
    if row.corrupt is not None:
        exam.problems.append(
            Problem(
                f"run {run_id}",
                f"corrupt: {row.corrupt}",
                f"mark it failed (stage ledger: a resume redoes it), its text kept in quarantine/run-{run_id}.txt",
                lambda: _quarantine_row(runs, run_id),
            )
        )
    elif row.status == Status.RUNNING:
        if is_live(row):
            exam.live.append(f"pid {row.pid}, run {run_id}")
            return
        exam.problems.append(
            Problem(
                f"run {run_id}",
                f"running, but its sweep (pid {row.pid} on {row.host}) is gone",
                "mark it interrupted (a resume redoes it)",
                lambda: _mark(runs, run_id, Status.INTERRUPTED, None, None),
            )
        )


def _mark(runs: Path, run_id: int, status: Status, stage: Stage | None, error: str | None) -> None:
    with Ledger.of_runs(runs) as ledger, ledger.write() as db:
        db.execute(
            "UPDATE runs SET status=?, stage=?, error=?, finished=? WHERE id=?",
            (status, stage, error, time.time(), run_id),
        )


def _quarantine_row(runs: Path, run_id: int) -> None:
    """Keep the row's text, then make the row a plain failure its variant is redone after."""
    with Ledger.of_runs(runs) as ledger, ledger.write() as db:
        raw = db.execute("SELECT CAST(record AS BLOB), CAST(flags AS BLOB) FROM runs WHERE id=?", (run_id,)).fetchone()
        atomic_write(runs / "quarantine" / f"run-{run_id}.txt", b"record: " + raw[0] + b"\nflags: " + raw[1] + b"\n")
        db.execute(
            "UPDATE runs SET status=?, stage=?, error=?, record='{}', flags='[]' WHERE id=?",
            (Status.FAILED, Stage.LEDGER, f"record was corrupt; its text is in quarantine/run-{run_id}.txt", run_id),
        )
        _retype(db, run_id)


def _retype(db: sqlite3.Connection, run_id: int) -> None:
    """Each column of another type than the ledger reads (a BLOB where text belongs) as its own
    type: a name as its text, anything else as null (0 for ``cache_hit``)."""
    names = {r[1] for r in db.execute("PRAGMA table_info(runs)")}
    for name, (kinds, nullable) in COLUMNS.items():
        if name not in names or name in ("id", "record", "flags"):
            continue
        wanted = ", ".join(f"'{SQL_TYPES[k]}'" for k in kinds) + (", 'null'" if nullable else "")
        other = "NULL" if nullable else ("0" if kinds == (int,) else f"CAST({name} AS TEXT)")
        db.execute(f"UPDATE runs SET {name}={other} WHERE id=? AND typeof({name}) NOT IN ({wanted})", (run_id,))
    known = [v.value for v in Verdict]
    db.execute(
        f"UPDATE runs SET verdict=NULL WHERE id=? AND verdict NOT IN ({', '.join('?' * len(known))})", (run_id, *known)
    )


_SALVAGE = "copy the runs it can still read into a new ledger, the old file kept beside it as ledger.sqlite.damaged-*"


def _salvage(path: Path) -> None:
    aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{path}{suffix}").exists():
            os.replace(f"{path}{suffix}", f"{aside}{suffix}")
    rows = _readable_rows(aside)
    with Ledger(path) as ledger, ledger.write() as db:
        columns = [r[1] for r in db.execute("PRAGMA table_info(runs)")]
        for row in rows:
            names = [c for c in columns if c in row]
            db.execute(
                f"INSERT INTO runs ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", [row[c] for c in names]
            )


def _readable_rows(path: Path) -> list[dict[str, object]]:
    """Every row SQLite can still read, one by one when a damaged page fails the whole scan."""
    try:
        db = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        db.text_factory = bytes  # as stored; flipped bytes stay flipped
    except sqlite3.Error:
        return []
    try:
        return _rows_of(db)
    finally:
        db.close()


def _rows_of(db: sqlite3.Connection) -> list[dict[str, object]]:
    def read(sql: str, args: tuple[object, ...] = ()) -> list[dict[str, object]]:
        cur = db.execute(sql, args)
        names = [d[0] for d in cur.description]
        return [
            {n: (v.decode("utf-8", "replace") if isinstance(v, bytes) else v) for n, v in zip(names, r, strict=True)}
            for r in cur
        ]

    try:
        return read("SELECT * FROM runs ORDER BY id")
    except sqlite3.DatabaseError:
        pass
    try:
        last = int(db.execute("SELECT max(id) FROM runs").fetchone()[0] or 0)
    except sqlite3.DatabaseError:
        return []
    out = []
    for run_id in range(1, last + 1):
        try:
            out += read("SELECT * FROM runs WHERE id=?", (run_id,))
        except sqlite3.DatabaseError:
            continue
    return out


def _cache(runs: Path, problems: list[Problem], reads: set[str]) -> dict[str, str]:
    """Check every cache entry in full; returns a verified entry's key by artifact hash, and
    adds the shared tensors each entry's artifact reads to ``reads``."""
    cache, restores = Cache.for_runs(runs), {}
    folder = cache.root
    names = sorted(os.listdir(folder)) if folder.is_dir() and not folder.is_symlink() else []
    for name in names:
        path = folder / name
        if name.endswith(META):
            key = name[: -len(META)]
            try:
                meta, blob = read_regular(path), read_regular(folder / f"{key}{BLOB}")
                if is_quantized(meta):  # a quantized model scale_grid starts from: no artifact to restore
                    verified_quantized(key, meta, blob)
                    continue
                result = verified(key, meta, blob, TensorStore(cache.tensors.folder, mend=False))
                restores[result.artifact.sha] = key  # type: ignore[union-attr]
                reads.update((body(meta)["artifact"] or {}).get("tensors", []))
            except (OSError, Damaged) as exc:
                why = str(exc) if isinstance(exc, Damaged) else f"unreadable ({exc.strerror or exc})"
                problems.append(
                    Problem(f"cache/{key[:16]}", why, "remove it (the next compile rewrites it)", _uncacher(cache, key))
                )
        elif name.endswith(BLOB) and not (folder / f"{name[: -len(BLOB)]}{META}").exists():
            problems.append(
                Problem(f"cache/{name}", "bytes without their entry (a torn write)", "remove it", _remover(path))
            )
        elif name.endswith(LEGACY) and not name.startswith("."):
            problems.append(
                Problem(f"cache/{name}", "an entry in the old pickled format (never read)", "remove it", _remover(path))
            )
    return restores


def _uncacher(cache: Cache, key: str) -> Callable[[], None]:
    return lambda: cache.remove(key)


def _artifacts(
    runs: Path, rows: list[LedgerEntry], restores: dict[str, str], problems: list[Problem], reads: set[str]
) -> None:
    recorded: set[str] = set()
    for run in (row.run for row in rows):
        if run.artifact and not isinstance(run.artifact, Garbled):  # even a corrupt row's
            name = Path(run.artifact).name
            recorded.add(name.split(".")[0])
            _recorded(runs, run.id, name, run.artifact_sha or name.split(".")[0], restores, problems)
    folder = runs / "artifacts"
    names = sorted(os.listdir(folder)) if folder.is_dir() and not folder.is_symlink() else []
    for name in names:
        if name.startswith(".") or name == FOLDER:
            continue
        if name.split(".")[0] in recorded:
            reads.update(tensors_read(folder / name))
            continue
        problems.append(
            Problem(
                f"artifacts/{name}",
                "no run records it (left by a failed or killed sweep, or by a run "
                "lost from the ledger, such as by a truncated WAL)",
                "remove it",
                _remover(folder / name),
            )
        )


def _tensors(runs: Path, reads: set[str], problems: list[Problem]) -> None:
    """Shared tensors no recorded artifact and no cache entry reads (their last reader removed)."""
    folder = runs / "artifacts" / FOLDER
    names = sorted(os.listdir(folder)) if folder.is_dir() and not folder.is_symlink() else []
    for name in names:
        if not name.startswith(".") and name not in reads:
            problems.append(
                Problem(f"artifacts/{FOLDER}/{name[:16]}", "no artifact reads it", "remove it", _remover(folder / name))
            )


def _recorded(runs: Path, run_id: int, name: str, sha: str, restores: dict[str, str], problems: list[Problem]) -> None:
    path = runs / "artifacts" / name
    if read_whole(path, sha, mend=False) is not None:  # examining removes nothing
        return
    what = "is missing" if not os.path.lexists(path) else "does not match its hash (swapped or damaged)"
    key = next((k for s, k in restores.items() if s.startswith(sha)), None)
    if key is not None:
        problems.append(
            Problem(
                f"run {run_id}",
                f"its artifact artifacts/{name} {what}",
                "restore it from the cache",
                lambda: _restore(runs, key, path),
            )
        )
    elif os.path.lexists(path):
        problems.append(
            Problem(
                f"run {run_id}",
                f"its artifact artifacts/{name} {what}",
                f"move the wrong file to quarantine/{name} (a sweep with --fresh rebuilds it)",
                lambda: _move_aside(runs, path),
            )
        )
    else:
        problems.append(Problem(f"run {run_id}", f"its artifact artifacts/{name} {what} and no cache entry holds it"))


def _restore(runs: Path, key: str, path: Path) -> None:
    result = Cache.for_runs(runs).lookup(key)
    if result is None or result.artifact is None:
        raise LoopError("the cache entry went meanwhile")
    atomic_write(path, result.artifact.data)


def _move_aside(runs: Path, path: Path) -> None:
    (runs / "quarantine").mkdir(exist_ok=True)
    shutil.move(str(path), str(runs / "quarantine" / path.name))
