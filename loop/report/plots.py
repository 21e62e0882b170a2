"""The report's plots: matplotlib figures (no pyplot, no global state) rendered as inline SVG.

Every artist a reader (or a test) needs to find carries an SVG id (``gid``): ``rungs``,
``plateau``, ``depths``, ``knee``, ``runs``, ``ceiling``, ``best``, ``ttfo-open-0`` (a bar
each), ``devices-0``, ``usable``, ``apart``, ``front``,
``usable-ratio-ci`` ... . ``svg`` renders with text kept as text and ids salted, so a report is
the same bytes for the same ledger.

Every name shown is a stored string (a variant, a sweep, an ONNX node, a link) and passes
:func:`~loop.core.text.for_person`; every text is drawn with math parsing off, so a ``$`` in
a name is a dollar sign, never mathtext that fails to parse and ends the report. Numbers are
plain text too: a log axis's ticks read ``2k``, never matplotlib's mathtext, which math parsing
off printed raw (``$\\mathdefault{2\\times10^{3}}$``); and tick labels that would print over one
another are thinned before the SVG is written (:mod:`loop.report.ticks`).
"""

from __future__ import annotations

import io
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loop.core.kinds import Verdict
from loop.core.record import RunRecord
from loop.core.text import for_person

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from loop.measure.link import LinkModel
    from loop.measure.results import Result

# Each kind of change the audit records, its mark in the audit grid, and the mark's legend
# (loop.report.page prints it): one table, so a kind never shows under another's letter.
MARKS = {
    "kernel": ("K", "kernel"),
    "kernel-rounding": ("k", "kernel re-rounded on a moved grid"),
    "kernel-scale": ("S", "kernel's scale alone (its integers the base's)"),
    "kernel-bits": ("W", "kernel at another width (4-bit weights), the float kernel rounded"),
    "bias": ("B", "bias (or its rounding)"),
    "bias-scale": ("s", "bias's scale alone (its integers the base's)"),
    "in_scale": ("I", "input scale"),
    "out_scale": ("O", "output scale"),
    "function": ("F", "function: values a removed clamp clipped now pass"),
    "other": ("?", "another change (its tooltip says which)"),
}
AUDIT_COLUMNS = tuple(MARKS)
NAME = 60  # characters of a name on a plot: an axis of 200-character names has no room left
# rcParams the report draws under: "$" is text (a name with "$\\frac{a$" ended the report
# with a ParseSyntaxException), and text stays text in the SVG
RC: dict[Any, Any] = {
    "text.parse_math": False,
    "axes.formatter.use_mathtext": False,
    "svg.fonttype": "none",
    "svg.id": None,
}


def shown(text: object, limit: int = NAME) -> str:
    """A stored string as a plot shows it: :func:`for_person`, cut first, so a 100 MB string
    is never scanned or copied whole."""
    return for_person(str(text)[: limit + 1], limit)


def labels(runs: Sequence[RunRecord]) -> list[str]:
    """Each run's variant name, with its sweep where the runs shown span several (a study's group as
    :func:`~loop.report.searches.group_names` names it: ``range g1/c0``)."""
    from loop.report.searches import group_names

    names = group_names(r.sweep for r in runs)
    return [shown(f"{names[r.sweep]}/{r.variant}" if len(names) > 1 else r.variant) for r in runs]


INSIDE, OUTSIDE = "#4c9a6a", "#d62728"


def figure(width: float = 6.4, height: float = 3.6) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def svg(fig: Figure, salt: str = "loop") -> str:
    """The figure as an ``<svg>`` element for inline use (no XML prolog, no external refs).
    Its own ids (clip paths, markers) are hashed from ``salt`` and their content: figures on
    one page take their own salt, so what one figure refers to no other figure defines."""
    import matplotlib
    from matplotlib.text import Text

    from loop.report.ticks import apart, plain_log_ticks, tooltips, unclutter

    for made in fig.findobj(Text):  # made before the rc below: titles, labels, legends, annotations
        made.set_parse_math(False)
    buf = io.StringIO()
    with matplotlib.rc_context({**RC, "svg.hashsalt": salt}):  # ticks made while drawing
        plain_log_ticks(fig)
        unclutter(fig)
        apart(fig)
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return tooltips(re.sub(r"<metadata>.*?</metadata>", "", text[text.index("<svg") :], flags=re.S), salt)


def legend_below(fig: Figure, size: float = 8) -> None:
    """The figure's legend in a row under its axes: inside them, even at matplotlib's "best"
    place, it covered bars (time to first output) and the front's points (searches)."""
    handles, names = fig.axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncols=min(len(names), 3), fontsize=size)


