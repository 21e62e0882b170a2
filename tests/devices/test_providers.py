"""ONNX Runtime execution providers as devices, tested on the CPU provider (the one here)."""

from __future__ import annotations

import numpy as np
import pytest

from loop.author.sweepfile import MeasureSpec
from loop.core.errors import LoopError
from loop.core.registry import make_device, statuses
from loop.devices.base import RuntimeOptions
from loop.devices.onnxruntime import OnnxRuntimeDevice
from loop.measure.protocol import measure

CPU = "onnxruntime:CPUExecutionProvider"


def frames(artifact) -> list[np.ndarray]:
    return [np.full(artifact.inputs[0].shape, 5, np.uint8)]


def test_the_provider_computes_what_the_plain_device_does(artifact):
    with OnnxRuntimeDevice().open(artifact, RuntimeOptions(threads=1)) as bare:
        expected = bare.infer(frames(artifact))
    with make_device(CPU).open(artifact, RuntimeOptions(threads=1)) as s:
        got = s.infer(frames(artifact))
        buf = [np.zeros(artifact.outputs[0].frame_bytes, np.uint8)]
        s.infer(frames(artifact), out=buf)
        assert s.pipelined(frames(artifact), 9, 3) > 0
    assert np.array_equal(expected[0], got[0])
    assert np.array_equal(buf[0].reshape(expected[0].shape), expected[0])


def test_a_run_records_copy_in_compute_and_copy_out_apart(artifact):
    spec = MeasureSpec(warmup=1, frames=4, repeats=2, min_duration_s=0.01, ttfo_repeats=1, latency_frames=3)
    m = measure(make_device(CPU), artifact, frames(artifact), spec).to_dict()
    assert set(m["split_ms"]) == {"copy_in_ms", "compute_ms", "copy_out_ms"}
    assert all(v >= 0 for v in m["split_ms"].values()) and m["compute_ms"] == m["split_ms"]["compute_ms"] > 0
    assert m["ttfo_parts"]["transfer_ms"] == pytest.approx(m["split_ms"]["copy_in_ms"] + m["split_ms"]["copy_out_ms"])


def test_the_plain_device_invents_no_split(artifact):
    spec = MeasureSpec(warmup=1, frames=4, repeats=2, min_duration_s=0.01, ttfo_repeats=1, latency_frames=3)
    m = measure(OnnxRuntimeDevice(), artifact, frames(artifact), spec).to_dict()
    assert m["split_ms"] is None and m["compute_ms"] is None and m["ttfo_parts"]["transfer_ms"] is None


@pytest.mark.parametrize(
    "name, match",
    [
        ("onnxruntime:NoSuchExecutionProvider", "unknown execution provider"),
        ("onnxruntime:CUDAExecutionProvider", "cannot run here: not in this onnxruntime build"),
    ],
)
def test_providers_that_cannot_run_are_refused_with_the_reason(name, match):
    import onnxruntime as ort

    if name.endswith("CUDAExecutionProvider") and "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("CUDA is installed on this machine")
    with pytest.raises(LoopError, match=match):
        make_device(name)


def test_backends_lists_every_provider_with_why_not():
    rows = {s.name: s for s in statuses()}
    assert rows[CPU].available
    assert "onnxruntime:CUDAExecutionProvider" in rows
    assert all(s.reason for s in rows.values() if not s.available)
