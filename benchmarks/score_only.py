"""What a score-only generation costs beside a measured one (issue 43): the same study generation
of N candidates, measured (the protocol's short run, then the rounds against the reference) and
score-only (``measure=False``: compile, audit and score on the controlled inputs), side by side.

    python benchmarks/score_only.py [MODEL] [--candidates 16] [--passes 3]

MODEL is a recipe or an ONNX model (default ``graphs/two_conv.yaml``; ``squeezenet1_1.onnx`` from
``benchmarks/zoo_export.py``); the candidates are ``scale_weights`` on its first convolution at N
factors, with ``bias_correction: false``, under the search protocol of ``generation_cost.MEASURE``.
Each mode has a runs folder of its own whose compile cache an untimed first generation fills; a
timed pass is the same N again with ``remeasure=True`` (compiles from the cache), the two modes
alternating which goes first. The time spent waiting for the host's lock (another process's
compile or measurement on this host) is kept apart. Prints a line per timed generation, then a
table: each mode's median wall without those waits, candidates per minute, and score-only's
speed-up over measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generation_cost import SETTINGS, _time_lock_waits

HERE = Path(__file__).resolve().parent.parent


def first_conv(model: Path) -> str:
    if model.suffix == ".onnx":
        return next(n.name for n in onnx.load(str(model), load_external_data=False).graph.node if n.op_type == "Conv")
    return "conv1"  # the two-conv recipe's


def generation(runs: Path, model: Path, layer: str, n: int, measure: bool, warm: bool) -> float:
    """One generation of ``n`` candidates in ``runs``; its wall in seconds."""
    from loop.study import Study

    study = Study("bench", base=model, runs=runs, **SETTINGS)
    candidates = [[{"op": "scale_weights", "layer": layer, "factor": 1.0 + 0.01 * (i + 1)}] for i in range(n)]
    t0 = time.perf_counter()
    study.evaluate(candidates, remeasure=not warm, measure=measure)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("model", nargs="?", type=Path, default=HERE / "graphs" / "two_conv.yaml")
    ap.add_argument("--candidates", type=int, default=16)
    ap.add_argument("--passes", type=int, default=3)
    args = ap.parse_args(argv)
    model, n = args.model.resolve(), args.candidates
    layer = first_conv(model)
    walls: dict[str, list[float]] = {"measured": [], "score-only": []}
    waited = _time_lock_waits()
    with tempfile.TemporaryDirectory(prefix="score-only-") as tmp:
        folders = {mode: Path(tmp) / mode for mode in walls}
        for mode, runs in folders.items():
            generation(runs, model, layer, n, mode == "measured", warm=True)
        for i in range(args.passes):
            order = list(walls) if i % 2 == 0 else list(reversed(walls))
            for mode in order:
                before, load = waited[0], os.getloadavg()[0]
                wall = generation(folders[mode], model, layer, n, mode == "measured", warm=False)
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
    print(f"score-only: {median['measured'] / median['score-only']:.1f}x the candidates per minute of measured")
    return {"walls": walls, "median": median}


if __name__ == "__main__":
    main()
