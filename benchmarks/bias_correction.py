"""Bias correction on real models: what each rule does to the SNR, and what it costs.

    python benchmarks/bias_correction.py table MANIFEST.json [--models a,b] [--rules holdout,shrink]
    python benchmarks/bias_correction.py cost MODEL.onnx [--frames 64] [--rounds 3] [--threads 1]

``table``: for each model in the manifest (written by benchmarks/real_models.py: the ONNX
file, its input shapes, calibration and scoring frames as .npy or .npz), the SNR of the
quantized model against the float one on the scoring frames (never the calibration frames),
through loop's own compile: bias correction off, loop's default, each rule asked for, and
ONNX Runtime's plain per-channel ``quantize_static`` called directly. Run it from an older
checkout (PYTHONPATH) for that checkout's default; ``--rules`` needs one that has them.

Measured 2026-12-05 on /tmp/realmodels (16 calibration, 12 scoring frames, 1 thread; dB).
Rules without the output guard (``correct(..., guard=False)``), then the default as shipped:

    model        off   old default  holdout  shrink  holdout_shrink  holdout_chan  default  quantize_static
    ocr_det      8.27  12.55        12.54    12.50   12.52           12.47         12.54    8.27
    ocr_rec     10.05  11.12        10.79    11.82   12.07           11.74         10.79   10.05
    ocr_cls     20.16  16.02        19.75    22.07   33.55           24.80         20.16   20.16
    captcha_det 10.46  16.11        16.45    15.84   15.55           15.54         16.45   10.46
    captcha_ocr 24.19  23.63        24.15    23.71   23.70           23.98         24.19   24.19
    magika       0.85   1.22         1.85     1.81    1.81            1.80          1.85    0.85
    silero_vad  11.27  10.25        10.18    10.04   10.03            9.56         11.27   11.27
    effnet_lite0 20.89 26.07        25.62    26.16   26.22           26.17         25.62   20.89

The default is holdout with the output guard. Without the guard no rule stays within 0.5 dB of
off on silero_vad: corrections that lower each layer's own error raise the LSTM state outputs'
error (hn, cn; speech_probs gains 0.1 dB). The guard reverts the whole pass there, and on
ocr_cls and captcha_ocr.

``cost``: quantize_static and bias correction interleaved round by round on the same seeded
frames, so a noisy host moves both alike; the median ratio of correction to quantize time.
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from loop.author import frames
from loop.author.graphs import load
from loop.compilers import bias_correction
from loop.compilers.onnxruntime import OnnxRuntimeCompiler, _quantize, calibration_feeds
from loop.core.modelfile import load_model
from loop.core.sessions import session
from loop.core.vocab import CompileOptions, Frames
from loop.judge import score


def _frames(path: str) -> Frames:
    loaded = np.load(path)
    return {k: loaded[k] for k in loaded.files} if isinstance(loaded, np.lib.npyio.NpzFile) else loaded


def snr(model: Path | onnx.ModelProto, quantized: bytes | onnx.ModelProto, scoring: Frames) -> float:
    """SNR in dB of every output of ``quantized`` against ``model``'s, over the scoring frames."""
    ref, got = session(model, optimize="all"), session(quantized, optimize="all")
    feeds = calibration_feeds(load_model(model) if isinstance(model, Path) else model, scoring)
    return score.snr_db(score.flat([ref.run(None, f) for f in feeds]), score.flat([got.run(None, f) for f in feeds]))


@contextmanager
def _rule(rule: str | None) -> Iterator[None]:
    """Loop's compile with bias correction under ``rule`` (None: the checkout's default)."""
    if rule is None:
        yield
        return
    original = bias_correction.correct
    # positional: model, quantized, frames, threads (the guard calls it again with a rule of its own)
    bias_correction.correct = lambda *a, **k: original(*a[:4], **{**k, "rule": rule})  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        bias_correction.correct = original  # type: ignore[assignment]


