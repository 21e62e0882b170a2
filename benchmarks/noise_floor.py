"""How noisy is this machine, and what can ``loop compare`` tell apart on it?

On ``graphs/stack_131k.yaml`` (64x64), with loop's default measure settings (``--spec`` changes
them, ``--recipe`` the network):

* ``aa``: the A/A false-call rate: ``pairs`` interleaved compares of one artifact against itself;
* ``detect``: the share of ``pairs`` compares that call a frame with more pixels (a real, steady
  slowdown: ~5%, 10%, 15% and 20% more) slower than the base;
* ``done``: six (``--sessions``) default measurements of one artifact, the 15 pairs among
  them compared (interleaved, as ``loop compare`` does by default, and from the ledger
  figures), and a frame with 27% more pixels (72x72) against each of the six; twice
  (``--done-runs``), to see whether the calls stay the same.

Every compare reports its wall time: that is the cost per variant compared.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loop.author.frames import seeded
from loop.author.graphs import build_recipe
from loop.author.sweepfile import MeasureSpec
from loop.compilers.base import run_compile
from loop.compilers.onnxruntime import OnnxRuntimeCompiler
from loop.core.record import RunRecord
from loop.core.vocab import Artifact, CompileOptions
from loop.devices.base import RuntimeOptions
from loop.devices.onnxruntime import OnnxRuntimeDevice
from loop.measure.compare import COMPARE_SPEC, INTERLEAVED, ROUNDS, compare_runs, interleaved_result, summarize
from loop.measure.interleave import device_frames, interleave
from loop.measure.protocol import measure

REPO = Path(__file__).resolve().parent.parent
RECIPE = REPO / "graphs/stack_131k.yaml"
QUICK_SPEC = {"warmup": 2, "frames": 10, "repeats": 2, "min_duration_s": 0.05, "ttfo_repeats": 1, "latency_frames": 2}
TINY = ["--pairs", "1", "--rounds", "2", "--detect", "20%", "--done-runs", "1", "--sessions", "2"]
TINY += ["--spec", json.dumps(QUICK_SPEC)]
TINY += ["--recipe", str(REPO / "graphs/two_conv.yaml")]
SIZES = {"base": (64, 64), "5%": (64, 67), "10%": (64, 70), "15%": (64, 74), "20%": (64, 77), "27%": (72, 72)}
# pixels +0, +4.7, +9.4, +15.6, +20.3, +26.6 %
DETECT = ("5%", "10%", "15%", "20%")


def compiled(recipe: Path, height: int, width: int, folder: Path) -> tuple[Artifact, Path]:
    model = build_recipe(recipe, {"height": height, "width": width})
    result = run_compile(
        OnnxRuntimeCompiler(), model.SerializeToString(), seeded((1, 3, height, width), 16, 0), CompileOptions()
    )
    if not result.ok or result.artifact is None:
        raise SystemExit(f"compile at {height}x{width} failed at {result.stage}: {result.error}")
    path = folder / f"stack_{height}x{width}.onnx"
    path.write_bytes(result.artifact.data)
    return result.artifact, path


def interleaved(a: Artifact, b: Artifact, pairs: int, spec: MeasureSpec, rounds: int) -> list[dict[str, Any]]:
    device = OnnxRuntimeDevice()
    return [interleaved_result(interleave(device, [a, b, a], spec, rounds)) for _ in range(pairs)]


def tally(results: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        **summarize(results),
        "median_ratio": statistics.median(r["ratio"] for r in results),
        "median_floor_pct": statistics.median(r["noise_floor_pct"] for r in results),
        "wall_s_per_compare": statistics.median(r["wall_s"] for r in results),
        "host_busy": sum("host-busy" in r["flags"] for r in results),
        "others_core_pct": statistics.median(r["host"].get("others_core_pct") or 0 for r in results),
    }


def run_row(i: int, path: Path, spec: MeasureSpec, device: str = "onnxruntime") -> RunRecord:
    """A run as the ledger would give it, measured now with ``spec`` (the default settings, unless
    ``--spec`` says otherwise)."""
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
        artifact_sha=hashlib.sha256(path.read_bytes()).hexdigest(),  # what a compare checks the file against
        device=device,
        measure=measure(OnnxRuntimeDevice(), art, frames, spec),
    )


def done(
    paths: dict[str, Path], sessions: int, spec: MeasureSpec, compare_spec: MeasureSpec, rounds: int
) -> dict[str, Any]:
    t0 = time.perf_counter()
    six = [run_row(i, paths["base"], spec) for i in range(sessions)]
    bigger = run_row(sessions, paths["27%"], spec)
    measure_s = (time.perf_counter() - t0) / (sessions + 1)
    out: dict[str, Any] = {
        "measure_wall_s_per_run": measure_s,
        "sessions_fps": [r.measure.median_fps for r in six],
        "sessions_host_busy": sum("host-busy" in r.measure.flags for r in six),
    }
    pairs = list(itertools.combinations(six, 2))
    for basis in ("ledger", INTERLEAVED):
        ledger = basis == "ledger"
        same = [compare_runs(a, b, from_ledger=ledger, spec=compare_spec, rounds=rounds) for a, b in pairs]
        slower = [compare_runs(a, bigger, from_ledger=ledger, spec=compare_spec, rounds=rounds) for a in six]
        out[basis] = {
            "same": summarize(same),
            "bigger": summarize(slower),
            "bigger_ratios": [round(r["ratio"], 4) for r in slower],
        }
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("parts", nargs="*", default=["aa", "detect", "done"], help="aa, detect and/or done")
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="rounds of each interleaved compare")
    parser.add_argument("--detect", nargs="+", choices=DETECT, default=list(DETECT), help="the frames `detect` tries")
    parser.add_argument("--done-runs", type=int, default=2, help="how often `done` runs")
    parser.add_argument("--sessions", type=int, default=6, help="`done`'s measurements of one artifact")
    parser.add_argument("--spec", type=json.loads, default={}, help="measure settings over loop's defaults (JSON)")
    parser.add_argument("--recipe", type=Path, default=RECIPE, help="a recipe taking height and width")
    args = parser.parse_args(argv)
    spec, compare_spec = MeasureSpec(**args.spec), COMPARE_SPEC.model_copy(update=args.spec)
    report: dict[str, Any] = {"spec": spec.model_dump(), "compare_spec": compare_spec.model_dump()}
    needed = (
        {"base"} | ({*args.detect} if "detect" in args.parts else set()) | ({"27%"} if "done" in args.parts else set())
    )
    with tempfile.TemporaryDirectory(prefix="loop-noise-") as tmp:
        built = {k: compiled(args.recipe, *SIZES[k], Path(tmp)) for k in SIZES if k in needed}
        arts, paths = {k: a for k, (a, _) in built.items()}, {k: p for k, (_, p) in built.items()}
        if "aa" in args.parts:
            report["aa"] = tally(interleaved(arts["base"], arts["base"], args.pairs, compare_spec, args.rounds))
            print("aa", report["aa"], file=sys.stderr, flush=True)
        for k in args.detect if "detect" in args.parts else []:
            report[f"detect_{k}"] = tally(interleaved(arts["base"], arts[k], args.pairs, compare_spec, args.rounds))
            print(k, report[f"detect_{k}"], file=sys.stderr, flush=True)
        for run in range(args.done_runs if "done" in args.parts else 0):
            report[f"done_{run + 1}"] = done(paths, args.sessions, spec, compare_spec, args.rounds)
            print("done", run + 1, report[f"done_{run + 1}"], file=sys.stderr, flush=True)
    return report
