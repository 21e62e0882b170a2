from dataclasses import replace

import numpy as np
import pytest
from fake_timing import VirtualDevice, virtual

from loop.author.sweepfile import MeasureSpec
from loop.core.facts import Where
from loop.core.record import Measurement, RunRecord
from loop.measure.compare import (
    FASTER,
    INTERLEAVED,
    LEDGER,
    NOISE,
    SLOWER,
    UNDECIDED,
    compare,
    compare_runs,
    decide,
    describe,
    interleaved_result,
)
from loop.measure.interleave import interleave
from loop.measure.protocol import spread, summary

SPEC = MeasureSpec(min_duration_s=0.5)  # virtual seconds: 5 chunks a side a round


def run(i: int, rates: list[float], **measure: object) -> RunRecord:
    figures = Measurement.from_dict({"rate_fps": summary(rates), "spread_pct": spread(rates), **measure})
    return RunRecord(id=i, sweep="s", variant=f"v{i}", status="ok", measure=figures)


# The seed's repeats of efficientnet_lite0 (spread 2%).
SEED_RATES = (1177.4, 1174.0, 1153.9)
BASELINE = run(1, list(SEED_RATES))


def test_seed_power_mode_difference_is_noise():
    ultra = run(2, [r * 145.8 / 146.2 for r in SEED_RATES])  # 145.8 ms -> 146.2 ms
    assert compare(BASELINE, ultra)["verdict"] == NOISE
    dma = run(3, [r * 145.8 / 144.1 for r in SEED_RATES])
    assert compare(BASELINE, dma)["verdict"] == NOISE


def test_pipelining_is_faster_and_its_reverse_slower():
    sync, pipelined = run(1, [720.0, 724.0, 728.0]), run(2, [2080.0, 2094.0, 2100.0])
    out = compare(sync, pipelined)
    assert out["verdict"] == FASTER and round(out["diff_pct"]) == 189 and out["basis"] == LEDGER
    assert out["ci95"][0] > 1 and compare(pipelined, sync)["verdict"] == SLOWER


def test_apart_but_within_the_interval_is_noise():
    a, b = run(1, [100.0, 101.0, 110.0]), run(2, [110.5, 110.8, 111.0])
    assert compare(a, b)["verdict"] == NOISE


def test_ledger_needs_three_repeats_a_side():
    one, three = run(1, [100.0]), run(2, [50.0, 51.0, 52.0])
    out = compare(one, three)
    assert out["verdict"] == UNDECIDED and "run 1 has 1 repeats" in out["reason"]
    legacy = Measurement.from_dict({"rate_fps": {"median": 50.0, "min": 49.0, "max": 51.0}, "spread_pct": 4.0})
    out = compare(replace(three, id=4, measure=legacy), three)
    assert out["verdict"] == UNDECIDED and "run 4 has no recorded repeats" in out["reason"]


def test_ledger_refuses_a_host_busy_run():
    # measured on this host: the same artifact at 203 fps under a busy neighbour and 937 fps after
    busy = run(1, [169.7, 190.0, 203.5, 220.0, 241.7], host={"others_core_pct": 106.0})
    out = compare(replace(busy, flags=("host-busy",)), run(2, [830.4, 900.0, 937.1, 960.0, 993.2]))
    assert out["verdict"] == UNDECIDED and "run 1 was measured host-busy" in out["reason"] and "106%" in out["reason"]


def test_a_missing_artifact_falls_back_to_the_ledger(tmp_path):
    a = replace(run(1, [100.0, 101.0, 99.0]), artifact=str(tmp_path / "gone.onnx"), device="onnxruntime")
    out = compare_runs(a, a)
    assert out["basis"] == LEDGER and out["verdict"] == NOISE and "is gone" in out["fallback"]
    assert out["a"]["rate_fps"] == summary([100.0, 101.0, 99.0])  # the recorded figures, as recorded


def test_a_confounded_run_is_refused():
    from loop.core.errors import LoopError

    with pytest.raises(LoopError, match="left out of comparisons"):
        compare(replace(BASELINE, verdict="confounded"), BASELINE)
    with pytest.raises(LoopError, match="no measured rate"):
        compare(BASELINE, replace(BASELINE, measure=Measurement()))


def test_decide_needs_the_interval_past_the_floor():
    control = (1.0, 0.98, 1.03)  # floor: the control's outer edge, 3%
    assert decide((1.10, 1.05, 1.15), control) == (FASTER, pytest.approx(3.0))
    assert decide((1.04, 1.02, 1.06), control)[0] == NOISE  # apart from 1, not from the floor
    assert decide((0.80, 0.78, 0.82), control)[0] == SLOWER
    tight = (1.0, 0.999, 1.001)  # a floor under the seed's 1.5% is raised to it
    assert decide((1.012, 1.011, 1.013), tight) == (NOISE, pytest.approx(1.5))


def interleaved(ms_a: float, ms_b: float, seed: int, noise: float = 0.03) -> dict:
    device = VirtualDevice(noise, seed)
    return interleaved_result(interleave(device, [virtual(ms_a), virtual(ms_b), virtual(ms_a)], SPEC, 5))


@pytest.mark.parametrize("seed", range(8))
def test_interleaved_same_artifact_is_noise_and_27pct_more_pixels_slower(seed):
    same = interleaved(5.0, 5.0, seed)
    assert same["verdict"] == NOISE and same["basis"] == INTERLEAVED and same["rounds"] == 5
    assert {"ratio", "ci95", "noise_floor_pct", "rounds", "basis"} <= set(same)
    assert interleaved(5.0, 5.0 * 1.27, seed)["verdict"] == SLOWER


