"""The report's first section: what every run came to, and a study's candidates with the figures
``loop study`` prints (issue 45: a study's rates live in its generations' rounds, not its runs)."""

from __future__ import annotations

import html
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from loop.core.kinds import NOT_COMPARABLE, Flag, Status, Verdict
from loop.core.record import RunRecord
from loop.core.text import CUT, for_person
from loop.report.cells import below, esc, group_cell, interval, num, rows_table
from loop.report.searches import group_names

if TYPE_CHECKING:
    from loop.measure.results import Result
    from loop.report.searches import Candidate, StudyView


def _ttfo_cell(r: RunRecord) -> str:
    """The time to first output with its parts; one word where nothing was timed (score-only, a
    study's rounds), never a dash for each of four figures."""
    m, parts = r.measure, r.measure.ttfo_parts
    if m.ttfo_ms is None:
        return esc(Flag.SCORE_ONLY) if Flag.SCORE_ONLY in r.flags else "-"
    split = " / ".join(num(parts.get(k), ".2f") for k in ("open_ms", "transfer_ms", "first_ms"))
    return f"{num(m.ttfo_ms, '.2f')} <span class='note'>({split})</span>"


def _glance_row(r: RunRecord, name: str) -> list[str]:
    m = r.measure
    return [
        esc(name),
        esc(state(r)),
        _ttfo_cell(r),
        num(m.median_fps, ".1f") + interval(m.rate.ci95 if m.rate else None, ".1f")
        if m.median_fps is not None or Flag.SCORE_ONLY not in r.flags
        else esc(Flag.SCORE_ONLY),
        num(m.rate.frames if m.rate else None, ","),
        f"{num(m.bytes_in, ',')} / {num(m.bytes_out, ',')}",
        num(r.scores.snr_db, ".1f") + interval(r.scores.interval("snr_db"), ".1f") + below(r),
        esc(", ".join(r.flags) or "-"),
    ]


def state(run: RunRecord) -> str:
    """The verdict of a finished run, else its status and the stage it reached where one is known."""
    if run.status == Status.OK:
        return str(run.verdict or "-")
    return str(run.status) + (f" at {run.stage}" if run.stage else "")


GLANCE = [
    "variant",
    "verdict",
    "ttfo ms (open / transfer / first)",
    "rate fps [95% CI]",
    "frames",
    "bytes in / out",
    "SNR dB [95% CI]",
    "flags",
]


def glance(runs: Sequence[RunRecord], studies: Sequence[StudyView] = ()) -> str:
    return "".join(glance_parts(runs, studies))


def glance_parts(runs: Sequence[RunRecord], studies: Sequence[StudyView] = ()) -> Iterator[str]:
    """Each study's candidates (:func:`_study_glance`), then every other run: those used in
    comparisons, then those apart, with why where the table's cells do not say it already."""
    from loop.report.plots import labels

    for study in studies:
        yield from _study_glance(study)
    told = {c.result.run_id for s in studies for c in s.candidates} | {r.id for s in studies for r in s.references}
    runs = [r for r in runs if r.id is None or r.id not in told]
    if not runs:
        return
    if studies:
        yield "<p class='note'>Other runs:</p>"
    names = dict(zip(map(id, runs), labels(runs), strict=True))
    used = [r for r in runs if r.status == Status.OK and r.verdict not in NOT_COMPARABLE]
    apart = [r for r in runs if r.status != Status.OK or r.verdict in NOT_COMPARABLE]
    if used:
        yield from rows_table(GLANCE, (_glance_row(r, names[id(r)]) for r in used))
    if not apart:
        return
    yield "<p class='apart'>Recorded, not used in comparisons (confounded, no reference, failed, interrupted):</p>"
    classes = ["confounded" if r.verdict == Verdict.CONFOUNDED else "apart" for r in apart]
    yield from rows_table(GLANCE, (_glance_row(r, names[id(r)]) for r in apart), classes)
    said = [(r, why) for r in apart for why in _apart_why(r)]
    if said:
        yield "<ul class='note'>" + "".join(f"<li>{esc(r.variant)}: {_words(why)}</li>" for r, why in said) + "</ul>"


