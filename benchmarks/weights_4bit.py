"""SNR against weight bytes at 8 bits, at 4, and at 4-bit shares chosen by loop's rule or largest first.

8 bits, every kernel at 4, 4-bit shares by loop's rule, and the same shares taken largest layers
first (the rule's plain alternative), all in one score-only study generation, bias correction off,
on realistic frames.

MODEL is an ONNX file with ``--shape NAME=D,D,...`` (its input's static shape); its calibration and
scoring frames are ``--calibration``/``--inputs`` (.npy), or else, for an RGB input, crops of the
photographs matplotlib ships at the shape's height and width (ImageNet's mean and std, calibration
and scoring crops from other halves of each photograph). Without MODEL: bench_data's
squeezenet1_1 (torchvision's layers, random weights) at ``--size``. Prints one row a variant:
verdict, weight bytes and their ratio to the 8-bit run's, SNR against the float model on the
scoring frames, and the share of weights at 4 bits.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import bench_data
import numpy as np
import onnx

from loop import Study
from loop.author.graphs import load

SHARES = (0.25, 0.5, 0.75)
TINY = ["--size", "32", "--shares", "0.5", "--frames", "4", "2"]


def largest_first(counts: dict[str, int], share: float) -> list[str]:
    """The plain alternative: largest kernels first, each while the share stays within ``share``."""
    total, done, chosen = sum(counts.values()), 0, []
    for name in sorted(counts, key=lambda n: -counts[n]):
        if done + counts[name] <= share * total:
            chosen.append(name)
            done += counts[name]
    return chosen


def candidates(counts: dict[str, int], shares: Sequence[float]) -> dict[str, dict[str, Any]]:
    """Each variant by name: a study's candidate (perturbations, and compile options of its own)."""
    found: dict[str, dict[str, Any]] = {
        "8 bits": {"perturb": []},
        "every kernel at 4 bits": {"perturb": [{"op": "precision", "layer": "*", "weights": 4}]},
    }
    for share in shares:
        found[f"share {share}, loop's rule"] = {"perturb": [], "compile": {"weights_4bit_share": share}}
        layers = largest_first(counts, share)
        found[f"share {share}, largest first"] = {
            "perturb": [{"op": "precision", "layer": n, "weights": 4} for n in layers]
        }
    return found


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("model", type=Path, nargs="?", help="an ONNX file (default: bench_data's squeezenet1_1)")
    parser.add_argument("--shape", help="NAME=D,D,... the input's static shape (with MODEL)")
    parser.add_argument("--calibration", type=Path, help="calibration frames, .npy (default: photograph crops)")
    parser.add_argument("--inputs", type=Path, help="scoring frames, .npy (default: photograph crops)")
    parser.add_argument("--size", type=int, default=224, help="squeezenet's input height and width")
    parser.add_argument("--frames", type=int, nargs=2, default=[16, 12], help="photograph crops: calibration, scoring")
    parser.add_argument("--shares", type=float, nargs="+", default=list(SHARES))
    parser.add_argument("--runs", type=Path, default=None, help="the study's runs folder (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.model and not args.shape:
        parser.error("MODEL needs --shape NAME=D,D,...")
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model.resolve() if args.model else Path(tmp) / "squeezenet1_1.onnx"
        name, dims = args.shape.split("=") if args.model else ("input", f"1,3,{args.size},{args.size}")
        shapes = {name: [int(d) for d in dims.split(",")]}
        if not args.model:
            onnx.save(bench_data.squeezenet1_1(args.size), str(model))
        frames = {}
        for key, given, count, half in (
            ("calibration", args.calibration, args.frames[0], 0),
            ("inputs", args.inputs, args.frames[1], 1),
        ):
            if given is None:
                given = Path(tmp) / f"{key}.npy"
                np.save(given, bench_data.photo_crops(count, *shapes[name][-2:], 10 + half, half))
            frames[key] = {"path": str(given.resolve())}
        counts = {lp.name: lp.weight_count for lp in load(model, {}, shapes).structure.layers if lp.weight_count}
        asked = candidates(counts, args.shares)
        settings = {"input_shapes": shapes, **frames, "compile": {"bias_correction": False}}
        with Study("weights", base=model, runs=args.runs or Path(tmp) / "runs", **settings) as study:
            records = {
                variant: r.run
                for variant, r in zip(asked, study.evaluate(list(asked.values()), measure=False), strict=True)
            }
    base = records["8 bits"].weight_bytes or 1
    print(f"{model.name}: {len(counts)} weighted layers, {sum(counts.values()):,} kernel values")
    print("| variant | verdict | weight bytes | x 8-bit | SNR dB | share at 4 bits |")
    print("|---|---|---|---|---|---|")
    rows = {}
    for variant, r in records.items():
        by_bits = (r.compiled.weights or {}).get("weights_by_bits") or {}
        four = by_bits.get("4", 0) / max(1, sum(v for k, v in by_bits.items() if k != "32"))
        snr = r.scores.to_json().get("snr_db")
        shown = "-" if snr is None else f"{snr:.2f}"
        ratio = (r.weight_bytes or 0) / base
        print(f"| {variant} | {r.verdict} | {r.weight_bytes:,} | {ratio:.3f} | {shown} | {four:.3f} |")
        rows[variant] = {
            "status": str(r.status),
            "verdict": str(r.verdict),
            "weight_bytes": r.weight_bytes,
            "x_8bit": ratio,
            "snr_db": snr,
            "share_4bit": four,
        }
    return {"model": model.name, "layers": len(counts), "kernel_values": sum(counts.values()), "variants": rows}
