"""Beside a device child, the keeper kills the child's process group once their parent is gone.

A ``kill -9`` of the sweep runs no cleanup, and the child's parent-death signal leaves it no
thread to kill what it started (a driver's or vendor tool's processes): this sibling does. Stdlib
only, run by path without site-packages (:func:`loop.flow.supervise.connected`): it starts fast.
"""

from __future__ import annotations

import os
import signal
import sys
import time

WATCH_S = 0.1  # how often the parent is looked for


def outlive(parent: int) -> None:
    """Return once ``parent`` is no longer this process's parent: it died, and init adopted us."""
    while os.getppid() == parent:
        time.sleep(WATCH_S)


def kill_group(group: int) -> None:
    """Kill every process of ``group``; a no-op once all have gone."""
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass


def main(argv: list[str] | None = None) -> None:
    parent, group = (int(a) for a in (argv or sys.argv)[1:3])
    outlive(parent)
    kill_group(group)


if __name__ == "__main__":
    main()