def link_ladder(rungs: Sequence[RunRecord], model: LinkModel | None) -> Figure:
    """MB/s against frame bytes; the fitted bandwidth as the plateau line, with its value."""
    from loop.measure.ladder import link_rate

    fig = figure()
    ax = fig.add_subplot()
    xs = [(r.measure.bytes_in or 0) + (r.measure.bytes_out or 0) for r in rungs]
    from matplotlib.ticker import LogLocator

    from loop.measure.ladder import link_plateau
    from loop.report.ticks import PlainLog

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
    ax.xaxis.set_minor_formatter(PlainLog(labelOnlyBase=False, minor_thresholds=(2, 2)))
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
    ax.set(xscale="log", xlabel="queue depth", ylabel="frames/s", title=f"Depth ladder: {shown(run.variant)}")
    ax.set_xscale("log", base=2)
    return fig


def roofline(runs: Sequence[RunRecord], model: LinkModel, raced: Mapping[int | None, float] | None = None) -> Figure:
    """Frames/s against bytes per inference, log-log, under the link's ceiling 1 / busy(bytes); a
    run's rate is its own measure's, or the one its study's rounds timed (``raced``, by run id)."""
    fig = figure(6.4, 4.0)  # and the legend below
    ax = fig.add_subplot()
    raced = raced or {}
    rounds = [bool(raced.get(r.id)) for r in runs]  # a rounds' rate, not the protocol's median: its own mark
    rates = [raced.get(r.id) or r.measure.median_fps or 0.0 for r in runs]
    sizes = [float((r.measure.bytes_in or 0) + (r.measure.bytes_out or 0)) for r in runs]
    pts = list(zip(sizes, rates, labels(runs), rounds, strict=True))
    named = [(b, f, name) for b, f, name, _ in pts if b > 0 and f > 0]
    lo, hi = min(b for b, _, _ in named) / 4, max(b for b, _, _ in named) * 4
    grid = [lo * (hi / lo) ** (i / 63) for i in range(64)]
    ceiling = f"{shown(model.name)} ceiling"
    ax.plot(grid, [1 / model.busy_s(b) for b in grid], color=OUTSIDE, gid="ceiling", label=ceiling)
    for mark, gid, label, keep in (
        ("o", "runs", "runs (compute here)", False),
        ("D", "raced", "raced in rounds", True),
    ):
        at = [(b, f) for b, f, _, rounds in pts if b > 0 and f > 0 and rounds is keep]
        if at:
            ax.plot(*zip(*at, strict=True), mark, gid=gid, label=label, fillstyle="none" if keep else "full")
    for (b, f), names in _huddles(named).items():
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        # out of the layout: a long label past the frame collapsed the axes to nothing; a line back
        # to its point where it is moved off another label (loop.report.ticks.apart)
        ax.annotate(shown(", ".join(names[:3]) + more, 2 * NAME), (b, f), fontsize=7, xytext=(3, 3),
                    textcoords="offset points", annotation_clip=False, in_layout=False,
                    arrowprops={"arrowstyle": "-", "color": "#999999", "lw": 0.5, "relpos": (0, 0)})  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel="bytes per inference", ylabel="frames/s", title="Bus roofline")
    legend_below(fig)
    return fig


def _huddles(points: Sequence[tuple[float, float, str]], near: float = 0.05) -> dict[tuple[float, float], list[str]]:
    """Labels of points within ``near`` decades of each other on both log axes, under the first
    one's: variants of one network share its bytes and nearly its rate, so their labels are one."""
    huddles: dict[tuple[float, float], list[str]] = {}
    for b, f, name in points:
        at = next((k for k in huddles if max(abs(math.log10(k[0] / b)), abs(math.log10(k[1] / f))) < near), (b, f))
        huddles.setdefault(at, []).append(name)
    return huddles


TTFO_PARTS = (("open_ms", "#9ecae1"), ("transfer_ms", "#fd8d3c"), ("first_ms", "#3182bd"))
TTFO_BARS = 40  # a bar a variant up to this many; past it, a bar a sweep: 2,000 bars took a third of a report


