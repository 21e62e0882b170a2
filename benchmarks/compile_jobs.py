"""Compile-phase throughput: ``--jobs 2`` against the fastest ``--jobs 1``, and a cached re-run.

Authors N variants (``add_weight_noise`` seeds on conv3) of the 131k-parameter stack at a
larger input, so one compile takes seconds, then times ``compile_all`` over all of them:

* jobs 1 with 1 and with 2 ONNX Runtime threads (the faster is the baseline);
* jobs 2 with 1 thread each (what ``loop`` picks on two cores), into an empty cache;
* the same items again through that cache (target: <= 2 % of the first, zero compiles).

Also times one compile in-process against one isolated in a child process (the price of
per-variant timeouts and crash isolation).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from loop.author.graphs import build_recipe
from loop.author.perturb import AddWeightNoise
from loop.core.vocab import CompileOptions
from loop.flow.compile_pool import Item, compile_all, compile_job
from loop.judge.structure import analyse
from loop.store.cache import Cache

RECIPE = Path(__file__).resolve().parent.parent / "graphs" / "stack_131k.yaml"
TINY = ["--variants", "2", "--size", "16", "--frames", "4"]


def variants(count: int, size: int, frames: int) -> list[Item]:
    calibration = np.random.default_rng(0).random((frames, 3, size, size), dtype=np.float32)
    items = []
    for seed in range(count):
        model = build_recipe(RECIPE, {"height": size, "width": size})
        AddWeightNoise(layer="conv3", std=0.01, seed=seed).apply(model, analyse(model))
        items.append((model.SerializeToString(deterministic=True), calibration, CompileOptions()))
    return items


def timed(items: list[Item], jobs: int, threads: int, cache: Cache | None) -> tuple[float, int]:
    """Seconds for the whole compile phase, and how many items were really compiled."""
    run = [(m, c, o.model_copy(update={"threads": threads})) for m, c, o in items]
    t0 = time.perf_counter()
    results = compile_all("onnxruntime", run, jobs=jobs, cache=cache)
    elapsed = time.perf_counter() - t0
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    return elapsed, sum(not r.cache_hit for r in results)


def isolation_overhead(items: list[Item], pooled_s: float) -> dict[str, float]:
    """Per compile: the pool's isolated path (a fork of a warm loky worker, in its own
    process group) against the same compiles run in this very process, both one at a time."""
    t0 = time.perf_counter()
    for model, calibration, options in items:
        compile_job("onnxruntime", model, calibration, options.model_copy(update={"threads": 1}))
    in_process = time.perf_counter() - t0
    return {
        "in_process_s": in_process / len(items),
        "pooled_s": pooled_s / len(items),
        "overhead_s": (pooled_s - in_process) / len(items),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--variants", type=int, default=8)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--frames", type=int, default=32)
    args = parser.parse_args(argv)
    items = variants(args.variants, args.size, args.frames)
    timed(items[:2], 2, 1, None)  # start the loky workers and warm the page cache once
    serial = {threads: timed(items, 1, threads, None)[0] for threads in (1, 2)}
    with tempfile.TemporaryDirectory() as runs:
        cache = Cache.for_runs(Path(runs))
        parallel, compiles = timed(items, 2, 1, cache)
        rerun, recompiles = timed(items, 2, 1, cache)
    return {
        "variants": len(items),
        "size": args.size,
        "frames": args.frames,
        "jobs1_threads1_s": serial[1],
        "jobs1_threads2_s": serial[2],
        "jobs2_threads1_s": parallel,
        "first_compiles": compiles,
        "rerun_s": rerun,
        "rerun_compiles": recompiles,
        "speedup_jobs2": min(serial.values()) / parallel,
        "rerun_share": rerun / parallel,
        "isolation": isolation_overhead(items, serial[1]),
    }
