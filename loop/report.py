"""Plain-text tables for the terminal, from ledger rows in their JSON shape."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _fmt(value: Any, spec: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    try:
        return format(value, spec)
    except (TypeError, ValueError):
        return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def _layer(run: dict[str, Any], name: str | None) -> dict[str, Any]:
    return next((lp for lp in run["layers"] if lp["name"] == name), {})


def perturbed_layer(runs: Sequence[dict[str, Any]]) -> str | None:
    for run in runs:
        for op in run.get("perturb", []):
            if op.get("layer"):
                return op["layer"]
    return runs[0]["layers"][0]["name"] if runs and runs[0]["layers"] else None


def summary_row(run: dict[str, Any], layer: str | None) -> list[str]:
    m, s = run["measure"] or {}, run["scores"] or {}
    differ = f"{s['bytes_differ']:,}/{s['bytes_total']:,}" if s.get("bytes_differ") is not None else "-"
    rate = (m.get("rate_fps") or {}).get("median")
    return [
        run["variant"],
        run["status"] if run["status"] != "ok" else _fmt(run["verdict"]),
        _fmt(run["kernel_sha"])[:12],
        _fmt(_layer(run, layer).get("out_scale"), ".4g"),
        _fmt(run["stages"].get("optimize_s"), ".2f"),
        _fmt(run["stages"].get("compile_s"), ".3f"),
        _fmt(m.get("ttfo_ms"), ".2f"),
        _fmt(rate, ".1f"),
        f"{_fmt(m.get('bytes_in'), ',')}/{_fmt(m.get('bytes_out'), ',')}",
        _fmt(s.get("output_mean"), ".4f"),
        differ,
        _fmt(s.get("snr_db"), ".1f"),
    ]


def sweep_summary(runs: Sequence[dict[str, Any]]) -> str:
    """One row per variant; confounded and failed runs are shown apart, with why."""
    layer = perturbed_layer(runs)
    headers = [
        "variant",
        "verdict",
        "kernel sha",
        f"{layer} out scale",
        "optimize s",
        "compile s",
        "ttfo ms",
        "rate fps",
        "bytes in/out",
        "out mean",
        "bytes differ",
        "SNR dB",
    ]
    from loop.judge.audit import NOT_COMPARABLE

    used = [r for r in runs if r["status"] == "ok" and r["verdict"] not in NOT_COMPARABLE]
    apart = [r for r in runs if r not in used]
    if layer is None:
        headers[3] = "out scale"
    text = table(headers, [summary_row(r, layer) for r in used])
    if apart:
        text += "\n\nRecorded, not used in comparisons:\n" + table(headers, [summary_row(r, layer) for r in apart])
        for r in apart:
            text += "\n" + _why(r)
    notes = [f"  {r['variant']}: {w}" for r in runs for w in r.get("warnings", [])]
    notes += [f"  {r['variant']}: {f}: {NOTED_FLAGS[f]}" for r in runs for f in r["flags"] if f in NOTED_FLAGS]
    notes += [host_busy_line(r) for r in runs if "host-busy" in r["flags"]]
    if notes:
        text += "\n\nWarnings:\n" + "\n".join(notes)
    return text


NOTED_FLAGS = {"calibration-worse": "scored far below the sweep's own calibration method"}


def host_busy_line(run: dict[str, Any]) -> str:
    """One line per host-busy run, with the figure: the rate is of a shared machine."""
    pct = ((run.get("measure") or {}).get("host") or {}).get("others_core_pct")
    return (
        f"  {run['variant']}: flagged host-busy: other processes used {_fmt(pct, '.0f')}% of a core "
        "while it was measured; compare it interleaved (loop compare) before trusting its rate"
    )


def _why(run: dict[str, Any]) -> str:
    if run["status"] != "ok":
        return f"  {run['variant']}: {run['status']} at {run.get('stage') or '?'}: {run.get('error')}"
    if run["verdict"] != "confounded":
        return f"  {run['variant']}: {run['verdict']}: the base it is audited against did not finish"
    lines = [f"  {run['variant']}: confounded; outside the footprint:"]
    lines += [f"    {c['layer']} {c['what']}: {c['detail']}" for c in run["changes"] if not c.get("allowed", True)]
    inside = [c for c in run["changes"] if c.get("allowed", True) and c["what"] in ("out_scale", "in_scale")]
    lines += [f"    (inside: {c['layer']} {c['what']}: {c['detail']})" for c in inside[:2]]
    return "\n".join(lines)


def runs_table(runs: Sequence[dict[str, Any]]) -> str:
    headers = ["id", "sweep", "variant", "status", "verdict", "kernel sha", "rate fps", "flags"]
    rows = [
        [
            str(r["id"]),
            r["sweep"],
            r["variant"],
            r["status"],
            _fmt(r["verdict"]),
            _fmt(r["kernel_sha"])[:12],
            _fmt(((r["measure"] or {}).get("rate_fps") or {}).get("median"), ".1f"),
            ",".join(r["flags"]) or "-",
        ]
        for r in runs
    ]
    return table(headers, rows)


def audit_table(runs: Sequence[dict[str, Any]]) -> str:
    blocks = []
    for r in runs:
        head = f"{r['id']:>4}  {r['sweep']}/{r['variant']}: {r['verdict'] or r['status']}"
        body = [
            f"        {'  ' if c.get('allowed', True) else '! '}{c['layer']} {c['what']}: {c['detail']}"
            for c in r.get("changes", [])
        ]
        blocks.append("\n".join([head, *body]))
    return "\n".join(blocks)


def link_table(runs: Sequence[dict[str, Any]]) -> str:
    """The seed's frame-ladder table: in/out MB, ms/frame, frames/s, MB/s; and the plateau."""
    from loop.measure.ladder import link_plateau, link_rate

    ok = [r for r in runs if r["status"] == "ok"]
    rows = [
        [
            r["variant"],
            f"{r['measure']['bytes_in']:,}",
            f"{r['measure']['bytes_out']:,}",
            f"{1e3 / r['measure']['rate_fps']['median']:.2f}",
            f"{r['measure']['rate_fps']['median']:.1f}",
            f"{link_rate(r):.0f}",
            f"{r['measure']['spread_pct']:.1f}%",
        ]
        for r in ok
    ]
    text = table(["frame", "bytes in", "bytes out", "ms/frame", "frames/s", "MB/s", "spread"], rows)
    plateau = link_plateau(ok)
    if plateau:
        text += f"\nthe link plateaus at {plateau[1]:.0f}-{plateau[2]:.0f} MB/s from {plateau[0]} on"
    else:
        text += "\nno plateau: MB/s is still climbing (or falling) across these frames"
    return text


