"""The link model: fitted from known rungs, the seed's link, predictions and their bounds."""

from __future__ import annotations

import pytest

from loop.core.errors import LoopError
from loop.core.record import Measurement, RunRecord
from loop.devices.links import seed_link
from loop.measure.link import (
    COMPUTE,
    LINK,
    LinkModel,
    Rung,
    fit,
    load,
    parse_inline,
    predict,
    rungs_of,
    save,
)


def rungs_from(bw_mb_s: float, fixed_ms: float, trip_ms: float) -> list[Rung]:
    per = [(n, b, b / (bw_mb_s * 1e6) + fixed_ms / 1e3) for n, b in (("a", 65_536), ("b", 1 << 20), ("c", 8 << 20))]
    return [Rung(n, b, s, 4, s + trip_ms / 1e3 if n == "a" else None) for n, b, s in per]


def test_fit_recovers_a_known_link():
    m = fit("known", rungs_from(120.0, 0.5, 1.25), "test")
    assert m.bandwidth_mb_s == pytest.approx(120.0, rel=1e-9)
    assert m.per_transfer_ms == pytest.approx(0.5, rel=1e-9)
    assert m.round_trip_ms == pytest.approx(1.25, rel=1e-9)
    assert all(abs(r) < 1e-6 for r in m.residuals_pct.values())


def test_a_line_below_the_origin_is_refitted_through_it():
    # no fixed cost, and noise (the smallest rung 3 % quick) that tips the free line below zero:
    # dropping the intercept but keeping its slope missed every rung by up to 4 %
    sizes = (81_920, 327_680, 737_280, 1_310_720)
    noise = (0.97, 1.0, 1.0, 1.01)
    m = fit("noisy", [Rung(f"r{b}", b, b / 150e6 * k, 4) for b, k in zip(sizes, noise, strict=True)], "test")
    assert m.per_transfer_ms == 0.0
    assert m.bandwidth_mb_s == pytest.approx(150.0, rel=0.01)
    assert max(abs(r) for r in m.residuals_pct.values()) < 3.0


def test_the_seed_link_is_the_seeds_plateau_and_round_trip():
    m = seed_link()
    assert 285 <= m.bandwidth_mb_s <= 300  # "the link plateaus at ~285-300 MB/s"
    assert m.round_trip_ms == pytest.approx(1e3 / 724 - 1e3 / 2094, rel=1e-9)  # ~0.9 ms of 1.38
    assert all(abs(r) < 5 for r in m.residuals_pct.values())
    assert "seed" in m.source


@pytest.mark.parametrize(
    "rungs, match",
    [
        ([Rung("a", 100, 1e-3, 4), Rung("b", 100, 1e-3, 4)], "two frame sizes or more, got 2 of 1"),
        ([Rung("a", 100, 2e-3, 4), Rung("b", 1000, 1e-3, 4)], "compute-bound"),
    ],
)
def test_fit_refuses_what_is_not_a_ladder(rungs, match):
    with pytest.raises(LoopError, match=match):
        fit("x", rungs, "test")


def run(fps: float, bytes_in: int, bytes_out: int = 0, depth: int = 4, **extra: object) -> RunRecord:
    by_depth = [
        {"depth": 1, "rate_fps": {"median": fps / 2}, "spread_pct": 1.0},
        {"depth": depth, "rate_fps": {"median": fps}, "spread_pct": 1.0},
    ]
    data = {
        "rate_fps": {"median": fps},
        "depth": depth,
        "bytes_in": bytes_in,
        "bytes_out": bytes_out,
        "by_depth": by_depth,
        **extra,
    }
    return RunRecord(
        id=7, sweep="s", variant="v", status="ok", device="onnxruntime", measure=Measurement.from_dict(data)
    )


LINK_100 = LinkModel("l100", 100.0, 0.0, 1.0, "test", {})


def test_a_big_frame_on_a_slow_link_is_link_bound():
    p = predict(LINK_100, run(1000.0, 1_000_000))  # 10 ms on the link against 1 ms of compute
    assert p.bound == LINK and p.rate_fps == pytest.approx(100.0)
    assert p.link_busy_ms == pytest.approx(10.0) and not p.depth_limited
    assert p.first_output_ms == pytest.approx(10.0 + 1.0 + 2.0)  # link, round trip, lone compute (1/500 s)


def test_a_small_frame_is_compute_bound_and_queueing_hides_the_round_trip():
    p = predict(LINK_100, run(200.0, 10_000))  # 0.1 ms on the link; compute 10 ms (1 / 100 fps at depth 1)
    assert p.bound == COMPUTE and p.rate_fps == pytest.approx(100.0) and "depth 1" in p.compute_basis
    lone = predict(LINK_100, run(200.0, 10_000), depth=1)
    assert lone.rate_fps == pytest.approx(1e3 / (0.1 + 1.0 + 10.0))  # depth 1 pays everything in turn


def test_littles_law_caps_a_shallow_queue():
    slow_trip = LinkModel("trip", 100.0, 0.0, 30.0, "test", {})
    p = predict(slow_trip, run(1000.0, 100_000, depth=2))  # 1 ms link, 1 ms compute, 30 ms round trip
    assert p.depth_limited and p.rate_fps == pytest.approx(2 / (1e-3 + 30e-3 + 2e-3))


def test_a_devices_own_compute_split_wins_over_its_rate():
    p = predict(LINK_100, run(1000.0, 0, compute_ms=4.0))
    assert p.compute_ms == pytest.approx(4.0) and "recorded by the device" in p.compute_basis