def _apart_why(run: RunRecord) -> list[str]:
    """What the table's verdict or status cell does not say of why the run is apart, a line each:
    the changes outside its footprint, its error, why it has no reference; none where the cell
    says it all."""
    outside = [f"{c.layer} {c.what}: {c.detail}" for c in run.changes if not c.allowed]
    if outside:
        return outside[:APART_SHOWN] + (
            [f"and {len(outside) - APART_SHOWN} more"] if len(outside) > APART_SHOWN else []
        )
    said = run.error if run.status != Status.OK else run.why_apart
    return [said] if said and said != state(run) else []


APART_SHOWN, APART_CHARS = 8, 600  # changes listed for a run kept apart, and the characters of each


def _words(text: str) -> str:
    """``text`` escaped, cut where a word ends if it runs past :data:`APART_CHARS` (never mid-word)."""
    shown = for_person(text[: APART_CHARS + 1], None)
    if len(shown) > APART_CHARS:
        head = shown[:APART_CHARS]
        shown = (head[: head.rfind(" ")] if " " in head else head) + CUT
    return html.escape(shown)


STUDY = [
    "asked in",
    "candidate",
    "verdict",
    "rate fps [95% CI]",
    "rate ratio to the reference [95% CI]",
    "ratio from",
    "SNR dB",
    "reused",
    "usable, or why not",
]


def _study_glance(study: StudyView) -> Iterator[str]:
    """A study's candidates, a row each as each generation asked them, with the figures ``loop
    study`` prints: the rate and the ratio to the reference, each with its interval, from the
    rounds of the generation the candidate ran in; a reused one says which."""
    states = ", ".join(f"g{n} {_STATES.get(state, state)}" for n, state in study.states.items()) or "none"
    head = f"<p><b>Study {esc(study.name)}</b> (generations: {esc(states)}): "
    if not study.candidates:
        yield head + "no generation is done, so no candidate has its figures; the runs are below.</p>"
        return
    yield head + (
        f"{len(study.candidates)} candidate(s) asked. Rates and ratios are from each generation's interleaved "
        f"rounds against its reference, as <code>loop study {esc(study.name)}</code> prints them.</p>"
    )
    names = group_names([*(c.result.sweep for c in study.candidates), *(r.sweep for r in study.references)])
    rows = [_study_row(c, names) for c in study.candidates]
    yield from rows_table(STUDY, rows, [_study_class(c.result) for c in study.candidates], "study")
    if study.references:
        refs = ", ".join(f"{group_cell(r.sweep, names)} run {r.id}" for r in study.references)
        yield f"<p class='note'>References (the base compiled with each group's options): {refs}.</p>"


_STATES = {"claimed": "claimed, not done", "abandoned": "abandoned"}


def _study_class(result: Result) -> str:
    return "confounded" if result.verdict == Verdict.CONFOUNDED else "" if result.usable else "apart"


def _study_row(candidate: Candidate, names: Mapping[str, str]) -> list[str]:
    r = candidate.result
    ci, ratio_ci = r.rate_ci95, r.rate_ratio_ci95
    rate = esc(r.why_no_rate) if r.rate_fps is None else num(r.rate_fps, ".1f") + interval(ci, ".1f")
    ratio = "-" if r.rate_ratio is None else num(r.rate_ratio, ".3f") + interval(ratio_ci, ".3f")
    reused = "no" if not r.reused else "yes" if r.generation is None else f"yes, run in g{r.generation}"
    return [
        f"g{candidate.asked_in}",
        f"{group_cell(r.sweep, names)}/{esc(r.variant)} <span class='note'>(run {r.run_id})</span>",
        esc(r.verdict or r.status),
        rate,
        ratio,
        esc(r.ratio_basis if r.rate_ratio is not None else "-"),
        num(r.value("snr_db"), ".1f") + below(r.run),
        reused,
        esc(r.why or "usable"),
    ]
