"""``loop compare``: does run B's rate differ from run A's beyond noise, and on what evidence?

Two bases, always named in the result:

* ``interleaved`` (the default, when both artifacts and the device are at hand): A and B
  re-measured with an A/A control (:mod:`loop.measure.interleave`). B is called faster or
  slower only when the 95% interval of the paired ratio B/A lies wholly beyond the noise floor,
  the outer edge of the control's own interval A'/A (at least ``MIN_FLOOR_PCT``).
* ``ledger`` (``from_ledger``, or an artifact is gone): the recorded figures only. Each side
  needs at least ``MIN_REPEATS`` repeats and no ``host-busy`` flag; non-overlapping 95% intervals
  of the medians call it, overlapping ones are noise, anything less is ``undecided`` with the reason.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loop.author.schema import MeasureSpec
from loop.core.kinds import NOT_COMPARABLE, Flag
from loop.core.record import Rate, RunRecord
from loop.core.text import for_person
from loop.judge import score
from loop.measure.interleave import Interleaved, interleave
from loop.measure.stats import ratio_ci95

NOISE, FASTER, SLOWER, UNDECIDED = "noise", "faster", "slower", "undecided"
INTERLEAVED, LEDGER = "interleaved", "ledger"
MIN_REPEATS = 3
ROUNDS = 5
# One runtime thread when re-measuring: on a shared host a pool of several swings 2-3x from one
# short chunk to the next (benchmarks/harness_overhead.py), which buries a 10% effect. Devices
# that run off the host ignore it.
COMPARE_SPEC = MeasureSpec(threads=1)
# Never call an effect under 1.5%: the seed's power-mode and DMA knobs (within 1.5%) are noise,
# and one A/A control cannot show a session-to-session difference of that order.
MIN_FLOOR_PCT = 1.5
# Each run's interval is of its own session; sessions on one host can differ by more (six
# sessions of one artifact here: 529-1022 fps, benchmarks/README.md), so a ledger call says so.
APART = "95% intervals apart (each of its own session; sessions can differ more: re-measure interleaved to confirm)"


def compare(a: RunRecord, b: RunRecord) -> dict[str, Any]:
    """From ledger figures; the verdict is about b relative to a."""
    ra, rb = _rate(a), _rate(b)
    out: dict[str, Any] = {
        "basis": LEDGER,
        "ratio": rb.median / ra.median,
        "ci95": None,
        "noise_floor_pct": None,
        "rounds": None,
        "diff_pct": 100.0 * (rb.median / ra.median - 1),
        "a": _side(a),
        "b": _side(b),
        **_across(a, b),
    }
    ia, ib = _interval(ra), _interval(rb)
    if ia is None or ib is None:
        short = [(r, rate) for r, rate, i in ((a, ra, ia), (b, rb, ib)) if i is None]
        which = ", ".join(f"run {r.id} has {rate.repeats or 'no recorded'} repeats" for r, rate in short)
        return {
            **out,
            "verdict": UNDECIDED,
            "reason": f"{which}; the ledger basis needs {MIN_REPEATS} or more "
            f"with a 95% interval on each side (re-measure: loop compare without --from-ledger)",
        }
    busy = [r for r in (a, b) if Flag.HOST_BUSY in {*r.flags, *r.measure.flags}]
    if busy:
        return {**out, "verdict": UNDECIDED, "reason": "; ".join(_busy_reason(r) for r in busy)}
    (alo, ahi), (blo, bhi) = ia, ib
    widest = widest_ratio(ia, ib)
    out["ci95"] = list(widest) if widest else None
    if blo > ahi:
        return {**out, "verdict": FASTER, "reason": APART}
    if bhi < alo:
        return {**out, "verdict": SLOWER, "reason": APART}
    return {**out, "verdict": NOISE, "reason": "95% intervals overlap"}


def _across(a: RunRecord, b: RunRecord) -> dict[str, str]:
    """``across_devices`` when the two runs were measured on different devices (another host,
    another worker, another stick): their ratio then holds the devices' difference too."""
    if a.measured_on == b.measured_on:
        return {}
    on_a, on_b = for_person(a.measured_on), for_person(b.measured_on)
    return {"across_devices": f"run {a.id} measured by {on_a}; run {b.id} by {on_b}"}


def widest_ratio(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float] | None:
    """B/A's widest reading of two runs' own intervals (measured apart, they pair nothing)."""
    (alo, ahi), (blo, bhi) = a, b
    return (blo / ahi, bhi / alo) if alo > 0 else None


def ledger_ratio(a: Rate, b: Rate) -> tuple[float, tuple[float, float] | None]:
    """B/A from two runs' recorded figures, with the interval where both have repeats enough."""
    ia, ib = _interval(a), _interval(b)
    return b.median / a.median, None if ia is None or ib is None else widest_ratio(ia, ib)


def _interval(rate: Rate) -> tuple[float, float] | None:
    """The median's 95% interval, where there are repeats enough to trust it."""
    return rate.ci95 if (rate.repeats or 0) >= MIN_REPEATS else None


