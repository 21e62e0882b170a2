"""What the host was doing during a measurement: CPU busy (all of it, and ours)."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass


def _proc_stat() -> tuple[float, float] | None:
    try:
        with open("/proc/stat") as f:
            fields = [float(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    return sum(fields), idle


@dataclass
class LoadProbe:
    """Start before a measurement, ``stop()`` after; percentages of all cores."""

    stat: tuple[float, float] | None = None
    own: float = 0.0
    wall: float = 0.0

    @classmethod
    def start(cls) -> "LoadProbe":
        t = os.times()
        return cls(_proc_stat(), t.user + t.system, time.perf_counter())

    def stop(self) -> dict[str, float | None]:
        end_stat, t, wall = _proc_stat(), os.times(), time.perf_counter() - self.wall
        cores = os.cpu_count() or 1
        own = 100.0 * (t.user + t.system - self.own) / max(wall * cores, 1e-9)
        busy = None
        if self.stat and end_stat and end_stat[0] > self.stat[0]:
            total, idle = end_stat[0] - self.stat[0], end_stat[1] - self.stat[1]
            busy = 100.0 * (total - idle) / total
        return {"cpu_busy_pct": busy, "own_cpu_pct": own,
                "others_cpu_pct": None if busy is None else max(busy - own, 0.0),
                "loadavg": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}
