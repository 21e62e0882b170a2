"""Zero biases before ONNX Runtime's quantizer, so every Conv, ConvTranspose and Gemm has a bias
for correction to move (the quantizer gives a layer without one nothing to hold it)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from loop.core.modelfile import tensor_array
from loop.judge.structure import out_channels


def add_zero_biases(model: onnx.ModelProto) -> list[str]:
    """Give each Conv, ConvTranspose and Gemm over an initializer kernel and without a bias
    a zero bias, in place; return their names. The function is unchanged."""
    inits = {t.name: t for t in model.graph.initializer}
    given = []
    for node in model.graph.node:
        if node.op_type not in ("Conv", "ConvTranspose", "Gemm") or len(node.input) < 2:
            continue
        if (len(node.input) > 2 and node.input[2]) or node.input[1] not in inits:
            continue
        weight = tensor_array(inits[node.input[1]])
        channels = out_channels(node, weight)
        if channels is None or not np.issubdtype(weight.dtype, np.floating):
            continue
        name = f"{node.name}.loop_zero_bias"
        model.graph.initializer.append(numpy_helper.from_array(np.zeros(channels, weight.dtype), name))
        if len(node.input) == 2:
            node.input.append(name)
        else:
            node.input[2] = name
        given.append(node.name)
    return given
