"""A child for the supervisor's tests (tests/flow/test_supervise.py) that misbehaves for real.

``python -m supervised FOLDER PARENT`` (or a fork running :func:`behave`) does what
``FOLDER/what.json`` says: exit 3, die of SIGSEGV, hang with a helper in its group, or add up
the numbers given and leave the sum beside them. ``python -m supervised FD PARENT`` answers
over the socket ``FD`` instead (anything else it is sent: it closes the socket, then exits 3
late), and ``python -m supervised sweep`` plays a sweep that starts
such a child, prints its pids and waits to be killed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from loop.flow import supervise

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]  # a helper that outlives nothing


def behave(folder: Path) -> None:
    asked = json.loads((folder / "what.json").read_text())
    if asked["do"] == "exit":
        os._exit(3)
    if asked["do"] == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if asked["do"] == "hang":
        os.write(1, f"helper {subprocess.Popen(SLEEPER).pid}\n".encode())  # fd 1: whatever sys.stdout is
        time.sleep(600)
    (folder / "sum.json").write_text(json.dumps({"sum": sum(asked["numbers"])}))


def answer(fd: int) -> None:
    conn = supervise.Connection(fd)
    while True:
        try:
            asked = conn.recv()
        except EOFError:
            return
        if not isinstance(asked, list | str):  # a job it cannot do: it closes its socket, then exits late
            conn.close()
            time.sleep(0.5)
            os._exit(3)
        conn.send(subprocess.Popen(SLEEPER).pid if asked == "helper" else sum(asked))


def sweep() -> None:
    child, conn = supervise.connected("supervised")
    conn.send("helper")
    assert child.keeper is not None
    print(child.pid, conn.recv(), child.keeper.pid, flush=True)
    time.sleep(600)


if __name__ == "__main__":
    if sys.argv[1] == "sweep":
        sweep()
    else:
        supervise.as_child(int(sys.argv[2]))
        if sys.argv[1].isdigit():
            answer(int(sys.argv[1]))
        else:
            behave(Path(sys.argv[1]))
