"""Real models with realistic frames: the default's SNR against bias correction off and plain
``quantize_static``, and every verdict checked against an independent diff of the artifacts.

    python benchmarks/real_models.py --manifest /tmp/realmodels/manifest.json --runs DIR [--only NAME ...]

The manifest (``benchmarks/real_frames.py`` writes it) names, per model, its ONNX file, its
input shapes, and a calibration and a scoring frame file (.npy for one input, .npz by input
name). For each model:

* SNR (dB) on the scoring frames against the float model, for loop's default compile
  (per-channel, bias correction on), bias correction off, and plain ONNX Runtime
  ``quantize_static`` (per-channel, QDQ, MinMax, the same calibration frames) on the file as
  the package ships it, scored here by code of its own;
* two sweeps, bias correction on and off: ``scale_weights`` on a middle layer (or the one the
  manifest names), ``force_range_out`` [0, 4] where a removed clamp bounds the output, and a
  ``calibration`` variant (12 of the 16 frames); each verdict re-derived from the two stored
  artifacts by ``real_exports.changes`` / ``expected`` (which share nothing with loop's judge),
  kernel rounding on a moved weight grid told apart from a re-derived kernel.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_exports import MEASURE, _picks, changes, expected, run

from loop.author.graphs import load

CALIBRATION_VARIANT = {"op": "calibration", "count": 12, "seed": 7}


def frames_of(path: str, names: list[str]) -> dict[str, np.ndarray]:
    if path.endswith(".npz"):
        with np.load(path) as archive:
            return {n: archive[n] for n in names}
    return {names[0]: np.load(path)}


def feeds(path: str, names: list[str]) -> list[dict[str, np.ndarray]]:
    stored = frames_of(path, names)
    count = len(next(iter(stored.values())))
    return [{n: v[i : i + 1] for n, v in stored.items()} for i in range(count)]


class Reader(CalibrationDataReader):
    def __init__(self, items: list[dict[str, np.ndarray]]) -> None:
        self.items = iter(items)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.items, None)


def snr(reference: list[list[np.ndarray]], actual: list[list[np.ndarray]]) -> float:
    ref = np.concatenate([np.asarray(o, np.float64).ravel() for outs in reference for o in outs])
    got = np.concatenate([np.asarray(o, np.float64).ravel() for outs in actual for o in outs])
    return float(10 * np.log10(np.sum(ref**2) / np.sum((ref - got) ** 2)))


def _plain(source: str, target: Path, entry: dict[str, Any]) -> None:
    quantize_static(
        source,
        str(target),
        Reader(feeds(entry["calibration"], list(entry["input_shapes"]))),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
    )


def plain_snr(entry: dict[str, Any]) -> tuple[float, str]:
    """ONNX Runtime's own ``quantize_static`` on the shipped file, per-channel, scored here. A
    file its per-channel output cannot load (a DequantizeLinear ``axis`` below opset 13) is
    first raised to opset 13 by ``onnx.version_converter``, as a user would have to."""
    scoring = feeds(entry["scoring"], list(entry["input_shapes"]))
    ref = ort.InferenceSession(entry["onnx"], providers=["CPUExecutionProvider"])
    with tempfile.TemporaryDirectory() as tmp:
        out, how = Path(tmp) / "plain.onnx", "shipped file"
        _plain(entry["onnx"], out, entry)
        try:
            got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
        except ort.capi.onnxruntime_pybind11_state.InvalidGraph:
            raised, how = Path(tmp) / "opset13.onnx", "raised to opset 13"
            onnx.save(onnx.version_converter.convert_version(onnx.load(entry["onnx"]), 13), raised)
            _plain(str(raised), out, entry)
            got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
        return snr([ref.run(None, f) for f in scoring], [got.run(None, f) for f in scoring]), how


def plain_loaded_snr(entry: dict[str, Any]) -> float:
    """The same plain ``quantize_static`` on the model as loop loads it (Constant nodes made
    initializers, opset raised to 13, shapes fixed). On a file whose weights are Constant nodes
    (PaddleOCR's ocr_det: all 64 conv kernels) the quantizer quantizes no weight of the shipped
    file, so this is the like-for-like figure."""
    scoring = feeds(entry["scoring"], list(entry["input_shapes"]))
    ref = ort.InferenceSession(entry["onnx"], providers=["CPUExecutionProvider"])
    src = load(Path(entry["onnx"]), {}, entry["input_shapes"]).path
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "plain.onnx"
        _plain(str(src), out, entry)
        got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
        return snr([ref.run(None, f) for f in scoring], [got.run(None, f) for f in scoring])


def _onto(x: np.ndarray, layout: dict[str, Any]) -> np.ndarray:
    if layout["scale"] is None:
        return x.astype(layout["dtype"])
    info = np.iinfo(np.dtype(layout["dtype"]))
    # float32, as QuantizeLinear divides (a float64 division misses the ties of a normalised frame)
    q = np.round(np.asarray(x, np.float32) / np.float32(layout["scale"])) + (layout["zero_point"] or 0)
    return np.clip(q, info.min, info.max).astype(layout["dtype"])


def _off(y: np.ndarray, layout: dict[str, Any]) -> np.ndarray:
    if layout["scale"] is None:
        return y
    return (y.astype(np.float64) - (layout["zero_point"] or 0)) * layout["scale"]


def artifact_snr(entry: dict[str, Any], artifact: str) -> float:
    """A stored artifact's SNR, recomputed here: frames put on its input grids as its layout
    says, outputs taken off theirs, matched to the shipped float model's by name."""
    model = onnx.load(artifact)
    layout = json.loads(next(p.value for p in model.metadata_props if p.key == "loop.layout"))
    ins, outs = {i["name"]: i for i in layout["inputs"]}, {o["name"]: o for o in layout["outputs"]}
    names = list(entry["input_shapes"])
    scoring = feeds(entry["scoring"], names)
    ref = ort.InferenceSession(entry["onnx"], providers=["CPUExecutionProvider"])
    got = ort.InferenceSession(artifact, providers=["CPUExecutionProvider"])
    order = [o.name for o in ref.get_outputs()]
    a = [ref.run(order, f) for f in scoring]
    b = [
        [
            _off(y, outs[n])
            for n, y in zip(order, got.run(order, {k: _onto(v, ins[k]) for k, v in f.items()}), strict=True)
        ]
        for f in scoring
    ]
    return snr(a, b)


def sweep_doc(name: str, entry: dict[str, Any], bias_correction: bool) -> dict[str, Any]:
    path, shapes = Path(entry["onnx"]), entry["input_shapes"]
    picks = _picks(load(path, {}, shapes))
    if entry.get("scale_weights"):
        picks["weights"] = {"op": "scale_weights", **entry["scale_weights"]}
    ops = {"weights": picks["weights"], "range-out": picks["range-out"], "calib": CALIBRATION_VARIANT}
    return {
        "sweep": f"real-{name}-bc{int(bias_correction)}",
        "base": str(path.resolve()),
        "input_shapes": shapes,
        "calibration": {"path": entry["calibration"]},
        "inputs": {"path": entry["scoring"]},
        "compile": {"bias_correction": bias_correction},
        "measure": MEASURE,
        "variants": [{"name": "base"}] + [{"name": k, "perturb": [op]} for k, op in ops.items()],
    }


def _moved(found: dict[str, Any]) -> str:
    parts = [f"{k} {len(v)}" for k, v in found.items() if v and k != "kernel-rounding"]
    rounding = found["kernel-rounding"]
    if rounding:
        channels = sum(len(c) for c in rounding.values())
        parts.append(f"kernel rounding {len(rounding)} ({channels} ch: " + ", ".join(sorted(rounding))[:80] + ")")
    return ", ".join(parts) or "nothing"


def check(name: str, entry: dict[str, Any], runs: Path) -> dict[str, Any]:
    """Both sweeps of one model: its base SNRs and every variant's verdict beside the diff's."""
    model = onnx.load(str(load(Path(entry["onnx"]), {}, entry["input_shapes"]).path))
    result: dict[str, Any] = {"snr": {}, "verdicts": []}
    for bc in (True, False):
        doc = sweep_doc(name, entry, bc)
        ops = {v["name"]: v.get("perturb", [None])[0] for v in doc["variants"]}
        t0 = time.perf_counter()
        recorded = run(doc, runs)
        base = next(r for r in recorded if r["variant"] == "base")
        key = "bc on" if bc else "bc off"
        result["snr"][key] = (base.get("scores") or {}).get("snr_db")
        if base["status"] == "ok":
            result["snr"][f"{key}, recomputed"] = artifact_snr(entry, base["artifact"])
        for r in recorded:
            if r["variant"] == "base":
                continue
            row = {"bc": bc, "variant": r["variant"], "op": ops[r["variant"]], "loop": r["verdict"] or r["status"]}
            if r["status"] == "ok":
                found = changes(base["artifact"], r["artifact"])
                row["independent"] = expected(ops[r["variant"]], found, bc, model, r["artifact"])
                row["moved"] = _moved(found)
                row["kernel_rounding"] = {k: v for k, v in found["kernel-rounding"].items()}
                row["loop_changes"] = r.get("changes") or []
            result["verdicts"].append(row)
        result[f"sweep_s_bc{int(bc)}"] = round(time.perf_counter() - t0, 1)
    result["snr"]["plain"], result["plain_from"] = plain_snr(entry)
    result["snr"]["plain, loaded"] = plain_loaded_snr(entry)
    return result


def tables(results: dict[str, dict[str, Any]], manifest: dict[str, Any]) -> str:
    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.1f}"

    lines = [
        "| model | package | plain quantize_static (per-channel), shipped file / as loop loads it | bc off | "
        "**default (bc on)** | default - off | default - plain (each) | within 0.5 dB | "
        "loop's SNR = artifacts' (0.05 dB) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        s = r["snr"]
        d_off = None if s["bc on"] is None or s["bc off"] is None else s["bc on"] - s["bc off"]
        plains = [s[k] for k in ("plain", "plain, loaded") if s.get(k) is not None]
        d_plain = None if s["bc on"] is None else min(s["bc on"] - p for p in plains)
        ok = d_off is not None and d_plain is not None and d_off >= -0.5 and d_plain >= -0.5
        plain = f"{f(s['plain'])} / {f(s.get('plain, loaded'))}"
        each = "" if s["bc on"] is None else " / ".join(f"{s['bc on'] - p:+.1f}" for p in plains)
        same = all(
            s.get(k) is not None and s.get(f"{k}, recomputed") is not None and abs(s[k] - s[f"{k}, recomputed"]) <= 0.05
            for k in ("bc on", "bc off")
        )
        lines.append(
            f"| {name} | {manifest[name]['package']} | {plain} | {f(s['bc off'])} | **{f(s['bc on'])}** | "
            f"{d_off:+.1f} | {each} | {'yes' if ok else '**no**'} | {'yes' if same else '**no**'} |"
            if d_off is not None and d_plain is not None
            else f"| {name} | {manifest[name]['package']} | {plain} | {f(s['bc off'])} | {f(s['bc on'])} "
            "| - | - | - | - |"
        )
    agree = total = 0
    lines += [
        "",
        "| model | bias correction | variant | loop | independent diff (what moved) | agree |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        for v in r["verdicts"]:
            total += 1
            same = v.get("independent") == v["loop"]
            agree += same
            mine = f"{v['independent']} ({v['moved']})" if "independent" in v else "failed"
            bc = "on" if v["bc"] else "off"
            lines.append(f"| {name} | {bc} | {v['variant']} | {v['loop']} | {mine} | {'yes' if same else '**no**'} |")
    lines.append(f"\n{agree} of {total} verdicts agree with the independent diff.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--manifest", type=Path, default=Path("/tmp/realmodels/manifest.json"))
    parser.add_argument("--runs", type=Path, required=True)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--resume", action="store_true", help="keep the models results.json already holds")
    parser.add_argument(
        "--plain-loaded", action="store_true", help="only add the plain-as-loaded SNR to the results held"
    )
    args = parser.parse_args(argv)
    args.runs.mkdir(parents=True, exist_ok=True)
    manifest = json.loads(args.manifest.read_text())["models"]
    results_path = args.runs / "results.json"
    results: dict[str, Any] = json.loads(results_path.read_text()) if results_path.exists() else {}
    for name, entry in manifest.items():
        if args.plain_loaded and name in results and "plain, loaded" not in results[name]["snr"]:
            results[name]["snr"]["plain, loaded"] = plain_loaded_snr(entry)
            results_path.write_text(json.dumps(results, indent=1, default=str) + "\n")
        if args.plain_loaded or (args.only is not None and name not in args.only) or (args.resume and name in results):
            continue
        results[name] = check(name, entry, args.runs)
        results_path.write_text(json.dumps(results, indent=1, default=str) + "\n")
        print(tables({name: results[name]}, manifest), flush=True)
    text = tables({k: results[k] for k in manifest if k in results}, manifest)
    (args.runs / "tables.md").write_text(text + "\n")
    print("\n" + text)
    verdicts = [v for r in results.values() for v in r["verdicts"]]
    return 0 if all(v.get("independent") == v["loop"] for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
