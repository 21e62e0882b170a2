"""loop doctor on real damage: each problem named in one line, and --repair fixing what it says."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from authored import FAST_MEASURE, TWO_CONV_RECIPE

from loop.author.sweepfile import parse
from loop.core.errors import LoopError
from loop.flow.sweep import SweepOptions, run_sweep
from loop.store.doctor import examine, repair_all
from loop.store.ledger import Ledger

SWEEP = f"""\
sweep: doctor
base: tiny.yaml
calibration: {{count: 8}}
inputs: {{count: 2}}
{FAST_MEASURE}
variants:
  - name: base
  - name: weights
    perturb: [{{op: scale_weights, layer: conv1, factor: 1.05}}]
  - name: scale
    perturb: [{{op: force_range_out, layer: conv1, range: [0.0, 8.0]}}]
"""


def _sweep(folder: Path, runs: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tiny.yaml").write_text(TWO_CONV_RECIPE)
    (folder / "sweep.yaml").write_text(SWEEP)
    result = run_sweep(parse(folder / "sweep.yaml"), runs, SweepOptions(jobs=1, progress=False))
    assert not result.failed


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("doctor")
    _sweep(folder, folder / "runs")
    return folder / "runs"


@pytest.fixture
def runs(pristine: Path, tmp_path: Path) -> Path:
    shutil.copytree(pristine, tmp_path / "runs")
    return tmp_path / "runs"


def lines(runs: Path) -> list[str]:
    return [p.line() for p in examine(runs).problems]


def artifact_of(runs: Path, run_id: int) -> Path:
    with Ledger(runs / "ledger.sqlite", readonly=True) as ledger:
        return runs / "artifacts" / Path(ledger.record(run_id).artifact or "").name


def test_a_clean_folder_has_no_problem(runs: Path) -> None:
    assert lines(runs) == []


def test_a_swapped_artifact_is_restored_from_the_cache(runs: Path) -> None:
    base, weights = artifact_of(runs, 1), artifact_of(runs, 2)
    original = weights.read_bytes()
    shutil.copy(base, weights)
    assert lines(runs) == [
        f"run 2: its artifact artifacts/{weights.name} does not match its hash (swapped or "
        "damaged); --repair would restore it from the cache"
    ]
    repair_all(runs, examine(runs))
    assert weights.read_bytes() == original and lines(runs) == []


def test_without_a_cache_a_wrong_file_is_moved_aside_never_deleted(runs: Path) -> None:
    shutil.rmtree(runs / "cache")
    weights = artifact_of(runs, 2)
    weights.write_bytes(b"flipped")
    [line] = lines(runs)
    assert "move the wrong file to quarantine/" in line
    repair_all(runs, examine(runs))
    assert (runs / "quarantine" / weights.name).read_bytes() == b"flipped"


def test_damaged_cache_entries_torn_writes_old_pickles_and_stale_temporaries(runs: Path) -> None:
    [meta, *_] = sorted((runs / "cache").glob("*.meta.json"))
    meta.write_bytes(meta.read_bytes().replace(b'"ok": true', b'"ok": tru3'))
    (runs / "cache" / "torn.blob").write_bytes(b"x")
    (runs / "cache" / "old.pkl").write_bytes(b"\x80\x05")
    (runs / "artifacts" / f".a.onnx.{2**22 + 1}-{'0' * 16}.tmp").write_bytes(b"")
    found = lines(runs)
    assert len(found) == 4 and all(line.count("\n") == 0 for line in found)
    assert any(line.startswith(f"cache/{meta.name[:16]}: its JSON does not match its hash") for line in found)
    assert any(line.startswith("cache/torn.blob: bytes without their entry") for line in found)
    assert any(line.startswith("cache/old.pkl: an entry in the old pickled format") for line in found)
    assert any(line.startswith("artifacts/.a.onnx.") and "temporary file" in line for line in found)
    repair_all(runs, examine(runs))
    assert lines(runs) == []


def test_runs_lost_with_a_truncated_wal_leave_artifacts_it_names(tmp_path: Path) -> None:
    """A reader holding an old snapshot keeps the sweep's commits in the WAL; cutting the WAL
    short then drops those runs, as a torn WAL copy or a bad disk would."""
    runs = tmp_path / "runs"
    Ledger(runs / "ledger.sqlite").close()
    reader = sqlite3.connect(runs / "ledger.sqlite", isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM runs").fetchone()  # holds the snapshot: no checkpoint past it
    _sweep(tmp_path / "sweep", runs)
    copy = tmp_path / "copy"
    shutil.copytree(runs, copy)
    reader.close()
    wal = copy / "ledger.sqlite-wal"
    wal.write_bytes(wal.read_bytes()[: 32 + 3 * (24 + 4096)])  # the header and the first frames only
    (copy / "ledger.sqlite-shm").unlink()
    with Ledger(copy / "ledger.sqlite", readonly=True) as ledger:
        assert ledger.integrity() == ["ok"] and [r.status for r in ledger.records()] != ["ok"] * 3
    found = [line for line in lines(copy) if "no run records it" in line]
    assert found and all("truncated WAL" in line for line in found)


def test_a_page_that_fails_integrity_check_is_salvaged(runs: Path) -> None:
    path = runs / "ledger.sqlite"
    with Ledger(path) as ledger, ledger.write():  # runs over many pages, so that one can go
        for i in range(300):
            ledger.begin("doctor", "k", f"filler-{i:03d}", "x" * 100, "onnxruntime")
    data = bytearray(path.read_bytes())
    # The table's own leaf page (type 0x0D) that holds a row, not an index page naming it:
    # damaging an index loses no row, and which page comes first depends on the record sizes.
    hits = [m.start() // 4096 * 4096 for m in re.finditer(b"filler-150", bytes(data))]
    page = next(p for p in hits if p and data[p] == 0x0D)
    data[page] = 0xFF  # not a b-tree page type any more
    path.write_bytes(bytes(data))
    found = lines(runs)
    assert any(
        line.startswith("ledger.sqlite: integrity_check: ") and "--repair would copy the runs it can still read" in line
        for line in found
    ), found
    repair_all(runs, examine(runs))
    with Ledger(path, readonly=True) as ledger:
        ids = [r.id for r in ledger.records()]
        assert ledger.integrity() == ["ok"] and ids[:3] == [1, 2, 3] and 100 < len(ids) < 303
    assert list(runs.glob("ledger.sqlite.damaged-*"))


def test_a_file_that_is_not_a_database_is_moved_aside(runs: Path) -> None:
    path = runs / "ledger.sqlite"
    path.write_bytes(b"\xff" * 16 + path.read_bytes()[16:])
    [line] = lines(runs)
    assert line.startswith("ledger.sqlite: ") and "file is not a database" in line
    repair_all(runs, examine(runs))
    assert list(runs.glob("ledger.sqlite.damaged-*")) and lines(runs) != [line]


def test_repair_waits_for_a_live_sweep(runs: Path) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with Ledger(runs / "ledger.sqlite") as ledger:
            run = ledger.begin("doctor", "k", "live", "x", "onnxruntime")
            with ledger.write() as db:
                db.execute("UPDATE runs SET pid=? WHERE id=?", (sleeper.pid, run))
        (runs / "artifacts" / "orphan.onnx").write_bytes(b"x")
        exam = examine(runs)
        assert exam.live and len(exam.problems) == 1
        with pytest.raises(LoopError, match="a sweep is running"):
            repair_all(runs, exam)
        assert (runs / "artifacts" / "orphan.onnx").exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_dead_sweeps_running_row_is_named(runs: Path) -> None:
    with Ledger(runs / "ledger.sqlite") as ledger:
        run = ledger.begin("doctor", "k", "dead", "x", "onnxruntime")
        with ledger.write() as db:
            db.execute("UPDATE runs SET pid=? WHERE id=?", (2**22 + 12345, run))
    [line] = lines(runs)
    assert line.startswith(f"run {run}: running, but its sweep") and "mark it interrupted" in line
    repair_all(runs, examine(runs))
    assert lines(runs) == []
    assert os.path.exists(runs / "ledger.sqlite")


def test_without_a_ledger_no_artifact_is_called_an_orphan(runs: Path) -> None:
    (runs / "ledger.sqlite").unlink()
    assert lines(runs) == ["ledger.sqlite: missing, so artifacts are not checked against runs; no repair"]
    repair_all(runs, examine(runs))
    assert len(list((runs / "artifacts").iterdir())) == 3
    with pytest.raises(LoopError, match="no runs folder"):
        examine(runs / "nope")