def test_a_lone_frame_takes_the_devices_lone_compute_and_a_queue_its_queued_one():
    # a cold lone frame computes in 3 ms where a queued one takes 1 ms (a shared host's caches)
    split = {"copy_in_ms": 0.1, "compute_ms": 1.0, "copy_out_ms": 0.1, "lone_compute_ms": 3.0}
    r = run(1000.0, 10_000, compute_ms=1.0, split_ms=split)
    queued, lone = predict(LINK_100, r, depth=8), predict(LINK_100, r, depth=1)
    assert queued.compute_ms == pytest.approx(1.0) and queued.rate_fps == pytest.approx(1000.0)
    assert lone.compute_ms == pytest.approx(3.0) and "lone_compute_ms" in lone.compute_basis
    assert lone.rate_fps == pytest.approx(1e3 / (0.1 + 1.0 + 3.0))
    assert queued.first_output_ms == pytest.approx(0.1 + 1.0 + 3.0)  # a first output is a lone frame


def test_rungs_take_a_lone_compute_so_the_round_trip_is_not_charged_for_it():
    split = {"copy_in_ms": 0.1, "compute_ms": 1.0, "copy_out_ms": 0.1, "lone_compute_ms": 3.0}
    [rung] = rungs_of([run(100.0, 400, 100, compute_ms=1.0, split_ms=split)])
    assert rung.compute_s == pytest.approx(3e-3)


def test_rungs_of_a_measured_ladder():
    rungs = rungs_of([run(100.0, 400, 100), run(50.0, 800, 200)])
    assert [(r.bytes, r.per_frame_s, r.depth) for r in rungs] == [(500, 0.01, 4), (1000, 0.02, 4)]
    assert rungs[0].lone_s == pytest.approx(0.02)


def test_saved_links_round_trip_and_unknown_names_list_the_known(tmp_path):
    m = fit("mine", rungs_from(50.0, 0.1, 0.0), "test")
    save(tmp_path, m)
    assert load(tmp_path, "mine") == m
    assert load(tmp_path, "hailo10h-usb-1.5a") == seed_link()
    assert load(tmp_path, "25MB/s+2ms").round_trip_ms == 2.0
    with pytest.raises(LoopError, match=r"unknown link 'other' \(known: hailo10h-usb-1.5a, mine\)"):
        load(tmp_path, "other")
    for bad in ("hailo10h-usb-1.5a", "../up", ""):
        with pytest.raises(LoopError):
            save(tmp_path, LinkModel(bad, 1.0, 0.0, 0.0, "t", {}))


def test_a_damaged_link_file_is_one_clear_error(tmp_path):
    save(tmp_path, LinkModel("ok", 1.0, 0.0, 0.0, "t", {}))
    (tmp_path / "links" / "ok.json").write_text('{"name": "ok"}')
    with pytest.raises(LoopError, match="not a link model"):
        load(tmp_path, "ok")


GOOD = '{"name": "ok", "bandwidth_mb_s": 300, "per_transfer_ms": 0.5, "round_trip_ms": 0.9, '
# a link file's text as a hand, a tool or a tamperer left it, and the field its one line names
HOSTILE_LINKS = {
    "bandwidth-a-string": (GOOD.replace("300", '"300"') + '"source": "", "residuals_pct": {}}', "bandwidth_mb_s"),
    "bandwidth-zero": (GOOD.replace("300", "0") + '"source": "", "residuals_pct": {}}', "bandwidth_mb_s"),
    "bandwidth-nan": (GOOD.replace("300", "NaN") + '"source": "", "residuals_pct": {}}', "bandwidth_mb_s"),
    "negative-fixed-cost": (GOOD.replace("0.5", "-40") + '"source": "", "residuals_pct": {}}', "per_transfer_ms"),
    "round-trip-inf": (GOOD.replace("0.9", "Infinity") + '"source": "", "residuals_pct": {}}', "round_trip_ms"),
    "residual-nan": (GOOD + '"source": "", "residuals_pct": {"a": NaN}}', "residuals_pct.a"),
    "name-with-escapes": (
        GOOD.replace('"ok"', '"\\u001b]0;TITLE\\u0007"') + '"source": "", "residuals_pct": {}}',
        "name",
    ),
    "a-list": ("[1, 2]", "(the file)"),
    "nested-5000-deep": (GOOD + '"source": "", "residuals_pct": ' + "[" * 5000 + "]" * 5000 + "}", "nested 5001 deep"),
}


@pytest.mark.parametrize("case", HOSTILE_LINKS)
def test_a_hostile_link_file_is_one_line_naming_the_file_and_field(tmp_path, case):
    text, field = HOSTILE_LINKS[case]
    (tmp_path / "links").mkdir()
    path = tmp_path / "links" / "ok.json"
    path.write_text(text)
    with pytest.raises(LoopError) as caught:
        load(tmp_path, "ok")
    said = str(caught.value)
    assert said.startswith(f"{path}: ") and field in said and "not a link model" in said and "\n" not in said, said


def test_a_link_the_loader_would_refuse_is_never_saved(tmp_path):
    with pytest.raises(LoopError, match="per_transfer_ms"):
        save(tmp_path, LinkModel("neg", 300.0, -1.0, 0.0, "t", {}))
    assert not (tmp_path / "links" / "neg.json").exists()


@pytest.mark.parametrize("text, bw, trip", [("300MB/s+0.9ms", 300.0, 0.9), ("25 MB/s", 25.0, 0.0)])
def test_inline_links(text, bw, trip):
    m = parse_inline(text)
    assert (m.bandwidth_mb_s, m.round_trip_ms) == (bw, trip)


@pytest.mark.parametrize("text", ["0MB/s", "fastMB/s", "300 mb/s", "infMB/s", "..MB/s", "1e999MB/s"])
def test_inline_links_refuse_nonsense(text):
    with pytest.raises(LoopError, match="expected a link name"):
        parse_inline(text)
