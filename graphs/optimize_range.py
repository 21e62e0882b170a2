"""A small generational search with loop.evaluate: which forced output range of conv1 keeps
the quantized two-conv graph closest to its float self (highest SNR)?

With bias_correction off, a forced range is a clean scale-only perturbation, so every
candidate should come back `clean`; any `confounded` one is dropped, not compared.

    python graphs/optimize_range.py --generations 3 --population 4 --runs runs
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import loop
from loop.api import script

HERE = Path(__file__).parent
SETTINGS = {
    "compile": {"bias_correction": False},
    "calibration": {"count": 32},
    "inputs": {"count": 4},
    "measure": {"warmup": 5, "frames": 100, "repeats": 3},
}


def candidates(rng: np.random.Generator, centre: float, width: float, n: int) -> list[float]:
    return [float(np.clip(rng.normal(centre, width), 0.25, 16.0)) for _ in range(n)]


def search(generations: int, population: int, runs: Path, seed: int = 0) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    best_hi, best_snr, width = 4.0, -np.inf, 2.0
    for g in range(generations):
        his = candidates(rng, best_hi, width, population)
        perturbs = [[{"op": "force_range_out", "layer": "conv1", "range": [0.0, round(hi, 4)]}] for hi in his]
        results = loop.evaluate(
            perturbs, generation=g, runs=runs, base=HERE / "two_conv.yaml", name="range-search", **SETTINGS
        )
        for hi, r in zip(his, results, strict=True):  # one result a candidate
            # an SNR is the candidate's whatever the host did; only its rate needs a quiet host
            usable = r.status == "ok" and r.verdict not in ("confounded", "no-reference")
            why = "" if usable else f"  (dropped: {r.verdict or r.status})"
            print(
                f"g{g} hi={hi:6.3f} snr={r.scores.get('snr_db', float('nan')):6.2f} dB "
                f"verdict={r.verdict} rate={r.rate_fps or 0:8.1f} fps{why}"
            )
            if usable and r.scores["snr_db"] > best_snr:
                best_hi, best_snr = hi, r.scores["snr_db"]
        width *= 0.6
    return best_hi, best_snr


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--population", type=int, default=4)
    parser.add_argument("--runs", type=Path, default=Path("runs"))
    args = parser.parse_args()
    hi, snr = search(args.generations, args.population, args.runs)
    print(f"best: force_range_out(conv1, [0, {hi:.3f}]) at {snr:.2f} dB")


if __name__ == "__main__":
    script(main)
