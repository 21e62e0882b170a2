"""A generation in interleaved rounds, on a device of virtual time (no absolute time here)."""

from fake_timing import VirtualDevice, virtual

from loop.measure.rounds import half_width_pct, race
from loop.spec.sweepfile import MeasureSpec

SPEC = MeasureSpec(min_duration_s=0.1)


def test_the_faster_is_found_the_same_holds_one_and_the_beaten_leave_the_race():
    device = VirtualDevice(0.02, seed=1)
    sides = [virtual(2.0), virtual(2.0), virtual(2.0 / 1.10), virtual(2.0 * 1.5)]
    r = race(device, sides, SPEC, target_pct=1.0, budget_s=60)
    same, fast, slow = r.ratios[1], r.ratios[2], r.ratios[3]
    assert same[1] <= 1.0 <= same[2] and abs(slow[0] - 1 / 1.5) < 0.05 and slow[2] < fast[1]
    assert fast[1] > 1.05 and abs(fast[0] - 1.10) < 0.03 and half_width_pct(fast) <= 1.0
    assert r.dropped[2] is None and r.dropped[1] is not None and r.dropped[3] is not None  # beaten by c2
    assert r.control is not None and r.control[1] <= 1.0 <= r.control[2] and r.floor_pct < 5
    assert len(device.opened) == 5  # the A/A control: a second session of the reference


def test_rounds_stop_at_the_target_and_keep_at_least_three():
    device = VirtualDevice(0.0, seed=0)
    r = race(device, [virtual(1.0), virtual(1.0)], SPEC, target_pct=3.0, budget_s=60)
    assert r.rounds == 3 and r.ratios[1][0] == 1.0 and r.floor_pct == 0.0
