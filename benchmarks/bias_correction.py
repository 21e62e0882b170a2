"""What layer-by-layer bias correction costs, beside ONNX Runtime's own quantize_static.

    python benchmarks/bias_correction.py MODEL.onnx [--frames 64] [--rounds 3] [--threads 1]

Both run in this process, interleaved round by round (quantize, correct, quantize, ...), on
the same calibration frames (loop's seeded ones), so a noisy host moves both alike; the
figure is the median ratio of correction time to quantize time. It also prints the SNR of
the quantized model against the float one on other frames, with and without correction.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx

from loop.compilers import bias_correction
from loop.compilers.onnxruntime import _quantize, calibration_feeds
from loop.core.sessions import session
from loop.core.vocab import CompileOptions
from loop.judge import score
from loop.spec import frames
from loop.spec.graphs import load


def snr(float_model: bytes, quantized: onnx.ModelProto, test: np.ndarray, name: str) -> float:
    ref, got = session(float_model, optimize="all"), session(quantized, optimize="all")
    a = [ref.run(None, {name: f[None]}) for f in test]
    b = [got.run(None, {name: f[None]}) for f in test]
    return score.snr_db(score.flat(a), score.flat(b))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--frames", type=int, default=64, help="calibration frames (loop's default: 64)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads of both")
    args = parser.parse_args(argv)
    base = load(args.model, {})
    float_model = onnx.load_from_string(base.data)
    calib = frames.seeded(base.shape, args.frames, 0)
    options = CompileOptions(bias_correction=False, threads=args.threads)
    feeds = calibration_feeds(float_model, calib)
    quantize_s, correct_s = [], []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        quantized = _quantize(base.data, calib, options)
        t1 = time.perf_counter()
        plain = onnx.ModelProto()
        plain.CopyFrom(quantized)
        done = bias_correction.correct(float_model, quantized, feeds, args.threads)
        t2 = time.perf_counter()
        quantize_s.append(t1 - t0)
        correct_s.append(t2 - t1)
    ratios = [c / q for c, q in zip(correct_s, quantize_s, strict=True)]
    test = frames.seeded(base.shape, 16, 1)
    name = base.structure.inputs[0]
    print(f"model {args.model.name}, input {base.shape}, {args.frames} calibration frames, {args.threads} thread(s)")
    print(f"quantize_static s: {', '.join(f'{t:.2f}' for t in quantize_s)}")
    print(
        f"bias correction s: {', '.join(f'{t:.2f}' for t in correct_s)} "
        f"({len(done.corrected)} layers in {done.depths} depths, {len(done.skipped)} skipped)"
    )
    print(
        f"correction / quantize_static: median {statistics.median(ratios):.2f}x "
        f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)})"
    )
    print(
        f"SNR on 16 other frames: {snr(base.data, plain, test, name):.1f} dB without, "
        f"{snr(base.data, quantized, test, name):.1f} dB with bias correction"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
