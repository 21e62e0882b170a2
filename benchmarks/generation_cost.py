"""What one generation costs, pass after pass (issue 42): the same generation timed alternately
with another checkout of loop, each side through its own ``loop.Study``.

    python benchmarks/generation_cost.py squeezenet1_1.onnx --other /work/wt-old [--passes 6] [--busy 1]

The generation: 8 candidates over squeezenet1_1 at 64 px (``benchmarks/zoo_export.py``) with
``bias_correction: false``, ``scale_weights`` on the first convolution at 8 factors (identical
compute: every ratio should hold 1.0), under the search protocol of ``study_ratios.MEASURE``.
Each side has a runs folder of its own whose compile cache an untimed first generation fills; a
timed pass is the same 8 again with ``remeasure=True`` (compiles from the cache, scoring, the
rounds, the ledger). Each pass runs both sides one after the other, the first side alternating,
each in a fresh interpreter of its checkout (``OTHER/.venv/bin/python`` for the other), so both
see the same host; the load average is read before each, and the time each spent waiting for the
host's lock (another process's compile or measurement on this host) is kept. Prints a line per
timed generation and each side's median and slowest wall, with and without those waits.
``--busy N`` keeps N processes spinning on the host through the timed passes (both sides alike).

``--one RUNS MODEL`` is what each interpreter runs: one generation, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LAYER = "/features/features.0/Conv"
CANDIDATES = 8
# as study_ratios.MEASURE: the ratios come from the rounds, a candidate's own measurement needs little
MEASURE = {
    "warmup": 10,
    "frames": 100,
    "repeats": 1,
    "ttfo_repeats": 1,
    "latency_frames": 0,
    "min_duration_s": 0.1,
    "threads": 1,
}
# the generation's study settings, shared with score_only.py: one search protocol, two benchmarks
SETTINGS = {
    "compile": {"bias_correction": False},
    "calibration": {"count": 16},
    "inputs": {"count": 4},
    "measure": MEASURE,
}


def candidates() -> list[list[dict[str, Any]]]:
    return [[{"op": "scale_weights", "layer": LAYER, "factor": 1.0 + 0.01 * (i + 1)}] for i in range(CANDIDATES)]


def one(runs: Path, model: Path) -> dict[str, Any]:
    """One generation in this interpreter's loop: its wall, and per candidate its rounds, why they
    stopped (where this loop says), its ratio's half-width and whether it holds 1.0."""
    from loop.study import Study

    waited = _time_lock_waits()
    warm = not (runs / "ledger.sqlite").exists()  # the first generation in this folder fills its cache
    study = Study("cost", base=model, runs=runs, **SETTINGS)
    t0 = time.perf_counter()
    results = study.evaluate(candidates(), remeasure=not warm)
    wall = time.perf_counter() - t0
    rounds = [re.match(r"interleaved, (\d+) rounds", r.ratio_basis) for r in results]
    spans = [r.rate_ratio_ci95 or (float("nan"), float("nan")) for r in results]
    return {
        "warm-up": warm,
        "wall_s": wall,
        "rounds": [int(m[1]) if m else None for m in rounds],
        "stopped": [getattr(r, "stopped", None) for r in results],
        "half_pct": [100 * (hi - lo) / 2 for lo, hi in spans],
        "hold": sum(lo <= 1.0 <= hi for lo, hi in spans),
        "floor_pct": results[0].ratio_floor_pct,
        "lock_s": waited[0],
    }


def _time_lock_waits() -> list[float]:
    """The seconds this process spends waiting for the host's compile/measure lock (another
    process's sweep on this host holds it), summed into the list's one item as they pass."""
    from loop.measure import hostlock

    waited, take = [0.0], hostlock._lock

    def timed(*args: Any, **kwargs: Any) -> None:
        t0 = time.perf_counter()
        try:
            take(*args, **kwargs)
        finally:
            waited[0] += time.perf_counter() - t0

    hostlock._lock = timed  # module-global: both checkouts call it by name
    return waited


def run_side(python: str, runs: Path, model: Path) -> dict[str, Any]:
    """``one`` in a fresh interpreter (``python``), with the load average before it. It runs in
    its runs folder's parent: child processes started with ``-m`` put their working directory on
    the path, and a checkout's own folder there would hand them that checkout's loop."""
    load = os.getloadavg()[0]
    done = subprocess.run(
        [python, __file__, "--one", str(runs), str(model)],
        capture_output=True,
        text=True,
        check=False,
        cwd=runs.parent,
    )
    if done.returncode != 0:
        raise SystemExit(f"{python}: {done.stderr.strip().splitlines()[-1:]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "load": load}


def line(side: str, n: int, r: dict[str, Any]) -> str:
    rounds = [x for x in r["rounds"] if x is not None]
    stops = {s: r["stopped"].count(s) for s in dict.fromkeys(r["stopped"]) if s}
    return (
        f"{side:5} pass {n}: {r['wall_s']:5.1f} s (lock waits {r['lock_s']:4.1f} s)  load {r['load']:.2f}  rounds "
        f"{min(rounds, default=0)}-{max(rounds, default=0)}  widest +-{max(r['half_pct']):.2f}%  hold 1.0: "
        f"{r['hold']}/{CANDIDATES}" + (f"  stopped {stops}" if stops else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("model", type=Path)
    parser.add_argument("--other", type=Path, help="the other checkout (its .venv/bin/python runs it)")
    parser.add_argument("--passes", type=int, default=6)
    parser.add_argument("--busy", type=int, default=0, help="processes spinning through the timed passes")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.model.resolve())))
        return
    sides = {"new": sys.executable, "old": str(args.other / ".venv" / "bin" / "python")}
    model = args.model.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        folders = {name: Path(tmp) / name for name in sides}
        for name, python in sides.items():
            run_side(python, folders[name], model)  # fills its compile cache
        walls: dict[str, list[float]] = {name: [] for name in sides}
        own: dict[str, list[float]] = {name: [] for name in sides}  # without the waits for the lock
        spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
        try:
            for n in range(args.passes):
                order = list(sides) if n % 2 == 0 else list(reversed(sides))
                for name in order:
                    found = run_side(sides[name], folders[name], model)
                    walls[name].append(found["wall_s"])
                    own[name].append(found["wall_s"] - found["lock_s"])
                    print(line(name, n, found), flush=True)
        finally:
            for spinner in spinners:
                spinner.kill()
                spinner.wait()
    for label, table in (("wall", walls), ("wall less lock waits", own)):
        old = statistics.median(table["old"])
        for name, w in table.items():
            print(
                f"{label}: {name}: median {statistics.median(w):.1f} s ({statistics.median(w) / old:.2f}x old median),"
                f" slowest {max(w):.1f} s ({max(w) / old:.2f}x)"
            )


if __name__ == "__main__":
    main()
