"""``test-double``: a TEST DOUBLE of a device, not a device. It runs the artifact on the host's
ONNX Runtime and misbehaves when told to, as a faulty driver would, to prove that a runner
survives it: ``test-double:segv@3,hang@7,short@5`` segfaults (a real SIGSEGV, by reading
address 0) while measuring the 3rd artifact it sees, hangs for ever measuring the 7th, and
returns a short output buffer for every input of the 5th; ``spawn@N`` starts a helper process
(as a driver starts a vendor tool) and then hangs, measuring the Nth; ``vendorhang@N`` measures
the Nth and then hangs in its vendor benchmark (a vendor tool that never returns).

"The Nth artifact" is counted across processes (a runner replaces a dead device process),
in the file named by ``LOOP_TEST_DOUBLE_STATE``, else one per parent process in the
temporary directory.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from loop.core.errors import LoopError
from loop.core.vocab import Artifact
from loop.devices.base import RuntimeOptions, Session
from loop.devices.onnxruntime import OnnxRuntimeDevice, OnnxRuntimeSession

FAULTS = ("segv", "hang", "short", "spawn", "vendorhang")
HELPER = "import sys, time; time.sleep(600)"  # a vendor tool that outlives nothing it should


def _faults(arg: str) -> dict[int, str]:
    out: dict[int, str] = {}
    for item in filter(None, arg.split(",")):
        fault, sep, nth = item.partition("@")
        if fault not in FAULTS or not sep or not nth.isdigit() or int(nth) < 1:
            raise LoopError(f"test-double: {item!r}: expected FAULT@N, FAULT one of {', '.join(FAULTS)}")
        out[int(nth)] = fault
    return out


def _state() -> Path:
    given = os.environ.get("LOOP_TEST_DOUBLE_STATE")
    if given:
        return Path(given)
    # a scratch folder named for the parent (the sweep), which a later sweep removes once it is gone
    folder = Path(tempfile.gettempdir()) / f"loop-testdouble-{os.getppid()}-state"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder / "seen.txt"


def nth_artifact(sha: str, state: Path) -> int:
    """The artifact's place (from 1) among those this double has seen, recorded if new."""
    with open(state, "a+") as f:
        if os.name == "posix":  # one reader-writer at a time (the workers of a cluster may share it)
            import fcntl

            fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        seen = f.read().split()
        if sha not in seen:
            f.write(sha + "\n")
            seen.append(sha)
    return seen.index(sha) + 1


class MisbehavingTestDoubleSession(OnnxRuntimeSession):
    def __init__(self, artifact: Artifact, options: RuntimeOptions, fault: str | None) -> None:
        super().__init__(artifact, options)
        self.fault = fault

    def infer(self, frames: Sequence[np.ndarray], out: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
        outputs = super().infer(frames, out)
        if self.fault == "short":
            return [o.reshape(-1)[:-1] for o in outputs]
        return outputs

    def pipelined(self, frames: Sequence[np.ndarray], count: int, depth: int) -> float:
        if self.fault == "segv":
            ctypes.string_at(0)  # a real segmentation fault, as a native driver's would be
        if self.fault == "spawn":
            subprocess.Popen([sys.executable, "-c", HELPER, str(_state())])
        if self.fault in ("hang", "spawn"):
            while True:  # a native call that never returns
                time.sleep(3600)
        return super().pipelined(frames, count, depth)


class MisbehavingTestDouble(OnnxRuntimeDevice):
    """A test double (see the module): ONNX Runtime on the host, with faults on purpose."""

    name = "test-double"
    takes_arg = True

    def __init__(self, faults: str = "") -> None:
        super().__init__()
        self.faults = _faults(faults)
        self.fault_now: str | None = None  # of the artifact opened last: the one measured

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return True, "a test double: ONNX Runtime on the host, misbehaving when told (FAULT@N)"

    def open(self, artifact: Artifact, options: RuntimeOptions) -> Session:
        fault = self.faults.get(nth_artifact(artifact.sha, _state())) if self.faults else None
        self.fault_now = fault
        return MisbehavingTestDoubleSession(artifact, options, fault)

    def vendor_benchmark(self, artifact_path: Path, loop_fps: float, options: RuntimeOptions) -> dict[str, Any] | None:
        while self.fault_now == "vendorhang":  # a vendor tool that never returns
            time.sleep(3600)
        return None
