"""The direction classifier against plain quantize_static, on three sets of rendered text lines.

Issue 50 found loop's default 22 dB below ``quantize_static`` on PaddleOCR's direction classifier
(``ch_ppocr_mobile_v2.0_cls``). That file keeps every conv kernel in a Constant node, and
``quantize_static`` quantizes no weight it does not find among the initializers: on the file as
shipped it leaves all 53 kernels in float. This script scores, on each frame set (12 calibration
lines, held-out scoring lines of other text and seeds), ``quantize_static`` per-channel and
per-tensor on the shipped file and on the graph as loop loads it (kernels as initializers, so
quantized), and loop's default and per-tensor compiles, each against the float model, and the
default less each plain one paired over the same frames with its 95% bootstrap interval.

    python benchmarks/cls_peer.py --model ch_ppocr_mobile_v2.0_cls_infer.onnx [--frames 64]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_frames as rf
import score_intervals as si
from real_models import Reader

from loop.author.graphs import load_onnx
from loop.compilers.base import run_compile
from loop.compilers.onnxruntime import OnnxRuntimeCompiler
from loop.core.vocab import CompileOptions
from loop.judge.score import paired_snr

INPUT, SHAPE = "x", [1, 3, 48, 192]


def upright(seed: int, n: int) -> np.ndarray:
    rng = random.Random(seed)
    return np.stack([rf.paddle(rf.text_line(t, rng), 48, 192) for t in rf.lines_of_text(n, rng, 5, 18)])


def frame_sets(n: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(calibration, scoring) per set: no line or seed shared between the two."""
    return {
        "real_frames.ocr_cls (30% turned)": (rf.ocr_cls(random.Random(11), 12), rf.ocr_cls(random.Random(22), n)),
        "upright lines": (upright(11, 12), upright(22, n)),
        "score_intervals lines (30% turned)": (
            si.text_frames(12, 48, 192, si.CALIBRATION_WORDS, 100),
            si.text_frames(n, 48, 192, si.SCORING_WORDS, 200 + n),
        ),
    }


def outputs(model: str | bytes, frames: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return np.concatenate([session.run(None, {INPUT: frames[i : i + 1]})[0] for i in range(len(frames))])


def one_set(model: Path, loaded: Path, cal: np.ndarray, score: np.ndarray, tmp: Path) -> dict[str, object]:
    ref = outputs(str(model), score)

    def energy(y: np.ndarray) -> np.ndarray:  # per frame: (signal, noise), as loop records them
        axes = tuple(range(1, ref.ndim))
        return np.column_stack([(ref.astype(np.float64) ** 2).sum(axes), ((ref - y).astype(np.float64) ** 2).sum(axes)])

    energies: dict[str, np.ndarray] = {}

    def snr(y: np.ndarray, tag: str) -> float:
        energies[tag] = energy(y)
        return round(float(10 * np.log10((ref**2).sum() / ((ref - y) ** 2).sum())), 2)

    row: dict[str, object] = {}
    feeds = [{INPUT: cal[i : i + 1]} for i in range(len(cal))]
    for source, tag in ((model, "shipped"), (loaded, "loaded")):
        for per_channel in (True, False):
            out = tmp / f"plain-{tag}-{per_channel}.onnx"
            quantize_static(
                str(source), str(out), Reader(feeds), quant_format=QuantFormat.QDQ, per_channel=per_channel,
                activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
            )  # fmt: skip
            name = f"plain {tag} {'per-channel' if per_channel else 'per-tensor'}"
            row[name] = snr(outputs(str(out), score), name)
    for options, tag in (({}, "loop default"), ({"per_channel": False}, "loop per-tensor")):
        done = run_compile(OnnxRuntimeCompiler(), loaded, {INPUT: cal}, CompileOptions(**options))
        assert done.ok and done.quantized is not None, done.error
        row[tag] = snr(outputs(done.quantized.data, score), tag)  # type: ignore[union-attr]
    for tag in [t for t in energies if t.startswith("plain")]:  # the default less each, paired over the frames
        found = paired_snr(energies["loop default"], energies[tag])
        if found is not None:
            row[f"default - {tag}"] = [round(found[0], 2), [round(v, 2) for v in found[1]]]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description="The direction classifier against plain quantize_static.")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--frames", type=int, default=64)
    args = parser.parse_args()
    ort.set_default_logger_severity(3)
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        loaded = tmp / "loaded.onnx"
        onnx.save(load_onnx(args.model, given_shapes={INPUT: SHAPE}), str(loaded))
        for label, (cal, score) in frame_sets(args.frames).items():
            row = one_set(args.model, loaded, cal.astype(np.float32), score.astype(np.float32), tmp)
            print(json.dumps({"frames": label, "scoring": args.frames, **row}), flush=True)


if __name__ == "__main__":
    main()
