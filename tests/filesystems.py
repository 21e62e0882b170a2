"""Real filesystem faults for the tests: a small tmpfs that fills up, and a read-only one.

Mounting needs root (CAP_SYS_ADMIN); elsewhere the tests that need it are skipped, except a
read-only folder, which an ordinary user gets from chmod (root ignores modes, hence the mount).
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _mount(args: list[str]) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@contextmanager
def small_filesystem(path: Path, size: int) -> Iterator[Path]:
    """``path`` as a fresh tmpfs of ``size`` bytes, unmounted afterwards."""
    path.mkdir(parents=True, exist_ok=True)
    if (
        not hasattr(os, "geteuid")
        or os.geteuid() != 0
        or not _mount(["-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)])
    ):
        pytest.skip("needs root to mount a small tmpfs")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(folder: Path, leave: int = 0) -> Path:
    """Fill the filesystem holding ``folder`` up to ``leave`` free bytes, with one file."""
    filler = folder / "filler"
    free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
    with open(filler, "wb") as f:
        try:
            f.write(b"\0" * max(0, free - leave))
        except OSError:
            pass
    return filler


@contextmanager
def read_only(path: Path) -> Iterator[Path]:
    """``path`` (already holding files) made read-only for this process, then writable again."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        if not _mount(["--bind", str(path), str(path)]) or not _mount(["-o", "remount,ro,bind", str(path)]):
            pytest.skip("needs a bind mount to make a folder read-only for root")
        try:
            yield path
        finally:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)
        return
    modes = {p: p.stat().st_mode for p in [path, *path.rglob("*")]}
    for p in modes:
        p.chmod(stat.S_IMODE(modes[p]) & ~0o222)
    try:
        yield path
    finally:
        for p, mode in modes.items():
            p.chmod(stat.S_IMODE(mode))
