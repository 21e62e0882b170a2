"""Nothing lost: kill -9 mid-sweep, resume, concurrent sweeps on one ledger, live rows left alone."""

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from loop.flow.resume import is_live, scan
from loop.store.ledger import Ledger

VARIANTS = "".join(
    f"  - name: n{i}\n    perturb: [{{op: add_weight_noise, layer: conv2, std: 0.01, seed: {i}}}]\n" for i in range(6)
)
SWEEP = (
    """\
sweep: NAME
base: tiny.yaml
calibration: {count: 8}
inputs: {count: 2}
measure: {warmup: 2, frames: 300, repeats: 3, ttfo_repeats: 2, latency_frames: 50, min_duration_s: 0}
variants:
  - name: base
"""
    + VARIANTS
)


def loop_cmd(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "loop.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw
    )


def ok_count(ledger: Path) -> int:
    if not ledger.exists():
        return 0
    db = sqlite3.connect(ledger, timeout=30)
    try:
        return db.execute("SELECT count(*) FROM runs WHERE status='ok'").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        db.close()


def test_kill_9_then_resume_gives_one_finished_run_per_variant(write_sweep, tmp_path: Path):
    sweep, runs = write_sweep(SWEEP.replace("NAME", "killed")), tmp_path / "runs"
    ledger = runs / "ledger.sqlite"
    proc = loop_cmd("sweep", str(sweep), "--runs", str(runs), "--quiet", "--jobs", "1")
    deadline = time.time() + 120
    while ok_count(ledger) < 2 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    db = sqlite3.connect(ledger)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    before = dict(db.execute("SELECT status, count(*) FROM runs GROUP BY status").fetchall())
    assert before.get("ok", 0) >= 2 and before.get("running", 0) >= 1, before
    db.close()
    again = loop_cmd("sweep", str(sweep), "--runs", str(runs), "--quiet", "--jobs", "1")
    _out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    rows = json.loads(
        subprocess.run(
            [sys.executable, "-m", "loop.cli", "runs", "--runs", str(runs), "--json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    finished = [r["variant"] for r in rows if r["status"] == "ok"]
    assert sorted(finished) == sorted(["base"] + [f"n{i}" for i in range(6)])
    assert {r["status"] for r in rows} <= {"ok", "interrupted"}
    for r in rows:
        if r["status"] == "ok":
            data = Path(r["artifact"]).read_bytes()
            assert hashlib.sha256(data).hexdigest()[:32] == Path(r["artifact"]).stem


def test_two_sweeps_and_a_reader_on_one_ledger(write_sweep, tmp_path: Path):
    runs = tmp_path / "runs"
    a = loop_cmd(
        "sweep",
        str(write_sweep(SWEEP.replace("NAME", "a"), "a.yaml")),
        "--runs",
        str(runs),
        "--quiet",
        "--jobs",
        "1",
        "--overlap",
    )
    b = loop_cmd(
        "sweep",
        str(write_sweep(SWEEP.replace("NAME", "b"), "b.yaml")),
        "--runs",
        str(runs),
        "--quiet",
        "--jobs",
        "1",
        "--overlap",
    )
    reads = 0
    while a.poll() is None or b.poll() is None:
        r = subprocess.run(
            [sys.executable, "-m", "loop.cli", "runs", "--runs", str(runs), "--json"], capture_output=True, text=True
        )
        assert "locked" not in r.stderr
        reads += r.returncode == 0
    outs = [p.communicate() for p in (a, b)]
    assert [a.returncode, b.returncode] == [0, 0], outs
    assert all("locked" not in err for _, err in outs)
    assert ok_count(runs / "ledger.sqlite") == 14 and reads > 0


def test_live_rows_are_left_alone_dead_ones_interrupted(tmp_path: Path):
    ledger = Ledger(tmp_path / "l.sqlite")
    mine = ledger.begin("s", "k", "mine", "x", "onnxruntime")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = ledger.begin("s", "k", "live", "x", "onnxruntime")
        dead = ledger.begin("s", "k", "dead", "x", "onnxruntime")
        with ledger.write() as db:
            db.execute("UPDATE runs SET pid=? WHERE id=?", (sleeper.pid, live))
            db.execute("UPDATE runs SET pid=? WHERE id=?", (2**22 + 12345, dead))
        entry = {e.run.id: e for e in ledger.entries("k")}
        assert is_live(entry[live]) and not is_live(entry[dead])
        state = scan(ledger, "k")
        assert state.live == {"live"} and sorted(state.interrupted) == sorted([dead, mine])
        assert ledger.record(dead).status == "interrupted" and ledger.record(live).status == "running"
    finally:
        sleeper.kill()
        ledger.close()


CLAIMER = """
import json, sys, time
from pathlib import Path
from loop.flow import resume
from loop.store.ledger import Ledger
path, me, other, delay = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[4])
read = Ledger.entries
def slow(self, key):  # a slow disk between reading what is done and claiming the rest
    entries = read(self, key)
    time.sleep(delay)
    return entries
Ledger.entries = slow
ledger = Ledger(Path(path))
me.with_suffix(".ready").touch()
while not other.with_suffix(".ready").exists():
    time.sleep(0.01)
want = resume.Claim("s", "identity", False, tuple((f"v{i}", "x") for i in range(4)), "onnxruntime")
_, _, ids = resume.claim(ledger, want)
me.write_text(json.dumps(sorted(ids)))
while not other.exists():  # a live sweep until the other has claimed too
    time.sleep(0.01)
"""


def test_two_sweeps_never_claim_one_variant(tmp_path: Path):
    """Each reads the ledger, waits (a slow disk), then claims: in one transaction, the second
    sees the first one's running rows, so the four variants are split, never run twice."""
    path, a, b = tmp_path / "l.sqlite", tmp_path / "a.json", tmp_path / "b.json"
    Ledger(path).close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIMER, str(path), str(me), str(other), "0.3"], stderr=subprocess.PIPE, text=True
        )
        for me, other in ((a, b), (b, a))
    ]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    first, second = json.loads(a.read_text()), json.loads(b.read_text())
    assert sorted(first + second) == [f"v{i}" for i in range(4)] and not set(first) & set(second)
    with Ledger(path, readonly=True) as ledger:
        assert len(ledger.records()) == 4


