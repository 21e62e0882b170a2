"""Small statistics for rates: the median's 95% interval and a paired ratio's, no SciPy.

Rates are few (3-10 repeats) and skewed by bursts of host load, so intervals are kept
simple and conservative: Student's t on the repeats, widened for the median's lower
efficiency, and paired ratios taken in logs so that B/A and A/B are symmetric."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

# Two-sided 95% quantiles of Student's t by degrees of freedom; past 30 the normal's.
_T95 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)
# Standard error of a median over that of a mean, for normal data (sqrt(pi/2)).
_MEDIAN_SE = math.sqrt(math.pi / 2)


def t95(df: int) -> float:
    return _T95[df - 1] if df <= len(_T95) else 1.96


def median_ci95(values: Sequence[float]) -> tuple[float, float]:
    """The median's 95% interval; one value gives a zero-width interval, which the callers
    that decide from it treat as too few repeats, never as certainty."""
    med = statistics.median(values)
    if len(values) < 2:
        return med, med
    half = t95(len(values) - 1) * _MEDIAN_SE * statistics.stdev(values) / math.sqrt(len(values))
    return med - half, med + half


def ci_pct(values: Sequence[float]) -> float:
    """The median interval's half-width in percent of the median (inf with one value)."""
    lo, hi = median_ci95(values)
    med = statistics.median(values)
    return math.inf if len(values) < 2 or not med else 100.0 * (hi - lo) / 2 / med


def widened(ratio: tuple[float, float, float], floor_pct: float | None) -> tuple[float, float, float]:
    """A ratio's interval from rounds, widened by an A/A floor (two sessions of one artifact
    differ by that much, whatever the rounds say): independent errors, added in quadrature in
    log space, where the rounds' interval is symmetric about the geometric mean."""
    mid, _, hi = ratio
    if not floor_pct:
        return ratio
    half = math.hypot(math.log(hi / mid), math.log1p(floor_pct / 100.0))
    return mid, mid * math.exp(-half), mid * math.exp(half)


def ratio_ci95(b: Sequence[float], a: Sequence[float]) -> tuple[float, float, float]:
    """Paired by round: the geometric mean of b_i/a_i and its 95% interval."""
    logs = [math.log(y / x) for y, x in zip(b, a, strict=True)]
    mean = statistics.fmean(logs)
    half = t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else math.inf
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)
