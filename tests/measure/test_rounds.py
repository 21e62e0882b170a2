"""A generation in interleaved rounds, on a device of virtual time (no absolute time here)."""

import math

from fake_timing import VirtualDevice, virtual
from measure.fake_hailo_scheduler import FakeHailoDevice, Net

from loop.author.sweepfile import MeasureSpec
from loop.devices.base import RuntimeOptions
from loop.measure.rounds import (
    BEATEN,
    BUDGET,
    NOT_NARROWING,
    TARGET,
    Race,
    half_width_pct,
    race,
    shrink,
    stop_rounds,
    why_stop,
)
from loop.measure.stats import ratio_ci95, widened

SPEC = MeasureSpec(min_duration_s=0.1)


def test_the_faster_is_found_the_same_holds_one_and_the_beaten_leave_the_race():
    device = VirtualDevice(0.02, seed=1)
    sides = [virtual(2.0), virtual(2.0), virtual(2.0 / 1.10), virtual(2.0 * 1.5)]
    r = race(device, sides, SPEC, target_pct=1.0, budget_s=60)
    same, fast, slow = r.ratios[1], r.ratios[2], r.ratios[3]
    assert same[1] <= 1.0 <= same[2] and abs(slow[0] - 1 / 1.5) < 0.05 and slow[2] < fast[1]
    assert fast[1] > 1.05 and abs(fast[0] - 1.10) < 0.03 and half_width_pct(fast) <= 1.0
    assert r.dropped[2] is None and r.dropped[1] is not None and r.dropped[3] is not None  # beaten by c2
    assert r.stopped[1:] == [BEATEN, NOT_NARROWING, BEATEN]  # c2: +-0.4%, but the A/A floor is +-1.0%
    assert r.control is not None and abs(r.control[0] - 1.0) < 0.02 and r.floor_pct < 5
    assert len(device.opened) == 5  # the A/A control: a second session of the reference
    assert not any(s.options.spin for s in device.opened)  # idle pools would steal the timed one's cores


def test_rounds_stop_at_the_target_and_keep_at_least_three():
    device = VirtualDevice(0.0, seed=0)
    r = race(device, [virtual(1.0), virtual(1.0)], SPEC, target_pct=3.0, budget_s=60)
    assert r.rounds == 3 and r.ratios[1][0] == 1.0 and r.floor_pct == 0.0 and r.stopped == [None, TARGET]


def test_two_sessions_apart_widen_every_interval_and_rounds_go_on_only_while_they_help():
    # three sessions: the reference, a candidate of the same compute, the reference's control 3% slower
    # seed 3: with the frames a switch costs now drawn too, seed 2's sequence put the floor at 4.65
    # (over 30 seeds, 4 land outside 2-4.5 against 2 before: the same spread)
    device = VirtualDevice(0.02, seed=3, slower=[1.0, 1.0, 1.03])
    r = race(device, [virtual(1.0), virtual(1.0)], SPEC, target_pct=3.0, budget_s=600)
    assert 2.0 < r.floor_pct < 4.5  # the A/A control saw the sessions apart
    # the widened interval cannot reach the target: stopped once another round would barely
    # narrow it (the sessions' offset does not come down in rounds), not at the budget
    full = widened(r.ratios[1], r.floor_pct)
    assert half_width_pct(full) > 3.0 and r.stopped[1] == NOT_NARROWING and r.rounds < 12
    assert full[1] < r.ratios[1][1] and full[2] > r.ratios[1][2] and full[1] <= 1.0 <= full[2]


def _interval(half_pct: float, mid: float = 1.0) -> tuple[float, float, float]:
    h = math.log1p(half_pct / 100)
    return mid, mid * math.exp(-h), mid * math.exp(h)


def test_a_round_that_would_barely_narrow_the_interval_is_not_run():
    """The stopping rule on its own: the interval one more round would leave, projected from the
    spread it has (Student's t and 1/sqrt(n)), against the target and the share it must cut."""
    same = _interval(0.0)  # the control: two sessions of the reference alike, no floor
    assert why_stop(_interval(2.9), 3, same, 3, 3.0) == TARGET
    assert [n for n in range(3, 30) if why_stop(_interval(6.0), n, same, n, 3.0)] == list(range(12, 30))
    assert why_stop(_interval(6.0), 12, same, 12, 3.0) == NOT_NARROWING
    assert 1 - shrink(11) > 0.05 > 1 - shrink(12)  # the 12th round is the last that cuts 5%
    # two sessions of the reference 3% apart: an offset no round removes, so a candidate whose own
    # rounds are tight stops at once, short of the target; one whose rounds are wide goes on
    apart = _interval(0.3, mid=1.03)
    assert why_stop(_interval(0.5), 3, apart, 3, 3.0) == NOT_NARROWING
    assert why_stop(_interval(5.0), 3, apart, 3, 3.0) is None
    # a candidate stuck at +-3.1% with a floor of +-2.5% stops rather than hold the generation
    floor = _interval(0.5, mid=1.02)
    assert half_width_pct(widened(_interval(1.8), 2.5)) > 3.0
    assert why_stop(_interval(1.8), 8, floor, 8, 3.0) == NOT_NARROWING


