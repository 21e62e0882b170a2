"""A study's state in the ledger (issue 34): generation numbers claimed atomically across
processes, a dead process's generation resumed by the same candidates and abandoned by others,
and ratios kept as rows."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest

from loop.core.errors import LoopError
from loop.store.ledger import Ledger
from loop.store.studies import Asked, Ratio, RatioRow, StudyStore, ratios

KEYS = [Asked(0, "k0", "c0"), Asked(1, "k1", "c1")]


def _claim_many(args: tuple[str, int]) -> list[int]:
    path, count = args
    out = []
    with Ledger(Path(path)) as ledger:
        store = StudyStore(ledger, "s")
        for i in range(count):
            number, _ = store.claim([Asked(0, f"k{i}", "c0")])
            store.finish(number)  # done at once, so the next claim is never a resume
            out.append(number)
    return out


def test_two_processes_never_claim_one_generation(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.sqlite")
    Ledger(Path(path)).close()
    with multiprocessing.get_context("fork").Pool(2) as pool:
        found = pool.map(_claim_many, [(path, 15), (path, 15)])
    numbers = [n for part in found for n in part]
    assert sorted(numbers) == list(range(30))


def test_a_dead_process_generation_is_resumed_by_the_same_candidates(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    Ledger(path).close()
    claim = (
        "import sys; from pathlib import Path; from loop.store.ledger import Ledger; "
        "from loop.store.studies import Asked, StudyStore; "
        "print(StudyStore(Ledger(Path(sys.argv[1])), 's').claim([Asked(0,'k0','c0'), Asked(1,'k1','c1')])[0])"
    )
    left = int(
        subprocess.run([sys.executable, "-c", claim, str(path)], capture_output=True, text=True, check=True).stdout
    )
    with Ledger(path) as ledger:
        store = StudyStore(ledger, "s")
        assert store.claim(KEYS) == (left, True)  # its process is gone: the same candidates take it over
        store.finish(left)
        assert store.claim(KEYS) == (left + 1, False)  # done: never taken again
        with pytest.raises(LoopError, match="has a generation 0 already"):
            store.claim(KEYS, 0)


def test_a_dead_generation_of_other_candidates_is_abandoned(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as ledger:
        store = StudyStore(ledger, "s")
        first, _ = store.claim(KEYS)  # this process: gone, as far as a later claim of it is concerned
        assert store.claim([Asked(0, "other", "c0")]) == (first + 1, False)
        state = ledger.query("SELECT state FROM generations WHERE number=?", (first,))[0][0]
        assert state == "abandoned" and store.answered() == []


def test_ratios_are_rows_and_a_met_target_is_the_rounds_interval(tmp_path: Path) -> None:
    row = RatioRow(7, 3, Ratio(1.0, 0.98, 1.02), 9, 1.5, None, ("host-busy",), Ratio(500.0, 490.0, 510.0), 3.0)
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        StudyStore(ledger, "s").put_ratios([row])
        assert ratios(ledger) == {7: row} and ratios(ledger, [8]) == {}
    assert row.met  # +-2% within 3%, whatever the host-busy flag says
    assert not RatioRow(7, 3, Ratio(1.0, 0.9, 1.1), 9, None, None, (), None, 3.0).met


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_a_study_marks_its_own_dead_running_rows_interrupted(tmp_path: Path) -> None:
    """Rows ``running`` under the study's sweeps (its generations' numbers, with or without an
    options suffix) whose process is gone become ``interrupted``; a live process's row, another
    study's and a number the study never claimed are left alone."""
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with Ledger(tmp_path / "ledger.sqlite") as ledger:
            store = StudyStore(ledger, "s_1")
            store.claim(KEYS)
            rows = {
                sweep: ledger.begin(sweep, "key", "c0", "sha", "onnxruntime", 0)
                for sweep in ("s_1-g0", "s_1-g0-o0123abcd", "s_1-g7", "sx1-g0", "s_1-g0-live")
            }
            with ledger.write() as db:
                for sweep, run_id in rows.items():
                    pid = live.pid if sweep.endswith("live") else _dead_pid()
                    db.execute("UPDATE runs SET pid=?, sweep=? WHERE id=?", (pid, sweep.removesuffix("-live"), run_id))
            marked = store.interrupt_dead()
            status = {r.id: str(r.status) for r in ledger.records()}
    finally:
        live.kill()
        live.wait()
    assert sorted(marked) == [rows["s_1-g0"], rows["s_1-g0-o0123abcd"]]
    assert [status[rows[k]] for k in ("s_1-g7", "sx1-g0", "s_1-g0-live")] == ["running"] * 3
