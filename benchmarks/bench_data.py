"""Data the benchmarks make for themselves, so that each runs on a fresh clone: squeezenet1_1
authored without torch, crops of the photographs matplotlib ships, text lines rendered in the font
it ships, and files of the Python installation as bytes. Nothing here reads a path of one machine.
"""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def mpl_data() -> Path:
    """matplotlib's data folder (the ``report`` extra installs matplotlib): photographs, fonts."""
    import matplotlib

    return Path(matplotlib.get_data_path())


def photo_crops(count: int, height: int, width: int, seed: int, half: int) -> np.ndarray:
    """``count`` RGB crops (random scale, offset and flip) of the two photographs matplotlib ships,
    resized to ``height`` x ``width`` and normalised by ImageNet's mean and std, [count, 3, height,
    width] float32.
    Each crop lies in the left (``half`` 0) or right (1) half of its photograph: calibration and
    scoring frames drawn from other halves share no pixel."""
    from PIL import Image

    folder = mpl_data() / "sample_data"
    photos = [Image.open(folder / n).convert("RGB") for n in ("grace_hopper.jpg", "Minduka_Present_Blue_Pack.png")]
    rng = np.random.default_rng(seed)
    mean, std = np.array(IMAGENET_MEAN, np.float32), np.array(IMAGENET_STD, np.float32)
    out = []
    for i in range(count):
        img = photos[i % len(photos)]
        part = img.width // 2
        side = int(min(part, img.height) * rng.uniform(0.45, 1.0))
        x, y = half * part + int(rng.integers(0, part - side + 1)), int(rng.integers(0, img.height - side + 1))
        crop = img.crop((x, y, x + side, y + side)).resize((width, height), Image.BICUBIC)
        if rng.random() < 0.5:
            crop = crop.transpose(Image.FLIP_LEFT_RIGHT)
        out.append(((np.asarray(crop, np.float32) / 255 - mean) / std).transpose(2, 0, 1))
    return np.stack(out).astype(np.float32)


def text_lines(count: int, height: int, width: int, words: list[str], seed: int) -> np.ndarray:
    """Lines of ``words`` rendered in DejaVu Sans (matplotlib's copy) on paper of a random tint,
    normalised as PaddleOCR does (``(x / 255 - 0.5) / 0.5``): pages of lines for a detector's tall
    input, one line otherwise; 30% turned 180 degrees. [count, 3, height, width] float32."""
    from PIL import Image, ImageDraw, ImageFont

    rng = np.random.default_rng(seed)
    font = ImageFont.truetype(str(mpl_data() / "fonts" / "ttf" / "DejaVuSans.ttf"), 24 if height < 100 else 18)
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


def installed_files(count: int, seed: int, skip: set[Path]) -> list[Path]:
    """``count`` files of this Python installation (its standard library and its packages: sources,
    shared objects, images, fonts, data), drawn by ``seed``, none of ``skip``."""
    found: list[Path] = []
    for root in dict.fromkeys(sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")):
        for top in sorted(p for p in Path(root).iterdir() if p.is_dir()):
            mine: list[Path] = []  # the first 40 or so of each package: every kind of file gets a say
            for at, dirs, names in os.walk(top):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")  # compiled copies of the sources
                mine += [Path(at) / n for n in sorted(names)]
                if len(mine) >= 40:
                    break
            found += mine
    files = [p for p in dict.fromkeys(found) if p not in skip and not p.is_symlink() and p.stat().st_size > 64]
    rng = np.random.default_rng(seed)
    return [files[i] for i in rng.choice(len(files), count, replace=False)]


def file_bytes(path: Path, size: int = 1024, block: int = 4096, pad: int = 256) -> np.ndarray:
    """magika's features of a file for standard_v3_3 (its ``_extract_features_from_seekable``): the
    first and last 1024 bytes of the first and last 4096, stripped of white space, padded with 256."""
    data = path.read_bytes()
    n = min(block, len(data))
    beg = list(data[:n].lstrip()[:size])
    end = list(data[len(data) - n :].rstrip())[-size:]
    return np.array(beg + [pad] * (size - len(beg)) + [pad] * (size - len(end)) + end, np.int32)


class Builder:
    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def conv(self, x: str, cin: int, cout: int, k: int, name: str, stride: int = 1, pad: int = 0) -> str:
        w = (self.rng.standard_normal((cout, cin, k, k)) * np.sqrt(2 / (cin * k * k))).astype(np.float32)
        b = (self.rng.standard_normal(cout) * 0.01).astype(np.float32)
        self.inits += [numpy_helper.from_array(w, f"{name}.w"), numpy_helper.from_array(b, f"{name}.b")]
        attrs = {"kernel_shape": [k, k], "strides": [stride] * 2, "pads": [pad] * 4}
        self.nodes.append(helper.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [f"{name}.o"], name=name, **attrs))
        self.nodes.append(helper.make_node("Relu", [f"{name}.o"], [f"{name}.r"], name=f"{name}_relu"))
        return f"{name}.r"

    def pool(self, x: str, name: str) -> str:
        self.nodes.append(
            helper.make_node("MaxPool", [x], [name], name=name, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
        )
        return name

    def fire(self, x: str, cin: int, squeeze: int, expand: int, i: int) -> str:
        at = f"/features/features.{i}"
        s = self.conv(x, cin, squeeze, 1, f"{at}/squeeze/Conv")
        a = self.conv(s, squeeze, expand, 1, f"{at}/expand1x1/Conv")
        b = self.conv(s, squeeze, expand, 3, f"{at}/expand3x3/Conv", pad=1)
        self.nodes.append(helper.make_node("Concat", [a, b], [f"{at}/Concat"], name=f"{at}/Concat", axis=1))
        return f"{at}/Concat"


def squeezenet1_1(size: int = 64) -> onnx.ModelProto:
    """squeezenet1_1 as torchvision lays it out, authored with onnx.helper (no torch): seeded
    He-init weights (4.9 MB, torchvision's parameter count), the first conv named as torch's export
    names it (``/features/features.0/Conv``), input ``input`` of [1, 3, size, size]."""
    g = Builder()
    x = g.pool(g.conv("input", 3, 64, 3, "/features/features.0/Conv", stride=2), "/features/features.2/MaxPool")
    x = g.fire(g.fire(x, 64, 16, 64, 3), 128, 16, 64, 4)
    x = g.pool(x, "/features/features.5/MaxPool")
    x = g.fire(g.fire(x, 128, 32, 128, 6), 256, 32, 128, 7)
    x = g.pool(x, "/features/features.8/MaxPool")
    for i, (cin, squeeze, expand) in enumerate(((256, 48, 192), (384, 48, 192), (384, 64, 256), (512, 64, 256))):
        x = g.fire(x, cin, squeeze, expand, 9 + i)
    x = g.conv(x, 512, 1000, 1, "/classifier/classifier.1/Conv")
    g.nodes.append(
        helper.make_node("GlobalAveragePool", [x], ["pooled"], name="/classifier/classifier.3/GlobalAveragePool")
    )
    g.nodes.append(helper.make_node("Flatten", ["pooled"], ["output"], name="/Flatten"))
    io = [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
        for n, s in (("input", [1, 3, size, size]), ("output", [1, 1000]))
    ]
    graph = helper.make_graph(g.nodes, "squeezenet1_1", io[:1], io[1:], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model
