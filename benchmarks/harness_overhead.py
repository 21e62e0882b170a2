"""How much of the measured rate does loop's own harness cost?

For three models (the two-conv recipe, the 131k stack, and a larger stack authored here),
compile once with loop's embedded compiler, open one artifact twice, and in ONE process
alternate five rounds of:

  (a) loop's steady-state rate: ``loop.measure.protocol.steady_rate`` on an ``OnnxRuntimeDevice`` session;
  (b) a bare ONNX Runtime loop: ``InferenceSession.run`` in a plain ``for`` loop.

Both see the same artifact, thread count, graph-optimization level, uint8 frame, warm-up and
frame count. A round is a few short (a)/(b) pairs, interleaved, and its figure is
median(loop fps) / median(bare fps); we report the median of the five round ratios and their
min..max. Separate processes on these hosts differ by tens of percent, and background load
comes in bursts, so only a same-process, finely interleaved ratio is stable enough to read.
``--control`` adds a second bare session (A/A): the ratio's own noise floor.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from loop.author.frames import quantize, seeded
from loop.author.graphs import build_recipe
from loop.author.sweepfile import MeasureSpec
from loop.compilers.base import run_compile
from loop.compilers.onnxruntime import OnnxRuntimeCompiler
from loop.core.vocab import Artifact, CompileOptions
from loop.devices.base import RuntimeOptions, Session
from loop.devices.onnxruntime import OnnxRuntimeDevice
from loop.measure.interleave import one_round
from loop.measure.protocol import steady_rate

REPO = Path(__file__).resolve().parent.parent
MODELS = ("two_conv", "stack_131k", "large_stack")
TINY = ["--rounds", "2", "--pairs", "2", "--chunk-s", "0.02", "--models", "two_conv", "--control"]
CALIBRATION_FRAMES = 16
TARGET_LARGE, TARGET_FLOOR = 0.99, 0.97

# About 4-5 ms a frame on a 2-core EPYC at 2 threads: well past the 1 ms floor, so
# the per-call cost of the harness is a small fraction and the ratio tests the loop itself.
LARGE_RECIPE = """\
# Authored by benchmarks/harness_overhead.py: a wider, deeper conv stack (~4-5 ms a frame).
name: large_stack
seed: 0
params: {height: 96, width: 96}
input: {name: input, shape: [1, 3, $height, $width]}
layers:
  - {name: conv1, op: conv, out: 32, kernel: 3, act: relu}
  - {name: conv2, op: conv, out: 64, kernel: 3, stride: 2, act: relu}
  - {name: conv3, op: conv, out: 96, kernel: 3, act: relu}
  - {name: conv4, op: conv, out: 96, kernel: 3, act: relu}
  - {name: conv5, op: conv, out: 128, kernel: 3, stride: 2, act: relu}
  - {name: conv6, op: conv, out: 128, kernel: 3, act: relu}
  - {name: conv7, op: conv, out: 128, kernel: 3, act: relu6}
  - {name: head, op: conv, out: 16, kernel: 1}
