"""Does the link model predict rates? Fit it on a ladder, predict other graphs, measure them.

Two ``link-sim`` settings, A and B. For each:

1. a frame ladder of ``graphs/link_1x1.yaml`` (four sizes, depths 1 and 4) is swept through
   it and fitted (``loop link fit``);
2. the repo's graphs are swept through it.

Then each graph's run on one setting predicts (``loop link predict``, its compute from the
device's own split) its rate on the other setting's fitted link, at the depth that run chose,
and is set against the rate measured there: A predicts B and B predicts A.

This validates the arithmetic of ``loop.measure.link`` against a simulated link (real copies,
timed waits, compute one frame at a time), not a real USB link.

    python benchmarks/link_model.py [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from loop.flow.sweep import SweepOptions, run_sweep
from loop.measure.link import fit_runs, load, predict
from loop.spec.sweepfile import parse
from loop.store.ledger import Ledger

REPO = Path(__file__).resolve().parent.parent
HEADERS = (
    "link",
    "predicted from",
    "fitted",
    "graph",
    "depth",
    "bytes",
    "compute ms",
    "link ms",
    "bound",
    "predicted",
    "measured",
    "error",
)
ROW = ("graph", "depth", "bytes", "compute_ms", "link_ms", "bound", "predicted_fps", "measured_fps")
SETTINGS = ("40MB/s+1ms", "150MB/s+0.3ms")
# One runtime thread: at two, this host's compute swings up to 2x between sessions minutes
# apart (benchmarks/README.md, noise), which would be checked against instead of the model.
MEASURE = (
    "{warmup: 4, frames: 16, repeats: 3, min_duration_s: 0.4, depth: [1, 4], threads: 1, ttfo_repeats: 1, "
    "latency_frames: 10}"
)
LADDER = """sweep: ladder
base: {graphs}/link_1x1.yaml
calibration: {{count: 4}}
inputs: {{count: 2}}
devices: ["link-sim:{setting}"]
measure: {measure}
variants:
  - {{name: 128sq, params: {{height: 128, width: 128}}}}
  - {{name: 256sq, params: {{height: 256, width: 256}}}}
  - {{name: 384sq, params: {{height: 384, width: 384}}}}
  - {{name: 512sq, params: {{height: 512, width: 512}}}}
"""
# Graphs the ladder never saw: compute-bound, link-bound and in between at either setting.
GRAPHS = (
    ("two_conv", "two_conv.yaml", "{}"),
    ("stack_131k", "stack_131k.yaml", "{}"),
    ("stack_64", "stack_131k.yaml", "{height: 64, width: 64}"),
    ("1x1_192x320", "link_1x1.yaml", "{height: 192, width: 320}"),
)
PREDICTED = """sweep: graphs-{tag}
base: {graphs}/two_conv.yaml
calibration: {{count: 4}}
inputs: {{count: 2}}
devices: ["{device}"]
measure: {measure}
variants:
{variants}
"""


def _sweep(text: str, folder: Path, runs: Path, name: str) -> None:
    path = folder / f"{name}.yaml"
    path.write_text(text)
    run_sweep(parse(path), runs, SweepOptions(jobs=1, progress=False))


def _graph_sweep(tag: str, device: str, folder: Path, runs: Path) -> None:
    rows = "\n".join(f"  - {{name: {n}, base: {REPO / 'graphs' / b}, params: {p}}}" for n, b, p in GRAPHS)
    text = PREDICTED.format(tag=tag, graphs=REPO / "graphs", device=device, measure=MEASURE, variants=rows)
    _sweep(text, folder, runs, f"graphs-{tag}")


def setting(link: str, folder: Path, runs: Path, i: int) -> None:
    """Sweep the ladder and the graphs through ``link``; fit the ladder as ``sim{i}``."""
    ladder = LADDER.format(graphs=REPO / "graphs", setting=link, measure=MEASURE)
    _sweep(ladder.replace("sweep: ladder", f"sweep: ladder{i}"), folder, runs, f"ladder{i}")
    fit_runs(runs, f"ladder{i}", f"sim{i}")
    _graph_sweep(f"sim{i}", f"link-sim:{link}", folder, runs)


def cross(runs: Path, source: int, target: int) -> dict[str, Any]:
    """Setting ``source``'s runs predict setting ``target``'s rates, on ``target``'s fitted link."""
    model = load(runs, f"sim{target}")
    with Ledger.open_existing(runs / "ledger.sqlite") as book:
        given = {r.variant: r for r in book.records(f"graphs-sim{source}")}
        measured = {r.variant: r for r in book.records(f"graphs-sim{target}")}
    rows = []
    for name, run in measured.items():
        if run.measure.rate is None or name not in given or given[name].measure.rate is None:
            continue
        p = predict(model, given[name], run.measure.depth)
        rows.append(
            {
                "graph": name,
                "depth": p.depth,
                "bytes": p.bytes,
                "compute_ms": round(p.compute_ms, 3),
                "link_ms": round(p.link_busy_ms, 3),
                "bound": p.bound,
                "predicted_fps": round(p.rate_fps, 1),
                "measured_fps": round(run.measure.rate.median, 1),
                "error_pct": round(100 * (p.rate_fps / run.measure.rate.median - 1), 2),
            }
        )
    return {"link": SETTINGS[target - 1], "from": SETTINGS[source - 1], "fitted": model.to_json(), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="loop-link-") as tmp:
        folder, runs = Path(tmp), Path(tmp) / "runs"
        for i, link in enumerate(SETTINGS, 1):
            setting(link, folder, runs, i)
        report = [cross(runs, 1, 2), cross(runs, 2, 1), cross(runs, 1, 1), cross(runs, 2, 2)]
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print("| " + " | ".join(HEADERS) + " |")
    print("|" + "---|" * len(HEADERS))
    for s in report:
        f = s["fitted"]
        fitted = f"{f['bandwidth_mb_s']:.1f} MB/s + {f['per_transfer_ms']:.3f} ms, trip {f['round_trip_ms']:.3f} ms"
        for r in s["rows"]:
            cells = [s["link"], s["from"], fitted, *(r[k] for k in ROW), f"{r['error_pct']:+.2f}%"]
            print("| " + " | ".join(map(str, cells)) + " |")
    worst = max(abs(r["error_pct"]) for s in report for r in s["rows"])
    print(f"\nworst error {worst:.2f}% over {sum(len(s['rows']) for s in report)} predictions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
