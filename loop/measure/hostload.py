"""What the host was doing during a measurement: CPU busy (all of it, and ours), and whether
other processes used enough of it that the measurement is flagged ``host-busy``."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from loop.core.kinds import Flag


def _proc_stat() -> tuple[float, float] | None:
    try:
        with open("/proc/stat") as f:
            fields = [float(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    return sum(fields), idle


def _own_cpu_s() -> float:
    """CPU seconds of this process, to the microsecond where the OS says (os.times ticks
    at 10 ms, too coarse for a short measurement)."""
    try:
        import resource
    except ImportError:  # Windows
        t = os.times()
        return t.user + t.system
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class LoadProbe:
    """Start before a measurement, ``stop()`` after; percentages of all cores."""

    stat: tuple[float, float] | None = None
    own: float = 0.0
    wall: float = 0.0

    @classmethod
    def start(cls) -> LoadProbe:
        return cls(_proc_stat(), _own_cpu_s(), time.perf_counter())

    def stop(self) -> dict[str, float | None]:
        end_stat, own_s, wall = _proc_stat(), _own_cpu_s(), time.perf_counter() - self.wall
        cores = os.cpu_count() or 1
        own = 100.0 * (own_s - self.own) / max(wall * cores, 1e-9)
        busy = None
        if self.stat and end_stat and end_stat[0] > self.stat[0]:
            total, idle = end_stat[0] - self.stat[0], end_stat[1] - self.stat[1]
            busy = 100.0 * (total - idle) / total
        others = None if busy is None else max(busy - own, 0.0)
        # others_core_pct: the same share in % of ONE core, the unit a busy neighbour comes in
        return {
            "cpu_busy_pct": busy,
            "own_cpu_pct": own,
            "others_cpu_pct": others,
            "others_core_pct": None if others is None else others * cores,
            "loadavg": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        }


def busy_flags(host: dict[str, float | None], limit_core_pct: float) -> list[Flag]:
    """``host-busy`` when other processes used more than ``limit_core_pct`` % of one core;
    nothing where the OS does not say (no /proc/stat), since unknown is not busy."""
    others = host.get("others_core_pct")
    return [Flag.HOST_BUSY] if others is not None and others > limit_core_pct else []