def test_synthetic_rounds_stop_each_candidate_for_its_own_reason():
    """Rounds written out (no device): per round, fps of the reference, three candidates and the
    control. c1 is the reference's twin, c2 is 20% slower, c3 swings +-8% a round."""
    n = 6
    ref = [100.0] * n
    twin = [100.0 * (1 + 0.004 * (-1) ** k) for k in range(n)]
    slow = [80.0 * (1 + 0.05 * (-1) ** k) for k in range(n)]
    wild = [100.0 * (1 + 0.08 * (-1) ** k) for k in range(n)]
    control = [100.0 * (1 + 0.002 * (-1) ** k) for k in range(n)]
    out = Race(fps=[ref, twin[:3], slow[:3], wild[:3], control], rounds=3)
    out.stopped, out.dropped = [None] * 4, [None] * 4
    out.ratios = [None, *(ratio_ci95(side, ref[: len(side)]) for side in out.fps[1:4])]
    out.control = ratio_ci95(control[:3], ref[:3])
    out.floor_pct = 100 * max(1 - out.control[1], out.control[2] - 1)
    active = [0, 1, 2, 3, 4]
    stop_rounds(out, active, target_pct=3.0)
    assert out.stopped == [None, TARGET, BEATEN, None] and out.dropped == [None, None, 3, None]
    assert active == [0, 3, 4]  # the reference and its control stay while c3 runs


def test_a_stuck_candidate_no_longer_holds_the_others():
    """Five candidates of the reference's compute, the last with frames twenty times as noisy:
    the four leave after the fewest rounds; it alone goes on with the reference and its control
    until its interval stops narrowing, and says it stopped short of the target."""
    device = VirtualDevice(0.02, seed=0, noisier=[1, 1, 1, 1, 1, 20])
    r = race(device, [virtual(1.0)] * 6, SPEC, target_pct=3.0, budget_s=600)
    assert [len(side) for side in r.fps[1:5]] == [3] * 4 and all(s in (TARGET, BEATEN) for s in r.stopped[1:5])
    assert r.stopped[5] == NOT_NARROWING and len(r.fps[5]) == r.rounds <= 12
    assert half_width_pct(widened(r.ratios[5], r.floor_pct)) > 3.0
    timed = [s.frames_timed for s in device.opened]
    assert max(timed[1:5]) < timed[0] / 3  # the four ran none of its rounds


def test_the_budget_stops_the_rest_and_says_so():
    device = VirtualDevice(0.02, seed=0, noisier=[1, 1, 20])
    r = race(device, [virtual(1.0), virtual(1.0)], SPEC, target_pct=0.1, budget_s=0.0)
    assert r.rounds == 3 and r.stopped == [None, BUDGET]


def test_widened_adds_the_floor_in_quadrature_in_log_space():
    ratio = (1.0, math.exp(-0.03), math.exp(0.03))
    assert widened(ratio, None) == ratio and widened(ratio, 0.0) == ratio
    mid, lo, hi = widened(ratio, 100 * (math.exp(0.04) - 1))
    assert mid == 1.0 and math.isclose(math.log(hi), 0.05) and math.isclose(math.log(lo), -0.05)


def test_a_race_runs_at_the_protocols_depth_and_keeps_single_frames_apart():
    """The seed's Hailo-10H: 1168 fps pipelined against about 253 fps single-frame. A candidate
    quicker on one frame but pipelining worse is slower at the protocol's depth, and ranked so;
    its single-frame advantage stays a figure of its own."""
    ref, cand = Net(4.0, 1000.0, 0.0), Net(3.0, 400.0, 0.0)
    r = race(FakeHailoDevice(), [ref.artifact(), cand.artifact()], SPEC.model_copy(update={"depth": (1, 4)}), 3.0, 60)
    assert r.depth == [4, 4, 4]
    assert 0.35 < r.ratios[1][0] < 0.45  # at depth 4: about 400 / 1000 (one queue fill per chunk)
    assert math.isclose(r.single_ratios[1][0], 4.0 / 3.0, rel_tol=1e-9)


def test_frames_after_a_network_switch_are_discarded_counted_and_costed():
    """Identical networks whose switches cost apart: the switch lands in no timed chunk, so the
    ratio holds 1.0; the frames it cost are counted, and what it cost is kept per side."""
    ref, cand = Net(4.0, 1000.0, 2.0), Net(4.0, 1000.0, 20.0)
    r = race(FakeHailoDevice(), [ref.artifact(), cand.artifact()], SPEC.model_copy(update={"depth": (4,)}), 3.0, 60)
    assert math.isclose(r.ratios[1][0], 1.0, rel_tol=1e-9) and r.floor_pct == 0.0
    assert all(n > 0 and n % 4 == 0 for n in r.discarded)  # a queue-full after each switch
    assert math.isclose(r.switch_ms[1] / r.switch_ms[0], 10.0, rel_tol=0.01)


def test_at_depth_one_a_switch_costs_one_frame_and_the_figure_is_the_single_frames():
    ref, cand = Net(4.0, 1000.0, 2.0), Net(2.0, 1000.0, 40.0)
    r = race(FakeHailoDevice(), [ref.artifact(), cand.artifact()], SPEC, 3.0, 60)
    assert r.depth == [1, 1, 1] and r.fps == r.single
    assert math.isclose(r.ratios[1][0], 2.0, rel_tol=1e-9) and min(r.discarded) > 0
    assert math.isclose(r.switch_ms[1] / r.switch_ms[0], 20.0, rel_tol=1e-9)


def test_a_change_of_batch_after_the_single_frames_is_not_timed():
    """A multi-context network reconfigures when its hardware batch changes (HailoRT's scheduler): a
    side's pipelined chunk right after its own single frames (batch 1) pays a switch with no other
    network between, as a side does across rounds (3 sides, 3 chunks a round). That queue-full runs
    untimed: the chunk's rate is the one before."""
    from loop.measure.sides import Side, Switches

    device, spec = FakeHailoDevice(), SPEC.model_copy(update={"depth": (4,)})
    side = Side(device.open(Net(4.0, 1000.0, 20.0, dynamic_batch=True).artifact(), RuntimeOptions()), spec, Switches())
    first, again = side(), side()
    assert first.rate is not None and again.rate == first.rate
    assert side.switches.frames == [4]  # the one queue-full discarded, counted
