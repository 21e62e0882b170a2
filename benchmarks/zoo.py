"""The model-zoo check: every op on a layer of every kind, on networks loop did not author.

First export the networks (needs the optional ``zoo`` extra, torch and torchvision)::

    python benchmarks/zoo_export.py --out /tmp/zoo --raw

then sweep each of them, with bias correction on (the default) and off::

    python benchmarks/zoo.py --models /tmp/zoo --runs /tmp/zoo-runs [--only resnet18,vit]

This part needs no torch. For each model it picks one layer of each kind that
``zoo_export.layer_kinds`` finds (after an activation, feeding an Add or a Concat, behind a
grid-sharing op, depthwise, Gemm/MatMul, the last), and perturbs it with ``scale_weights``,
``add_weight_noise``, ``force_range_out`` and ``force_range_in``; one ``calibration``
variant per sweep. Forced ranges are 1.5x the tensor's float range on the calibration
frames, kept inside the bounds of any activation the quantizer removes, so that every
one of them is a real change of scale and none of them changes the function.
Prints a markdown table of verdicts and the base SNR, with and without bias correction.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from zoo_export import layer_kinds

from loop.author import frames
from loop.author.graphs import Base, load
from loop.author.sweepfile import parse
from loop.core.sessions import session
from loop.flow.sweep import SweepOptions, run_sweep
from loop.store.ledger import Ledger

KINDS = ("after_activation", "feeds_add", "feeds_concat", "behind_grid_op", "depthwise", "gemm_matmul", "last")
CALIBRATION = {"count": 16, "seed": 0}
MEASURE = {"warmup": 1, "frames": 5, "repeats": 1, "ttfo_repeats": 1, "latency_frames": 2}


def _float_range(base: Base, tensor: str) -> tuple[float, float]:
    """The float range of ``tensor`` over the sweep's own calibration frames."""
    model = onnx.load(str(base.path))
    if tensor not in {o.name for o in model.graph.output}:
        model.graph.output.append(onnx.helper.make_empty_tensor_value_info(tensor))
    run = session(model)
    name = base.structure.inputs[0]
    values = [run.run([tensor], {name: f[None]})[0] for f in frames.seeded(base.shape, CALIBRATION["count"], 0)]
    return float(min(v.min() for v in values)), float(max(v.max() for v in values))


def _forced(base: Base, tensor: str) -> list[float]:
    lo, hi = _float_range(base, tensor)
    bound = base.structure.bounds.get(tensor, (-np.inf, np.inf))
    lo, hi = max(1.5 * min(lo, 0.0), bound[0]), min(1.5 * max(hi, 1e-3), bound[1])
    if bound[1] < np.inf and hi >= bound[1]:  # already at the bound: narrow instead
        hi = 0.5 * bound[1]
    return [round(lo, 6), round(hi, 6)]


def _ops(base: Base, layer: str) -> list[dict[str, Any]]:
    found = base.structure.layer(layer)
    assert found is not None
    ops: list[dict[str, Any]] = []
    if found.weight is not None:
        kernel = next(t for t in onnx.load(str(base.path)).graph.initializer if t.name == found.weight)
        std = float(onnx.numpy_helper.to_array(kernel).std())
        ops += [
            {"op": "scale_weights", "layer": layer, "factor": 1.05},
            {"op": "add_weight_noise", "layer": layer, "std": round(0.1 * std, 8), "seed": 1},
        ]
    for side, tensor in (("out", found.out_tensor), ("in", found.in_tensor)):
        ops.append({"op": f"force_range_{side}", "layer": layer, "range": _forced(base, base.structure.grid(tensor))})
    return ops


def sweep_doc(path: Path, bias_correction: bool) -> tuple[dict[str, Any], dict[str, str]]:
    """A sweep over ``path``, and what kind each variant's layer was picked for."""
    base = load(path, {})
    kinds = layer_kinds(onnx.load(str(base.path)))
    picked: dict[str, str] = {}
    for kind in KINDS:
        layers = [name for name in kinds.get(kind, []) if base.structure.layer(name) is not None]
        fresh = [name for name in layers if name not in picked.values()]  # a new layer where there is one
        if layers:
            picked[kind] = (fresh or layers)[0]
    variants: list[dict[str, Any]] = [
        {"name": "base"},
        {"name": "calibration", "perturb": [{"op": "calibration", "count": 24, "seed": 3}]},
    ]
    what = {"calibration": "calibration"}
    for kind, layer in picked.items():
        for op in _ops(base, layer):
            name = f"{kind}/{op['op']}"
            variants.append({"name": name, "perturb": [op]})
            what[name] = layer
    doc = {
        "sweep": f"zoo-{path.stem}-bc{int(bias_correction)}",
        "base": str(path.resolve()),
        "calibration": CALIBRATION,
        "inputs": {"count": 8, "seed": 1},
        "compile": {"bias_correction": bias_correction},
        "measure": MEASURE,
        "variants": variants,
    }
    return doc, what


