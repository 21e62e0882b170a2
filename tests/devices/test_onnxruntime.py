import numpy as np
import pytest

from loop.core.errors import BufferSizeError
from loop.devices.base import RuntimeOptions
from loop.devices.onnxruntime import OnnxRuntimeDevice


def frame(artifact, value: int = 7) -> list[np.ndarray]:
    return [np.full(artifact.inputs[0].shape, value, np.uint8)]


def test_infer_returns_device_dtype(artifact):
    with OnnxRuntimeDevice().open(artifact, RuntimeOptions(threads=1)) as s:
        out = s.infer(frame(artifact))
    assert out[0].dtype == np.uint8 and out[0].shape == artifact.outputs[0].shape


@pytest.mark.parametrize(
    "bad",
    [
        lambda a: [np.zeros(a.inputs[0].frame_bytes - 1, np.uint8)],
        lambda a: [np.zeros(a.inputs[0].shape, np.float32)],
        lambda a: [],
    ],
)
def test_bad_frames_are_refused_before_running(artifact, bad):
    with OnnxRuntimeDevice().open(artifact, RuntimeOptions()) as s, pytest.raises(BufferSizeError):
        s.infer(bad(artifact))


def test_output_buffers_filled_or_refused(artifact):
    with OnnxRuntimeDevice().open(artifact, RuntimeOptions()) as s:
        expected = s.infer(frame(artifact))[0]
        buf = np.zeros(artifact.outputs[0].frame_bytes, np.uint8)
        s.infer(frame(artifact), out=[buf])
        assert np.array_equal(buf.reshape(expected.shape), expected)
        with pytest.raises(BufferSizeError, match="smaller than the frame"):
            s.infer(frame(artifact), out=[np.zeros(artifact.outputs[0].frame_bytes - 1, np.uint8)])


@pytest.mark.parametrize("depth", [1, 3])
def test_pipelined_runs_count_frames(artifact, depth):
    with OnnxRuntimeDevice().open(artifact, RuntimeOptions()) as s:
        assert s.pipelined(frame(artifact), count=10, depth=depth) > 0


def test_health_never_invents():
    h = OnnxRuntimeDevice().health()
    assert h.temperature_c is None or -50 < h.temperature_c < 150
    assert h.device_id and h.warnings == ()
