"""The widening's words and rungs (issue 42): where the target comes from, which step is printed,
and the order the rungs widen in, on figures and a graph written here."""

from __future__ import annotations

from loop.judge.falls import ROOT, RUNGS, first_guess, neighbours, widened
from loop.judge.noise import Fall, NoiseReport, TensorNoise
from loop.judge.widen import EVERY, TARGET_DB, RateCost, Step, Target, Widening, target_of

TARGET = Target(25.0, "default")


def step(
    index: int, snr: float, layers: tuple[str, ...] = ("a",), verdict: str = "clean", rate: RateCost | None = None
) -> Step:
    layers = layers if index else ()
    return Step(index, f"why {index}", layers, 8, snr, {"y": 0.5}, len(layers), verdict, rate)


def test_the_target_is_the_flag_then_the_sweeps_ruined_line_plus_15_then_25() -> None:
    assert target_of(30.0, 12.0) == Target(30.0, "--target-db")
    assert target_of(None, 12.0) == Target(27.0, "measure.ruined_snr_db 12 + 15")
    assert target_of(None, None) == Target(TARGET_DB, "default") and TARGET_DB == 25.0


def test_the_first_step_that_meets_the_target_is_marked_and_printed() -> None:
    rate = RateCost(0.8, 0.78, 0.82, 5)
    steps = [step(0, -1.2, verdict="reference"), step(1, 7.8, rate=rate), step(2, 26.0, ("a", "b"), rate=rate)]
    steps.append(step(3, 34.9, (EVERY,)))
    found = Widening(TARGET, steps)
    assert found.met() is steps[2] and found.chosen() is steps[2]
    lines = found.lines()
    assert [line for line in lines if line.endswith("<- meets the target")] == [steps[2].line(True)]
    assert "top-1 4/8, 2 layers at 16 bits, rate 0.80x [0.78, 0.82], clean" in steps[2].line(True)
    assert "rate 1.00x (the base), reference" in steps[0].line(False)
    assert lines[-3:] == [
        "the variant to paste (step 2, met the target: 26.0 dB, clean):",
        "  - {op: precision, layer: a, bits: 16}",
        "  - {op: precision, layer: b, bits: 16}",
    ]
    assert found.to_json()["met"] == 2 and found.to_json()["variant"] == steps[2].entries()


def test_short_of_the_target_the_best_is_printed_and_says_so() -> None:
    failed = Step(2, "every activation", (EVERY,), 8, error="compile: boom")
    found = Widening(TARGET, [step(0, 1.0), step(1, 9.0), failed])
    assert found.met() is None and found.chosen() is found.steps[1]
    assert "the variant to paste (step 1, the best reached, short of 25 dB: 9.0 dB, clean):" in found.lines()
    assert failed.line(False) == "  step 2  every activation: failed: compile: boom"
    assert Widening(TARGET, [step(0, 30.0)]).lines()[-1] == "it meets the target as it is: nothing to widen"


def noise(tensor: str, index: int, bits: int = 8) -> TensorNoise:
    return TensorNoise(tensor, "Mul", tensor, index, 10.0, 40.0, bits=bits)


# x -> a -> b -> c -> d: a chain of quantized tensors, the fall at c with its region b, c
READS = {"x": [ROOT], "a": ["x"], "b": ["a"], "c": ["b"], "d": ["c"]}


def report(falls: list[Fall], bits: dict[str, int] | None = None) -> NoiseReport:
    layers = [noise(t, i, (bits or {}).get(t, 8)) for i, t in enumerate("abcd")]
    return NoiseReport("s", "base", "onnxruntime", 8, layers, falls=falls)


def test_the_rungs_widen_by_the_next_fall_then_the_neighbours_then_everything() -> None:
    fall = Fall("c", "c", 40.0, 10.0, ("b", "c"))
    assert first_guess(report([fall])) == ("the falls' regions (2 layers)", ("b", "c"))
    assert first_guess(report([]))[1] == ("a", "b", "c")  # nothing falls: the worst three
    later = Fall("d", "d", 30.0, 12.0, ("d",))
    assert widened(("b", "c"), report([fall, later]), READS, 0) == (1, "+ the next fall (d)", ("b", "c", "d"))
    # the fall mended, no other: the neighbours of the 16-bit grids, then every activation
    wide = report([fall], {"b": 16, "c": 16})
    assert widened(("b", "c"), wide, READS, 0) == (2, "+ the neighbours (2 layers)", ("b", "c", "a", "d"))
    assert widened(("a", "b", "c", "d"), wide, READS, 2) == (len(RUNGS), RUNGS[-1], (EVERY,))


def test_neighbours_look_through_unquantized_tensors() -> None:
    reads = {"x": [ROOT], "a": ["x"], "u": ["a"], "b": ["u"], "c": ["b"]}  # u is not quantized
    quantized = {t: noise(t, i) for i, t in enumerate("abc")}
    assert neighbours({"b"}, reads, quantized) == {"a", "c"}