def depth_table(run: dict[str, Any]) -> str:
    from loop.measure.ladder import depth_knee

    by_depth = run["measure"]["by_depth"]
    rows = [
        [
            str(d["depth"]),
            f"{d['rate_fps']['median']:.1f}",
            f"{d['rate_fps']['min']:.1f}",
            f"{d['rate_fps']['max']:.1f}",
            f"{d['spread_pct']:.1f}%",
        ]
        for d in by_depth
    ]
    text = f"{run['variant']}: rate by queue depth\n" + table(["depth", "median fps", "min", "max", "spread"], rows)
    knee = depth_knee(by_depth)
    return text + (f"\nthe rate stops climbing at depth {knee}" if knee is not None else "")


def device_disagreement(runs: Sequence[dict[str, Any]]) -> str:
    """How far further devices (an emulator, say) disagree with the first on the same inputs."""
    rows = [
        [
            r["variant"],
            name,
            _fmt(d.get("snr_db_vs_first"), ".1f"),
            _fmt(d.get("max_abs_diff"), ".4g"),
            f"{d['values_differ']:,}/{d['values_total']:,}",
        ]
        for r in runs
        for name, d in ((r.get("scores") or {}).get("devices") or {}).items()
    ]
    if not rows:
        return ""
    return "Devices against the first device, same inputs:\n" + table(
        ["variant", "device", "SNR dB", "max |diff|", "values differ"], rows
    )


def ladders(runs: Sequence[dict[str, Any]]) -> str:
    """Ladder tables for a sweep whose variants are rungs (own bases) or measured at many depths."""
    parts = []
    # A link ladder is rungs of different frame sizes; variants that are n/a for another
    # reason (their own compile options) are not one.
    rungs = [r for r in runs if r["verdict"] == "n/a" and r["status"] == "ok"]
    if len({r["measure"].get("bytes_in") for r in rungs}) >= 2:
        parts.append(link_table(rungs))
    parts += [depth_table(r) for r in runs if r["status"] == "ok" and len(r["measure"].get("by_depth", [])) > 1]
    parts.append(device_disagreement(runs))
    return "\n\n".join(p for p in parts if p)