def decide(b_over_a: tuple[float, float, float], control: tuple[float, float, float]) -> tuple[str, float]:
    """The verdict from the paired ratio (ratio, lo, hi) and the A/A control's; also the floor in %."""
    _, clo, chi = control
    floor = max(chi, 1 / clo, 1 + MIN_FLOOR_PCT / 100) - 1
    _, lo, hi = b_over_a
    if lo > 1 + floor:
        return FASTER, 100 * floor
    if hi < 1 / (1 + floor):
        return SLOWER, 100 * floor
    return NOISE, 100 * floor


def interleaved_result(m: Interleaved) -> dict[str, Any]:
    """The verdict, ratio and floor of one interleaved measurement (sides A, B, A')."""
    a, b, control = m.side(0), m.side(1), m.side(2)
    effect, floor_ci = ratio_ci95(b, a), ratio_ci95(control, a)
    verdict, floor = decide(effect, floor_ci)
    return {
        "verdict": verdict,
        "basis": INTERLEAVED,
        "ratio": effect[0],
        "ci95": [effect[1], effect[2]],
        "noise_floor_pct": floor,
        "rounds": len(m.rounds),
        "diff_pct": 100 * (effect[0] - 1),
        "control": {"ratio": floor_ci[0], "ci95": [floor_ci[1], floor_ci[2]]},
        "round_fps": {"a": a, "b": b, "a_again": control},
        "wall_s": m.wall_s,
        "host": m.host,
        "flags": m.flags,
    }


def remeasure(
    a: RunRecord, b: RunRecord, spec: MeasureSpec | None = None, rounds: int = ROUNDS, progress: bool = False
) -> dict[str, Any]:
    """Re-measure both runs' artifacts interleaved, each at its own recorded depth (``progress``:
    say so on stderr, with how long it takes, once both artifacts are read and checked)."""
    from loop.core.registry import make_device
    from loop.store.artifacts import load_artifact, recorded_sha

    _rate(a), _rate(b)
    (device_a, path_a), (_, path_b) = _stored(a), _stored(b)
    # checked against the hashes the ledger holds: a swapped file would be measured as the run
    art_a, art_b = load_artifact(path_a, recorded_sha(a)), load_artifact(path_b, recorded_sha(b))
    depths = [_depth(a), _depth(b), _depth(a)]
    if progress:  # three sides a round, each timed min_duration_s at least
        took = 3 * rounds * (spec or COMPARE_SPEC).min_duration_s
        sys.stderr.write(
            f"loop: re-measuring runs {a.id} and {b.id} interleaved, {rounds} rounds, about {took:.0f} s\n"
        )
    m = interleave(make_device(device_a), [art_a, art_b, art_a], spec or COMPARE_SPEC, rounds, depths)
    return {**interleaved_result(m), "a": _side(a), "b": _side(b)}


def compare_runs(
    a: RunRecord,
    b: RunRecord,
    from_ledger: bool = False,
    spec: MeasureSpec | None = None,
    rounds: int = ROUNDS,
    progress: bool = False,
) -> dict[str, Any]:
    """What ``loop compare A B`` does: re-measure where it can, else decide from the ledger."""
    gone = [r for r in (a, b) if not _measurable(r)]
    scored = {"snr": snr} if (snr := score_difference(a, b)) is not None else {}
    if from_ledger or gone:
        out = compare(a, b)
        if gone and not from_ledger:
            out["fallback"] = "; ".join(
                f"run {r.id}: artifact {for_person(r.artifact or '(none)')} is gone" for r in gone
            )
        return {**out, **scored}
    return {**remeasure(a, b, spec, rounds, progress), **scored}


def score_difference(a: RunRecord, b: RunRecord) -> dict[str, Any] | None:
    """B's SNR less A's, bootstrapped paired over the frames both were scored on (the same
    inputs), with how many frames would resolve it where it lies inside the noise; None where
    either has no per-frame energies or they were scored on other frames."""
    ea, eb = score.recorded_energy(a.scores.data), score.recorded_energy(b.scores.data)
    if ea is None or eb is None or a.inputs_sha != b.inputs_sha:
        return None
    found = score.paired_snr(eb, ea)
    if found is None:
        return None
    diff, (low, high) = found
    verdict = "higher" if low > 0 else "lower" if high < 0 else NOISE
    out: dict[str, Any] = {"a": a.scores.snr_db, "b": b.scores.snr_db, "diff_db": diff, "ci95": [low, high]}
    out.update(frames=len(ea), verdict=verdict)
    need = score.frames_to_resolve(diff, (low, high), len(ea)) if verdict == NOISE else None
    return {**out, "frames_to_resolve": need}


