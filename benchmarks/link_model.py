"""Does the link model predict rates? Fit it on a ladder, predict other networks, measure them.

Two ``link-sim`` settings, A and B. For each, a frame ladder of ``graphs/link_1x1.yaml``
(four sizes, depths 1 and 4) is swept through it and fitted (``loop link fit``). Then the
repo's graphs (and any ``--models``) are swept through both, and each run on one setting
predicts (``loop link predict``, its compute from the device's own split) its rate on the
other setting's fitted link, set against the rate measured there: A predicts B, B predicts A,
and each predicts itself (the model alone, with no change of setting).

Two phases, because this host's compute is not steady:

1. **host compute**: the networks computed by ONNX Runtime as they come, swept ``--sessions``
   times through each setting, interleaved (A B, B A, ...); a row sets the median prediction
   against the median measured rate, and ``spread`` is the measured rates' range across
   sessions as a share of their median. One session's compute on this shared 2-core VM runs
   20-40 % faster or slower than another's seconds later, and a compute-bound prediction
   carries that swing whole: these rows measure the host as much as the model.
2. **paced compute** (the check): each network's compute is paced to 1.5x the slowest it
   computed in phase 1, queued or lone (``link-sim:A@PACE``: it really computes, then holds the device until
   the pace has passed), as an accelerator's fixed schedule would, so what is checked is the
   link arithmetic: transfer, round trip, overlap of link and compute, and the depth cap.
   Predicted at the depth each run chose, at depth 1 (a lone frame pays the round trip) and at
   depth 2 (where the round trip can cap the rate: Little's law).

This validates the arithmetic of ``loop.measure.link`` against a simulated link (real copies,
timed waits, compute one frame at a time), not a real USB link. ``--models`` adds ONNX files of
your own to the networks predicted.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loop.author.sweepfile import parse
from loop.core.record import RunRecord
from loop.flow.sweep import SweepOptions, run_sweep
from loop.measure.link import LinkModel, fit_runs, load, predict
from loop.store.ledger import Ledger

REPO = Path(__file__).resolve().parent.parent
SETTINGS = ("40MB/s+1ms", "150MB/s+0.3ms")
# One runtime thread: at two, this host's compute swings up to 2x between sessions minutes
# apart (benchmarks/README.md, noise), which would be checked against instead of the model.
MEASURE = {
    "warmup": 4,
    "frames": 16,
    "repeats": 3,
    "min_duration_s": 0.4,
    "depth": [1, 2, 4],
    "threads": 1,
    "ttfo_repeats": 1,
    "latency_frames": 10,
}
SWEEP = """sweep: {name}
base: {graphs}/link_1x1.yaml
calibration: {{count: 4}}
inputs: {{count: 2}}
devices: ["{device}"]
measure: {measure}
variants:
{variants}
"""
LADDER = (128, 256, 384, 512)
# Networks the ladder never saw: compute-bound, link-bound and in between at either setting.
GRAPHS = (
    ("two_conv", "two_conv.yaml", "{}"),
    ("stack_131k", "stack_131k.yaml", "{}"),
    ("stack_64", "stack_131k.yaml", "{height: 64, width: 64}"),
    ("1x1_192x320", "link_1x1.yaml", "{height: 192, width: 320}"),
)
QUICK = {"warmup": 2, "frames": 8, "repeats": 1, "min_duration_s": 0.05, "latency_frames": 2}
TINY = ["--sessions", "1", "--networks", "two_conv", "--ladder", "128", "256", "--spec", json.dumps(QUICK)]
HEADERS = ("link", "from", "network", "depth", "bytes", "compute ms", "link ms", "bound", "predicted", "measured")


class Bench:
    """A scratch runs folder and the sweeps written into it."""

    def __init__(self, folder: Path, networks: Sequence[str], models: Sequence[Path], measure: dict[str, Any]) -> None:
        self.folder, self.runs, self.measure = folder, folder / "runs", json.dumps(measure)
        self.nets = {
            n: f"  - {{name: {n}, base: {REPO / 'graphs' / b}, params: {p}}}" for n, b, p in GRAPHS if n in networks
        }
        self.nets |= {m.stem: f"  - {{name: {m.stem}, base: {m.resolve()}}}" for m in models}

    def sweep(self, name: str, device: str, variants: str) -> None:
        text = SWEEP.format(name=name, graphs=REPO / "graphs", device=device, measure=self.measure, variants=variants)
        path = self.folder / f"{name}.yaml"
        path.write_text(text)
        run_sweep(parse(path), self.runs, SweepOptions(jobs=1, progress=False))

    def records(self, sweeps: Sequence[str]) -> dict[str, list[RunRecord]]:
        found: dict[str, list[RunRecord]] = {}
        with Ledger.of_runs(self.runs, existing=True) as book:
            for sweep in sweeps:
                for r in book.records(sweep):
                    if r.measure.rate is not None:
                        found.setdefault(r.variant, []).append(r)
        return found


def host_phase(bench: Bench, sessions: int) -> None:
    """Every network through both settings, ``sessions`` times, alternating which goes first."""
    for k in range(sessions):
        order = list(enumerate(SETTINGS, 1))
        for i, link in order if k % 2 == 0 else order[::-1]:
            bench.sweep(f"host{i}-s{k}", f"link-sim:{link}", "\n".join(bench.nets.values()))


def _slowest_ms(run: RunRecord) -> float:
    split = run.measure.split_ms
    return max(float(split["compute_ms"]), float(split.get("lone_compute_ms") or 0))


def paces_ms(bench: Bench, sessions: int) -> dict[str, float]:
    """1.5x the slowest compute (queued or lone) a network showed in phase 1, so that the pace
    rules, not the host."""
    runs = bench.records([f"host{i}-s{k}" for i in (1, 2) for k in range(sessions)])
    return {n: math.ceil(15 * max(_slowest_ms(r) for r in rs)) / 10 for n, rs in runs.items()}


def paced_phase(bench: Bench, paces: dict[str, float]) -> None:
    for name, pace in paces.items():
        for i, link in enumerate(SETTINGS, 1):
            bench.sweep(f"paced{i}-{name}", f"link-sim:{link}@{pace}ms", bench.nets[name])


def _at_depth(run: RunRecord, depth: int) -> float | None:
    return {d.depth: d.rate.median for d in run.measure.by_depth}.get(depth)


def rows(
    model: LinkModel, given: dict[str, list[RunRecord]], there: dict[str, list[RunRecord]], depth: int | None
) -> list[dict[str, Any]]:
    """Median prediction from ``given``'s runs against the median rate measured ``there``, at
    ``depth`` (``None``: the depth the measured runs chose)."""
    out = []
    for name, measured in there.items():
        d = depth or statistics.median_low(r.measure.depth or 1 for r in measured)
        rates = [x for r in measured if (x := _at_depth(r, d)) is not None]
        guesses = sorted((predict(model, r, d) for r in given.get(name, [])), key=lambda g: g.rate_fps)
        if not rates or not guesses:
            continue
        p, fps = guesses[(len(guesses) - 1) // 2], statistics.median(rates)
        out.append(
            {
                "network": name,
                "depth": d,
                "bytes": p.bytes,
                "compute_ms": round(p.compute_ms, 3),
                "link_ms": round(p.link_busy_ms, 3),
                "bound": p.bound + (", depth-limited" if p.depth_limited else ""),
                "predicted_fps": round(p.rate_fps, 1),
                "measured_fps": round(fps, 1),
                "spread_pct": round(100 * (max(rates) - min(rates)) / fps, 1),
                "sessions": len(rates),
                "error_pct": round(100 * (p.rate_fps / fps - 1), 2),
            }
        )
    return out


def compare(bench: Bench, sweeps: dict[int, list[str]], depths: Sequence[int | None]) -> list[dict[str, Any]]:
    """Every (target, source) pair of settings, at each of ``depths``."""
    report = []
    for target in (1, 2):
        model, there = load(bench.runs, f"sim{target}"), bench.records(sweeps[target])
        for source in (2, 1) if target == 1 else (1, 2):
            given = bench.records(sweeps[source])
            for depth in depths:
                found = rows(model, given, there, depth)
                report.append(
                    {
                        "link": SETTINGS[target - 1],
                        "from": SETTINGS[source - 1],
                        "fitted": model.to_json(),
                        "rows": found,
                    }
                )
    return report


def run(folder: Path, sessions: int, ladder: Sequence[int], bench: Bench) -> dict[str, Any]:
    rungs = "\n".join(f"  - {{name: {n}sq, params: {{height: {n}, width: {n}}}}}" for n in ladder)
    for i, link in enumerate(SETTINGS, 1):
        bench.sweep(f"ladder{i}", f"link-sim:{link}", rungs)
        fit_runs(bench.runs, f"ladder{i}", f"sim{i}")
    host_phase(bench, sessions)
    paces = paces_ms(bench, sessions)
    paced_phase(bench, paces)
    host = {i: [f"host{i}-s{k}" for k in range(sessions)] for i in (1, 2)}
    paced = {i: [f"paced{i}-{n}" for n in paces] for i in (1, 2)}
    return {"host": compare(bench, host, [None]), "paced": compare(bench, paced, [None, 1, 2]), "paces_ms": paces}


def _table(title: str, sections: list[dict[str, Any]]) -> float:
    print(f"\n### {title}\n")
    print("| " + " | ".join((*HEADERS, "spread", "error")) + " |")
    print("|" + "---|" * (len(HEADERS) + 2))
    for s in sections:
        for r in s["rows"]:
            cells = [
                s["link"],
                s["from"],
                *(r[k] for k in ("network", "depth", "bytes", "compute_ms", "link_ms", "bound")),
            ]
            cells += [
                r["predicted_fps"],
                r["measured_fps"],
                f"{r['spread_pct']:.1f}% of {r['sessions']}",
                f"{r['error_pct']:+.2f}%",
            ]
            print("| " + " | ".join(map(str, cells)) + " |")
    errors = [abs(r["error_pct"]) for s in sections for r in s["rows"]]
    worst = max(errors, default=math.nan)
    print(f"\nworst error {worst:.2f}% over {len(errors)} predictions; {sum(e <= 10 for e in errors)} within 10%")
    return worst


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sessions", type=int, default=5, help="phase 1 sweeps of the networks per setting")
    parser.add_argument("--networks", nargs="+", default=[n for n, _, _ in GRAPHS], help="the repo's graphs predicted")
    parser.add_argument("--models", nargs="*", type=Path, default=[], help="ONNX files to predict too")
    parser.add_argument("--ladder", nargs="+", type=int, default=list(LADDER), help="the fitted ladder's squares (px)")
    parser.add_argument("--spec", type=json.loads, default={}, help="measure settings over the ones above (JSON)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="loop-link-") as tmp:
        bench = Bench(Path(tmp), args.networks, args.models, {**MEASURE, **args.spec})
        report = run(Path(tmp), args.sessions, args.ladder, bench)
    for s in report["paced"][::6]:  # one section per fitted link (two sources, three depths)
        f = s["fitted"]
        fitted = f"{f['bandwidth_mb_s']:.1f} MB/s + {f['per_transfer_ms']:.3f} ms, trip {f['round_trip_ms']:.3f} ms"
        print(f"{s['link']}: fitted {fitted}")
    print("paces (ms): " + ", ".join(f"{n} {p:g}" for n, p in report["paces_ms"].items()))
    _table("Host compute (medians over sessions)", report["host"])
    report["worst_paced_error_pct"] = _table("Paced compute (the check)", report["paced"])
    return report
