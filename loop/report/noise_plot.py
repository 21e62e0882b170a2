"""The noise analysis as a plot: SNR per quantized tensor in graph order, local and accumulated,
with the layers where the signal is lost marked (the report's plot style, :mod:`loop.report.plots`).
Artists carry the ids ``local``, ``accumulated``, ``floor`` (the 10 dB line Hailo's profiler marks
layers under) and ``falls``. ``loop noise --plot FILE`` writes one; ``loop report`` draws one per run
that stored its analysis (a base flagged quantization-ruined), beside the audit."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from loop.judge.noise import NoiseReport
from loop.report.plots import figure, shown, svg

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FLOOR_DB = 10.0
SHOWN_DB = 120.0  # a lossless tensor's SNR (the eps floor: ~300 dB) is drawn here, not off the chart
Row = tuple[str, float | None, float | None]  # layer, accumulated, local (None: lossless, as JSON keeps it)


def noise_figure(title: str, rows: Sequence[Row], falls: Sequence[str] = ()) -> Figure:
    fig = figure(width=max(6.4, 0.18 * len(rows)), height=4.2)
    ax = fig.add_subplot()
    at = range(len(rows))
    clip = lambda v: SHOWN_DB if v is None or not math.isfinite(v) or v >= SHOWN_DB else v  # noqa: E731
    ax.plot(at, [clip(r[2]) for r in rows], "o", ms=3, label="local", gid="local")
    ax.plot(at, [clip(r[1]) for r in rows], "-", lw=1, label="accumulated", gid="accumulated")
    marked = [i for i, r in enumerate(rows) if r[0] in set(falls)]
    if marked:
        ax.plot(
            marked, [clip(rows[i][1]) for i in marked], "v", ms=6, color="#d62728", label="signal lost", gid="falls"
        )
    ax.axhline(FLOOR_DB, color="#d62728", lw=0.8, ls=":", gid="floor")
    ax.set_xticks(list(at), [shown(r[0], 40) for r in rows], rotation=90, fontsize=5)
    ax.set_ylabel("SNR (dB)")
    ax.set_title(shown(title), fontsize=8)
    ax.legend(fontsize=7)
    return fig


def noise_svg(report: NoiseReport) -> str:
    rows = [(r[0], r[1], r[2]) for r in report.series()]
    title = f"{report.sweep} / {report.variant}: SNR per quantized tensor, graph order"
    fig = noise_figure(title, rows, [f.layer for f in report.falls])
    return svg(fig, salt=f"noise-{report.sweep}-{report.variant}")
