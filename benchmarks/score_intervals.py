"""Scores with their spread over frames: is a difference of a score signal?

For each model: its default compile scored on 8, 32 and 128 frames that share nothing with its
16 calibration frames, each SNR with its 95% bootstrap interval over frames; then every weight grid
moved by exp(1e-4 z) (``scale_grid``, four draws of z), scored on the same frames, to show how far
a change of one part in ten thousand moves the score at each frame count, against the interval
and against the paired interval of the difference.

The models are real ones that installed packages ship, each used where its package is installed:
PaddleOCR's direction classifier, recogniser and detector (``pip install rapidocr-onnxruntime``),
scored on rendered text lines (other words and seeds than the calibration lines'), and magika's
content-type model (``pip install magika``), scored on the bytes of files of this Python
installation, calibration and scoring files never the same. ``--models DIR`` looks for the files
in DIR instead. ``squeezenet`` (bench_data's, random weights, on crops of matplotlib's photographs)
needs nothing more and is what the tiny run uses.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import bench_data
import numpy as np
import onnx

SHIPPED = {  # package, file in it, input name, input height and width (0, 0: a file's bytes)
    "ocr_cls": ("rapidocr_onnxruntime", "ch_ppocr_mobile_v2.0_cls_infer.onnx", "x", 48, 192),
    "ocr_rec": ("rapidocr_onnxruntime", "ch_PP-OCRv4_rec_infer.onnx", "x", 48, 320),
    "ocr_det": ("rapidocr_onnxruntime", "ch_PP-OCRv4_det_infer.onnx", "x", 320, 320),
    "magika": ("magika", "standard_v3_3/model.onnx", "bytes", 0, 0),
}
MODELS = (*SHIPPED, "squeezenet")
TINY = ["--only", "squeezenet", "--size", "32", "--counts", "4", "8", "--draws", "1"]
CALIBRATION_WORDS = ["quantize", "scale", "grid", "kernel", "bias", "frame", "device", "compile", "layer", "tensor"]
SCORING_WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "0123456789",
    "text",
    "line",
    "page",
]


def shipped(name: str, models: Path | None) -> Path | None:
    """Where ``name``'s file lies: under ``models`` if given, else in its installed package; None
    where it is in neither."""
    package, file, *_ = SHIPPED[name]
    if models is None:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            return None
        models = Path(next(iter(spec.submodule_search_locations)))
    return next(iter(sorted(p for p in models.rglob(Path(file).name) if p.as_posix().endswith(file))), None)


def frames_of(name: str, count: int, calibration: bool, used: set[Path], size: int) -> np.ndarray:
    seed = 100 if calibration else 200 + count
    if name == "squeezenet":
        return bench_data.photo_crops(count, size, size, seed, 0 if calibration else 1)
    _, _, _, height, width = SHIPPED[name]
    if not height:
        files = bench_data.installed_files(count, seed, used)
        if calibration:
            used.update(files)
        return np.stack([bench_data.file_bytes(p) for p in files])
    return bench_data.text_lines(count, height, width, CALIBRATION_WORDS if calibration else SCORING_WORDS, seed)


def one_model(name: str, model: Path, runs: Path, counts: list[int], draws: int, size: int) -> dict[str, Any]:
    from loop import Study
    from loop.author.graphs import load_onnx
    from loop.judge.score import paired_snr, recorded_energy

    inp, height, width = ("input", size, size) if name == "squeezenet" else SHIPPED[name][2:]
    frames = runs / name
    frames.mkdir(parents=True, exist_ok=True)
    used: set[Path] = set()
    np.save(frames / "calibration.npy", frames_of(name, 16, True, used, size))
    shape = [1, 3, height, width] if height else [1, 2048]
    layers = [lp.name for lp in _layers(load_onnx(model, given_shapes={inp: shape}))]
    rows: dict[str, Any] = {}
    for count in counts:
        np.save(frames / f"scoring{count}.npy", frames_of(name, count, False, used, size))
        settings = {
            "input_shapes": {inp: shape},
            "calibration": {"path": str(frames / "calibration.npy")},
            "inputs": {"path": str(frames / f"scoring{count}.npy")},
        }
        study = Study(f"{name}-{count}", base=model, runs=runs, **settings)
        rng = np.random.default_rng(count)
        moved = [
            [
                {"op": "scale_grid", "layer": layer, "of": "weights", "factor": float(np.exp(1e-4 * z))}
                for layer, z in zip(layers, rng.standard_normal(len(layers)), strict=True)
            ]
            for _ in range(draws)
        ]
        results = study.evaluate([[], *moved], measure=False)
        study.close()
        base = results[0]
        energy = lambda r: recorded_energy(r.scores)  # noqa: E731
        paired = [paired_snr(energy(r), energy(base)) for r in results[1:]]
        rows[str(count)] = {
            "snr_db": base.value("snr_db"),
            "ci95": list(base.interval("snr_db")),
            "moved_snr_db": [r.value("snr_db") for r in results[1:]],
            "moved_paired_ci95": [list(p[1]) if p else None for p in paired],
            "verdicts": [str(r.verdict) for r in results[1:]],
        }
        print(json.dumps({"model": name, "frames": count, **rows[str(count)]}), flush=True)
    return rows


def _layers(model: object) -> list:
    from loop.judge.structure import analyse

    return [layer for layer in analyse(model).layers if layer.weight is not None]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument(
        "--models", type=Path, help="a folder holding the shipped models' files (default: their packages)"
    )
    parser.add_argument("--runs", type=Path, help="the runs folder (default: a temporary one)")
    parser.add_argument("--counts", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--draws", type=int, default=4)
    parser.add_argument("--size", type=int, default=64, help="squeezenet's input height and width")
    parser.add_argument("--only", nargs="+", choices=MODELS, default=list(MODELS))
    args = parser.parse_args(argv)
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="score-intervals-") as tmp:
        runs = args.runs or Path(tmp) / "runs"
        for name in args.only:
            if name == "squeezenet":
                model = Path(tmp) / "squeezenet1_1.onnx"
                onnx.save(bench_data.squeezenet1_1(args.size), str(model))
            elif (found := shipped(name, args.models)) is not None:
                model = found
            else:
                report[name] = {"skipped": f"{SHIPPED[name][0]} is not installed (nor its file under --models)"}
                print(json.dumps({"model": name, **report[name]}), flush=True)
                continue
            report[name] = one_model(name, model, runs, args.counts, args.draws, args.size)
    return report
