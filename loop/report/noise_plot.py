"""The noise analysis as a plot: SNR per quantized tensor in graph order, local and accumulated,
with the layers where the signal is lost marked (the report's plot style, :mod:`loop.report.plots`). A
network's ONNX names share a long prefix (``/model/encoder/layer.0/...``): the ticks drop what all
of them share, the axis label says what was dropped, and each tick's whole name is its tooltip.
Artists carry the ids ``local``, ``accumulated``, ``floor`` (the 10 dB line Hailo's profiler marks
layers under) and ``falls``. ``loop noise --plot FILE`` writes one; ``loop report`` draws one per run
that stored its analysis (a base flagged quantization-ruined), beside the audit."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from loop.judge.noise import NoiseReport
from loop.report.plots import NAME, figure, legend_below, shown, svg

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FLOOR_DB = 10.0
SHOWN_DB = 120.0  # a lossless tensor's SNR (the eps floor: ~300 dB) is drawn here, not off the chart
NAME_CHARS = 1000  # of a layer's name read: its tooltip shows as much
Row = tuple[str, float | None, float | None]  # layer, accumulated, local (None: lossless, as JSON keeps it)


def noise_figure(title: str, rows: Sequence[Row], falls: Sequence[str] = ()) -> Figure:
    fig = figure(width=max(6.4, 0.18 * len(rows)), height=4.6)
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
    # named in the legend: the line Hailo's profiler marks layers under
    ax.axhline(FLOOR_DB, color="#d62728", lw=0.8, ls=":", gid="floor", label=f"{FLOOR_DB:g} dB floor")
    from loop.report.ticks import tip

    names = [r[0][:NAME_CHARS] for r in rows]  # cut before they are compared or copied
    prefix = shared_prefix(names)
    small = 5 if len(rows) > 40 else 7  # a tick 0.18 inch apart holds a 5-point line
    cut = [n[len(prefix) :] if prefix and n.startswith(prefix) else n for n in names]
    ax.set_xticks(list(at), [shown(c or n, 40) for c, n in zip(cut, names, strict=True)], rotation=90, fontsize=small)
    for i, (label, name) in enumerate(zip(ax.get_xticklabels(), names, strict=True)):
        tip(label, name, i)
    ax.set_xlabel(f"quantized tensor, graph order{f' (each name after {shown(prefix)})' if prefix else ''}")
    ax.set_ylabel("SNR (dB)")
    ax.set_title(shown(title, 2 * NAME), fontsize=8)
    legend_below(fig, 7)
    return fig


def shared_prefix(names: Sequence[str]) -> str:
    """What every name of a path (an exporter's ``/block/layer/op``) starts with, up to and with its
    last ``/``: ``/features/features.1/Conv`` and ``features.12/...`` keep their blocks whole. A name
    of no path (the graph's input, ``x``) has no part in it and is shown whole. Nothing for fewer
    than two names of a path."""
    names = [n for n in names if "/" in n]
    if len(names) < 2:
        return ""
    low, high = min(names), max(names)  # what these two share, every name between them shares
    common = low[: next((i for i, (a, b) in enumerate(zip(low, high, strict=False)) if a != b), len(low))]
    return common[: common.rfind("/") + 1]


def noise_svg(report: NoiseReport) -> str:
    rows = [(r[0], r[1], r[2]) for r in report.series()]
    title = f"{report.sweep} / {report.variant}: SNR per quantized tensor, graph order"
    fig = noise_figure(title, rows, [f.layer for f in report.falls])
    return svg(fig, salt=f"noise-{report.sweep}-{report.variant}")
