"""Nothing outlives a killed sweep: not its loky workers, not their compile children, not
what those started; and what a killed sweep left in the temporary folder goes at the next start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from loop.core.leftovers import process_alive, remove_stale_scratch

TESTS = Path(__file__).resolve().parents[1]
SWEEPER = """
import sys
from pathlib import Path
from loop.core import registry as backends
from loop.author import sweepfile as spec_mod
backends.COMPILERS["misbehaving"] = "compile_fakes:MisbehavingCompiler"
backends.DEFAULT_DEVICES["misbehaving"] = ("onnxruntime",)
spec_mod.BACKEND_COMPILE_KEYS["misbehaving"] = {"misbehave", "pidfile"}
from loop.author.sweepfile import parse
from loop.flow.sweep import SweepOptions, run_sweep
run_sweep(parse(Path(sys.argv[1])), Path(sys.argv[2]), SweepOptions(jobs=2, progress=False))
"""
HANGING = """\
sweep: hung
base: tiny.yaml
backend: misbehaving
calibration: {{count: 4}}
inputs: {{count: 2}}
variants:
  - name: base
  - name: hangs
    compile: {{misbehave: hang, pidfile: {pidfile}}}
  - name: other
    perturb: [{{op: scale_weights, layer: conv1, factor: 1.1}}]
"""


def marked(mark: str) -> set[int]:
    """Every process whose environment carries ``mark``: all a sweep started, however deep,
    and whichever parent they have now (orphans move to init)."""
    out = set()
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"LOOP_TEST_MARK={mark}".encode() in environ.read_bytes().split(b"\0"):
                out.add(int(environ.parent.name))
        except OSError:
            continue
    return out


def alive(pids: set[int]) -> set[int]:
    """The pids still running (a zombie awaiting its reaper counts as gone)."""
    out = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.add(pid)
    return out


def test_kill_9_during_a_hung_compile_leaves_no_process_alive(write_sweep, tmp_path: Path, monkeypatch) -> None:
    pidfile, scratch = tmp_path / "hang.pid", tmp_path / "tmp"
    scratch.mkdir()
    mark = f"{os.getpid()}-{time.monotonic_ns()}"
    env = {
        **os.environ,
        "TMPDIR": str(scratch),
        "LOOP_TEST_MARK": mark,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    sweep = subprocess.Popen(
        [sys.executable, "-c", SWEEPER, str(write_sweep(HANGING.format(pidfile=pidfile))), str(tmp_path / "runs")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    while not pidfile.exists() and sweep.poll() is None:
        time.sleep(0.05)
    assert sweep.poll() is None, sweep.communicate()[1]
    _, child, helper = map(int, pidfile.read_text().split())
    assert {sweep.pid, child, helper} <= marked(mark) and len(marked(mark)) >= 6  # and 2 workers, 2 trackers
    os.kill(sweep.pid, signal.SIGKILL)
    sweep.wait()
    deadline = time.monotonic() + 5.0  # the bar the issue sets
    while alive(marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive(marked(mark)) == set()
    assert not list(Path("/dev/shm").glob(f"sem.loky-{sweep.pid}-*"))  # loky's tracker cleared them
    left = {int(p.name.split("-")[2]) for p in scratch.glob("loop-*")}
    assert sweep.pid in left and not [pid for pid in left if process_alive(pid)]  # the author folder, maybe more
    _next_sweep_starts(write_sweep, tmp_path, scratch, monkeypatch)
    # what remains is this live process's own (its models folder, when no earlier test made it)
    assert [p for p in scratch.glob("loop-*") if int(p.name.split("-")[2]) != os.getpid()] == []


def _next_sweep_starts(write_sweep, tmp_path: Path, scratch: Path, monkeypatch) -> None:
    import tempfile

    from loop.author.sweepfile import parse
    from loop.flow.sweep import SweepOptions, run_sweep

    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    plain = HANGING.format(pidfile="x").replace("backend: misbehaving\n", "").split("  - name: hangs")[0]
    run_sweep(parse(write_sweep(plain, "plain.yaml")), tmp_path / "runs", SweepOptions(jobs=1, progress=False))


def test_only_the_scratch_folders_of_dead_processes_are_removed(tmp_path: Path) -> None:
    dead, live = tmp_path / f"loop-author-{2**22 + 12345}-x1", tmp_path / f"loop-compile-{os.getpid()}-x2"
    other = tmp_path / "loop-author-unrelated"
    for folder in (dead, live, other):
        (folder / "inside").mkdir(parents=True)
    (tmp_path / f"loop-q-{2**22 + 12346}-link").symlink_to(live, target_is_directory=True)
    assert remove_stale_scratch(tmp_path) == [dead]
    assert live.exists() and other.exists() and (live / "inside").exists()
