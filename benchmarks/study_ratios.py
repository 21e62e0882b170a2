"""A generation measured together: rate ratios to the reference, and reuse by content.

A ``loop.Study`` over squeezenet1_1 at 64 px (``benchmarks/zoo_export.py``; pass its path) with
``bias_correction: false``: a generation of 12 candidates whose compute is identical
(``scale_weights`` on the first convolution at 12 factors: only the weights' values move), so
every ratio to the reference should hold 1.0. Prints, per candidate, the ratio and its 95%
interval from the interleaved rounds; then the same 12 again (reused: the time it took against
the first); then, ``--gap`` seconds later, the generation again with ``remeasure=True``.

Run: ``python benchmarks/study_ratios.py MODEL.onnx [--gap 120]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from loop.api import Result
from loop.study import Study

LAYER = "/features/features.0/Conv"
# A search's protocol: the ratios come from the generation's rounds, so each candidate's own
# measurement only needs its first output, bytes and a rate: one repeat, one fresh session.
MEASURE = {
    "warmup": 10,
    "frames": 100,
    "repeats": 1,
    "ttfo_repeats": 1,
    "latency_frames": 0,
    "min_duration_s": 0.1,
    "threads": 1,
}


def candidates() -> list[list[dict]]:
    return [[{"op": "scale_weights", "layer": LAYER, "factor": 1.0 + 0.01 * (i + 1)}] for i in range(12)]


def show(label: str, results: list[Result], seconds: float) -> None:
    """Each ratio's 95% interval as a result reports it: the rounds' widened by the A/A floor."""
    spans = [r.interval("rate_ratio") for r in results if r.rate_ratio is not None]
    inside = sum(1 for lo, hi in spans if lo <= 1.0 <= hi)
    widest = max((100 * (hi - lo) / 2 for lo, hi in spans), default=float("nan"))
    floor = results[0].ratio_floor_pct
    print(f"{label}: {seconds:.1f} s; reused {sum(r.reused for r in results)} of {len(results)}")
    print(f"  A/A floor +-{floor if floor is not None else float('nan'):.2f}%")
    print(f"  intervals holding 1.0: {inside} of {len(results)}; widest +-{widest:.2f}%")
    for r in results:
        ci = r.rate_ratio_ci95 or (float("nan"), float("nan"))
        print(f"  c{r.index:<3} ratio {r.rate_ratio or float('nan'):.4f} [{ci[0]:.4f}, {ci[1]:.4f}] {r.ratio_basis}")


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("model", type=Path)
    parser.add_argument("--gap", type=float, default=120.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        study = Study(
            "squeeze",
            base=args.model,
            runs=Path(tmp) / "runs",
            compile={"bias_correction": False},
            calibration={"count": 16},
            inputs={"count": 4},
            measure=MEASURE,
        )
        for label, remeasure in (("generation 0", False), ("generation 1, the same 12", False)):
            t0 = time.perf_counter()
            results = study.evaluate(candidates(), remeasure=remeasure)
            show(label, results, time.perf_counter() - t0)
        time.sleep(args.gap)
        t0 = time.perf_counter()
        show(
            f"{args.gap:.0f} s later, measured again",
            study.evaluate(candidates(), remeasure=True),
            time.perf_counter() - t0,
        )


if __name__ == "__main__":
    main()
