"""``loop compare``: do two runs' rates differ beyond run-to-run noise?

They differ only if their [min, max] ranges do not overlap and their medians differ by more
than the larger of the two spreads (both in percent of the median)."""
from __future__ import annotations

from typing import Any

NOISE, FASTER, SLOWER = "noise", "faster", "slower"


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """``a`` and ``b`` are runs in their JSON shape; the verdict is about b relative to a."""
    ra, rb = _rate(a), _rate(b)
    diff_pct = 100.0 * (rb["median"] - ra["median"]) / ra["median"]
    overlap = rb["min"] <= ra["max"] and ra["min"] <= rb["max"]
    bar = max(a["measure"]["spread_pct"], b["measure"]["spread_pct"])
    verdict = NOISE if overlap or abs(diff_pct) <= bar else (FASTER if diff_pct > 0 else SLOWER)
    return {"verdict": verdict, "diff_pct": diff_pct, "ranges_overlap": overlap, "noise_pct": bar,
            "a": _side(a), "b": _side(b)}


def _rate(run: dict[str, Any]) -> dict[str, float]:
    from loop.audit import NOT_COMPARABLE
    from loop.errors import LoopError
    if run.get("verdict") in NOT_COMPARABLE:
        raise LoopError(f"run {run['id']} ({run['variant']}) is {run['verdict']}: kept in the ledger, "
                        "left out of comparisons")
    rate = (run.get("measure") or {}).get("rate_fps")
    if not rate:
        raise LoopError(f"run {run['id']} ({run['variant']}) has no measured rate (status {run['status']})")
    return rate


def _side(run: dict[str, Any]) -> dict[str, Any]:
    m = run["measure"]
    return {"id": run["id"], "variant": run["variant"], "rate_fps": m["rate_fps"], "spread_pct": m["spread_pct"],
            "depth": m.get("depth")}


def describe(result: dict[str, Any]) -> str:
    a, b = result["a"], result["b"]
    line = lambda s: (f"run {s['id']} ({s['variant']}): median {s['rate_fps']['median']:.1f} fps "  # noqa: E731
                      f"[{s['rate_fps']['min']:.1f}, {s['rate_fps']['max']:.1f}], spread {s['spread_pct']:.1f}%")
    return "\n".join([line(a), line(b), f"{result['verdict']}: {result['diff_pct']:+.2f}% "
                      f"(ranges {'overlap' if result['ranges_overlap'] else 'apart'}, noise {result['noise_pct']:.1f}%)"])
