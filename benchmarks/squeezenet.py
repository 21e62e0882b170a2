"""squeezenet1_1 as torchvision lays it out, authored with onnx.helper (no torch): seeded He-init
weights (4.9 MB, torchvision's parameter count), 64 px input, the first conv named as torch's
export names it (``/features/features.0/Conv``, the layer ``generation_cost.py`` scales).

    python benchmarks/squeezenet.py OUT.onnx
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


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


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("out", type=Path, help="the .onnx file to write")
    parser.add_argument("--size", type=int, default=64, help="the input's height and width")
    args = parser.parse_args()
    onnx.save(squeezenet1_1(args.size), str(args.out))


if __name__ == "__main__":
    main()
