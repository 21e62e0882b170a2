"""The one Pareto rule (issue 42): ``Study.pareto`` and the report's front are both
:func:`loop.measure.results.pareto`, held here to the rule as the study wrote it pair by pair."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

from report_records import raced

from loop.core.facts import CompileFacts
from loop.core.record import Scores
from loop.measure.results import Result, pareto


def beats(a: Result, b: Result, keys: Sequence[str]) -> bool:
    """The rule, pair by pair: ``a`` is better than ``b`` beyond both intervals on one key, and
    not worse beyond them on any, so within noise of each other neither beats the other."""
    ia, ib = [a.interval(k) for k in keys], [b.interval(k) for k in keys]
    not_worse = all(ahi >= blo for (_, ahi), (blo, _) in zip(ia, ib, strict=True))
    return not_worse and any(alo > bhi for (alo, _), (_, bhi) in zip(ia, ib, strict=True))


def candidates(count: int, seed: int) -> list[Result]:
    rng = random.Random(seed)
    found = []
    for i in range(count):
        ratio, half = rng.uniform(0.8, 1.2), rng.uniform(0.001, 0.05)
        scores = {"snr_db": round(rng.uniform(10, 30), 1), "output_mean": round(rng.uniform(0, 1), 2)}
        r = raced(i, scores["snr_db"], (ratio - half, ratio, ratio + half))
        found.append(replace(r, run=replace(r.run, scores=Scores.from_json(scores))))
    return [*found, raced(count, 99.0, (9.0, 9.0, 9.0), verdict="confounded")]


def test_the_front_is_the_rule_pair_by_pair_on_any_keys() -> None:
    results = candidates(60, 7)
    pool = [r for r in results if r.usable]
    for keys in (("snr_db", "rate_ratio"), ("rate_ratio",), ("snr_db", "rate_ratio", "output_mean")):
        rule = [r for r in pool if not any(beats(o, r, keys) for o in pool if o is not r)]
        assert [r.index for r in pareto(results, keys)] == [r.index for r in rule] and len(rule) < 60


def test_ties_within_noise_stay_on_the_front() -> None:
    a, b = raced(0, 30.0, (0.98, 1.00, 1.02)), raced(1, 30.0, (1.01, 1.03, 1.05))  # intervals overlap
    assert pareto([a, b]) == [a, b]
    assert pareto([a, raced(2, 30.0, (1.03, 1.05, 1.07))]) == [raced(2, 30.0, (1.03, 1.05, 1.07))]


def test_unusable_or_unscored_results_are_never_on_it() -> None:
    apart = raced(0, 40.0, (1.5, 1.6, 1.7), verdict="confounded")
    assert pareto([apart]) == [] and pareto([raced(1, 30.0, (0.9, 1.0, 1.1))], ("output_mean",)) == []


def test_fewer_weight_bytes_are_better_on_the_front() -> None:
    """``weight_bytes`` (and ``ttfo_ms``) rank lower-is-better: a smaller model at the same SNR
    beats a larger one, and the smallest is on the front whatever its SNR."""
    made = []
    for i, (snr, size) in enumerate(((30.0, 1000), (30.0, 600), (20.0, 500), (10.0, 500))):
        r = raced(i, snr, (1.0, 1.0, 1.0))
        made.append(replace(r, run=replace(r.run, compiled=CompileFacts(weights={"bytes": size}))))
    assert [r.index for r in pareto(made, ("snr_db", "weight_bytes"))] == [1, 2]
    assert made[1].better("weight_bytes") == -600 and made[1].value("weight_bytes") == 600
