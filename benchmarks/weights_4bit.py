"""SNR against weight bytes on a real model (issue 44): 8 bits, every kernel at 4, 4-bit shares by
loop's rule, and the same shares taken largest layers first (the rule's plain alternative), all
in one score-only sweep, bias correction off, on realistic frames.

    python benchmarks/weights_4bit.py MODEL --calibration C.npy --inputs S.npy --shape NAME=1,3,224,224 [--runs DIR]

Prints one row a variant: verdict, weight bytes and their ratio to the 8-bit run's, SNR against
the float model on the scoring frames, and the share of weights at 4 bits.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import yaml

from loop.author.graphs import load
from loop.author.sweepfile import parse
from loop.flow.sweep import SweepOptions, run_sweep
from loop.store.ledger import Ledger

SHARES = (0.25, 0.5, 0.75)


def largest_first(counts: dict[str, int], share: float) -> list[str]:
    """The plain alternative: largest kernels first, each while the share stays within ``share``."""
    total, done, chosen = sum(counts.values()), 0, []
    for name in sorted(counts, key=lambda n: -counts[n]):
        if done + counts[name] <= share * total:
            chosen.append(name)
            done += counts[name]
    return chosen


def variants(counts: dict[str, int]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = [
        {"name": "base"},
        {"name": "all-4", "perturb": [{"op": "precision", "layer": "*", "weights": 4}]},
    ]
    for share in SHARES:
        found.append({"name": f"share-{share}", "compile": {"weights_4bit_share": share}})
        layers = largest_first(counts, share)
        found.append(
            {"name": f"largest-{share}", "perturb": [{"op": "precision", "layer": n, "weights": 4} for n in layers]}
        )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("model", type=Path)
    parser.add_argument("--calibration", type=Path, required=True)
    parser.add_argument("--inputs", type=Path, required=True)
    parser.add_argument("--shape", required=True, help="NAME=D,D,... the input's static shape")
    parser.add_argument("--runs", type=Path, default=None)
    args = parser.parse_args(argv)
    name, dims = args.shape.split("=")
    shapes = {name: [int(d) for d in dims.split(",")]}
    counts = {
        lp.name: lp.weight_count for lp in load(args.model.resolve(), {}, shapes).structure.layers if lp.weight_count
    }
    doc = {
        "sweep": f"weights-{args.model.stem}",
        "base": str(args.model.resolve()),
        "input_shapes": shapes,
        "calibration": {"path": str(args.calibration.resolve())},
        "inputs": {"path": str(args.inputs.resolve())},
        "compile": {"bias_correction": False},
        "variants": variants(counts),
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sweep.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        runs = args.runs or Path(tmp) / "runs"
        run_sweep(parse(path), runs, SweepOptions(progress=False, score_only=True))
        with Ledger(runs / "ledger.sqlite", readonly=True) as ledger:
            records = {r.variant: r for r in ledger.records(doc["sweep"])}
    base = records["base"].weight_bytes or 1
    print(f"{args.model.name}: {len(counts)} weighted layers, {sum(counts.values()):,} kernel values")
    print("| variant | verdict | weight bytes | x 8-bit | SNR dB | share at 4 bits |")
    print("|---|---|---|---|---|---|")
    for variant, r in records.items():
        by_bits = (r.compiled.weights or {}).get("weights_by_bits") or {}
        four = by_bits.get("4", 0) / max(1, sum(v for k, v in by_bits.items() if k != "32"))
        snr = r.scores.to_json().get("snr_db")
        shown = "-" if snr is None else f"{snr:.2f}"
        ratio = (r.weight_bytes or 0) / base
        print(f"| {variant} | {r.verdict} | {r.weight_bytes:,} | {ratio:.3f} | {shown} | {four:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
