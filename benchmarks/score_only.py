"""What a score-only generation costs beside a measured one.

The same study generation of N candidates, measured (the protocol's short run, then the rounds
against the reference) and score-only (``measure=False``: compile, audit and score on the
controlled inputs), side by side.

MODEL is a recipe or an ONNX model (default ``graphs/two_conv.yaml``); the candidates are
``scale_weights`` on its first convolution at N factors, with ``bias_correction: false``, under a
search's protocol (``MEASURE``: one repeat, one fresh session; the ratios come from the rounds).
Each mode has a runs folder of its own whose compile cache an untimed first generation fills; a
timed pass is the same N again with ``remeasure=True`` (compiles from the cache), the two modes
alternating which goes first. The time spent waiting for the host's lock (another process's
compile or measurement on this host) is kept apart. Prints a line per timed generation, then a
table: each mode's median wall without those waits, candidates per minute, and score-only's
speed-up over measured.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import onnx

from loop.study import Study

HERE = Path(__file__).resolve().parent.parent
QUICK = {"warmup": 2, "frames": 10, "min_duration_s": 0, "budget_s": 1}
MEASURE = {
    "warmup": 10,
    "frames": 100,
    "repeats": 1,
    "ttfo_repeats": 1,
    "latency_frames": 0,
    "min_duration_s": 0.1,
    "threads": 1,
}
SETTINGS = {
    "compile": {"bias_correction": False},
    "calibration": {"count": 16},
    "inputs": {"count": 4},
    "measure": MEASURE,
}
TINY = ["--candidates", "2", "--passes", "1", "--spec", json.dumps(QUICK)]


@contextmanager
def lock_waits() -> Iterator[list[float]]:
    """The seconds this process spends waiting for the host's compile/measure lock (another
    process's sweep on this host holds it), summed into the list's one item as they pass. The
    lock has no public hook, so its one taker is wrapped while this lasts."""
    from loop.measure import hostlock

    waited, take = [0.0], hostlock._lock

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return take(*args, **kwargs)
        finally:
            waited[0] += time.perf_counter() - t0

    hostlock._lock = timed
    try:
        yield waited
    finally:
        hostlock._lock = take


def first_conv(model: Path) -> str:
    if model.suffix == ".onnx":
        return next(n.name for n in onnx.load(str(model), load_external_data=False).graph.node if n.op_type == "Conv")
    return "conv1"  # the two-conv recipe's


def generation(runs: Path, model: Path, layer: str, n: int, spec: dict[str, Any], measure: bool, warm: bool) -> float:
    """One generation of ``n`` candidates in ``runs``, by a study opened for it; its wall in seconds."""
    candidates = [[{"op": "scale_weights", "layer": layer, "factor": 1.0 + 0.01 * (i + 1)}] for i in range(n)]
    with Study("bench", base=model, runs=runs, **{**SETTINGS, "measure": {**MEASURE, **spec}}) as study:
        t0 = time.perf_counter()
        study.evaluate(candidates, remeasure=not warm, measure=measure)
        return time.perf_counter() - t0


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("model", nargs="?", type=Path, default=HERE / "graphs" / "two_conv.yaml")
    ap.add_argument("--candidates", type=int, default=16)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--spec", type=json.loads, default={}, help="measure settings over MEASURE (JSON)")
    args = ap.parse_args(argv)
    model, n = args.model.resolve(), args.candidates
    layer = first_conv(model)
    walls: dict[str, list[float]] = {"measured": [], "score-only": []}
    with lock_waits() as waited, tempfile.TemporaryDirectory(prefix="score-only-") as tmp:
        folders = {mode: Path(tmp) / mode for mode in walls}
        for mode, runs in folders.items():
            generation(runs, model, layer, n, args.spec, mode == "measured", warm=True)
        for i in range(args.passes):
            order = list(walls) if i % 2 == 0 else list(reversed(walls))
            for mode in order:
                before, load = waited[0], os.getloadavg()[0]
                wall = generation(folders[mode], model, layer, n, args.spec, mode == "measured", warm=False)
                lock = waited[0] - before
                walls[mode].append(wall - lock)
                print(
                    f"pass {i + 1} {mode:>10}: {wall:6.2f} s, of which {lock:5.2f} s waiting for the host lock "
                    f"(load {load:.1f}): {60 * n / (wall - lock):7.1f} candidates/min",
                    flush=True,
                )
    median = {mode: statistics.median(w) for mode, w in walls.items()}
    print(f"\n{model.name}, {n} candidates, {args.passes} passes (median wall, lock waits apart)")
    print("| mode | wall s | candidates/min |")
    print("|---|---|---|")
    for mode, wall in median.items():
        print(f"| {mode} | {wall:.2f} | {60 * n / wall:.1f} |")
    speedup = median["measured"] / median["score-only"]
    print(f"score-only: {speedup:.1f}x the candidates per minute of measured")
    per_minute = {mode: 60 * n / wall for mode, wall in median.items()}
    return {
        "model": model.name,
        "candidates": n,
        "walls": walls,
        "median": median,
        "per_minute": per_minute,
        "speedup": speedup,
    }
