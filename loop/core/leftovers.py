"""What a killed process leaves behind, and how loop tells it from a live one.

Every scratch folder loop makes in the temporary directory is named
``loop-KIND-PID-RANDOM``: the pid of the process that made it, so the next sweep can remove
the folders of processes that are gone (a ``kill -9`` runs no cleanup) and leave a live
sweep's alone.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

SCRATCH = re.compile(r"^loop-[a-z0-9]+-(?P<pid>\d+)-[^/]+$")


def process_alive(pid: int) -> bool:
    if os.name == "nt":
        return _windows_process_alive(pid)
    try:
        os.kill(pid, 0)  # signal 0 only asks; on Windows it would send a Ctrl-C instead
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """A process that has exited but not been reaped (an orphan under an init that does not
    reap, as in some containers) still answers signal 0: it is gone all the same."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _windows_process_alive(pid: int) -> bool:
    import ctypes

    kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
    handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
    if not handle:
        return False
    code = ctypes.c_ulong()
    try:
        return bool(kernel32.GetExitCodeProcess(handle, ctypes.byref(code))) and code.value == 259  # STILL_ACTIVE
    finally:
        kernel32.CloseHandle(handle)


def scratch(kind: str) -> tempfile.TemporaryDirectory[str]:
    """A private (0700) scratch folder that names this process, removed when closed."""
    return tempfile.TemporaryDirectory(prefix=f"loop-{kind}-{os.getpid()}-")


def stale_scratch(root: Path | None = None) -> list[Path]:
    """Scratch folders of processes that are gone: this user's own folders only, never a link."""
    root = Path(root or tempfile.gettempdir())
    try:
        names = os.listdir(root)
    except OSError:
        return []
    out = []
    for name in names:
        match = SCRATCH.match(name)
        if match is None or process_alive(int(match["pid"])):
            continue
        try:
            info = os.lstat(root / name)
        except OSError:
            continue
        mine = not hasattr(os, "getuid") or info.st_uid == os.getuid()
        if stat.S_ISDIR(info.st_mode) and mine:
            out.append(root / name)
    return sorted(out)


def remove_stale_scratch(root: Path | None = None) -> list[Path]:
    """Remove :func:`stale_scratch`; returns what went."""
    removed = []
    for path in stale_scratch(root):
        shutil.rmtree(path, ignore_errors=True)  # rmtree does not follow links inside
        if not path.exists():
            removed.append(path)
    return removed
