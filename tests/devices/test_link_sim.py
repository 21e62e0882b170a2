"""``link-sim``: a real copy and a timed wait per inference, on the host's ONNX Runtime device.

Its waits are what the link model predicts, so rates are checked as ratios to the model's
own prediction (load on the host only lengthens a wait, and the waits dominate here)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from loop.core.errors import LoopError
from loop.core.registry import make_device
from loop.devices.base import RuntimeOptions
from loop.devices.link_sim import LinkSimDevice
from loop.devices.onnxruntime import OnnxRuntimeDevice


def frames(artifact) -> list[np.ndarray]:
    return [np.full(artifact.inputs[0].shape, 3, np.uint8)]


def nbytes(artifact) -> int:
    return sum(t.frame_bytes for t in (*artifact.inputs, *artifact.outputs))


def test_outputs_are_the_wrapped_devices(artifact):
    with OnnxRuntimeDevice().open(artifact, RuntimeOptions(threads=1)) as bare:
        expected = bare.infer(frames(artifact))
    with LinkSimDevice("100MB/s+0.1ms").open(artifact, RuntimeOptions(threads=1)) as s:
        got = s.infer(frames(artifact))
        assert "simulated" in s.notes[0]
    assert all(np.array_equal(a, b) for a, b in zip(expected, got, strict=True))


def test_the_link_goes_in_front_of_the_device_named_after_it(artifact):
    # an execution provider's session times through IOBinding; its bound call returns no outputs
    device = make_device("link-sim:100MB/s+0.1ms>onnxruntime:CPUExecutionProvider")
    with OnnxRuntimeDevice().open(artifact, RuntimeOptions(threads=1)) as bare:
        expected = bare.infer(frames(artifact))
    with device.open(artifact, RuntimeOptions(threads=1)) as s:
        got = s.infer(frames(artifact))
        split = s.split_ms(frames(artifact), 3)
        s.pipelined(frames(artifact), 3, 2)  # queued through the provider's IOBinding step
    assert all(np.array_equal(a, b) for a, b in zip(expected, got, strict=True))
    assert split is not None and split["copy_in_ms"] >= 0.1 and split["compute_ms"] > 0
    assert device.describe()["device"] == "link-sim:100MB/s+0.1ms>onnxruntime:CPUExecutionProvider"
    assert make_device("link-sim:100MB/s").describe()["device"] == "link-sim:100MB/s>onnxruntime"
    assert device.timed_on == "onnxruntime"  # its measurements hold the lock of what they time


def test_binding_a_call_runs_nothing_so_the_first_output_is_timed_cold(artifact, monkeypatch):
    with LinkSimDevice("100MB/s").open(artifact, RuntimeOptions(threads=1)) as s:
        monkeypatch.setattr(s._inner, "infer", lambda *a, **k: pytest.fail("binding ran an inference"))
        call = s.bound(frames(artifact))
        monkeypatch.undo()
        assert call()[0] > 0  # the copy in, timed apart


def test_a_slow_link_sets_the_rate_and_queueing_hides_the_round_trip(artifact):
    # a link busy ~10 ms per inference and a 30 ms round trip dwarf the tiny graph's compute
    bw = nbytes(artifact) / 10e-3 / 1e6
    device = LinkSimDevice(f"{bw:.6f}MB/s+30ms")
    with device.open(artifact, RuntimeOptions(threads=1)) as s:
        lone = 6 / s.pipelined(frames(artifact), 6, 1)
        queued = 24 / s.pipelined(frames(artifact), 24, 8)
    assert lone == pytest.approx(1 / 40e-3, rel=0.2)  # link + round trip + compute, one at a time
    assert queued == pytest.approx(1 / 10e-3, rel=0.2)  # the link alone, once 8 are in flight
    assert queued / lone > 3


def test_a_shallow_queue_is_capped_by_its_frames_round_trip(artifact):
    # link 1 ms, compute paced to 1 ms, round trip 10 ms: at depth 2, two frames per 12 ms
    # (Little's law), not the 1000 fps either stage allows, nor the 83 fps of one in flight
    bw = nbytes(artifact) / 1e-3 / 1e6
    with LinkSimDevice(f"{bw:.6f}MB/s+10ms@1ms").open(artifact, RuntimeOptions(threads=1)) as s:
        rate = 24 / s.pipelined(frames(artifact), 24, 2)
    assert rate == pytest.approx(2 / 12e-3, rel=0.15)


def test_the_split_times_the_link_apart_from_compute(artifact):
    device = LinkSimDevice("hailo10h-usb-1.5a")
    with device.open(artifact, RuntimeOptions(threads=1)) as s:
        split = s.split_ms(frames(artifact), 5)
    model = device.link.model
    assert split is not None and set(split) == {"copy_in_ms", "compute_ms", "copy_out_ms"}
    assert split["copy_in_ms"] >= model.round_trip_ms + model.per_transfer_ms
    assert split["compute_ms"] > 0 and split["copy_out_ms"] >= 0


def test_a_paced_compute_holds_the_device_for_the_pace_and_the_split_says_so(artifact):
    # the tiny graph computes in well under 1 ms; paced at 8 ms, the fast link leaves compute the bound
    device = LinkSimDevice("1000MB/s@8ms")
    with device.open(artifact, RuntimeOptions(threads=1)) as s:
        queued = 20 / s.pipelined(frames(artifact), 20, 4)
        split = s.split_ms(frames(artifact), 3)
        assert "paced to 8 ms" in s.notes[0]
    assert queued == pytest.approx(1 / 8e-3, rel=0.15)
    assert split is not None and split["compute_ms"] >= 8.0 and split["lone_compute_ms"] >= 8.0
    assert 1e3 / split["compute_ms"] == pytest.approx(queued, rel=0.1)  # the stage's time a frame is the rate's
    assert device.describe()["compute_pace"] == "8 ms a frame"


def test_a_lone_frames_compute_is_the_mean_over_the_frames_its_rate_was_measured_on(artifact, monkeypatch):
    # a fit subtracts it from the depth-1 rate's time a frame: frames timed later would not cancel
    with LinkSimDevice("1000MB/s").open(artifact, RuntimeOptions(threads=1)) as s:
        fast = s._inner.bound(frames(artifact))

        def slowed(_frames):  # the host's compute, 4 ms slower while the depth-1 rate is measured
            return lambda: (time.sleep(4e-3), fast())[1]

        monkeypatch.setattr(s._inner, "bound", slowed)
        s.pipelined(frames(artifact), 5, 1)
        monkeypatch.undo()
        split = s.split_ms(frames(artifact), 3)
    assert split is not None and split["lone_compute_ms"] >= 4.0 > split["compute_ms"]


def test_an_unpaced_device_computes_as_fast_as_the_host(artifact):
    with LinkSimDevice("1000MB/s").open(artifact, RuntimeOptions(threads=1)) as s:
        assert 20 / s.pipelined(frames(artifact), 20, 4) > 1 / 8e-3


@pytest.mark.parametrize(
    "name, match",
    [
        ("link-sim", "link-sim needs a link"),
        ("link-sim:300MB/s@fast", "compute pace 'fast'"),
        ("link-sim:300MB/s@0ms", "compute pace '0ms'"),
        ("link-sim:nowhere", "unknown link 'nowhere'"),
        ("link-sim:0MB/s", "expected a link name"),
        ("link-sim:300MB/s>nowhere", "unknown device 'nowhere'"),
        ("link-sim:300MB/s>link-sim:40MB/s", "a link in front of a simulated link"),
        ("link-sim:300MB/s> ", "name the device after '>'"),
        ("hailort:x", "takes no ':' argument"),
    ],
)
def test_device_names_with_bad_arguments_are_refused(name, match):
    with pytest.raises(LoopError, match=match):
        make_device(name)


def test_a_sweep_naming_a_bad_link_fails_at_its_line(write_sweep):
    from loop.author.sweepfile import parse

    path = write_sweep(
        """\
        sweep: s
        base: tiny.yaml
        devices: ["link-sim:fastest"]
        variants:
          - name: base
        """
    )
    with pytest.raises(LoopError) as err:
        parse(path)
    assert err.value.line == 3 and err.value.field == "devices" and "unknown link 'fastest'" in err.value.message


def test_a_failing_compute_stops_a_queued_run_instead_of_hanging(artifact):
    with LinkSimDevice("1000MB/s").open(artifact, RuntimeOptions(threads=1)) as s:

        def broken() -> object:
            raise RuntimeError("device lost")

        s._inner.bound = lambda frames: broken  # type: ignore[method-assign]  # a device failing mid-run
        with pytest.raises(RuntimeError, match="device lost"):
            s.pipelined(frames(artifact), 50, 4)
