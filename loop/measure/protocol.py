"""The measurement protocol, written once over the device interface.

Three quantities are kept apart, always:

* time to first output: a fresh session each time (open, then the first inference);
* steady-state rate: after warm-up, ``depth`` frames in flight, repeated, min/median/max;
* transferred bytes: per inference as the device sees them, and bytes x rate as MB/s.

The first inference of a session is reported on its own and never averaged into a rate.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from loop.author.schema import MeasureSpec
from loop.core.capture import captured_stderr
from loop.core.kinds import Flag
from loop.core.record import DepthRate, Measurement, Rate, plain
from loop.core.vocab import Artifact, DeviceSettings
from loop.devices.base import Device, RuntimeOptions, Session
from loop.measure.hostload import LoadProbe, busy_flags
from loop.measure.stats import ci_pct, median_ci95

POWER_WARNING = "USB-C source electrical current advertised"
LEAK_WARNING = "session leaked"  # a session the device could not free: its buffers kept for good
SESSION_LEAKED = "session-leaked"
DRIFT_MIN_S = 60.0


def spread(values: Sequence[float]) -> float:
    med = statistics.median(values)
    return 100.0 * (max(values) - min(values)) / med if med else 0.0


def summary(values: Sequence[float]) -> dict[str, Any]:
    """min/median/max of the repeats, the median's 95% interval (absolute, and its half-width
    in % of the median: what a ``target_ci_pct`` is held to) and how many repeats there were."""
    lo, hi = median_ci95(values)
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "ci95": [max(lo, 0.0), hi],  # a t interval on a few wild repeats can reach below 0; a rate cannot
        "ci95_pct": ci_pct(values),
        "repeats": len(values),
    }


def time_to_first_output(
    device: Device, artifact: Artifact, frames: Sequence[np.ndarray], options: RuntimeOptions, repeats: int
) -> tuple[dict[str, float | None], float]:
    """Fresh sessions: median open and first-inference times; open+first is the figure."""
    opens, firsts = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        with device.open(artifact, options) as session:  # closed even when the first call fails
            t1 = time.perf_counter()
            session.infer(frames)  # checks included: this is what a user's first call costs
            t2 = time.perf_counter()
        opens.append((t1 - t0) * 1e3)
        firsts.append((t2 - t1) * 1e3)
    parts: dict[str, float | None] = {
        "open_ms": statistics.median(opens),
        "first_ms": statistics.median(firsts),
        "transfer_ms": None,
    }
    return parts, statistics.median(o + f for o, f in zip(opens, firsts, strict=True))


def steady_rate(session: Session, frames: Sequence[np.ndarray], spec: MeasureSpec, depth: int) -> DepthRate:
    """Frames/s over repeats (each at least ``spec.frames`` frames and ``spec.min_duration_s``),
    or over ``spec.duration_s`` in chunks; ``rate_fps.frames`` is how many frames were timed."""
    if spec.warmup:
        session.pipelined(frames, spec.warmup, depth)
    if spec.duration_s is None:
        rates, counted = _repeats(session, frames, spec, depth)
    else:
        rates, counted = _rates_for_duration(session, frames, spec.duration_s, depth)
    rate = Rate.from_json({**summary(rates), "frames": counted})
    assert rate is not None  # a summary always has its median
    return DepthRate(depth, rate, spread(rates), tuple(rates))


def one_repeat(
    session: Session, frames: Sequence[np.ndarray], count: int, min_s: float, depth: int
) -> tuple[float, int]:
    """At least ``count`` frames and ``min_s`` seconds: a rate over a few milliseconds is a
    rate of whatever else the host did in those milliseconds. Returns (fps, frames)."""
    elapsed = session.pipelined(frames, count, depth)
    while elapsed < min_s:
        # sized from the rate so far, so a repeat overshoots min_s by about one frame
        more = max(depth, int((min_s - elapsed) * count / max(elapsed, 1e-9)) + 1)
        elapsed += session.pipelined(frames, more, depth)
        count += more
    return count / elapsed, count


def _repeats(session: Session, frames: Sequence[np.ndarray], spec: MeasureSpec, depth: int) -> tuple[list[float], int]:
    """``spec.repeats`` repeats, then more while a ``target_ci_pct`` is unmet and time is left."""
    rates: list[float] = []
    counted, started = 0, time.perf_counter()
    while len(rates) < spec.repeats or _wants_more(rates, spec, time.perf_counter() - started):
        rate, n = one_repeat(session, frames, spec.frames, spec.min_duration_s, depth)
        rates.append(rate)
        counted += n
    return rates, counted


def _wants_more(rates: Sequence[float], spec: MeasureSpec, elapsed_s: float) -> bool:
    return spec.target_ci_pct is not None and elapsed_s < spec.max_duration_s and ci_pct(rates) > spec.target_ci_pct


def _rates_for_duration(
    session: Session, frames: Sequence[np.ndarray], duration_s: float, depth: int
) -> tuple[list[float], int]:
    """Chunks of about a twentieth of the duration each, until the duration has passed."""
    probe = max(depth, 4)
    per_frame = session.pipelined(frames, probe, depth) / probe
    chunk = max(depth, int(duration_s / 20 / max(per_frame, 1e-9)))
    rates: list[float] = []
    end = time.perf_counter() + duration_s
    while time.perf_counter() < end or len(rates) < 3:
        rates.append(chunk / session.pipelined(frames, chunk, depth))
    return rates, chunk * len(rates)


def latencies(session: Session, frames: Sequence[np.ndarray], count: int) -> dict[str, float]:
    """Single frames, one at a time: p50/p90/p99 in ms, apart from the pipelined rate."""
    if count <= 0:
        return {}
    p50, p90, p99 = 1e3 * np.percentile(session.frame_times(frames, count), [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99)}


def drift(rate: DepthRate, elapsed_s: float) -> dict[str, Any] | None:
    """On runs of a minute or more: the last tenth's median rate against the first tenth's,
    flagged past max(2%, the spread). The spread is the first tenth's own (the noise before
    any drift): the whole run's would contain the drift and could never be exceeded."""
    chunks = rate.chunks
    if elapsed_s < DRIFT_MIN_S or len(chunks) < 20:
        return None
    tenth = max(len(chunks) // 10, 2)
    first, last = statistics.median(chunks[:tenth]), statistics.median(chunks[-tenth:])
    drop = 100.0 * (first - last) / first
    threshold = max(2.0, spread(chunks[:tenth]))
    return {
        "first_fps": first,
        "last_fps": last,
        "drop_pct": drop,
        "threshold_pct": threshold,
        "drifted": drop > threshold,
    }


@dataclass
class _Timed:
    first_ms: float
    by_depth: list[DepthRate]
    elapsed_s: float
    latency_ms: dict[str, float]
    hw_latency_ms: float | None
    bytes_in: int
    bytes_out: int
    notes: list[str]
    split_ms: dict[str, float] | None


def _timed(
    device: Device, artifact: Artifact, frames: Sequence[np.ndarray], spec: MeasureSpec, options: RuntimeOptions
) -> _Timed:
    with device.open(artifact, options) as session:
        call = session.bound(frames)
        t0 = time.perf_counter()
        call()
        first = (time.perf_counter() - t0) * 1e3
        started = time.perf_counter()
        depths = sorted({min(d, session.max_depth or d) for d in spec.depth})
        by_depth = [steady_rate(session, frames, spec, d) for d in depths]
        elapsed = time.perf_counter() - started
        return _Timed(
            first,
            by_depth,
            elapsed,
            latencies(session, frames, spec.latency_frames),
            session.hw_latency_ms(),
            sum(t.frame_bytes for t in session.inputs),
            sum(t.frame_bytes for t in session.outputs),
            list(session.notes),
            session.split_ms(frames, max(spec.latency_frames, 3)),
        )


def runtime_options(spec: MeasureSpec) -> RuntimeOptions:
    """The sweep file's measurement knobs that need no recompile, as the device takes them."""
    return RuntimeOptions(**spec.model_dump(include=set(DeviceSettings.model_fields)))


def measure(device: Device, artifact: Artifact, frames: Sequence[np.ndarray], spec: MeasureSpec) -> Measurement:
    """Run the whole protocol on ``artifact`` with ``frames`` in the device's own dtype."""
    options = runtime_options(spec)
    device.select(options)  # health before any session: on the device and group the sessions will use
    before = device.health()
    probe = LoadProbe.start()
    with captured_stderr() as err:
        parts, ttfo = time_to_first_output(device, artifact, frames, options, spec.ttfo_repeats)
        t = _timed(device, artifact, frames, spec, options)
    host = probe.stop()
    after = device.health()
    best = max(t.by_depth, key=lambda r: r.rate.median)
    printed = [line for line in err.getvalue().splitlines() if "warn" in line.lower()]
    warnings = list(before.warnings) + printed + list(after.warnings)
    drifted = drift(best, t.elapsed_s)
    flags = flags_for(warnings) + ([Flag.THERMAL_DRIFT] if drifted and drifted["drifted"] else [])
    flags += busy_flags(host, spec.host_busy_pct)
    rate = best.rate.median
    if t.split_ms:
        parts["transfer_ms"] = t.split_ms["copy_in_ms"] + t.split_ms["copy_out_ms"]
    return Measurement(
        ttfo_ms=ttfo,
        ttfo_parts=parts,
        first_infer_ms=t.first_ms,
        rate=best.rate,
        spread_pct=best.spread_pct,
        depth=best.depth,
        by_depth=tuple(t.by_depth),
        basis="duration" if spec.duration_s else "frames",
        duration_s=t.elapsed_s,
        bytes_in=t.bytes_in,
        bytes_out=t.bytes_out,
        mb_s={"in": t.bytes_in * rate / 1e6, "out": t.bytes_out * rate / 1e6},
        latency_ms=t.latency_ms,
        hw_latency_ms=t.hw_latency_ms,
        health_before=plain(asdict(before)),
        health_after=plain(asdict(after)),
        warnings=tuple(warnings),
        flags=tuple(flags),
        host=host,
        drift=drifted,
        notes=tuple(t.notes),
        split_ms=t.split_ms,
        compute_ms=t.split_ms["compute_ms"] if t.split_ms else None,
    )


def measuring_stick(
    device: Device, artifact_path: Path, m: Measurement, spec: MeasureSpec | None = None
) -> dict[str, Any] | None:
    """The device's own vendor benchmark of the same artifact file beside loop's rate, where the
    device has one and it is installed here (:meth:`Device.vendor_benchmark`); else None."""
    if m.median_fps is None:
        return None
    options = runtime_options(spec or MeasureSpec())
    return device.vendor_benchmark(artifact_path, m.median_fps, options)


def flags_for(warnings: Sequence[str]) -> list[Flag]:
    flags = [Flag.POWER_LIMITED] if any(POWER_WARNING in w for w in warnings) else []
    return flags + ([Flag(SESSION_LEAKED)] if any(LEAK_WARNING in w for w in warnings) else [])
