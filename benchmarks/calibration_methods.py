"""Calibration methods side by side: SNR of each against the float model, on other frames.

    python benchmarks/calibration_methods.py MODEL.onnx [MODEL.onnx ...] [--frames 32]

Bias correction is off, so the figure is the calibration's own. ONNX Runtime's defaults made
``entropy`` equal to ``minmax`` byte for byte; loop passes its bin counts through.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import onnx

from loop.author import frames
from loop.author.graphs import load
from loop.compilers.onnxruntime import OnnxRuntimeCompiler
from loop.core.sessions import session
from loop.core.vocab import CompileOptions
from loop.judge import score

METHODS = ("minmax", "entropy", "percentile", "distribution")


def snr_by_method(path: Path, count: int) -> dict[str, float]:
    base = load(path, {})
    calib, test = frames.seeded(base.shape, count, 0), frames.seeded(base.shape, 16, 1)
    name = base.structure.inputs[0]
    ref = session(base.path, optimize="all")
    expected = score.flat([ref.run(None, {name: f[None]}) for f in test])
    out = {}
    for method in METHODS:
        q = OnnxRuntimeCompiler().optimize(
            base.path, calib, CompileOptions(bias_correction=False, calibration_method=method)
        )
        got = session(onnx.load_from_string(q.data), optimize="all")
        out[method] = score.snr_db(expected, score.flat([got.run(None, {name: f[None]}) for f in test]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("models", type=Path, nargs="+")
    parser.add_argument("--frames", type=int, default=32)
    args = parser.parse_args(argv)
    print("| model | " + " | ".join(METHODS) + " |\n|---|" + "---|" * len(METHODS))
    for path in args.models:
        snr = snr_by_method(path, args.frames)
        print(f"| {path.stem} | " + " | ".join(f"{snr[m]:.1f}" for m in METHODS) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