def test_a_sweep_run_again_after_its_base_or_frames_changed_in_place_runs_afresh_and_says_why(tmp_path: Path):
    """The sweep file is the same, but the base and then the scoring frames were rewritten
    under their paths: each is a new reference, measured afresh, with a line naming what moved."""
    import numpy as np
    import onnx
    import pytest
    from authored import FAST_MEASURE, exported_classifier
    from sweeps import _sweep_runs

    from loop.flow.resume import ContentChanged

    onnx.save(exported_classifier(seed=0), str(tmp_path / "x.onnx"))
    np.save(tmp_path / "inputs.npy", np.zeros((2, 3, 16, 16), np.float32))
    path, runs = tmp_path / "s.yaml", tmp_path / "runs"
    path.write_text(
        f"sweep: s\nbase: x.onnx\ninputs: {{path: inputs.npy}}\n{FAST_MEASURE}\nvariants:\n  - name: base\n"
        "  - name: up\n    perturb: [{op: scale_weights, layer: /features/0/Conv, factor: 1.05}]\n"
    )
    first = _sweep_runs(path, runs)
    assert _sweep_runs(path, runs)["up"]["id"] == first["up"]["id"]  # unchanged: resumed
    onnx.save(exported_classifier(seed=1), str(tmp_path / "x.onnx"))
    with pytest.warns(ContentChanged, match=r"^base \S*x\.onnx changed since run \d+ \(sha \w{8} -> \w{8}\): measured"):
        moved = _sweep_runs(path, runs)
    assert moved["up"]["id"] != first["up"]["id"] and moved["up"]["onnx_sha"] != first["up"]["onnx_sha"]
    np.save(tmp_path / "inputs.npy", np.ones((2, 3, 16, 16), np.float32))
    with pytest.warns(ContentChanged, match=r"^scoring frames inputs\.npy changed since run \d+ \(sha") as told:
        rescored = _sweep_runs(path, runs)
    assert len(told) == 1 and "base" not in str(told[0].message)  # only what moved
    assert rescored["base"]["id"] != moved["base"]["id"] and rescored["up"]["scores"] != moved["up"]["scores"]
