"""Memory as a resource, as cores are: what is available, what a process peaked at, and whether
the kernel's out-of-memory killer struck.

Linux only, and each reading says None where it cannot be made (another OS, a /proc or cgroup
file that is not there). The cgroup is the process's own memory cgroup, version 2 (``memory.max``,
``memory.events``) or version 1 (``memory.limit_in_bytes``, ``memory.oom_control``): in a
container, the host's free memory is not this process's to take.
"""

from __future__ import annotations

import resource
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
UNLIMITED = 1 << 60  # cgroup v1 writes "no limit" as a page-rounded 2**63 - 1


def peak_bytes() -> int:
    """This process's peak resident set (Linux gives ``ru_maxrss`` in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def available_bytes() -> int | None:
    """Memory a new process can take: the kernel's ``MemAvailable``, less what this cgroup's limit
    leaves (its limit minus its usage) where that is smaller."""
    found = _meminfo_available()
    folder = _cgroup_folder()
    if folder is not None:
        limit = _read_int(folder / "memory.max") or _read_int(folder / "memory.limit_in_bytes")
        usage = _read_int(folder / "memory.current") or _read_int(folder / "memory.usage_in_bytes")
        if limit is not None and limit < UNLIMITED and usage is not None:
            left = max(0, limit - usage)
            found = left if found is None else min(found, left)
    return found


def oom_kills() -> int | None:
    """How many processes of this cgroup the out-of-memory killer has killed so far."""
    folder = _cgroup_folder()
    if folder is None:
        return None
    for name in ("memory.events", "memory.oom_control"):
        try:
            for line in (folder / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            continue
    return None


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_folder() -> Path | None:
    """This process's memory cgroup folder: the v1 ``memory`` hierarchy's, else the v2 one's."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    found = None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            found = CGROUP_ROOT / "memory" / path.lstrip("/")
            break
        if controllers == "" and (CGROUP_ROOT / "cgroup.controllers").exists():
            found = CGROUP_ROOT / path.lstrip("/")
    return found if found is not None and found.is_dir() else None


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
