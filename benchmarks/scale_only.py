"""What a scale-only, score-only candidate costs, beside a full one and the limit.

Side by side in one run:

* **full**: a study generation of ``--full`` ``scale_weights`` candidates, each quantized from scratch
  and measured (the protocol's short run, then the rounds against the reference);
* **scale-only**: two generations of ``--candidates`` ``scale_grid`` candidates each (per-channel
  factors on every weight grid, ``measure=False``): the base quantized once, each candidate a patch
  of it. The first pays for starting this process's patch children (:mod:`loop.flow.patch_child`),
  the second finds them running, as every later generation of a search does;
* **the limit**: a bare loop over the same candidates' compiled artifacts, opening an ONNX Runtime
  session on each one's bytes and running the scoring frames.

MODEL is an ONNX file whose input is ``input`` [1, 3, SIZE, SIZE] and whose first conv is
``/features/features.0/Conv``, as torchvision's squeezenet1_1 exports; without one, bench_data's
squeezenet1_1 (the same layers, random weights) at SIZE. 16 seeded calibration and 8 scoring
frames, ``bias_correction: false`` (the full path's cheapest compile).
Both studies start in runs folders of their own whose compile caches hold only the base (an untimed
generation of the base alone), so every full candidate is quantized afresh and every scale-only
one is patched. Prints candidates per minute for each and the ratios, then how many scale-only
candidates were ``clean``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import bench_data
import numpy as np
import onnx
import onnxruntime as ort

from loop.author.frames import seeded_set
from loop.store.artifacts import load_artifact, recorded_sha
from loop.store.files import runs_artifact
from loop.study import Study

MEASURE = {"warmup": 2, "frames": 20, "repeats": 2, "min_duration_s": 0, "ttfo_repeats": 1}
TINY = ["--size", "32", "--candidates", "4", "--full", "2", "--passes", "1", "--spec", json.dumps({"budget_s": 1})]


def settings(model: Path, size: int, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "base": model,
        "input_shapes": {"input": [1, 3, size, size]},
        "calibration": {"count": 16},
        "inputs": {"count": 8},
        "compile": {"bias_correction": False},
        "measure": {**MEASURE, **spec},
    }


def grid_candidates(study: Study, count: int, seed: int) -> list[list[dict[str, Any]]]:
    (base,) = study.evaluate([[]], measure=False)
    grids = {lp.name: len(lp.weight_scale) for lp in base.run.layers if lp.kernel_sha and lp.weight_scale}
    rng = np.random.default_rng(seed)
    return [
        [
            {"op": "scale_grid", "layer": name, "of": "weights", "factors": np.exp(rng.normal(0, 0.005, n))}
            for name, n in grids.items()
        ]
        for _ in range(count)
    ]


def bare(runs: Path, results: list[Any], size: int) -> float:
    """Seconds to open a session on every candidate's artifact and run the 8 frames."""
    arts = [load_artifact(runs_artifact(runs, Path(r.run.artifact).name), recorded_sha(r.run)) for r in results]
    frames = seeded_set({"input": (1, 3, size, size)}, 8, 1)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    t0 = time.perf_counter()
    for art in arts:
        session = ort.InferenceSession(art.data, options, providers=["CPUExecutionProvider"])
        put = session.get_inputs()[0]
        for frame in frames:  # values do not change the time; the artifact's uint8 I/O is fed as such
            session.run(None, {put.name: frame[None].astype(np.uint8 if "uint8" in put.type else np.float32)})
    return time.perf_counter() - t0


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("model", type=Path, nargs="?", help="an ONNX file (default: bench_data's squeezenet1_1)")
    parser.add_argument("--size", type=int, default=96)
    parser.add_argument("--candidates", type=int, default=64)
    parser.add_argument("--full", type=int, default=8)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--spec", type=json.loads, default={}, help="measure settings over MEASURE (JSON)")
    args = parser.parse_args(argv)
    n = args.candidates
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model.resolve() if args.model else Path(tmp) / "squeezenet1_1.onnx"
        if not args.model:
            onnx.save(bench_data.squeezenet1_1(args.size), str(model))
        with (
            Study("full", runs=Path(tmp) / "full", **settings(model, args.size, args.spec)) as full,
            Study("grid", runs=Path(tmp) / "grid", **settings(model, args.size, args.spec)) as grid,
        ):
            full.evaluate([[]])  # the base, compiled and measured: untimed
            asked = grid_candidates(grid, (args.passes + 1) * n, 0)
            first = _timed(lambda: grid.evaluate(asked[:n], measure=False))  # starts the patch children
            results, rows = list(first[1]), []
            for k in range(args.passes):  # side by side, pass by pass: new candidates each time
                full_s = _timed(lambda k=k: full.evaluate(weights(k, args.full)))[0]  # type: ignore[misc]
                grid_s, found = _timed(lambda k=k: grid.evaluate(asked[(k + 1) * n : (k + 2) * n], measure=False))  # type: ignore[misc]
                results += found
                rows.append((args.full / full_s * 60, n / grid_s * 60))
                print(f"pass {k + 1}: full {rows[-1][0]:.0f}, scale-only {rows[-1][1]:.0f} a minute")
            limit_s = bare(Path(tmp) / "grid", first[1], args.size)
    clean = sum(r.run.verdict == "clean" for r in results)
    full_rate, grid_rate = statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)
    ratio = statistics.median(r[1] / r[0] for r in rows)
    print(f"first scale-only generation (starting the patch children): {n / first[0] * 60:.0f} a minute")
    print(f"limit: a session on each artifact and its 8 frames: {n / limit_s * 60:.0f} a minute")
    print(
        f"median of {args.passes} passes: full {full_rate:.0f}, scale-only {grid_rate:.0f} a minute; "
        f"scale-only / full {ratio:.1f}x; limit / scale-only {n / limit_s * 60 / grid_rate:.1f}x; "
        f"clean: {clean} of {len(results)}"
    )
    return {
        "per_minute": {"full": full_rate, "scale_only": grid_rate, "first_scale_only": n / first[0] * 60},
        "limit_per_minute": n / limit_s * 60,
        "passes": [{"full": f, "scale_only": g} for f, g in rows],
        "scale_only_over_full": ratio,
        "limit_over_scale_only": n / limit_s * 60 / grid_rate,
        "clean": clean,
        "candidates": len(results),
    }


def weights(k: int, count: int) -> list[list[dict[str, Any]]]:
    """Pass ``k``'s full candidates: ``scale_weights`` on the first conv, new factors each pass."""
    return [
        [{"op": "scale_weights", "layer": "/features/features.0/Conv", "factor": 1 + 0.001 * (100 * k + i + 1)}]
        for i in range(count)
    ]


def _timed(call: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = call()
    return time.perf_counter() - t0, out
