"""How noisy is this machine, and what can ``loop compare`` tell apart on it?

On ``graphs/stack_131k.yaml`` (64x64), with loop's default measure settings:

* ``aa``: the A/A false-call rate: ``pairs`` interleaved compares of one artifact against itself;
* ``detect``: the share of ``pairs`` compares that call a frame with more pixels (a real, steady
  slowdown: ~5%, 10%, 15% and 20% more) slower than the base;
* ``done``: the issue's check: six default measurements of one artifact, the 15 pairs among
  them compared (interleaved, as ``loop compare`` does by default, and from the ledger
  figures), and a frame with 27% more pixels (72x72) against each of the six; twice, to see
  whether the calls stay the same.

Every compare reports its wall time: that is the cost per variant compared.

    nice -n 5 python benchmarks/noise_floor.py [aa detect done] [--pairs 20] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness_overhead import machine

from loop.author.frames import seeded
from loop.author.graphs import build_recipe
from loop.author.sweepfile import MeasureSpec
from loop.compilers.base import run_compile
from loop.compilers.onnxruntime import OnnxRuntimeCompiler
from loop.core.record import RunRecord
from loop.core.vocab import Artifact, CompileOptions
from loop.devices.base import RuntimeOptions
from loop.devices.onnxruntime import OnnxRuntimeDevice
from loop.measure.compare import COMPARE_SPEC, INTERLEAVED, compare_runs, interleaved_result, summarize
from loop.measure.interleave import device_frames, interleave
from loop.measure.protocol import measure

REPO = Path(__file__).resolve().parent.parent
RECIPE = REPO / "graphs/stack_131k.yaml"
SIZES = {"base": (64, 64), "5%": (64, 67), "10%": (64, 70), "15%": (64, 74), "20%": (64, 77), "27%": (72, 72)}
# pixels +0, +4.7, +9.4, +15.6, +20.3, +26.6 %
DETECT = ("5%", "10%", "15%", "20%")


def compiled(height: int, width: int, folder: Path) -> tuple[Artifact, Path]:
    model = build_recipe(RECIPE, {"height": height, "width": width})
    result = run_compile(
        OnnxRuntimeCompiler(), model.SerializeToString(), seeded((1, 3, height, width), 16, 0), CompileOptions()
    )
    if not result.ok or result.artifact is None:
        raise SystemExit(f"compile at {height}x{width} failed at {result.stage}: {result.error}")
    path = folder / f"stack_{height}x{width}.onnx"
    path.write_bytes(result.artifact.data)
    return result.artifact, path


def interleaved(a: Artifact, b: Artifact, pairs: int) -> list[dict[str, Any]]:
    device, spec = OnnxRuntimeDevice(), COMPARE_SPEC
    return [interleaved_result(interleave(device, [a, b, a], spec, 5)) for _ in range(pairs)]


def tally(results: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        **summarize(results),
        "median_ratio": statistics.median(r["ratio"] for r in results),
        "median_floor_pct": statistics.median(r["noise_floor_pct"] for r in results),
        "wall_s_per_compare": statistics.median(r["wall_s"] for r in results),
        "host_busy": sum("host-busy" in r["flags"] for r in results),
        "others_core_pct": statistics.median(r["host"].get("others_core_pct") or 0 for r in results),
    }


def run_row(i: int, path: Path, device: str = "onnxruntime") -> RunRecord:
    """A run as the ledger would give it, measured now with the default settings."""
    from loop.store.artifacts import load_artifact

    art = load_artifact(path)
    with OnnxRuntimeDevice().open(art, RuntimeOptions()) as s:
        frames = device_frames(s)
    return RunRecord(
        id=i,
        sweep="noise-floor",
        variant=path.stem,
        status="ok",
        verdict="clean",
        artifact=str(path),
        device=device,
        measure=measure(OnnxRuntimeDevice(), art, frames, MeasureSpec()),
    )


def done(paths: dict[str, Path]) -> dict[str, Any]:
    t0 = time.perf_counter()
    six = [run_row(i, paths["base"]) for i in range(6)]
    bigger = run_row(6, paths["27%"])
    measure_s = (time.perf_counter() - t0) / 7
    out: dict[str, Any] = {
        "measure_wall_s_per_run": measure_s,
        "six_fps": [r.measure.median_fps for r in six],
        "six_host_busy": sum("host-busy" in r.measure.flags for r in six),
    }
    pairs = list(itertools.combinations(six, 2))
    for basis in ("ledger", INTERLEAVED):
        same = [compare_runs(a, b, from_ledger=basis == "ledger") for a, b in pairs]
        slower = [compare_runs(a, bigger, from_ledger=basis == "ledger") for a in six]
        out[basis] = {
            "same_15": summarize(same),
            "bigger_6": summarize(slower),
            "bigger_ratios": [round(r["ratio"], 4) for r in slower],
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("parts", nargs="*", default=["aa", "detect", "done"])
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"machine": machine(MeasureSpec().threads), "spec": MeasureSpec().model_dump()}
    with tempfile.TemporaryDirectory(prefix="loop-noise-") as tmp:
        built = {k: compiled(h, w, Path(tmp)) for k, (h, w) in SIZES.items()}
        arts, paths = {k: a for k, (a, _) in built.items()}, {k: p for k, (_, p) in built.items()}
        if "aa" in args.parts:
            report["aa"] = tally(interleaved(arts["base"], arts["base"], args.pairs))
            print("aa", report["aa"], file=sys.stderr, flush=True)
        if "detect" in args.parts:
            for k in DETECT:
                report[f"detect_{k}"] = tally(interleaved(arts["base"], arts[k], args.pairs))
                print(k, report[f"detect_{k}"], file=sys.stderr, flush=True)
        for run in range(2 if "done" in args.parts else 0):
            report[f"done_{run + 1}"] = done(paths)
            print("done", run + 1, report[f"done_{run + 1}"], file=sys.stderr, flush=True)
    print(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