def test_interleaved_seed_cases():
    assert interleaved(145.8, 146.2, 0, noise=0.01)["verdict"] == NOISE
    assert interleaved(145.8, 144.1, 0, noise=0.01)["verdict"] == NOISE
    assert interleaved(1e3 / 724, 1e3 / 2094, 0)["verdict"] == FASTER


def test_every_side_is_timed_alike():
    device = VirtualDevice(0.0)
    m = interleave(device, [virtual(1.0), virtual(2.0), virtual(1.0)], SPEC, 3)
    timed = [s.seconds for s in device.opened]
    assert max(timed) / min(timed) < 1.2 and m.chunks == 5 and len(m.rounds) == 3


def test_runs_measured_by_two_devices_are_compared_only_flagged_as_such():
    here = Where({"host": "lab-1", "worker": "0"}, {"device_id": "0000:01:00.0"})
    there = Where({"host": "lab-2", "worker": "1"}, {"device_id": "0000:01:00.0"})
    a = replace(BASELINE, device="hailort", where=here)
    same = compare(a, replace(run(2, list(SEED_RATES)), device="hailort", where=here))
    assert "across_devices" not in same and "across devices" not in describe(same)
    out = compare(a, replace(run(3, list(SEED_RATES)), device="hailort", where=there))
    assert out["across_devices"] == (
        "run 1 measured by hailort on lab-1 0000:01:00.0; run 3 by hailort on lab-2 0000:01:00.0"
    )
    assert describe(out).splitlines()[-1].startswith("across devices: run 1 measured by hailort on lab-1")


def test_a_swapped_artifact_is_refused_not_remeasured(artifact, tmp_path):
    """The file at a run's recorded path was swapped for another (still a valid artifact): compare
    must not measure it as the run, as ``loop doctor`` would flag it."""
    import onnx

    from loop.store.files import StoreFault

    path = tmp_path / f"{artifact.sha[:32]}.onnx"
    other = onnx.load_from_string(artifact.data)
    other.producer_name = "another variant"
    path.write_bytes(other.SerializeToString())
    a = replace(run(1, [100.0, 101.0, 99.0]), artifact=str(path), artifact_sha=artifact.sha, device="onnxruntime")
    fast = MeasureSpec(min_duration_s=0.01, threads=1)
    with pytest.raises(StoreFault, match="does not match its hash"):
        compare_runs(a, a, spec=fast, rounds=2)
    with pytest.raises(StoreFault, match="does not match its hash"):  # a row without the whole hash: its file's name
        compare_runs(replace(a, artifact_sha=None), a, spec=fast, rounds=2)


def test_a_crafted_variant_name_is_shown_escaped():
    a = replace(run(1, [100.0, 101.0, 99.0]), variant="\x1b]0;owned\x07a")
    text = describe(compare(a, a))
    assert "\x1b" not in text and "\\x1b]0;owned\\x07a" in text


def test_a_network_switch_before_each_chunk_is_not_timed():
    """Sides interleaved on one Hailo device: every chunk follows another network group and its
    first frames pay the switch (the FAKE scheduler, as HailoRT's reconfigures). Untimed, the
    switch leaves the ratio where it is with switches free; timed, 30 ms a chunk would pull
    2x toward 1."""
    from measure.fake_hailo_scheduler import FakeHailoDevice, Net

    def ratio(switch_ms: float) -> float:
        a, b = Net(4.0, 500.0, switch_ms), Net(4.0, 1000.0, switch_ms)
        arts = [a.artifact(), b.artifact(), a.artifact()]
        return interleaved_result(interleave(FakeHailoDevice(), arts, SPEC, 3, depths=[8, 8, 8]))["ratio"]

    free = ratio(0.0)
    assert free > 1.8  # B twice A's pipelined rate, less the queue's fill
    assert ratio(30.0) == pytest.approx(free, rel=1e-6)


def _scored(i: int, noise: list[float], inputs: str = "frames-1") -> RunRecord:
    from loop.core.record import Scores

    signal = [10.0] * len(noise)
    snr = float(10 * np.log10(sum(signal) / sum(noise)))
    scores = Scores.from_json({"snr_db": snr, "frame_energy": {"signal": signal, "noise": noise}})
    return RunRecord(id=i, sweep="s", variant=f"v{i}", status="ok", scores=scores, inputs_sha=inputs)


def test_scores_on_the_same_frames_are_compared_paired() -> None:
    """Frames of very different difficulty: B's error is 10% larger on every frame. Paired, that is
    resolved on 6 frames; a difference far smaller than the noise says how many frames it needs."""
    from loop.measure.compare import _snr_lines, score_difference

    hard = [0.01, 0.5, 0.02, 0.9, 0.05, 0.3]
    found = score_difference(_scored(1, hard), _scored(2, [n * 1.1 for n in hard]))
    assert found["verdict"] == "lower" and found["ci95"][1] < 0 and found["frames_to_resolve"] is None
    assert abs(found["diff_db"] + 10 * np.log10(1.1)) < 1e-9
    jitter = [n * f for n, f in zip(hard, (1.0, 1.2, 1.0, 0.9, 1.0, 0.97), strict=True)]
    close = score_difference(_scored(1, hard), _scored(2, jitter))
    assert close["verdict"] == "noise" and close["frames_to_resolve"] > 6
    assert score_difference(_scored(1, hard), _scored(2, hard, "other frames")) is None  # not the same frames
    (line,) = _snr_lines(found)
    assert line.startswith("SNR: B - A -0.41 dB (95% CI") and line.endswith("paired over the same 6 frames): lower")
    assert _snr_lines(close)[0].endswith(
        f"about {close['frames_to_resolve']} frames would resolve a difference this size"
    )