def ttfo_bars(runs: Sequence[RunRecord]) -> Figure:
    """Time to first output per variant, stacked: open, transfer (where known), first inference;
    past TTFO_BARS variants, each sweep's median of each part."""
    rows = _ttfo_rows(runs)
    fig = figure(6.4, 1.0 + 0.3 * max(len(rows), 2))  # the legend below takes half an inch
    ax = fig.add_subplot()
    left, ys = [0.0] * len(rows), list(range(len(rows)))
    for k, (part, color) in enumerate(TTFO_PARTS):
        widths = [parts[k] for _, parts in rows]
        # a part no run timed (HailoRT's transfer where the device does not say) is left out of the legend
        label = part[:-3] if any(widths) else f"_{part[:-3]}"
        bars = ax.barh(ys, widths, left=left, color=color, label=label)
        for i, bar in enumerate(bars):
            bar.set_gid(f"ttfo-{part[:-3]}-{i}")  # one id a bar: an SVG id is unique
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_yticks(ys, [name for name, _ in rows])  # by position: two runs of one name stay two bars
    many = len(runs) > TTFO_BARS
    ax.set(xlabel="ms", title="Time to first output" + (" (each sweep's medians)" if many else ""))
    ax.invert_yaxis()
    legend_below(fig)
    return fig


def _ttfo_rows(runs: Sequence[RunRecord]) -> list[tuple[str, tuple[float, ...]]]:
    parts = [tuple(float(r.measure.ttfo_parts.get(p) or 0.0) for p, _ in TTFO_PARTS) for r in runs]
    if len(runs) <= TTFO_BARS:
        return list(zip(labels(runs), parts, strict=True))
    by_sweep: dict[str, list[tuple[float, ...]]] = {}
    for run, found in zip(runs, parts, strict=True):
        by_sweep.setdefault(run.sweep, []).append(found)
    return [
        (shown(f"{sweep}: {len(found)} runs"), tuple(statistics.median(col) for col in zip(*found, strict=True)))
        for sweep, found in by_sweep.items()
    ]


@dataclass(frozen=True)
class Cell:  # one cell of the audit grid (drawn as HTML by loop.report.page: no figure to lay out)
    state: str  # "same", "inside" or "outside"
    magnitude: float | None  # x the rounding bound (bias), the scale ratio, the weight scale ratio
    detail: str


_NUMBER = {
    "bias": r"= ([0-9.]+)x the rounding bound",
    "in_scale": r"\(([0-9.]+)x\)",
    "out_scale": r"\(([0-9.]+)x\)",
    "kernel": r"weight scale x([0-9.]+)",
    "kernel-rounding": r"weight scale x([0-9.]+)",
    "kernel-scale": r"weight scale x([0-9.]+)",
}


def audit_cells(run: RunRecord) -> dict[tuple[str, str], Cell]:
    """(layer, column) -> cell, from the audit's recorded changes. The magnitude is read back
    from the change's text, where the audit wrote it; a change without one has None."""
    cells: dict[tuple[str, str], Cell] = {}
    for c in run.changes:
        what = "bias" if c.what == "bias-rounding" else c.what
        if what not in AUDIT_COLUMNS:
            what = "other"  # a kind a newer audit records: shown as such, never as another's mark
        found = re.search(_NUMBER.get(what, "$^"), c.detail)
        state = "inside" if c.allowed else "outside"
        old = cells.get((c.layer, what))
        if old is None or old.state == "inside":
            cells[(c.layer, what)] = Cell(state, float(found.group(1)) if found else None, c.detail)
    return cells


LETTERS = {what: mark for what, (mark, _) in MARKS.items()}


def legend() -> str:
    """The marks of the audit grid in words: ``K kernel, k kernel re-rounded ..., ...``."""
    return ", ".join(f"{mark} {words}" for mark, words in MARKS.values())


def layer_cells(run: RunRecord) -> dict[str, Cell]:
    """Layer -> one cell: what changed there as marks (:data:`MARKS`) with the largest
    magnitude, outside the footprint if any part was."""
    parts: dict[str, list[tuple[str, Cell]]] = {}
    for (layer, what), cell in audit_cells(run).items():
        parts.setdefault(layer, []).append((what, cell))
    out: dict[str, Cell] = {}
    for layer, found in parts.items():
        state = "outside" if any(c.state == "outside" for _, c in found) else "inside"
        sizes = [c.magnitude for _, c in found if c.magnitude is not None]
        letters = "".join(LETTERS[w] for w in AUDIT_COLUMNS if any(w == what for what, _ in found))
        out[layer] = Cell(state, max(sizes, default=None), letters + (f" {max(sizes):.3g}x" if sizes else ""))
    return out


