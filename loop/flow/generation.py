"""A study's generation as one flow on the sweep's own runner (issue 34): compile, audit and score
the candidates and their reference, the devices answering the controlled inputs only; then measure
them once, together, in interleaved rounds at the protocol's depth, each candidate leaving the rounds
on its own when its ratio's interval meets ``measure.target_ratio_pct``, stops narrowing, or is beaten,
or when ``measure.budget_s`` is spent (:mod:`loop.measure.rounds`); why is kept in its ratio row.
Each candidate's ratio and its own rate come from the same rounds; nothing is measured twice.
A score-only generation (``SweepOptions.score_only``) stops after the sweep: no rounds, no ratios.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from loop.author.sweepfile import SweepSpec
from loop.core.errors import LoopError
from loop.core.kinds import Status
from loop.core.record import RunRecord
from loop.flow.runner import RaceSpec, Runner
from loop.flow.sweep import SweepOptions, SweepResult, open_runner, run_sweep
from loop.measure.stats import median_ci95
from loop.store.artifacts import recorded_sha, stored_artifact
from loop.store.files import runs_artifact
from loop.store.ledger import Ledger
from loop.store.studies import Ratio, RatioRow


@dataclass
class Generation:
    """The sweep's outcome, its runs by variant, and the ratios measured (empty: nothing raced)."""

    sweep: SweepResult
    runs: dict[str, RunRecord]
    ratios: list[RatioRow] = field(default_factory=list)
    error: str | None = None  # why the rounds did not run (the runs stand, unmeasured)


def run_generation(spec: SweepSpec, runs: Path, options: SweepOptions) -> Generation:
    """Run ``spec`` (its reference is the variant named ``base``) as the module says."""
    with open_runner(spec, options) as runner:
        swept = run_sweep(spec, runs, replace(options, runner=runner, measure=False))
        with Ledger.of_runs(runs, readonly=True) as ledger:
            found = ledger.latest(spec.name)
            # a reference an earlier generation's run stands for (SweepOptions.references)
            found.update(
                (o.variant, ledger.record(o.run_id)) for o in swept.outcomes if o.variant not in found and o.run_id
            )
        if options.score_only:
            return Generation(swept, found)
        ref = found.get("base")
        candidates = [r for name, r in found.items() if name != "base"]
        try:
            rows = race(spec, runs, runner, ref, candidates)
        except LoopError as exc:
            return Generation(swept, found, [], str(exc))
    return Generation(swept, found, rows)


def race(
    spec: SweepSpec, runs: Path, runner: Runner, ref: RunRecord | None, candidates: Sequence[RunRecord]
) -> list[RatioRow]:
    """The candidates that finished measured with their reference in interleaved rounds on the
    sweep's first device; one row per candidate run (runs of one artifact share its side)."""
    ok = [r for r in candidates if r.status == Status.OK and r.artifact]
    if ref is None or ref.status != Status.OK or not ref.artifact or not ok:
        return []
    # each as its file: the device's process reads the weights, not this one
    load = lambda r: stored_artifact(runs_artifact(runs, Path(r.artifact or "").name), recorded_sha(r))  # noqa: E731
    unique = list({recorded_sha(r): r for r in ok}.values())  # one side per artifact
    target, budget = spec.measure.target_ratio_pct, spec.measure.budget_s
    spec_race = RaceSpec(tuple(map(load, unique)), target, budget)
    m = runner.race_against(load(ref), spec_race, spec.measure, spec.devices[:1])
    if isinstance(m, str):
        raise LoopError(f"measuring the generation together failed at {m}")
    side = {recorded_sha(r): i + 1 for i, r in enumerate(unique)}  # side 0: the reference
    rows = []
    for r in ok:
        i = side[recorded_sha(r)]
        ratio = m["ratios"][i]
        if ratio is None:
            continue
        rows.append(
            RatioRow(
                r.id or 0,
                ref.id or 0,
                Ratio(*ratio),
                len(m["fps"][i]),  # its own rounds: it leaves them when it stops
                m.get("floor_pct"),
                m["dropped"][i],
                tuple(m.get("flags") or ()),
                _rate(m["fps"][i]),
                target,
                m["stopped"][i],
            )
        )
    return rows


def _rate(fps: Sequence[float]) -> Ratio | None:
    """A side's median rate over the rounds it ran, with its interval."""
    if not fps:
        return None
    lo, hi = median_ci95(fps) if len(fps) > 1 else (fps[0], fps[0])
    return Ratio(float(statistics.median(fps)), float(lo), float(hi))


__all__ = ["Generation", "race", "run_generation"]
