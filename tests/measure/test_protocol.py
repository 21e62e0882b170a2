from dataclasses import replace

import numpy as np

from loop.author.sweepfile import MeasureSpec
from loop.core.record import DepthRate, Rate
from loop.devices.base import Health
from loop.devices.onnxruntime import OnnxRuntimeDevice
from loop.measure.protocol import drift, flags_for, measure, spread

# host_busy_pct: this test host is shared; host-busy has tests of its own
SPEC = MeasureSpec(
    warmup=2, frames=20, repeats=3, ttfo_repeats=2, latency_frames=10, min_duration_s=0.0, host_busy_pct=1e4
)
POWER = "[HailoRT] [warning] USB-C source electrical current advertised: 1.5A."


def frames(artifact):
    return [np.full(artifact.inputs[0].shape, 3, np.uint8)]


def test_three_quantities_kept_apart(artifact):
    m = measure(OnnxRuntimeDevice(), artifact, frames(artifact), SPEC)
    assert m.ttfo_ms > 0 and m.ttfo_parts["open_ms"] > 0 and m.ttfo_parts["first_ms"] > 0
    assert m.ttfo_parts["transfer_ms"] is None  # ONNX Runtime cannot separate it: null, not invented
    assert m.first_infer_ms > 0
    assert m.rate.min <= m.rate.median <= m.rate.max
    assert m.bytes_in == 3 * 8 * 8 and m.bytes_out == 4 * 8 * 8
    assert np.isclose(m.mb_s["in"], m.bytes_in * m.rate.median / 1e6)
    assert m.latency_ms["p50"] <= m.latency_ms["p90"] <= m.latency_ms["p99"]
    assert m.basis == "frames" and m.flags == ()
    # a share of all cores; a little over 100 is clock skew between the CPU and wall clocks
    assert 0 < m.host["own_cpu_pct"] <= 110 and m.host["loadavg"] is not None


def test_depth_list_and_duration(artifact):
    spec = SPEC.model_copy(update={"depth": (1, 2), "duration_s": 0.3})
    m = measure(OnnxRuntimeDevice(), artifact, frames(artifact), spec)
    assert [d.depth for d in m.by_depth] == [1, 2]
    best = max(m.by_depth, key=lambda d: d.rate.median)
    assert m.depth == best.depth and m.rate == best.rate
    assert m.basis == "duration" and m.duration_s >= 0.6


def test_spread_is_range_over_median():
    assert spread([90.0, 100.0, 110.0]) == 20.0


def test_thermal_drift_only_on_long_runs():
    chunks = [100.0, 99.0] * 5 + [95.0] * 80 + [80.0, 79.0] * 5
    falling = DepthRate(1, Rate(95.0, 79.0, 100.0), spread(chunks), chunks=tuple(chunks))
    assert drift(falling, elapsed_s=30.0) is None
    d = drift(falling, elapsed_s=600.0)
    assert d["first_fps"] == 99.5 and d["last_fps"] == 79.5 and d["drifted"] is True
    assert round(d["threshold_pct"], 2) == 2.0  # the first tenth's spread (1%) is below the 2% floor
    noisy = replace(falling, chunks=(100.0, 90.0) * 50)
    assert drift(noisy, elapsed_s=600.0)["drifted"] is False
    slight = replace(falling, chunks=(100.0,) * 90 + (98.5,) * 10)
    assert drift(slight, elapsed_s=600.0)["drifted"] is False


class PowerLimitedDeviceDouble(OnnxRuntimeDevice):
    """Test double: an ONNX Runtime device whose health reports the HailoRT USB power warning,
    which no device on this machine can print."""

    def health(self) -> Health:
        return Health(warnings=(POWER,))


def test_power_warning_flags_the_run(artifact):
    m = measure(PowerLimitedDeviceDouble(), artifact, frames(artifact), SPEC)
    assert "power-limited" in m.flags and POWER in m.warnings
    assert flags_for(["something else"]) == []


def test_each_repeat_lasts_min_duration_and_frames():
    from fake_timing import VirtualDevice, virtual

    from loop.measure.protocol import steady_rate

    session = VirtualDevice(0.0).open(virtual(2.0), None)
    r = steady_rate(session, [], MeasureSpec(warmup=0, frames=10, repeats=5, min_duration_s=0.5), 1)
    assert r.rate.data["repeats"] == 5 and r.rate.data["frames"] >= 5 * 250  # 0.5 s / 2 ms a repeat
    assert session.seconds >= 5 * 0.5
    long_frames = steady_rate(session, [], MeasureSpec(warmup=0, frames=400, repeats=3, min_duration_s=0.1), 1)
    assert long_frames.rate.data["frames"] == 3 * 400  # frames the longer of the two
    assert set(r.rate.data) >= {"median", "min", "max", "ci95", "ci95_pct", "frames", "repeats"}
    lo, hi = r.rate.data["ci95"]
    assert lo <= r.rate.data["median"] <= hi


def test_target_ci_repeats_until_reached():
    from fake_timing import VirtualDevice, virtual

    from loop.measure.protocol import steady_rate

    session = VirtualDevice(0.05, seed=3).open(virtual(1.0), None)
    spec = MeasureSpec(warmup=0, frames=10, repeats=5, min_duration_s=0.0, target_ci_pct=2.0)
    r = steady_rate(session, [], spec, 1)
    assert r.rate.data["repeats"] > 5 and r.rate.data["ci95_pct"] <= 2.0
    fixed = steady_rate(session, [], spec.model_copy(update={"target_ci_pct": None}), 1)
    assert fixed.rate.data["repeats"] == 5


def test_busy_neighbour_flags_host_busy(artifact):
    import subprocess
    import sys

    from loop.measure.hostload import busy_flags

    assert busy_flags({"others_core_pct": 50.0}, 10.0) == ["host-busy"]
    assert busy_flags({"others_core_pct": 5.0}, 10.0) == [] and busy_flags({"others_core_pct": None}, 10.0) == []
    neighbour = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        m = measure(
            OnnxRuntimeDevice(),
            artifact,
            frames(artifact),
            SPEC.model_copy(update={"repeats": 2, "min_duration_s": 0.3, "host_busy_pct": 10.0}),
        )
    finally:
        neighbour.kill()
        neighbour.wait()
    assert "host-busy" in m.flags and m.host["others_core_pct"] > 10.0