def a_a(
    run: RunRecord, pairs: int = 10, spec: MeasureSpec | None = None, rounds: int = ROUNDS, progress: bool = False
) -> dict[str, Any]:
    """One artifact against itself ``pairs`` times: every call but ``noise`` is a false call.
    ``progress``: a bar on stderr, a pair at a time (20 pairs took 5 minutes, silent)."""
    from tqdm import tqdm

    bar = tqdm(range(pairs), desc=f"A/A pairs of run {run.id}", unit="pair", disable=not progress, file=sys.stderr)
    results = [remeasure(run, run, spec, rounds) for _ in bar]
    false = sum(r["verdict"] != NOISE for r in results)
    return {
        "basis": INTERLEAVED,
        "run": run.id,
        "pairs": pairs,
        "false_calls": false,
        "false_call_rate": false / pairs,
        "rounds": rounds,
        "noise_floor_pct": statistics.median(r["noise_floor_pct"] for r in results),
        "verdicts": [r["verdict"] for r in results],
        "ratios": [r["ratio"] for r in results],
        "ci95": [r["ci95"] for r in results],
        "wall_s": sum(r["wall_s"] for r in results),
        "host_busy": sum(Flag.HOST_BUSY in r["flags"] for r in results),
    }


def _busy_reason(run: RunRecord) -> str:
    """Another process's load can move a rate several-fold: such a figure decides nothing."""
    pct = run.measure.others_core_pct
    return (
        f"run {run.id} was measured host-busy (other processes used "
        f"{'?' if pct is None else f'{pct:.0f}'}% of a core); re-measure: loop compare without --from-ledger"
    )


def _measurable(run: RunRecord) -> bool:
    return bool(run.artifact) and Path(run.artifact or "").is_file() and bool(run.device)


def _stored(run: RunRecord) -> tuple[str, Path]:
    """The device a run was measured on and its artifact's file."""
    from loop.core.errors import LoopError

    if not run.device or not run.artifact:
        raise LoopError(f"run {run.id} ({for_person(run.variant)}) has no stored artifact to re-measure")
    return run.device, Path(run.artifact)


def _depth(run: RunRecord) -> int:
    return run.measure.depth or 1


def _rate(run: RunRecord) -> Rate:
    from loop.core.errors import LoopError

    if run.verdict in NOT_COMPARABLE:
        raise LoopError(
            f"run {run.id} ({for_person(run.variant)}) is {run.verdict}: kept in the ledger, left out of comparisons"
        )
    if run.measure.rate is None:
        raise LoopError(f"run {run.id} ({for_person(run.variant)}) has no measured rate (status {run.status})")
    return run.measure.rate


def _side(run: RunRecord) -> dict[str, Any]:
    return {
        "id": run.id,
        "variant": run.variant,
        "rate_fps": _rate(run).to_json(),
        "spread_pct": run.measure.spread_pct,
        "depth": run.measure.depth,
    }


def describe(result: dict[str, Any]) -> str:
    """Both runs' recorded figures, then the verdict with its basis and interval."""

    def line(s: dict[str, Any]) -> str:
        r = s["rate_fps"]
        ci = f", 95% CI [{r['ci95'][0]:.1f}, {r['ci95'][1]:.1f}]" if r.get("ci95") else ""
        return (
            f"run {s['id']} ({for_person(s['variant'])}): median {r['median']:.1f} fps [{r['min']:.1f}, {r['max']:.1f}]"
            f"{ci}, spread {s['spread_pct']:.1f}%"
        )

    ci = result.get("ci95")
    head = f"{result['verdict']}: B/A {result['ratio']:.4f}"
    head += f" (95% CI {ci[0]:.4f}..{ci[1]:.4f})" if ci else ""
    if result["basis"] == INTERLEAVED:
        head += (
            f", noise floor +-{result['noise_floor_pct']:.2f}% from an A/A control; "
            f"{result['rounds']} interleaved rounds"
        )
        head += f"; flagged {', '.join(result['flags'])}" if result.get("flags") else ""
    else:
        head += f"; from ledger figures: {result.get('reason')}"
        head += f" ({result['fallback']})" if result.get("fallback") else ""
    across = [f"across devices: {result['across_devices']}"] if result.get("across_devices") else []
    return "\n".join([line(result["a"]), line(result["b"]), head, *across, *_snr_lines(result.get("snr"))])


def _snr_lines(snr: dict[str, Any] | None) -> list[str]:
    if snr is None:
        return []
    low, high = snr["ci95"]
    said = (
        f"SNR: B - A {snr['diff_db']:+.2f} dB (95% CI {low:+.2f}..{high:+.2f}, paired over the same "
        f"{snr['frames']} frames): {snr['verdict']}"
    )
    if snr.get("frames_to_resolve"):
        said += f"; about {snr['frames_to_resolve']} frames would resolve a difference this size"
    return [said]


def describe_a_a(result: dict[str, Any]) -> str:
    calls = ", ".join(f"{v} {r:.4f}" for v, r in zip(result["verdicts"], result["ratios"], strict=True))
    return (
        f"run {result['run']} against itself, {result['pairs']} interleaved pairs of {result['rounds']} rounds: "
        f"{result['false_calls']} false call(s), rate {100 * result['false_call_rate']:.0f}%; "
        f"median noise floor +-{result['noise_floor_pct']:.2f}%; {result['wall_s']:.0f} s\n{calls}"
    )


def summarize(results: Sequence[dict[str, Any]]) -> dict[str, int]:
    """How many of several comparisons gave each verdict."""
    return {v: sum(r["verdict"] == v for r in results) for v in (NOISE, FASTER, SLOWER, UNDECIDED)}
