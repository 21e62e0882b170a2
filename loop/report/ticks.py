"""Tick labels a person can read, and tooltips, for the report's plots (:mod:`loop.report.plots`).

The report draws with math parsing off, so that a ``$`` in a variant's name is a dollar sign; but
matplotlib's log formatters write their ticks as mathtext, which then printed raw
(``$\\mathdefault{2\\times10^{3}}$``) and, that long, one on another. Here a log axis's ticks
are plain text (``2k``, ``500``, ``0.01``); tick labels that would still overlap are thinned
until none do, and labels beside points are moved off one another; and a text given a tooltip
(:func:`tip`) carries it into the SVG as a ``<title>``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from matplotlib.text import Annotation
from matplotlib.ticker import Formatter, LogFormatter, NullFormatter

from loop.core.text import for_person

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure
    from matplotlib.text import Text
    from matplotlib.transforms import Bbox, BboxBase

PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def plain_number(x: float) -> str:
    """``2000`` -> ``2k``, ``16384`` -> ``16.4k``, ``0.5`` -> ``0.5``: three figures at most."""
    for size, prefix in PREFIXES:
        if abs(x) >= size:
            return f"{x / size:.3g}{prefix}"
    return f"{x:.3g}"


class PlainLog(LogFormatter):
    """A log axis's labels as :func:`plain_number`: which ticks get one is matplotlib's rule
    (decades, and between them as the span allows), only the text is plain."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        return plain_number(x) if super().__call__(x, pos) else ""


class Thinned(Formatter):
    """Every ``step``-th label of ``inner``, the rest blank: labels too dense to print apart."""

    def __init__(self, inner: Formatter, step: int) -> None:
        self.inner, self.step = inner, step

    def set_axis(self, axis: Any) -> None:
        super().set_axis(axis)
        self.inner.set_axis(axis)

    def set_locs(self, locs: Any) -> None:
        self.inner.set_locs(locs)

    def get_offset(self) -> str:
        return self.inner.get_offset()

    def __call__(self, x: float, pos: int | None = None) -> str:
        return self.inner(x, pos) if pos is None or pos % self.step == 0 else ""


def _axes(fig: Figure) -> list[Axis]:
    return [axis for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)]


def plain_log_ticks(fig: Figure) -> None:
    """Every log axis of ``fig`` labelled by :class:`PlainLog`, keeping which ticks its own
    formatters labelled (a formatter set to :class:`PlainLog` already is kept as it is)."""
    for axis in _axes(fig):
        if axis.get_scale() != "log":
            continue
        base = float(getattr(axis.get_transform(), "base", 10.0))
        for minor in (False, True):
            old = axis.get_minor_formatter() if minor else axis.get_major_formatter()
            if isinstance(old, PlainLog | NullFormatter):
                continue
            only_base = old.labelOnlyBase if isinstance(old, LogFormatter) else not minor
            kept = old.minor_thresholds if isinstance(old, LogFormatter) else None
            new = PlainLog(base=base, labelOnlyBase=only_base, minor_thresholds=kept)
            (axis.set_minor_formatter if minor else axis.set_major_formatter)(new)


def labels(axis: Axis) -> list[Text]:
    """The tick labels the axis prints, major and minor, as last drawn."""
    found = [*axis.get_majorticklabels(), *axis.get_minorticklabels()]
    return [t for t in found if t.get_visible() and t.get_text().strip()]


def over(a: Bbox, b: Bbox, slack: float = 0.5) -> bool:
    """Whether two boxes overlap by more than ``slack`` (in their units) both ways."""
    return min(a.x1, b.x1) - max(a.x0, b.x0) > slack and min(a.y1, b.y1) - max(a.y0, b.y0) > slack


def overlapping(boxes: Sequence[Bbox], slack: float = 0.5) -> list[tuple[int, int]]:
    """Pairs of boxes that overlap by more than ``slack`` (in their units) both ways."""
    return [(i, j) for i, a in enumerate(boxes) for j in range(i + 1, len(boxes)) if over(a, boxes[j], slack)]