def run_model(path: Path, runs: Path, bias_correction: bool) -> list[dict[str, Any]]:
    doc, _ = sweep_doc(path, bias_correction)
    sweep_file = runs / f"{doc['sweep']}.yaml"
    sweep_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = run_sweep(parse(sweep_file), runs, SweepOptions(progress=False, fresh=True))
    ledger = Ledger(runs / "ledger.sqlite")
    try:
        return [ledger.record(o.run_id).to_json() for o in result.outcomes if o.run_id is not None]
    finally:
        ledger.close()


def _cell(run: dict[str, Any]) -> str:
    return run["verdict"] if run["status"] == "ok" else f"FAILED at {run['stage']}: {run['error']}"


def report(name: str, on: list[dict[str, Any]], off: list[dict[str, Any]]) -> tuple[str, Counter[str]]:
    by_off = {r["variant"]: r for r in off}
    lines = [
        f"### {name}",
        "",
        f"Base SNR: {_snr(off)} dB without bias correction, {_snr(on)} dB with it.",
        "",
        "| variant | verdict, bias correction on | off |",
        "|---|---|---|",
    ]
    tally: Counter[str] = Counter()
    for run in on:
        other = by_off.get(run["variant"])
        cells = [_cell(run), _cell(other) if other else "-"]
        tally.update(f"{c}" for c in cells)
        lines.append(f"| {run['variant']} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines), tally


SUMMARY_HEAD = "| model | kinds | variants | bias correction on | off | SNR dB off -> on |\n|---|---|---|---|---|---|\n"


def _counts(runs: list[dict[str, Any]]) -> str:
    tally = Counter(_cell(r) if r["status"] != "ok" else r["verdict"] for r in runs if r["variant"] != "base")
    return ", ".join(f"{v} {k}" for k, v in sorted(tally.items()))


def summary_row(name: str, on: list[dict[str, Any]], off: list[dict[str, Any]]) -> str:
    """One line per model: the kinds swept, verdict counts with and without bias correction."""
    kinds = sorted({r["variant"].split("/")[0] for r in on if "/" in r["variant"]})
    return f"| {name} | {len(kinds)} | {len(on) - 1} | {_counts(on)} | {_counts(off)} | {_snr(off)} -> {_snr(on)} |"


def _snr(runs: list[dict[str, Any]]) -> str:
    value = next(((r["scores"] or {}).get("snr_db") for r in runs if r["variant"] == "base"), None)
    return "-" if value is None else f"{value:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--models", type=Path, required=True, help="a folder of .onnx files (zoo_export.py --out)")
    parser.add_argument("--runs", type=Path, required=True, help="a runs folder for the sweeps")
    parser.add_argument("--only", default="", help="comma-separated model names (default: every .onnx)")
    args = parser.parse_args(argv)
    args.runs.mkdir(parents=True, exist_ok=True)
    names = [n for n in args.only.split(",") if n] or sorted(p.stem for p in args.models.glob("*.onnx"))
    total: Counter[str] = Counter()
    rows = []
    for name in names:
        path = args.models / f"{name}.onnx"
        on, off = run_model(path, args.runs, True), run_model(path, args.runs, False)
        text, tally = report(name, on, off)
        total.update(tally)
        rows.append(summary_row(name, on, off))
        print(text + "\n", flush=True)
    print(SUMMARY_HEAD + "\n".join(rows) + "\n")
    print("Verdicts over every model and both compiles: " + ", ".join(f"{k} {v}" for k, v in sorted(total.items())))
    return 1 if any(k.startswith("FAILED") for k in total) else 0


if __name__ == "__main__":
    sys.exit(main())
