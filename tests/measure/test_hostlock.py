import threading
from collections.abc import Callable
from contextlib import AbstractContextManager as ContextManager

from loop.measure import hostlock

Enter = Callable[[], ContextManager[None]]


def start(enter: Enter, entered: threading.Event, release: threading.Event) -> threading.Thread:
    """Hold ``enter()`` in a thread until ``release``; ``entered`` is set once inside."""

    def run() -> None:
        with enter():
            entered.set()
            release.wait(30)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_measuring_waits_for_compiles(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOP_LOCK_DIR", str(tmp_path))
    compiling, release, measured = threading.Event(), threading.Event(), threading.Event()
    start(hostlock.compiling, compiling, release)
    assert compiling.wait(30)
    start(lambda: hostlock.measuring("dev"), measured, threading.Event()).join(0)
    assert not measured.wait(0.3)  # blocked by the compile (no absolute time is asserted)
    release.set()
    assert measured.wait(30)


def test_overlap_measures_during_compiles(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOP_LOCK_DIR", str(tmp_path))
    compiling, release, measured = threading.Event(), threading.Event(), threading.Event()
    start(hostlock.compiling, compiling, release)
    assert compiling.wait(30)
    start(lambda: hostlock.measuring("dev", overlap=True), measured, threading.Event())
    assert measured.wait(30)
    release.set()


def test_one_device_one_measurement(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOP_LOCK_DIR", str(tmp_path))
    first, release = threading.Event(), threading.Event()
    start(lambda: hostlock.measuring("dev"), first, release)
    assert first.wait(30)
    other, same = threading.Event(), threading.Event()
    start(lambda: hostlock.measuring("other", overlap=True), other, threading.Event())
    start(lambda: hostlock.measuring("dev", overlap=True), same, threading.Event())
    assert other.wait(30) and not same.wait(0.3)
    release.set()
    assert same.wait(30)


HOLDER = """
import sys, time
from pathlib import Path
from loop.measure import hostlock
with hostlock.measuring("dev"):
    Path(sys.argv[1]).touch()
    while not Path(sys.argv[2]).exists():
        time.sleep(0.01)
"""


def test_a_waiting_sweep_says_who_holds_the_lock_and_keeps_saying_it(tmp_path, monkeypatch, capsys):
    import socket
    import subprocess
    import sys

    monkeypatch.setenv("LOOP_LOCK_DIR", str(tmp_path))
    monkeypatch.setattr(hostlock, "WAIT_REPORT_S", 0.0)
    held, release = tmp_path / "held", tmp_path / "release"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(held), str(release)])
    try:
        while not held.exists():
            assert holder.poll() is None
        measured, done = threading.Event(), threading.Event()
        thread = start(lambda: hostlock.measuring("dev"), measured, done)
        while capsys.readouterr().err.count("loop: waiting for") < 1:
            assert not measured.is_set()
        err = ""
        while err.count("loop: waiting for") < 2:  # and again, while it waits
            err += capsys.readouterr().err
        release.touch()
        assert measured.wait(30)
        done.set()
        thread.join(30)
    finally:
        release.touch()
        holder.wait()
    line = err.splitlines()[0]
    assert line.startswith("loop: waiting for host.lock: held by pid ")
    assert f"pid {holder.pid} on {socket.gethostname()}, measuring on dev since 20" in line
    assert "waited" not in line and "still waiting after" in err  # the first line claims no wait of 0 s
    assert not list(tmp_path.glob("*.who"))  # each holder's note went with its lock
