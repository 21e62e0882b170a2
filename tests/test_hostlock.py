import threading
from typing import Callable, ContextManager

from loop import hostlock

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
