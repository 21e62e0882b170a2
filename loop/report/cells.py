"""The page's cells: stored values as HTML text, figures with their intervals, and tables of them
(:mod:`loop.report.page` and its sections)."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence

from loop.core.kinds import Flag
from loop.core.record import RunRecord
from loop.core.text import LIMIT, for_person


def esc(value: object, limit: int = LIMIT) -> str:
    """A stored value as page text: cut before :func:`for_person` scans it (a 100 MB error
    was copied whole into the page), then HTML-escaped."""
    return html.escape("-" if value is None else for_person(str(value)[: limit + 1], limit))


def num(value: float | None, spec: str) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def rows_table(
    headers: Sequence[str], rows: Iterable[Sequence[str]], classes: Sequence[str] = (), kind: str = ""
) -> Iterator[str]:
    yield (
        (f"<table class='{kind}'><tr>" if kind else "<table><tr>")
        + "".join(f"<th>{esc(h)}</th>" for h in headers)
        + "</tr>"
    )
    for i, row in enumerate(rows):
        cls = classes[i] if i < len(classes) else ""
        yield f"<tr class='{cls}'>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>"
    yield "</table>"


def interval(ci: tuple[float, float] | None, spec: str) -> str:
    return "" if ci is None else f" <span class='note'>[{ci[0]:{spec}}, {ci[1]:{spec}}]</span>"


def group_cell(sweep: str, names: Mapping[str, str]) -> str:
    """A sweep as ``names`` shows it (:func:`~loop.report.searches.group_names`), its own name the tooltip."""
    shown = esc(names.get(sweep, sweep))
    return shown if names.get(sweep, sweep) == sweep else f"<span title='{esc(sweep)}'>{shown}</span>"


def below(run: RunRecord, words: str = " below its reference") -> str:
    """A mark on a run scored far below its reference, whatever its verdict (a clean run may still
    give a wrong answer), with the two SNRs as its tooltip; '' for any other run."""
    if Flag.BELOW_REFERENCE not in run.flags:
        return ""
    snr = run.judged.below_reference or {}
    said = f"SNR {num(snr.get('snr_db'), '.1f')} dB, its reference's {num(snr.get('reference_snr_db'), '.1f')} dB"
    return f" <span class='bad' title='far below its reference: {esc(said)}'>&#9660;{words}</span>"