def crowded(axis: Axis) -> bool:
    """Whether two of the axis's tick labels, as last drawn, print over each other."""
    return bool(overlapping([t.get_window_extent() for t in labels(axis)]))


def unclutter(fig: Figure, tries: int = 8) -> None:
    """Thin each axis whose tick labels overlap: first its minor labels go, then every other
    major one, then three in four..., measured by matplotlib's own text extents (the SVG keeps
    text as text, in the same font) until none overlap."""
    for _ in range(tries):
        fig.draw_without_rendering()
        busy = [axis for axis in _axes(fig) if crowded(axis)]
        if not busy:
            return
        for axis in busy:
            _thin(axis)


def apart(fig: Figure, gap: float = 2.0) -> None:
    """Each label set beside its point (an annotation offset in points) moved to the nearest place
    above (else below) where it prints over no other text of its axes and stays in the figure,
    lowest first: labels of points a few pixels apart were printed one on another."""
    if not any(_beside(ax) for ax in fig.axes):
        return
    fig.draw_without_rendering()
    for ax in fig.axes:
        fixed = [ax.title, ax.xaxis.label, ax.yaxis.label, *labels(ax.xaxis), *labels(ax.yaxis)]
        placed = [t.get_window_extent() for t in [*fixed, *(t for t in ax.texts if t not in _beside(ax))]]
        for text in sorted(_beside(ax), key=lambda t: t.get_window_extent().y0):
            box = text.get_window_extent().padded(gap / 2)
            dy = _free(box, [b for b in placed if min(b.x1, box.x1) > max(b.x0, box.x0)], fig.bbox)
            text.xyann = (text.xyann[0], text.xyann[1] + dy * 72 / fig.dpi)
            placed.append(box.translated(0, dy))


def _beside(ax: Axes) -> list[Annotation]:
    return [t for t in ax.texts if isinstance(t, Annotation) and t.anncoords == "offset points"]


def _free(box: Bbox, taken: Sequence[Bbox], frame: BboxBase) -> float:
    """The least shift up, else down, that puts ``box`` over none of ``taken`` inside ``frame``
    (0 where none does): up first, so labels keep their points' order."""
    edges = {0.0, *(b.y1 - box.y0 for b in taken), *(b.y0 - box.y1 for b in taken)}  # just above, just below each
    shifts = sorted(edges, key=lambda d: (d < 0, abs(d)))
    inside = lambda d: frame.y0 <= box.y0 + d and box.y1 + d <= frame.y1  # noqa: E731
    return next((d for d in shifts if inside(d) and not any(over(box.translated(0, d), b) for b in taken)), 0.0)


def _thin(axis: Axis) -> None:
    if any(t.get_text().strip() for t in axis.get_minorticklabels()):
        axis.set_minor_formatter(NullFormatter())
        return
    major = axis.get_major_formatter()
    step = 2 * major.step if isinstance(major, Thinned) else 2
    axis.set_major_formatter(Thinned(major.inner if isinstance(major, Thinned) else major, step))


TIP = "loop-tip-"
TIPPED = re.compile(rf'<g id="{TIP}([0-9a-f]*)-(\d+)">')
TIP_CHARS = 1000  # of a tooltip's text: the whole of any name worth reading


def tip(text: Text, whole: object, index: int) -> None:
    """Give ``text`` a tooltip of ``whole`` (a stored string, shown through :func:`for_person`
    when the SVG is written); ``index`` tells two texts of one figure apart."""
    text.set_gid(f"{TIP}{str(whole)[: TIP_CHARS + 1].encode().hex()}-{index}")


def tooltips(svg: str, salt: str) -> str:
    """The SVG with each :func:`tip` as a ``<title>`` its text shows on hover, under an id of
    ``salt`` (the figure's own: two figures on a page never share one)."""

    def titled(found: re.Match[str]) -> str:
        words = for_person(bytes.fromhex(found[1]).decode("utf-8", "replace"), TIP_CHARS)
        return f'<g id="{html.escape(salt)}-tip-{found[2]}"><title>{html.escape(words)}</title>'

    return TIPPED.sub(titled, svg)