def layer_order(runs: Sequence[RunRecord]) -> list[str]:
    """The layers in graph order as fingerprinted, then any only a change names."""
    seen = dict.fromkeys(lay.name for r in runs for lay in r.layers)
    return [*seen, *sorted({c.layer for r in runs for c in r.changes} - seen.keys())]


def pareto(results: Sequence[Result], front: Sequence[Result], title: str) -> Figure:
    """SNR against rate ratio to the reference: usable candidates as dots, those kept apart
    (confounded, host-busy) as x and never on the front, each with its intervals as error bars
    where known (the ratio's widened by the A/A floor); the front ringed and joined (named in the
    page's table beside it: names on the points covered one another)."""
    fig = figure(6.4, 4.8)  # and the legend below
    ax = fig.add_subplot()
    _pareto_points(ax, [r for r in results if r.usable], "o", "usable", "usable")
    _pareto_points(ax, [r for r in results if not r.usable], "x", "apart", "apart: confounded, host busy")
    ring = sorted(((float(r.value("rate_ratio") or 0.0), float(r.value("snr_db") or 0.0), r) for r in front),
                  key=lambda p: p[:2])  # fmt: skip
    if ring:
        xs, ys = [x for x, _, _ in ring], [y for _, y, _ in ring]
        ax.plot(xs, ys, "o-", mfc="none", ms=11, color=INSIDE, gid="front", label="front (ties within noise kept)")
    ax.axvline(1.0, color="#999999", linewidth=0.8, linestyle=":")
    ax.set(xlabel="rate ratio to the reference (>1: faster)", ylabel="SNR dB", title=shown(title, 2 * NAME))
    legend_below(fig)
    return fig


def _pareto_points(ax: Axes, results: Sequence[Result], marker: str, gid: str, name: str) -> None:
    """The results as ``marker``s under id ``gid``, with their intervals as bars where known
    (ids ``GID-ratio-ci`` and ``GID-snr-ci``)."""
    if not results:
        return
    color = INSIDE if gid == "usable" else OUTSIDE
    xs, ys = [float(r.value("rate_ratio") or 0.0) for r in results], [float(r.value("snr_db") or 0.0) for r in results]
    ax.plot(xs, ys, marker, ls="none", color=color, gid=gid, label=name)
    for key, part in (("rate_ratio", "ratio"), ("snr_db", "snr")):
        known = [(x, y, r.interval(key)) for x, y, r in zip(xs, ys, results, strict=True) if _spread(r, key)]
        if not known:
            continue
        at = [x if key == "rate_ratio" else y for x, y, _ in known]
        err = [[m - lo for m, (_, _, (lo, _)) in zip(at, known, strict=True)],
               [hi - m for m, (_, _, (_, hi)) in zip(at, known, strict=True)]]  # fmt: skip
        x, y = [x for x, _, _ in known], [y for _, y, _ in known]
        ratio = key == "rate_ratio"
        bars = ax.errorbar(
            x, y, xerr=err if ratio else None, yerr=None if ratio else err, fmt="none", ecolor=color, elinewidth=0.8
        )
        for lines in bars.lines[2]:
            lines.set_gid(f"{gid}-{part}-ci")


def _spread(result: Result, key: str) -> bool:
    """Whether the value has an interval of its own (a score without one is a point)."""
    lo, hi = result.interval(key)
    return math.isfinite(lo) and math.isfinite(hi) and hi > lo


SCORE_AXES = {"snr_db": "SNR dB", "cosine": "cosine similarity", "output_mean": "output mean"}  # as the tables say


def generations(runs: Sequence[RunRecord], score: str, search: str | None = None) -> Figure:
    """Each candidate's score by generation, the best so far as a step line, confounded ones as x;
    ``search``: the one search these runs are the generations of, named in the title."""
    fig = figure(6.4, 4.0)  # and the legend below
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
    title = f"Generations of {shown(search)}: {shown(score)}" if search else f"Generations: {shown(score)}"
    ax.set(xlabel="generation", ylabel=SCORE_AXES.get(score, shown(score)), title=title)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    legend_below(fig)
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
    rows = [(shown(r.variant), shown(d.device), d.snr_db_vs_first) for r in runs for d in r.scores.devices]
    labels = [f"{v}\n{d}" for v, d, _ in rows]
    bars = ax.bar(labels, [min(s, 120.0) if s is not None else 0.0 for _, _, s in rows])
    for i, bar in enumerate(bars):
        bar.set_gid(f"devices-{i}")
    ax.set(ylabel="SNR against the first device, dB (capped at 120)", title="Devices side by side")
    ax.tick_params(axis="x", labelsize=7)
    return fig
