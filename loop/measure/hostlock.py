"""Host-wide locks: two sweeps on one machine never time the same device at once, and a
measurement never runs while another sweep compiles, unless ``--overlap`` says so.

Compiles hold the host lock shared; a measurement holds its device's lock and the host
lock exclusively. A compile never waits on a device lock, so the two cannot deadlock.
On Windows, which has no shared file locks in the standard library, every lock is
exclusive: two sweeps there also take turns compiling.

A sweep that waits says so on stderr, naming who holds the lock (pid, host, what it does and
since when, from a note each holder leaves beside the lock), and says it again every few
seconds for as long as it waits.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager as ContextManager
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO

from loop.core.leftovers import process_alive

SHARED, EXCLUSIVE = "shared", "exclusive"
WAIT_REPORT_S = 5.0  # how often a waiting sweep says again who it waits for
POLL_S = 0.1


def lock_dir() -> Path:
    path = Path(os.environ.get("LOOP_LOCK_DIR", Path(tempfile.gettempdir()) / "loop-locks"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _try_lock(f: IO[str], mode: str) -> bool:
    """Take the lock if it is free now; never waits."""
    if os.name == "nt":
        import msvcrt

        try:
            msvcrt.locking(f.fileno(), msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
            return True
        except OSError:
            return False
    import fcntl

    try:
        fcntl.flock(f, (fcntl.LOCK_SH if mode == SHARED else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _lock(f: IO[str], name: str, mode: str) -> None:
    """Take the lock; while it waits, say on stderr who holds it, now and every few seconds.
    (It polls: a blocking lock could not speak meanwhile, and msvcrt's gives up after ten tries.)"""
    start, said = time.monotonic(), None
    while not _try_lock(f, mode):
        now = time.monotonic()
        if said is None or now - said >= WAIT_REPORT_S:
            waited = f"; still waiting after {now - start:.0f} s" if said is not None else ""
            sys.stderr.write(f"loop: waiting for {name}: {_holders(name)}{waited}\n")
            sys.stderr.flush()
            said = now
        time.sleep(POLL_S)


def _holders(name: str) -> str:
    """Who holds ``name``, from the notes holders leave beside it (a dead one's are removed)."""
    found = []
    for note in sorted(lock_dir().glob(f"{name}.*.who")):
        try:
            who = json.loads(note.read_text())
        except (OSError, ValueError):
            continue
        if who.get("host") == socket.gethostname() and not process_alive(int(who.get("pid", 0))):
            note.unlink(missing_ok=True)
            continue
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(who.get("since", 0))))
        found.append(f"pid {who.get('pid')} on {who.get('host')}, {who.get('doing')} since {since}")
    return "held by " + "; ".join(found) if found else "held by a process that has not said who it is"


@contextmanager
def _noted(name: str, doing: str) -> Iterator[None]:
    """Leave a note naming this process while it holds ``name``."""
    note = lock_dir() / f"{name}.{os.getpid()}.{secrets.token_hex(4)}.who"
    text = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(), "doing": doing})
    try:
        fd = os.open(note, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "w") as f:
            f.write(text)
    except OSError:  # a note is a courtesy: the lock holds without it
        pass
    try:
        yield
    finally:
        note.unlink(missing_ok=True)


def _unlock(f: IO[str]) -> None:
    if os.name == "nt":
        import msvcrt

        f.seek(0)
        msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]
        return
    import fcntl

    fcntl.flock(f, fcntl.LOCK_UN)


@contextmanager
def _held(name: str, mode: str, doing: str) -> Iterator[None]:
    with open(lock_dir() / name, "a+") as f:
        f.seek(0)
        _lock(f, name, mode)
        try:
            with _noted(name, doing):
                yield
        finally:
            _unlock(f)


def compiling() -> ContextManager[None]:
    return _held("host.lock", SHARED, "compiling")


@contextmanager
def answering(device: str) -> Iterator[None]:
    """A device answering the controlled inputs, timing nothing: it loads the host as a compile
    does, so it holds the host lock shared (no one measures meanwhile; compiles and other
    answers go on), and its device's lock, which one session at a time may hold."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", device)
    doing = f"answering the inputs on {device}"
    with _held("host.lock", SHARED, doing), _held(f"device-{safe}.lock", EXCLUSIVE, doing):
        yield


@contextmanager
def measuring(device: str, overlap: bool = False) -> Iterator[None]:
    # Always the host lock before a device lock: a sweep that measures with ``overlap``
    # still holds the host lock shared (it is compiling) when it takes the device lock, so
    # taking them in the other order here could wait on it while it waits on us.
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", device)
    with ExitStack() as held:
        if not overlap:
            held.enter_context(_held("host.lock", EXCLUSIVE, f"measuring on {device}"))
        held.enter_context(_held(f"device-{safe}.lock", EXCLUSIVE, f"measuring on {device}"))
        yield
