"""The audit as HTML grids: a row per candidate, a column per layer (:mod:`loop.report.page`'s
second section)."""

from __future__ import annotations

import html
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from loop.core.record import RunRecord
from loop.core.text import LIMIT, for_person
from loop.report.cells import below, esc

if TYPE_CHECKING:
    from loop.report.plots import Cell


def audit_grid(runs: Sequence[RunRecord], title: str) -> Iterator[str]:
    """One generation's audit as an HTML grid: a row per candidate, a column per layer, each
    cell what changed there (:func:`~loop.report.plots.layer_cells`). A table, not a figure:
    one figure per variant made a report of 500 variants 25 s and 4.4 MB, and even one figure
    per generation spent most of a 2,000-run report laying out its labels. A grid wider than the
    page is wrapped, not scrolled: its layers go on in another block under the same rows, so a
    screenshot or a printout holds every column."""
    from loop.report.plots import layer_cells, layer_order

    columns = layer_order(runs)
    cells = [layer_cells(run) for run in runs]
    heads = [f"{esc(run.variant, 60)}: {esc(run.verdict)}" for run in runs]
    wrap, blocks = _blocks(columns, cells, heads)
    # names stand upright, wrapped, where they fit so; on end, a short grid is a tall empty box
    th = f"<th class='layer upright' style='max-width:{wrap}px'>" if wrap else "<th class='layer'>"
    for start, stop in blocks:
        part = f" (layers {start + 1}-{stop} of {len(columns)})" if len(blocks) > 1 else ""
        head = "".join(f"{th}{esc(c, 60).replace('/', '/<wbr>')}</th>" for c in columns[start:stop])
        yield f"<div class='grid'><table class='audit'><caption>{title}{esc(part)}</caption><tr><th></th>{head}</tr>"
        for y, run in enumerate(runs):
            why = _changes_by_layer(run)
            row = "".join(
                "<td></td>"
                if (c := cells[y].get(layer)) is None
                else f"<td class='{c.state}' data-cell='{y}-{x}-{c.state}' "
                f"title='{_decoded(c.detail)}{why[layer]}'>{esc(c.detail)}</td>"
                for x, layer in enumerate(columns[start:stop], start)
            )
            yield f"<tr><th>{heads[y]}{below(run, '')}</th>{row}</tr>"
        yield "</table></div>"


PAGE_PX = 1060  # the body's width (max-width in loop.report.page.STYLE), less a margin
CHAR_PX, CELL_PX = 7, 30  # a character of a cell or row head; the narrowest column (2.6em of 11px, padded)
WRAP_PX = 70, 160  # the narrowest and widest a layer's name is wrapped to, standing upright


def _blocks(
    columns: Sequence[str], cells: Sequence[Mapping[str, Cell]], heads: Sequence[str]
) -> tuple[int, list[tuple[int, int]]]:
    """How wide the layers' names wrap standing upright (0: they stand on end) and the grid's
    columns cut into runs ``[start, stop)`` that each fit the page beside the row heads, by the
    widest text in each column (an estimate; the rendered test measures the page)."""
    room = max(PAGE_PX - CHAR_PX * max((len(html.unescape(h)) for h in heads), default=0) - 16, 4 * CELL_PX)
    widths = [
        max(CELL_PX, 12 + CHAR_PX * max((len(c[col].detail) for c in cells if col in c), default=0)) for col in columns
    ]
    wrap = max(WRAP_PX[0], min(WRAP_PX[1], room // max(len(columns), 1)))
    if sum(max(w, min(12 + CHAR_PX * min(len(c), 60), wrap)) for w, c in zip(widths, columns, strict=True)) <= room:
        return wrap, [(0, len(columns))]
    blocks, start, used = [], 0, 0
    for i, width in enumerate(widths):
        if i > start and used + width > room:
            blocks.append((start, i))
            start, used = i, 0
        used += width
    return 0, [*blocks, (start, len(columns))]


def _decoded(detail: str) -> str:
    """A cell's marks in words, first in its tooltip (``S kernel's scale alone; B bias: ``): the
    letters are read where they are shown, not only in the paragraph above the grid."""
    from loop.report.plots import MARKS

    marks = set(detail.split(" ", 1)[0])
    said = "; ".join(f"{mark} {words}" for mark, words in MARKS.values() if mark in marks)
    return esc(said, 4 * LIMIT) + " | " if said else ""


def _changes_by_layer(run: RunRecord) -> dict[str, str]:
    """Each layer's changes in words, for its cell's tooltip: every detail cut, then the whole."""
    found: dict[str, list[str]] = {}
    for c in run.changes:
        found.setdefault(c.layer, []).append(f"{c.what}: {for_person(c.detail[: LIMIT + 1])}")
    return {layer: esc("; ".join(parts), 4 * LIMIT) for layer, parts in found.items()}
