"""Issue 32: device outputs put back in the model's order by rank, not "any 4-D is NCHW"."""

from __future__ import annotations

import numpy as np
import pytest

from loop.author.frames import dequantize, to_model_order
from loop.core.vocab import TensorLayout

HEF = dict(dtype="uint8", scale=0.5, zero_point=2, channels_last=True)


def test_rank_4_nhwc_becomes_nchw() -> None:
    y = np.arange(1 * 2 * 3 * 4).reshape(1, 2, 3, 4)
    layout = TensorLayout("net/conv1", (1, 2, 3, 4), **HEF)  # type: ignore[arg-type]
    for shape in (None, (1, 4, 2, 3)):
        assert np.array_equal(to_model_order(y, layout, shape), y.transpose(0, 3, 1, 2))


@pytest.mark.parametrize("model", [(1, 5, 3), (1, 3, 5)])
def test_rank_3_keeps_its_own_axes(model: tuple[int, ...]) -> None:
    """HailoRT shapes a stream (H, W, features): a rank-3 output comes as (1, 1, W, F). A sequence
    (N, W, F) keeps its order; a channels-first (N, F, W) is transposed. Before, both became
    (1, F, 1, W), scored in the wrong order."""
    values = np.random.default_rng(0).random((1, 5, 3))  # W=5 steps of F=3 features
    device = values.reshape(1, 1, 5, 3)
    layout = TensorLayout("net/conv2", (1, 1, 5, 3), **HEF)  # type: ignore[arg-type]
    want = values if model == (1, 5, 3) else values.transpose(0, 2, 1)
    assert np.array_equal(to_model_order(device, layout, model), want)


def test_rank_2_and_unknown_layouts_keep_the_device_order() -> None:
    logits = np.arange(10).reshape(1, 1, 1, 10)
    layout = TensorLayout("net/fc1", (1, 1, 1, 10), **HEF)  # type: ignore[arg-type]
    assert np.array_equal(to_model_order(logits, layout, (1, 10)), np.arange(10).reshape(1, 10))
    flat = TensorLayout("y", (1, 6), "float32")  # not channels-last: the model's order already
    assert np.array_equal(to_model_order(np.arange(6).reshape(1, 6), flat, (1, 2, 3)), np.arange(6).reshape(1, 2, 3))


def test_dequantize_takes_the_models_shape() -> None:
    layout = TensorLayout("net/conv2", (1, 1, 4, 2), **HEF)  # type: ignore[arg-type]
    q = np.arange(8, dtype=np.uint8).reshape(1, 1, 4, 2)
    got = dequantize(q, layout, (1, 4, 2))
    assert got.shape == (1, 4, 2) and np.allclose(got, (np.arange(8).reshape(1, 4, 2) - 2) * 0.5)