def _plain(model: Path, calibration: Frames) -> onnx.ModelProto:
    """ONNX Runtime's own quantize_static, per channel, MinMax, QDQ: what a user would run."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.feeds = iter(calibration_feeds(load_model(model), calibration))

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.feeds, None)

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "f.onnx", Path(tmp) / "q.onnx"
        src.write_bytes(model)
        quantize_static(
            str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
        )  # fmt: skip
        return onnx.load(str(dst))


def table_row(entry: dict[str, Any], rules: list[str]) -> dict[str, Any]:
    base = load(Path(entry["onnx"]), {}, entry["input_shapes"])
    calib, scoring = _frames(entry["calibration"]), _frames(entry["scoring"])
    compiler = OnnxRuntimeCompiler()
    row: dict[str, Any] = {"frames": frames.count(calib), "scored": frames.count(scoring)}
    columns: list[tuple[str, bool, str | None]] = [("off", False, None), ("default", True, None)]
    for label, on, rule in columns + [(r, True, r) for r in rules]:
        t0 = time.perf_counter()
        with _rule(rule):
            q = compiler.optimize(base.path, calib, CompileOptions(bias_correction=on, threads=1))
        row[label] = round(snr(base.path, q.data, scoring), 2)
        record = q.info.bias_correction or {}
        kept = record.get("corrected", [])
        row[f"{label}_note"] = (
            f"{len(kept) if isinstance(kept, list) else kept} corrected, {len(record.get('clipped', {}))} clipped, "
            f"{len(record.get('skipped', {}))} skipped, {time.perf_counter() - t0:.0f} s"
            if on
            else ""
        )
    row["quantize_static"] = round(snr(base.path, _plain(base.path, calib), scoring), 2)
    return row


def table(args: argparse.Namespace) -> int:
    manifest = json.loads(Path(args.manifest).read_text())["models"]
    names = args.models.split(",") if args.models else list(manifest)
    rules = [r for r in args.rules.split(",") if r] if args.rules else []
    if rules and "rule" not in inspect.signature(bias_correction.correct).parameters:
        sys.exit("this checkout's bias correction has no rules")
    for name in names:
        row = table_row(manifest[name], rules)
        print(json.dumps({"model": name, **row}), flush=True)
    return 0


def cost(args: argparse.Namespace) -> int:
    base = load(args.model, {})
    float_model = onnx.load(str(base.path))
    calib = frames.seeded(base.shape, args.frames, 0)
    options = CompileOptions(bias_correction=False, threads=args.threads)
    feeds = calibration_feeds(float_model, calib)
    quantize_s, correct_s = [], []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        quantized = _quantize(base.path, calib, options)
        t1 = time.perf_counter()
        done = bias_correction.correct(float_model, quantized, feeds, args.threads)
        quantize_s.append(t1 - t0)
        correct_s.append(time.perf_counter() - t1)
    ratios = [c / q for c, q in zip(correct_s, quantize_s, strict=True)]
    print(f"model {args.model.name}, input {base.shape}, {args.frames} calibration frames, {args.threads} thread(s)")
    print(f"quantize_static s: {', '.join(f'{t:.2f}' for t in quantize_s)}")
    print(f"bias correction s: {', '.join(f'{t:.2f}' for t in correct_s)} ({done.to_dict()['depths']} depths)")
    print(f"correction / quantize_static: median {statistics.median(ratios):.2f}x")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("table", help="SNR per model and rule on the manifest's frames")
    t.add_argument("manifest", type=Path)
    t.add_argument("--models", default="", help="comma-separated names from the manifest (default: all)")
    t.add_argument("--rules", default="", help="comma-separated rules beside the default (holdout, shrink, ...)")
    c = sub.add_parser("cost", help="time of bias correction beside quantize_static")
    c.add_argument("model", type=Path)
    c.add_argument("--frames", type=int, default=64, help="calibration frames (loop's default: 64)")
    c.add_argument("--rounds", type=int, default=3)
    c.add_argument("--threads", type=int, default=1, help="intra-op threads of both")
    args = parser.parse_args(argv)
    return table(args) if args.command == "table" else cost(args)


if __name__ == "__main__":
    sys.exit(main())
