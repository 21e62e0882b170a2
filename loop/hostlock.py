"""Host-wide locks: two sweeps on one machine never time the same device at once, and a
measurement never runs while another sweep compiles, unless ``--overlap`` says so.

Compiles hold the host lock shared; a measurement holds its device's lock and the host
lock exclusively. A compile never waits on a device lock, so the two cannot deadlock.
On Windows, which has no shared file locks in the standard library, every lock is
exclusive: two sweeps there also take turns compiling.
"""
from __future__ import annotations

import os
import re
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, ContextManager, Iterator

SHARED, EXCLUSIVE = "shared", "exclusive"


def lock_dir() -> Path:
    path = Path(os.environ.get("LOOP_LOCK_DIR", Path(tempfile.gettempdir()) / "loop-locks"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _lock(f: IO[str], mode: str) -> None:
    if os.name == "nt":
        import msvcrt
        while True:  # msvcrt.LK_LOCK gives up after ten tries; a measurement may take longer
            try:
                msvcrt.locking(f.fileno(), msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
                return
            except OSError:
                time.sleep(0.1)
    import fcntl
    fcntl.flock(f, fcntl.LOCK_SH if mode == SHARED else fcntl.LOCK_EX)


def _unlock(f: IO[str]) -> None:
    if os.name == "nt":
        import msvcrt
        f.seek(0)
        msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]
        return
    import fcntl
    fcntl.flock(f, fcntl.LOCK_UN)


@contextmanager
def _held(name: str, mode: str) -> Iterator[None]:
    with open(lock_dir() / name, "a+") as f:
        f.seek(0)
        _lock(f, mode)
        try:
            yield
        finally:
            _unlock(f)


def compiling() -> ContextManager[None]:
    return _held("host.lock", SHARED)


@contextmanager
def measuring(device: str, overlap: bool = False) -> Iterator[None]:
    # Always the host lock before a device lock: a sweep that measures with ``overlap``
    # still holds the host lock shared (it is compiling) when it takes the device lock, so
    # taking them in the other order here could wait on it while it waits on us.
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", device)
    with ExitStack() as held:
        if not overlap:
            held.enter_context(_held("host.lock", EXCLUSIVE))
        held.enter_context(_held(f"device-{safe}.lock", EXCLUSIVE))
        yield
