"""Frame sets hash by content: bytes, dtype, shape, and for several inputs their names."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from loop.author.frames import frames_sha


def test_input_names_cannot_run_into_each_other() -> None:
    """The old framing joined ``name:hash`` pairs with ``|``: an input named ``a:<hash>|b``
    hashed like two inputs ``a`` and ``b``."""
    x, y = np.zeros((1, 3), np.float32), np.ones((1, 3), np.float32)
    two = frames_sha({"a": x, "b": y})
    assert two != frames_sha({f"a:{frames_sha(x)}|b": y})
    assert two != frames_sha({"a": y, "b": x}) and two == frames_sha({"b": y, "a": x})
    assert frames_sha(x) != frames_sha(x.reshape(3, 1)) != frames_sha(x.astype(np.float64))


def test_a_frame_file_is_used_whole_unless_a_count_is_given(tmp_path):
    """24 stored frames score 24 (a seeded subset only when ``count`` asks, and a note says so)."""
    from loop.author.author import make_frames, used_note
    from loop.author.sweepfile import DataSpec

    np.save(tmp_path / "f.npy", np.random.default_rng(0).random((24, 3, 4, 4), dtype=np.float32))
    whole = DataSpec(count=None, path="f.npy")
    assert len(make_frames(whole, (1, 3, 4, 4), tmp_path)) == 24
    assert used_note(whole, (1, 3, 4, 4), tmp_path, "inputs.path", {}) is None
    some = DataSpec(count=8, seed=3, path="f.npy")
    assert len(make_frames(some, (1, 3, 4, 4), tmp_path)) == 8
    assert used_note(some, (1, 3, 4, 4), tmp_path, "inputs.path", {}) == (
        "inputs: 8 of the 24 frames in f.npy used (inputs.count: 8)"
    )


def test_a_sweep_file_without_count_takes_every_stored_frame(tmp_path):
    from loop.author.sweepfile import parse

    np.save(tmp_path / "f.npy", np.zeros((24, 3, 32, 32), np.float32))
    (tmp_path / "s.yaml").write_text(
        "sweep: s\nbase: %s\ncalibration: {path: f.npy}\ninputs: {path: f.npy}\nvariants:\n  - name: base\n"
        % (Path(__file__).parents[2] / "graphs" / "two_conv.yaml")
    )
    spec = parse(tmp_path / "s.yaml")
    assert spec.calibration.count is None and spec.inputs.count is None


def _quantize_linear(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """ONNX Runtime's own QuantizeLinear on ``x``: what the calibrated model was scored with."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])],
        "q",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, list(x.shape))],
        [
            helper.make_tensor("s", TensorProto.FLOAT, [], [scale]),
            helper.make_tensor("z", TensorProto.UINT8, [], [zero_point]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def test_a_normalised_frame_is_put_on_its_grid_as_quantize_linear_puts_it() -> None:
    """(p/255 - 0.5)/0.5 on a grid of 2/255 puts every value on a tie; a float64 division
    lands them short of it and rounds them all toward the zero point (7 dB on a real text
    classifier)."""
    from loop.author.frames import onto_grid
    from loop.core.vocab import TensorLayout

    pixels = np.arange(256, dtype=np.float32)
    x = ((pixels / 255 - 0.5) / 0.5).astype(np.float32).reshape(1, 256)
    for scale, zero_point in ((np.float32(2 / 255), 128), (np.float32(0.0123), 7)):
        layout = TensorLayout("x", (1, 256), "uint8", float(scale), zero_point)
        got = onto_grid(x, layout)
        assert np.array_equal(got, _quantize_linear(x, float(scale), zero_point))
    # a float64 frame is put on the grid as the float32 the model takes
    assert np.array_equal(onto_grid(x.astype(np.float64), layout), onto_grid(x, layout))
