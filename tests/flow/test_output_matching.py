"""Issue 32: a device's outputs are matched to the float model's by name, not by position (a
compiled model may list its outputs in another order than the ONNX does)."""

from __future__ import annotations

import numpy as np
import pytest

from loop.core.errors import LoopError
from loop.core.vocab import TensorLayout
from loop.flow.evaluate import FloatOutputs, model_order, outputs_of
from loop.flow.runner import DeviceRun

A = np.arange(2 * 3 * 3, dtype=np.float32).reshape(1, 2, 3, 3)  # the model's "a", NCHW
B = -np.arange(4 * 3 * 3, dtype=np.float32).reshape(1, 4, 3, 3)  # the model's "b", NCHW


def _stream(name: str, channels: int) -> TensorLayout:
    return TensorLayout(name, (1, 3, 3, channels), "float32", channels_last=True)


def test_outputs_are_matched_by_the_name_the_compiler_gives() -> None:
    """The ONNX lists b then a; the compiled streams (as a HEF names them) list a then b. Each is
    scored against its own float output, in the model's order and layout."""
    streams = (_stream("net/conv2", 2), _stream("net/conv3", 4))
    run = DeviceRun([[A.transpose(0, 2, 3, 1), B.transpose(0, 2, 3, 1)]], True, (), streams)
    reference = FloatOutputs(("b", "a"), [[B, A]])
    (outs,) = outputs_of(run, reference, {"net/conv2": "a", "net/conv3": "b"}).outputs
    assert np.array_equal(outs[0], B) and np.array_equal(outs[1], A)


def test_streams_named_as_the_model_match_without_a_map_and_unnamed_ones_by_position() -> None:
    named = (TensorLayout("a", (1, 2), "float32"), TensorLayout("b", (1, 2), "float32"))
    assert model_order(named, ("b", "a"), {}) == [1, 0]
    unnamed = (TensorLayout("s0", (1, 2), "float32"), TensorLayout("s1", (1, 2), "float32"))
    assert model_order(unnamed, ("b", "a"), {}) == [0, 1]
    with pytest.raises(LoopError, match="do not all carry a model output"):
        model_order((named[0], unnamed[1]), ("b", "a"), {})
