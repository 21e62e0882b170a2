"""A fitted link says what makes it doubtful: rungs off its line, and a round trip nothing measured."""

from __future__ import annotations

from loop.core.links import Rung, fit, fit_warnings


def _rung(name: str, nbytes: int, mb_s: float, fixed_ms: float, lone_extra_ms: float | None = None) -> Rung:
    per_frame = nbytes / (mb_s * 1e6) + fixed_ms / 1e3
    lone = per_frame + lone_extra_ms / 1e3 if lone_extra_ms is not None else None
    return Rung(name, nbytes, per_frame, 4, lone)


def test_a_clean_ladder_with_a_lone_frame_gives_no_warning() -> None:
    rungs = [_rung(f"r{i}", 16_000 * 2**i, 300.0, 0.4, lone_extra_ms=0.9 if i == 0 else None) for i in range(5)]
    model = fit("clean", rungs, "test")
    assert abs(model.bandwidth_mb_s - 300.0) < 1 and model.round_trip_ms > 0
    assert fit_warnings(model) == []


def test_rungs_off_the_line_and_a_zero_round_trip_are_each_one_line() -> None:
    rungs = [_rung(f"r{i}", 16_000 * 2**i, 300.0, 0.4) for i in range(5)]
    rungs[2] = Rung("slow", rungs[2].bytes, rungs[2].per_frame_s * 1.6, 4)  # compute-bound, or a busy host
    said = fit_warnings(fit("doubtful", rungs, "test"))
    assert len(said) == 2
    assert said[0].startswith("the line misses 1 of 5 rungs") and "(slow -" in said[0]  # slower than the line says
    assert said[1].startswith("round trip 0 ms")
