"""Peak memory of the parent process over a sweep of many variants.

Writes a sweep of N `add_weight_noise` variants of a graph recipe, runs it with
`run_sweep` in a child process (the parent of the compile workers), and reports that
child's own peak RSS. The target: under 1.5 GB for 100 variants, because models
and artifacts must not pile up in the parent.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

GRAPHS = Path(__file__).resolve().parents[1] / "graphs"
TINY = ["--variants", "2", "--jobs", "1", "--recipe", str(GRAPHS / "two_conv.yaml"), "--layer", "conv1"]
TINY += ["--min-duration", "0"]

CHILD = """
import resource, sys
from pathlib import Path
from loop.author.sweepfile import parse
from loop.flow.sweep import SweepOptions, run_sweep
result = run_sweep(parse(Path(sys.argv[1])), Path(sys.argv[2]), SweepOptions(jobs=int(sys.argv[3]), progress=False))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, len(result.outcomes), len(result.failed))
"""


def sweep_text(recipe: Path, variants: int, layer: str, min_duration_s: float) -> str:
    rows = "".join(
        f"  - name: n{i}\n    perturb: [{{op: add_weight_noise, layer: {layer}, std: 0.01, seed: {i}}}]\n"
        for i in range(variants)
    )
    return (
        f"sweep: memory\nbase: {recipe.resolve()}\ncalibration: {{count: 16}}\ninputs: {{count: 2}}\n"
        "measure: {warmup: 2, frames: 20, repeats: 2, ttfo_repeats: 1, latency_frames: 5, "
        f"min_duration_s: {min_duration_s}}}\n"
        f"variants:\n  - name: base\n{rows}"
    )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--variants", type=int, default=100)
    parser.add_argument("--recipe", type=Path, default=GRAPHS / "stack_131k.yaml")
    parser.add_argument("--layer", default="conv3")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--min-duration", type=float, default=1.0, help="each timed repeat lasts at least this (s)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        sweep = Path(tmp) / "sweep.yaml"
        sweep.write_text(sweep_text(args.recipe, args.variants, args.layer, args.min_duration))
        t0 = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(sweep), str(Path(tmp) / "runs"), str(args.jobs)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        wall = time.perf_counter() - t0
    peak_kb, runs, failed = (int(v) for v in out[-3:])
    return {
        "variants": args.variants + 1,
        "runs": runs,
        "failed": failed,
        "jobs": args.jobs,
        "recipe": args.recipe.name,
        "parent_peak_mb": peak_kb / 1024,
        "wall_s": wall,
    }
