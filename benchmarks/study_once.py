"""A generation measured once (issue 34): frames run per candidate and wall time, before and after,
side by side in one run; then 12 identical candidates beside a busy-loop process.

    python benchmarks/study_once.py MODEL.onnx --layer NAME [--shape x=1,3,48,192] [--rounds 3] [--busy]

A generation of 12 candidates whose compute is identical (``scale_weights`` on ``--layer`` at factors
1.01-1.12, bias correction off, the search protocol of ``study_ratios.MEASURE``), over one runs
folder whose compile cache a first sweep filled, so the time is the generation's measuring,
scoring and recording. Each round runs both, alternating which goes first:

* before: the sweep measures every candidate by the protocol, then the generation's rounds
  measure them all again (``run_sweep`` then ``loop.flow.generation.race``, on one runner, as a
  study did before this issue);
* after: ``loop.flow.generation.run_generation`` (the sweep answers the inputs only; the rounds
  measure once).

Frames are counted by a device that is ONNX Runtime's with a counter on its session's ``run``
(each session appends its artifact's count to a file on close). With ``--busy``, a process
spinning on core 0 runs beside a ``loop.Study`` generation of the same 12 candidates: each ratio's
interval, whether it holds 1.0, ``usable`` and ``host-busy`` are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from loop.core import registry
from loop.devices.onnxruntime import OnnxRuntimeDevice, OnnxRuntimeSession
from loop.measure.stats import widened

COUNTS = "LOOP_BENCH_FRAME_COUNTS"  # the file each counting session appends its count to


class _Counted:
    def __init__(self, inner: Any) -> None:
        self.inner, self.count = inner, 0

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self.count += 1
        return self.inner.run(*args, **kwargs)


class CountingSession(OnnxRuntimeSession):
    def __init__(self, artifact: Any, options: Any) -> None:
        super().__init__(artifact, options)
        self._session, self._sha = _Counted(self._session), artifact.sha  # type: ignore[assignment]

    def close(self) -> None:
        with open(os.environ[COUNTS], "a") as out:
            out.write(f"{self._sha} {self._session.count}\n")  # type: ignore[attr-defined]
        super().close()


class CountingDevice(OnnxRuntimeDevice):
    """ONNX Runtime's device, each inference counted (benchmarks only)."""

    def open(self, artifact: Any, options: Any) -> Any:
        return CountingSession(artifact, options)


def counts(path: Path) -> Counter[str]:
    found: Counter[str] = Counter()
    for line in path.read_text().splitlines() if path.exists() else []:
        sha, n = line.split()
        found[sha] += int(n)
    return found


def settings(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).parent))
    from study_ratios import MEASURE

    shapes = {k: [int(d) for d in v.split(",")] for k, v in (s.split("=") for s in args.shape)}
    return {
        "compile": {"bias_correction": False},
        "calibration": {"count": 16},
        "inputs": {"count": 4},
        "measure": MEASURE,
        **({"input_shapes": shapes} if shapes else {}),
    }


def candidates(layer: str) -> list[dict[str, Any]]:
    return [
        {"name": f"c{i}", "perturb": [{"op": "scale_weights", "layer": layer, "factor": 1.0 + 0.01 * (i + 1)}]}
        for i in range(12)
    ]


def one_side(kind: str, path: Path, runs: Path, tally: Path) -> tuple[float, Counter[str], list[float]]:
    """Wall seconds, frames per artifact, and the ratio intervals' half-widths (%)."""
    from loop.author.sweepfile import parse
    from loop.flow.generation import race, run_generation
    from loop.flow.sweep import SweepOptions, open_runner, run_sweep
    from loop.store.ledger import Ledger

    tally.unlink(missing_ok=True)
    spec, options = parse(path), SweepOptions(progress=False, fresh=True, generation=0)
    t0 = time.perf_counter()
    if kind == "after":
        rows = run_generation(spec, runs, options).ratios
    else:
        with open_runner(spec, options) as runner:
            run_sweep(spec, runs, replace(options, runner=runner))
            with Ledger(runs / "ledger.sqlite", readonly=True) as ledger:
                found = {r.variant: r for r in ledger.records(spec.name)}
            rows = race(spec, runs, runner, found["base"], [r for n, r in found.items() if n != "base"])
    wall = time.perf_counter() - t0
    spans = [widened((r.ratio.value, r.ratio.low, r.ratio.high), r.floor_pct) for r in rows]
    widths = [100 * (hi - lo) / 2 / mid for mid, lo, hi in spans]
    return wall, counts(tally), widths


def compare(args: argparse.Namespace, folder: Path) -> None:
    from loop.author.sweepfile import parse
    from loop.flow.sweep import SweepOptions, run_sweep
    from loop.store.generations import prepare, write

    runs = folder / "runs"
    asked = prepare(runs, "once-g0", args.model, "onnxruntime", candidates(args.layer), settings(args))
    path = write(asked, "once-g0").path
    doc = path.read_text().replace("backend: onnxruntime", "backend: onnxruntime\ndevices: [counting]")
    path.write_text(doc)
    run_sweep(parse(path), runs, SweepOptions(progress=False, generation=0))  # fills the compile cache
    tally = folder / "frames.txt"
    os.environ[COUNTS] = str(tally)
    rows: dict[str, list[tuple[float, Counter[str], list[float]]]] = {"before": [], "after": []}
    for i in range(args.rounds):
        for kind in ("before", "after") if i % 2 == 0 else ("after", "before"):
            rows[kind].append(one_side(kind, path, runs, tally))
    for kind, got in rows.items():
        walls = [w for w, _, _ in got]
        per = [statistics.median(c.values()) for _, c, _ in got if c]
        widths = [statistics.median(w) for _, _, w in got if w]
        print(
            f"{kind}: wall median {statistics.median(walls):.2f} s ({', '.join(f'{w:.2f}' for w in walls)}); "
            f"frames per artifact, median {statistics.median(per):.0f}; "
            f"ratio half-width median {statistics.median(widths):.2f}%"
        )
    before = statistics.median(w for w, _, _ in rows["before"])
    after = statistics.median(w for w, _, _ in rows["after"])
    print(f"after / before wall: {after / before:.3f}")


def busy(args: argparse.Namespace, folder: Path) -> None:
    from loop import Study

    spin = subprocess.Popen([sys.executable, "-c", "import os; os.sched_setaffinity(0, {0})\nwhile True: pass"])
    try:
        time.sleep(1)
        study = Study("busy", base=args.model, runs=folder / "busy", **settings(args))
        results = study.evaluate([c["perturb"] for c in candidates(args.layer)])
    finally:
        spin.kill()
    holding = sum(1 for r in results if r.interval("rate_ratio")[0] <= 1.0 <= r.interval("rate_ratio")[1])
    print(f"busy: {holding} of 12 intervals hold 1.0; usable {sum(r.usable for r in results)} of 12")
    for r in results:
        lo, hi = r.interval("rate_ratio")
        print(
            f"  c{r.index:<3} ratio {r.rate_ratio or float('nan'):.4f} [{lo:.4f}, {hi:.4f}] "
            f"usable {r.usable} flags {json.dumps(list(r.flags))} {r.ratio_basis}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("model", type=Path)
    parser.add_argument("--layer", required=True)
    parser.add_argument("--shape", action="append", default=[])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--busy", action="store_true")
    args = parser.parse_args()
    args.model = args.model.resolve()
    registry.DEVICES["counting"] = "study_once:CountingDevice"  # children import it from this folder
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory() as tmp:
        compare(args, Path(tmp))
        if args.busy:
            busy(args, Path(tmp))


if __name__ == "__main__":
    main()
