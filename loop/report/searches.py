"""The report's view of searches: a study's candidates read back from the ledger as
:class:`~loop.measure.results.Result` views (each with its rate ratio to its generation's reference, from
the generation's race where one ran). Their front is :func:`loop.measure.results.pareto`, the rule
``Study.pareto`` answers with."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from loop.core.errors import LoopError
from loop.core.kinds import Verdict
from loop.core.record import RunRecord

if TYPE_CHECKING:
    from loop.measure.results import Result
    from loop.store.studies import RatioRow

STUDY = re.compile(r"^(?P<study>.+)-g(?P<generation>\d+)(?:-o[0-9a-f]+)?$")


def study_of(sweep: str) -> str:
    """The study a generation's sweep belongs to (``NAME-gN``, ``NAME-gN-o<hash>``): ``NAME``."""
    found = STUDY.match(sweep)
    return found["study"] if found else sweep


def raced(runs_dir: Path, sweep: str, run_ids: Sequence[int]) -> dict[int, RatioRow]:
    """Each raced run's ratio to its reference, by run id: from the ledger's ratios
    (:mod:`loop.store.studies`), or for a study of the old layout never opened since, from
    ``studies/SWEEP.race.json`` (:func:`loop.store.races.read_race`); {} where there is neither."""
    from loop.store.ledger import Ledger
    from loop.store.races import as_rows, read_race
    from loop.store.studies import ratios

    path = runs_dir / "ledger.sqlite"
    if path.exists():
        with Ledger(path, readonly=True) as ledger:
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


__all__ = ["raced", "search_results", "study_of"]
