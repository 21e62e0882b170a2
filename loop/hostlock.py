"""Host-wide locks: two sweeps on one machine never time the same device at once, and a
measurement never runs while another sweep compiles, unless ``--overlap`` says so.

Compiles hold the host lock shared; a measurement holds its device's lock and the host
lock exclusively. A compile never waits on a device lock, so the two cannot deadlock."""
from __future__ import annotations

import fcntl
import os
import re
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import ContextManager, Iterator


def lock_dir() -> Path:
    path = Path(os.environ.get("LOOP_LOCK_DIR", Path(tempfile.gettempdir()) / "loop-locks"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def _flock(name: str, mode: int) -> Iterator[None]:
    with open(lock_dir() / name, "a") as f:
        fcntl.flock(f, mode)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def compiling() -> ContextManager[None]:
    return _flock("host.lock", fcntl.LOCK_SH)


@contextmanager
def measuring(device: str, overlap: bool = False) -> Iterator[None]:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", device)
    with _flock(f"device-{safe}.lock", fcntl.LOCK_EX):
        if overlap:
            yield
            return
        with _flock("host.lock", fcntl.LOCK_EX):
            yield
