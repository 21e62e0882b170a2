"""Scores with their spread over frames, on real models: is a difference of a score signal?

For each model: its default compile scored on 8, 32 and 128 rendered text lines that share
nothing with its calibration lines (other words, other seeds), each SNR with its 95% bootstrap
interval over frames; then every weight grid moved by exp(1e-4 z) (``scale_grid``, four draws of
z), scored on the same frames, to show how far a change of one part in ten thousand moves the
score at each frame count, against the interval and against the paired interval of the
difference. The models are the PaddleOCR ones that ``rapidocr-onnxruntime`` ships in its wheel
(``pip download rapidocr-onnxruntime==1.4.4 --no-deps``, unzipped; nothing fetched at run time),
and magika 1.0.3's content-type model (its wheel unzipped into the same folder), scored on the
bytes of this machine's own files, calibration and scoring files never the same.

    python benchmarks/score_intervals.py --models DIR --runs /tmp/si [--counts 8 32 128] [--draws 4]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

MODELS = {  # file in the wheel, input name, input height and width (0, 0: a file's bytes)
    "ocr_cls": ("ch_ppocr_mobile_v2.0_cls_infer.onnx", "x", 48, 192),
    "ocr_rec": ("ch_PP-OCRv4_rec_infer.onnx", "x", 48, 320),
    "ocr_det": ("ch_PP-OCRv4_det_infer.onnx", "x", 320, 320),
    # magika 1.0.3's content-type model (its wheel unzipped into the same DIR): real files' bytes
    "magika": ("magika/models/standard_v3_3/model.onnx", "bytes", 0, 0),
}
FILE_ROOTS = ("/usr/share", "/usr/lib", "/usr/include", "/etc", "/usr/bin")
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


def text_frames(count: int, height: int, width: int, words: list[str], seed: int) -> np.ndarray:
    """Rendered lines (DejaVu, as PaddleOCR normalises them): pages of lines for a detector's
    square input, one line otherwise; 30% turned 180 degrees."""
    from PIL import Image, ImageDraw, ImageFont

    rng = np.random.default_rng(seed)
    font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", 24 if height < 100 else 18)
    out = []
    for _ in range(count):
        paper = tuple(int(v) for v in rng.integers(200, 256, 3))
        image = Image.new("RGB", (width, height), paper)
        draw = ImageDraw.Draw(image)
        lines = 1 if height < 100 else int(rng.integers(4, 10))
        for k in range(lines):
            y = 8 + k * (height - 16) // max(lines, 1)
            draw.text((int(rng.integers(0, 24)), y), " ".join(rng.choice(words, 4)), font=font, fill=(20, 20, 30))
        if rng.random() < 0.3:
            image = image.rotate(180)
        out.append(((np.asarray(image, np.float32) / 255 - 0.5) / 0.5).transpose(2, 0, 1))
    return np.stack(out)


def machine_files(count: int, seed: int, skip: set[Path]) -> list[Path]:
    """``count`` files of this machine (of every kind its system folders hold), drawn by ``seed``,
    none of ``skip``: calibration and scoring never share a file."""
    found = []
    for root in FILE_ROOTS:
        for at, _, names in os.walk(root):
            found += [Path(at) / n for n in sorted(names)[:20]]
    files = sorted(p for p in found if p not in skip and p.is_file() and not p.is_symlink() and p.stat().st_size > 64)
    rng = np.random.default_rng(seed)
    return [files[i] for i in rng.choice(len(files), count, replace=False)]


def file_frames(files: list[Path]) -> np.ndarray:
    """magika's features of each file (``real_frames.magika_features``: the first and last 1024 bytes)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from real_frames import magika_features

    return np.stack([magika_features(p) for p in files])


def frames_of(name: str, count: int, calibration: bool, used: set[Path]) -> np.ndarray:
    _, _, height, width = MODELS[name]
    if not height:
        files = machine_files(count, 100 if calibration else 200 + count, used)
        if calibration:
            used.update(files)
        return file_frames(files)
    words, seed = (CALIBRATION_WORDS, 100) if calibration else (SCORING_WORDS, 200 + count)
    return text_frames(count, height, width, words, seed)


def one_model(name: str, folder: Path, runs: Path, counts: list[int], draws: int) -> dict[str, object]:
    from loop import Study
    from loop.author.graphs import load_onnx
    from loop.judge.score import paired_snr, recorded_energy

    file, inp, height, width = MODELS[name]
    frames = runs / name
    frames.mkdir(parents=True, exist_ok=True)
    used: set[Path] = set()
    np.save(frames / "calibration.npy", frames_of(name, 16, True, used))
    shape = [1, 3, height, width] if height else [1, 2048]
    layers = [lp.name for lp in _layers(load_onnx(folder / file, given_shapes={inp: shape}))]
    rows: dict[str, object] = {}
    for count in counts:
        np.save(frames / f"scoring{count}.npy", frames_of(name, count, False, used))
        settings = {
            "input_shapes": {inp: shape},
            "calibration": {"path": str(frames / "calibration.npy")},
            "inputs": {"path": str(frames / f"scoring{count}.npy")},
        }
        study = Study(f"{name}-{count}", base=folder / file, runs=runs, **settings)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--models", type=Path, required=True, help="the folder of the wheel's .onnx files")
    parser.add_argument("--runs", type=Path, required=True)
    parser.add_argument("--counts", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--draws", type=int, default=4)
    parser.add_argument("--only", nargs="*", default=list(MODELS))
    args = parser.parse_args()
    report = {name: one_model(name, args.models, args.runs, args.counts, args.draws) for name in args.only}
    (args.runs / "score_intervals.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
