import numpy as np

from loop.devices.onnxruntime import OnnxRuntimeDevice, OnnxRuntimeSession
from loop.measure.check import check


def test_check_passes_on_an_artifact(artifact):
    results = check(OnnxRuntimeDevice(), artifact)
    assert [r.passed for r in results] == [True] * 4
    assert "refused" in results[2].detail and "refused" in results[3].detail


class UncheckedSessionDouble(OnnxRuntimeSession):
    """Test double: a session that skips buffer checks, to show check() catches it."""

    def infer(self, frames, out=None):
        return [np.zeros(t.shape, t.dtype) for t in self.outputs]


class UncheckedDeviceDouble(OnnxRuntimeDevice):
    def open(self, artifact, options):
        return UncheckedSessionDouble(artifact, options)


def test_check_fails_a_session_that_accepts_anything(artifact):
    results = {r.name: r for r in check(UncheckedDeviceDouble(), artifact)}
    assert not results["different inputs -> different outputs"].passed
    assert not results["undersized input buffer -> refused"].passed
    assert "accepted" in results["undersized output buffer -> refused"].detail


def test_loop_check_cli(artifact, tmp_path):
    from click.testing import CliRunner

    from loop.cli import main

    path = tmp_path / "a.onnx"
    path.write_bytes(artifact.data)
    result = CliRunner().invoke(main, ["check", str(path)])
    assert result.exit_code == 0 and result.output.count("PASS") == 4
    bad = tmp_path / "b.onnx"
    bad.write_bytes(b"garbage")
    result = CliRunner().invoke(main, ["check", str(bad)])
    assert result.exit_code == 2 and "unreadable ONNX artifact" in result.output