"""


Rate = Callable[[], float]


@dataclass
class Result:
    model: str
    ms_per_frame: float
    frames: int
    warmup: int
    pairs: int
    ratios: list[float] = field(default_factory=list)
    loop_fps: list[float] = field(default_factory=list)
    bare_fps: list[float] = field(default_factory=list)
    control: list[float] = field(default_factory=list)  # bare/bare on a second session (A/A)

    def summary(self) -> dict[str, Any]:
        out = {
            "model": self.model,
            "ms_per_frame": self.ms_per_frame,
            "frames": self.frames,
            "warmup": self.warmup,
            "pairs": self.pairs,
            "ratio_median": statistics.median(self.ratios),
            "ratio_min": min(self.ratios),
            "ratio_max": max(self.ratios),
            "loop_fps_median": statistics.median(self.loop_fps),
            "bare_fps_median": statistics.median(self.bare_fps),
            "ratios": self.ratios,
            "loop_fps": self.loop_fps,
            "bare_fps": self.bare_fps,
        }
        if self.control:
            out.update(
                control_median=statistics.median(self.control),
                control_min=min(self.control),
                control_max=max(self.control),
                control=self.control,
            )
        return out


def compile_recipe(path: Path) -> Artifact:
    model = build_recipe(path)
    shape = tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)
    calibration = seeded(shape, CALIBRATION_FRAMES, 0)
    result = run_compile(OnnxRuntimeCompiler(), model.SerializeToString(), calibration, CompileOptions())
    if not result.ok or result.artifact is None:
        raise SystemExit(f"compile of {path.name} failed at {result.stage}: {result.error}")
    return result.artifact


def bare_session(artifact: Artifact, threads: int) -> ort.InferenceSession:
    """Configured exactly as ``OnnxRuntimeSession`` configures its own (graph optimization
    left at ONNX Runtime's default), but written out here so the baseline shares no loop code."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    return ort.InferenceSession(artifact.data, so, providers=["CPUExecutionProvider"])


def bare_rate(sess: ort.InferenceSession, feed: dict[str, np.ndarray], spec: MeasureSpec) -> float:
    """The baseline protocol: same warm-up, then ``repeats`` timed runs of ``frames``; median fps."""
    for _ in range(spec.warmup):
        sess.run(None, feed)
    rates = []
    for _ in range(spec.repeats):
        t0 = time.perf_counter()
        for _ in range(spec.frames):
            sess.run(None, feed)
        rates.append(spec.frames / (time.perf_counter() - t0))
    return statistics.median(rates)


def probe_ms(sess: ort.InferenceSession, feed: dict[str, np.ndarray]) -> float:
    """A short bare timing, only to size the frame count so each chunk lasts about as planned."""
    for _ in range(5):
        sess.run(None, feed)
    n, t0 = 20, time.perf_counter()
    for _ in range(n):
        sess.run(None, feed)
    return (time.perf_counter() - t0) / n * 1e3


def bench_model(
    name: str, artifact: Artifact, threads: int, chunk_s: float, pairs: int, rounds: int, control: bool
) -> Result:
    layout = artifact.inputs[0]
    frame = quantize(seeded(layout.shape, 1, 1), layout)  # uint8, as loop feeds the device
    feed = {layout.name: frame}
    bare = bare_session(artifact, threads)
    ms = probe_ms(bare, feed)
    frames = max(5, int(chunk_s * 1e3 / ms))
    # One repeat per chunk: the repeats steady_rate would take back to back are instead
    # spread over the interleaved pairs, where the load falls on both sides alike.
    spec = MeasureSpec(warmup=max(5, frames // 20), frames=frames, repeats=1, threads=threads, min_duration_s=0.0)
    session: Session = OnnxRuntimeDevice().open(artifact, RuntimeOptions(threads=threads))
    sides: list[Rate] = [
        lambda: steady_rate(session, [frame], spec, depth=1).rate.median,
        lambda: bare_rate(bare, feed, spec),
    ]
    if control:
        other = bare_session(artifact, threads)
        sides.append(lambda: bare_rate(other, feed, spec))
    result = Result(name, ms, frames, spec.warmup, pairs)
    for i in range(rounds):
        medians = one_round(sides, pairs, i, statistics.median)
        result.loop_fps.append(medians[0])
        result.bare_fps.append(medians[1])
        result.ratios.append(medians[0] / medians[1])
        if control:
            result.control.append(medians[2] / medians[1])
    session.close()
    return result


def verdict(results: list[Result]) -> dict[str, Any]:
    """The issue's targets: >= 0.99 on the larger model; no model's median below 0.97."""
    large = statistics.median(results[-1].ratios)
    floor = min(statistics.median(r.ratios) for r in results)
    lowest = min(min(r.ratios) for r in results)
    return {
        "large_median": large,
        "large_ok": large >= TARGET_LARGE,
        "min_model_median": floor,
        "floor_ok": floor >= TARGET_FLOOR,
        "lowest_single_ratio": lowest,
    }


def table(results: list[Result], check: dict[str, Any]) -> str:
    control = bool(results[0].control)
    rows = [
        f"{'model':<12} {'ms/frame':>8} {'frames':>6} {'loop fps':>9} {'bare fps':>9} "
        f"{'loop/bare':>9} {'min..max':>13}" + (f" {'A/A bare':>9} {'min..max':>13}" if control else ""),
    ]
    for r in results:
        s = r.summary()
        row = (
            f"{r.model:<12} {1e3 / s['bare_fps_median']:>8.3f} {r.frames:>6} {s['loop_fps_median']:>9.1f} "
            f"{s['bare_fps_median']:>9.1f} {s['ratio_median']:>9.3f} "
            f"{s['ratio_min']:>6.3f}..{s['ratio_max']:.3f}"
        )
        if control:
            row += f" {s['control_median']:>9.3f} {s['control_min']:>6.3f}..{s['control_max']:.3f}"
        rows.append(row)
    rows += [
        "",
        f"target: large >= {TARGET_LARGE}: {'met' if check['large_ok'] else 'MISSED'} "
        f"({check['large_median']:.3f}); every model >= {TARGET_FLOOR}: "
        f"{'met' if check['floor_ok'] else 'MISSED'} ({check['min_model_median']:.3f}); "
        f"lowest single ratio {check['lowest_single_ratio']:.3f}",
    ]
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    # One thread by default: on a 2-core VM a 2-thread ONNX Runtime pool swings 2-3x from one
    # 0.1 s chunk to the next for either side (see --control), which buries a 1 % effect.
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads for both sides (default 1)")
    parser.add_argument(
        "--control", action="store_true", help="also time a second bare session (A/A): the noise floor of the ratio"
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=16, help="interleaved loop/bare pairs a round")
    parser.add_argument("--chunk-s", type=float, default=0.1, help="seconds a timed chunk lasts, about")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="loop-bench-") as tmp:
        large = Path(tmp) / "large_stack.yaml"
        large.write_text(LARGE_RECIPE)
        recipes = {
            "two_conv": REPO / "graphs/two_conv.yaml",
            "stack_131k": REPO / "graphs/stack_131k.yaml",
            "large_stack": large,
        }
        artifacts = [(name, compile_recipe(recipes[name])) for name in args.models]
    results = [
        bench_model(name, art, args.threads, args.chunk_s, args.pairs, args.rounds, args.control)
        for name, art in artifacts
    ]
    check = verdict(results)
    print(table(results, check), flush=True)
    return {"threads": args.threads, "models": [r.summary() for r in results], "verdict": check}
