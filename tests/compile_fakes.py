"""Compilers that misbehave for real, for the compile pool's tests: they hang, crash or count.

Each wraps the real ONNX Runtime compiler and reads what to do from its backend options, so
one ``compile_all`` call can mix good and bad variants.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from loop.compilers.onnxruntime import OnnxRuntimeCompiler
from loop.core.vocab import CompileOptions, Quantized


class MisbehavingCompiler(OnnxRuntimeCompiler):
    name = "misbehaving"

    def optimize(self, model: bytes, calibration: np.ndarray, options: CompileOptions) -> Quantized:
        log = options.backend_option("log")
        if log:  # one line per real compile, so tests can count compiles across processes
            with open(log, "a") as f:
                f.write(f"{os.getpid()}\n")
        how = options.backend_option("misbehave")
        if how == "hang":
            _hang(Path(options.backend_option("pidfile")))
        if how == "segv":
            sys.stderr.write("about to crash\n")
            os.kill(os.getpid(), signal.SIGSEGV)
        if how == "exit":
            os._exit(139)
        if how == "hog":  # a compile that needs more memory than it has: every page touched
            hoard = [np.ones(1 << 27, np.uint8) for _ in range(int(options.backend_option("hog_gb", 4)) * 8)]
            del hoard
        return super().optimize(model, calibration, options)


def _hang(pidfile: Path) -> None:
    """Start a helper in our process group, record both, and never return."""
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    pidfile.write_text(f"{os.getpgrp()} {os.getpid()} {helper.pid}")
    time.sleep(600)


class PatchMisbehavingTestDouble(OnnxRuntimeCompiler):
    """A TEST DOUBLE for a compiler whose patch (``scale_grid``) crashes or hangs its process, for
    the patch child's tests: a first factor of 13 exits the process, one of 7 never returns."""

    name = "patch-misbehaving"

    def rescale(self, quantized: Quantized, edits):  # type: ignore[no-untyped-def]
        if edits and edits[0].factors[0] == 13.0:
            os._exit(139)
        if edits and edits[0].factors[0] == 7.0:
            time.sleep(600)
        return super().rescale(quantized, edits)
