"""The report's view of searches: a study's candidates read back from the ledger as
:class:`~loop.measure.results.Result` views (each with its rate ratio to its generation's reference, from
the generation's race where one ran). Their front is :func:`loop.measure.results.pareto`, the rule
``Study.pareto`` answers with. :func:`studies_of` reads each study as ``loop study`` does, from its
own tables: every candidate each generation asked, answered by a run of its own or reused."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from loop.core.errors import LoopError
from loop.core.kinds import Verdict
from loop.core.record import RunRecord

if TYPE_CHECKING:
    from loop.measure.results import Result
    from loop.store.ledger import Ledger
    from loop.store.studies import RatioRow

STUDY = re.compile(r"^(?P<study>.+)-g(?P<generation>\d+)(?:-o(?P<options>[0-9a-f]+))?$")


def study_of(sweep: str) -> str:
    """The study a generation's sweep belongs to (``NAME-gN``, ``NAME-gN-o<hash>``): ``NAME``."""
    found = STUDY.match(sweep)
    return found["study"] if found else sweep


def group_names(sweeps: Iterable[str]) -> dict[str, str]:
    """Each sweep as a page names it: a study's generation ``NAME-gN`` as ``NAME gN``, and its group
    of candidates with compile options of their own (``NAME-gN-o<hash>``) too, unless another takes
    that name: then with its hash (``NAME gN, options <hash>``). Two alike but for that keep their own."""
    found = {s: STUDY.match(s) for s in set(sweeps)}
    short = {s: f"{m['study']} g{m['generation']}" if m else s for s, m in found.items()}
    taken, plain = Counter(short.values()), Counter(short[s] for s, m in found.items() if not (m and m["options"]))
    return {
        s: short[s] if taken[short[s]] == 1 else f"{short[s]}, options {m['options']}" if m and m["options"]
        else short[s] if plain[short[s]] == 1 else s
        for s, m in found.items()
    }  # fmt: skip


def raced(runs_dir: Path, sweep: str, run_ids: Sequence[int]) -> dict[int, RatioRow]:
    """Each raced run's ratio to its reference, by run id: from the ledger's ratios
    (:mod:`loop.store.studies`), or for a study of the old layout never opened since, from
    ``studies/SWEEP.race.json`` (:func:`loop.store.races.read_race`); {} where there is neither."""
    from loop.store.ledger import LEDGER_FILE, Ledger
    from loop.store.races import as_rows, read_race
    from loop.store.studies import ratios

    if (runs_dir / LEDGER_FILE).exists():
        with Ledger.of_runs(runs_dir, readonly=True) as ledger:
            found = ratios(ledger, run_ids)
        if found:
            return found
    return as_rows(read_race(runs_dir / "studies" / f"{sweep}.race.json"))


def search_results(runs: Sequence[RunRecord], runs_dir: Path) -> tuple[dict[str, list[Result]], list[str]]:
    """Each study's candidates as results (rate ratio to their generation's reference, from its
    race where one ran), by study name, and a line for each race file that could not be used."""
    from loop.measure.results import result_of, with_race

    by_sweep: dict[str, list[RunRecord]] = {}
    for r in runs:
        if r.generation is not None:
            by_sweep.setdefault(r.sweep, []).append(r)
    studies: dict[str, list[Result]] = {}
    notes: list[str] = []
    for sweep, members in by_sweep.items():
        ref = next((r for r in members if r.variant == "base"), None)
        try:
            race = raced(runs_dir, sweep, [r.id or 0 for r in members])
        except LoopError as exc:
            race = {}
            notes.append(str(exc))
        mine = [r for r in members if r is not ref and r.verdict != Verdict.REFERENCE]
        studies.setdefault(study_of(sweep), []).extend(
            with_race(result_of(i, r, ref), race) for i, r in enumerate(mine)
        )
    return studies, notes


@dataclass(frozen=True)
class Candidate:
    """A candidate as generation ``asked_in`` asked it, and the result that answers it: its rate
    and ratio from the rounds of the generation it ran in (``result.generation``; an earlier one
    where ``result.reused``), the figures ``loop study`` prints."""

    asked_in: int
    result: Result


@dataclass(frozen=True)
class StudyView:
    """A study as its tables hold it: its candidates in generation order, each group's reference
    (the base compiled with the group's options), and each generation's state."""

    name: str
    candidates: list[Candidate]
    references: list[RunRecord]
    states: dict[int, str]


def studies_of(runs: Sequence[RunRecord], runs_dir: Path) -> list[StudyView]:
    """The studies ``runs`` hold generations of, read from the ledger (read-only); a study of the
    old file layout, never opened since, is not in it and shows as its runs."""
    from loop.store.ledger import LEDGER_FILE, Ledger
    from loop.store.studies import study_names

    wanted = {study_of(r.sweep) for r in runs if r.generation is not None}
    if not wanted or not (runs_dir / LEDGER_FILE).exists():
        return []
    known = {r.id: r for r in runs if r.id is not None}
    with Ledger.of_runs(runs_dir, readonly=True) as ledger:
        return [_view(ledger, name, known) for name in study_names(ledger) if name in wanted]


def _view(ledger: Ledger, name: str, known: Mapping[int, RunRecord]) -> StudyView:
    """As ``Study.results`` builds its results (:func:`~loop.measure.results.result_of` over the
    run and its reference, with the generation's race), each candidate of each done generation."""
    from loop.measure.results import result_of, with_race
    from loop.store.studies import StudyStore, ratios

    store = StudyStore(ledger, name)
    answered = store.answered()
    raced = ratios(ledger, [a.run_id for a in answered])
    record: Callable[[int], RunRecord] = lambda i: known.get(i) or ledger.record(i)  # noqa: E731
    refs = {a.ref_run_id: record(a.ref_run_id) for a in answered if a.ref_run_id is not None}
    found = [
        Candidate(
            a.generation,
            with_race(result_of(i, record(a.run_id), refs.get(a.ref_run_id or -1), a.reused_from is not None), raced),
        )
        for i, a in enumerate(answered)
    ]
    return StudyView(name, found, list(refs.values()), store.states())


__all__ = ["Candidate", "StudyView", "group_names", "raced", "search_results", "studies_of", "study_of"]
