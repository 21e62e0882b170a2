"""``loop noise --plot FILE``: a variant's SNR per quantized tensor in graph order, local and
accumulated, as one inline SVG (the report's plot style, :mod:`loop.report.plots`). Artists carry
the ids ``local``, ``accumulated`` and ``floor`` (the 10 dB line Hailo's profiler marks layers under)."""

from __future__ import annotations

import math

from loop.judge.noise import NoiseReport
from loop.report.plots import figure, shown, svg

FLOOR_DB = 10.0
SHOWN_DB = 120.0  # a lossless tensor's SNR (the eps floor: ~300 dB) is drawn here, not off the chart


def noise_svg(report: NoiseReport) -> str:
    rows = report.in_graph_order()
    fig = figure(width=max(6.4, 0.18 * len(rows)), height=4.2)
    ax = fig.add_subplot()
    at = range(len(rows))
    clip = lambda v: v if math.isfinite(v) and v < SHOWN_DB else SHOWN_DB  # noqa: E731
    ax.plot(at, [clip(t.local_snr_db) for t in rows], "o", ms=3, label="local", gid="local")
    ax.plot(at, [clip(t.accumulated_snr_db) for t in rows], "-", lw=1, label="accumulated", gid="accumulated")
    ax.axhline(FLOOR_DB, color="#d62728", lw=0.8, ls=":", gid="floor")
    ax.set_xticks(list(at), [shown(t.layer, 40) for t in rows], rotation=90, fontsize=5)
    ax.set_ylabel("SNR (dB)")
    ax.set_title(shown(f"{report.sweep} / {report.variant}: SNR per quantized tensor, graph order"), fontsize=8)
    ax.legend(fontsize=7)
    return svg(fig, salt=f"noise-{report.sweep}-{report.variant}")
