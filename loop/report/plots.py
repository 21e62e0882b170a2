"""The report's plots: matplotlib figures (no pyplot, no global state) rendered as inline SVG.

Every artist a reader (or a test) needs to find carries an SVG id (``gid``): ``rungs``,
``plateau``, ``depths``, ``knee``, ``runs``, ``ceiling``, ``best``, ``ttfo-open-0`` (a bar
each), ``devices-0``, ``cell-ROW-COL-STATE`` ... . ``svg`` renders
with text kept as text and ids salted, so a report is the same bytes for the same ledger.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from loop.core.kinds import Verdict
from loop.core.record import RunRecord

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from loop.measure.link import LinkModel

AUDIT_COLUMNS = ("kernel", "bias", "in_scale", "out_scale")


def label(run: RunRecord, runs: Sequence[RunRecord]) -> str:
    """The variant's name, with its sweep where the runs shown span several (generations)."""
    return run.variant if len({r.sweep for r in runs}) <= 1 else f"{run.sweep}/{run.variant}"


INSIDE, OUTSIDE, SAME = "#4c9a6a", "#d62728", "#f2f2f2"


def figure(width: float = 6.4, height: float = 3.6) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def svg(fig: Figure, salt: str = "loop") -> str:
    """The figure as an ``<svg>`` element for inline use (no XML prolog, no external refs).
    Its own ids (clip paths, markers) are hashed from ``salt`` and their content: figures on
    one page take their own salt, so what one figure refers to no other figure defines."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt, "svg.id": None}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return re.sub(r"<metadata>.*?</metadata>", "", text[text.index("<svg") :], flags=re.S)


def link_ladder(rungs: Sequence[RunRecord], model: LinkModel | None) -> Figure:
    """MB/s against frame bytes; the fitted bandwidth as the plateau line, with its value."""
    from loop.measure.ladder import link_rate

    fig = figure()
    ax = fig.add_subplot()
    xs = [(r.measure.bytes_in or 0) + (r.measure.bytes_out or 0) for r in rungs]
    from matplotlib.ticker import LogFormatterSciNotation, LogLocator

    from loop.measure.ladder import link_plateau

    rates = [link_rate(r) for r in rungs]
    ax.plot(xs, rates, "o", gid="rungs", label="measured")
    if model is not None:
        ax.axhline(model.bandwidth_mb_s, color=OUTSIDE, ls="--", gid="plateau")
        flat = link_plateau(rungs)
        seen = f"plateau {flat[1]:.0f}-{flat[2]:.0f} MB/s from {flat[0]}" if flat else "no plateau yet: still climbing"
        ax.annotate(f"fitted {model.bandwidth_mb_s:.0f} MB/s; {seen}", (0.02, 0.92), xycoords="axes fraction")
    ax.set(xscale="log", xlabel="bytes per frame (in + out)", ylabel="MB/s", title="Link ladder")
    # after the scale, which resets them: minor ticks at 2x and 5x only (labels on every one
    # overlapped), labelled where the axis spans two decades or less, so a ladder inside them
    # still reads off more than one label
    ax.xaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
    ax.xaxis.set_minor_formatter(LogFormatterSciNotation(labelOnlyBase=False, minor_thresholds=(2, 2)))
    # from zero, with room above the plateau: autoscaling pads the rungs' own spread (594-616
    # MB/s), which left the top rungs half cut off by the frame
    ax.set_ylim(0, 1.15 * max([*rates, model.bandwidth_mb_s if model else 0.0]))
    return fig


def depth_ladder(run: RunRecord, knee: int | None) -> Figure:
    fig = figure()
    ax = fig.add_subplot()
    by = run.measure.by_depth
    ax.plot([d.depth for d in by], [d.rate.median for d in by], "o-", gid="depths")
    if knee is not None:
        ax.axvline(knee, color=OUTSIDE, ls="--", gid="knee")
        ax.annotate(f"knee at depth {knee}", (0.02, 0.92), xycoords="axes fraction")
    ax.set(xscale="log", xlabel="queue depth", ylabel="frames/s", title=f"Depth ladder: {run.variant}")
    ax.set_xscale("log", base=2)
    return fig


def roofline(runs: Sequence[RunRecord], model: LinkModel) -> Figure:
    """Frames/s against bytes per inference, log-log, under the link's ceiling 1 / busy(bytes)."""
    fig = figure()
    ax = fig.add_subplot()
    pts = [(float((r.measure.bytes_in or 0) + (r.measure.bytes_out or 0)), r.measure.median_fps or 0.0) for r in runs]
    named = [(b, f, r.variant) for r, (b, f) in zip(runs, pts, strict=True) if b > 0 and f > 0]
    lo, hi = min(b for b, _, _ in named) / 4, max(b for b, _, _ in named) * 4
    grid = [lo * (hi / lo) ** (i / 63) for i in range(64)]
    ax.plot(grid, [1 / model.busy_s(b) for b in grid], color=OUTSIDE, gid="ceiling", label=f"{model.name} ceiling")
    ax.plot([b for b, _, _ in named], [f for _, f, _ in named], "o", gid="runs", label="runs (compute here)")
    for (b, f), names in _huddles(named).items():
        ax.annotate(", ".join(names), (b, f), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set(xscale="log", yscale="log", xlabel="bytes per inference", ylabel="frames/s", title="Bus roofline")
    ax.legend(loc="lower left", fontsize=8)
    return fig


def _huddles(points: Sequence[tuple[float, float, str]], near: float = 0.05) -> dict[tuple[float, float], list[str]]:
    """Labels of points within ``near`` decades of each other on both log axes, under the first
    one's: variants of one network share its bytes and nearly its rate, and their labels,
    drawn one on another, were unreadable."""
    huddles: dict[tuple[float, float], list[str]] = {}
    for b, f, name in points:
        at = next((k for k in huddles if max(abs(math.log10(k[0] / b)), abs(math.log10(k[1] / f))) < near), (b, f))
        huddles.setdefault(at, []).append(name)
    return huddles


def ttfo_bars(runs: Sequence[RunRecord]) -> Figure:
    """Time to first output per variant, stacked: open, transfer (where known), first inference."""
    fig = figure(6.4, 0.5 + 0.3 * max(len(runs), 2))
    ax = fig.add_subplot()
    left = [0.0] * len(runs)
    for part, color in (("open_ms", "#9ecae1"), ("transfer_ms", "#fd8d3c"), ("first_ms", "#3182bd")):
        widths = [float((r.measure.data.get("ttfo_parts") or {}).get(part) or 0.0) for r in runs]
        names = [label(r, runs) for r in runs]
        bars = ax.barh(names, widths, left=left, color=color, label=part[:-3])
        for i, bar in enumerate(bars):
            bar.set_gid(f"ttfo-{part[:-3]}-{i}")  # one id a bar: an SVG id is unique
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set(xlabel="ms", title="Time to first output")
    ax.invert_yaxis()
    ax.legend(fontsize=8)
    return fig


@dataclass(frozen=True)
class Cell:
    state: str  # "same", "inside" or "outside"
    magnitude: float | None  # x the rounding bound (bias), the scale ratio, the weight scale ratio
    detail: str


_NUMBER = {
    "bias": r"= ([0-9.]+)x the rounding bound",
    "in_scale": r"\(([0-9.]+)x\)",
    "out_scale": r"\(([0-9.]+)x\)",
    "kernel": r"weight scale x([0-9.]+)",
}


def audit_cells(run: RunRecord) -> dict[tuple[str, str], Cell]:
    """(layer, column) -> cell, from the audit's recorded changes. The magnitude is read back
    from the change's text, where the audit wrote it; a change without one has None."""
    cells: dict[tuple[str, str], Cell] = {}
    for c in run.changes:
        what = "bias" if c.what == "bias-rounding" else c.what
        if what not in AUDIT_COLUMNS:
            what = "kernel"  # a function change or a missing layer is about the layer's weights
        found = re.search(_NUMBER.get(what, "$^"), c.detail)
        state = "inside" if c.allowed else "outside"
        old = cells.get((c.layer, what))
        if old is None or old.state == "inside":
            cells[(c.layer, what)] = Cell(state, float(found.group(1)) if found else None, c.detail)
    return cells


def audit_grid(run: RunRecord, title: str | None = None) -> Figure:
    """Layers x {kernel, bias, in_scale, out_scale}: grey unchanged, green inside the
    footprint, red (hatched) outside, with the magnitude written in the cell."""
    from matplotlib.patches import Rectangle

    layers = [lay.name for lay in run.layers] or sorted({c.layer for c in run.changes})
    cells = audit_cells(run)
    fig = figure(5.2, 0.8 + 0.28 * max(len(layers), 2))
    ax = fig.add_subplot()
    for y, layer in enumerate(layers):
        for x, col in enumerate(AUDIT_COLUMNS):
            cell = cells.get((layer, col), Cell("same", None, ""))
            color = {"same": SAME, "inside": INSIDE, "outside": OUTSIDE}[cell.state]
            ax.add_patch(
                Rectangle(
                    (x, y),
                    0.95,
                    0.9,
                    facecolor=color,
                    edgecolor="#7f0000" if cell.state == "outside" else color,  # the hatch's colour
                    linewidth=0,
                    hatch="//" if cell.state == "outside" else None,
                    gid=f"cell-{y}-{x}-{cell.state}",
                )
            )
            if cell.magnitude is not None:
                ax.text(x + 0.47, y + 0.45, f"{cell.magnitude:.3g}x", ha="center", va="center", fontsize=7)
    ax.set(xlim=(0, len(AUDIT_COLUMNS)), ylim=(len(layers), 0), title=f"{title or run.variant}: {run.verdict}")
    ax.set_xticks([i + 0.47 for i in range(len(AUDIT_COLUMNS))], AUDIT_COLUMNS)
    ax.set_yticks([i + 0.45 for i in range(len(layers))], layers, fontsize=7)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    return fig


def generations(runs: Sequence[RunRecord], score: str) -> Figure:
    """Each candidate's score by generation, the best so far as a step line, confounded ones as x."""
    fig = figure()
    ax = fig.add_subplot()
    _scatter(ax, [r for r in runs if r.verdict != Verdict.CONFOUNDED], score, "o", "candidates")
    _scatter(ax, [r for r in runs if r.verdict == Verdict.CONFOUNDED], score, "x", "confounded")
    best: list[tuple[int, float]] = []
    for g in sorted({r.generation for r in runs if r.generation is not None}):
        here = [
            s
            for r in runs
            if r.generation == g and r.verdict != Verdict.CONFOUNDED
            if (s := _score(r, score)) is not None
        ]
        here += [best[-1][1]] if best else []
        if here:
            best.append((g, max(here)))
    ax.step([g for g, _ in best], [s for _, s in best], where="post", color=INSIDE, gid="best", label="best so far")
    ax.set(xlabel="generation", ylabel=score, title="Generations")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=8)
    return fig


def _score(run: RunRecord, score: str) -> float | None:
    value = run.scores.data.get(score)
    return float(value) if isinstance(value, (int, float)) else None


def _scatter(ax: Axes, runs: Sequence[RunRecord], score: str, marker: str, label: str) -> None:
    pts = [(r.generation, _score(r, score)) for r in runs]
    kept = [(g, s) for g, s in pts if g is not None and s is not None]
    if kept:
        ax.plot([g for g, _ in kept], [s for _, s in kept], marker, ls="none", gid=label, label=label)


def device_bars(runs: Sequence[RunRecord]) -> Figure:
    """Each further device's SNR against the first device's outputs, per variant."""
    fig = figure()
    ax = fig.add_subplot()
    rows = [(r.variant, d.device, d.snr_db_vs_first) for r in runs for d in r.scores.devices]
    labels = [f"{v}\n{d}" for v, d, _ in rows]
    bars = ax.bar(labels, [min(s, 120.0) if s is not None else 0.0 for _, _, s in rows])
    for i, bar in enumerate(bars):
        bar.set_gid(f"devices-{i}")
    ax.set(ylabel="SNR against the first device, dB (capped at 120)", title="Devices side by side")
    ax.tick_params(axis="x", labelsize=7)
    return fig
