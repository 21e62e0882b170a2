"""A candidate's result: a view over its run record, never a copy of it.

A :class:`Result` holds the run record as the ledger keeps it, the record of the reference it is
compared with (the base compiled with the same options) and, where the generation's rounds raced
it, its ratio row (:class:`loop.store.studies.RatioRow`). Every figure an optimizer reads (verdict,
scores, the three quantities, the rate ratio and their intervals, why it is not usable) is read
from those when asked, so nothing is renamed or dropped on the way, and ``to_dict`` is the one
flat shape ``loop study --json``, ``study.records()`` and a data frame show.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from loop.core.kinds import Flag, Kind, Status, Verdict
from loop.core.record import RunRecord
from loop.measure.compare import ledger_ratio
from loop.measure.stats import widened
from loop.store.studies import Ratio, RatioRow

HOST_BUSY = "measured host-busy"
PARETO_KEYS = ("snr_db", "rate_ratio")  # what a search trades: accuracy against speed
LOWER_KEYS = ("weight_bytes", "ttfo_ms")  # fewer bytes and sooner outputs are better; higher is, elsewhere
RATE_KEYS = ("rate_fps", "rate_ratio", "ttfo_ms")  # what the protocol or the rounds measure; a score-only run has none
SCORE_ONLY = str(Flag.SCORE_ONLY)  # why a score-only run has no rate
# The keys of ``to_dict``, in order: the view's shape for JSON, CSV and data frames.
VIEW_KEYS = (
    "index",
    "variant",
    "run_id",
    "status",
    "verdict",
    "scores",
    "ttfo_ms",
    "rate_fps",
    "weight_bytes",
    "bytes_in",
    "bytes_out",
    "error",
    "flags",
    "why",
    "rate_ci95",
    "rate_ratio",
    "rate_ratio_ci95",
    "reused",
    "generation",
    "sweep",
    "stages",
    "ratio_basis",
    "ratio_floor_pct",
    "stopped",
    "why_no_rate",
)


@dataclass(frozen=True)
class Result:
    """One candidate's outcome, read from its run record: its verdict, whether it is fit to
    compare and why not, its scores and the three quantities, its rate's interval, and its rate
    ratio to ``ref`` with that ratio's interval (from the generation's rounds where ``race`` holds
    them, else from the two runs' recorded figures). ``reused``: it came back from the ledger,
    evaluated before with the same content; ``tied`` (set by ``Study.best``): the others within
    noise of it.

    What is derived (scores, the ratio, why it is not usable) is worked out once per view: a
    front compares every pair of candidates, and reads them for each pair."""

    index: int
    run: RunRecord
    ref: RunRecord | None = None
    race: RatioRow | None = None
    reused: bool = False
    tied: list[Result] = field(default_factory=list)

    def __repr__(self) -> str:
        """One line a person reads: the candidate, its verdict, its SNR and rate ratio with their
        intervals (the run behind it, its layers' hashes and all, is ``result.run``)."""
        parts = [f"#{self.index} {self.variant!r}", f"run {self.run_id}", f"{self.status}/{self.verdict}"]
        for key in ("snr_db", "rate_ratio"):
            value = self.value(key)
            if value is not None:
                low, high = self.interval(key)
                parts.append(f"{key} {value:.4g} [{low:.4g}, {high:.4g}]")
        parts += ["reused"] if self.reused else []
        parts += [f"tied with {len(self.tied)}"] if self.tied else []
        return f"Result({', '.join(parts)})"

    # -- the run as recorded -----------------------------------------------------------

    @property
    def variant(self) -> str:
        return self.run.variant

    @property
    def run_id(self) -> int | None:
        return self.run.id

    @property
    def status(self) -> Status:
        return self.run.status

    @property
    def verdict(self) -> Verdict | None:
        return self.run.verdict

    @cached_property
    def scores(self) -> dict[str, Any]:
        return self.run.scores.to_json()

    @property
    def ttfo_ms(self) -> float | None:
        return self.run.measure.ttfo_ms

    @property
    def weight_bytes(self) -> int | None:
        return self.run.weight_bytes

    @property
    def bytes_in(self) -> int | None:
        return self.run.measure.bytes_in

    @property
    def bytes_out(self) -> int | None:
        return self.run.measure.bytes_out

    @property
    def error(self) -> str | None:
        return self.run.error

    @property
    def generation(self) -> int | None:
        return self.run.generation

    @property
    def sweep(self) -> str:
        return self.run.sweep

    @property
    def stages(self) -> dict[str, float]:
        return dict(self.run.stages)

    # -- the rate and its ratio: the race's rounds where they ran, else the records -----

    @property
    def rate_fps(self) -> float | None:
        return self.race.fps.value if self.race and self.race.fps else self.run.measure.median_fps

    @property
    def rate_ci95(self) -> tuple[float, float] | None:
        if self.race and self.race.fps:
            return self.race.fps.low, self.race.fps.high
        rate = self.run.measure.rate
        return None if rate is None else rate.ci95

    @cached_property
    def _ratio(self) -> tuple[float, tuple[float, float] | None] | None:
        if self.race is not None:
            # the rounds' interval widened by the race's A/A floor: two sessions of one artifact
            # differed by that much, which no round-to-round interval shows
            r = Ratio(*widened((self.race.ratio.value, self.race.ratio.low, self.race.ratio.high), self.race.floor_pct))
            return r.value, (r.low, r.high)
        mine, theirs = self.run.measure.rate, None if self.ref is None else self.ref.measure.rate
        if mine is None or theirs is None or theirs.median <= 0:
            return None
        return ledger_ratio(theirs, mine)

    @property
    def rate_ratio(self) -> float | None:
        """This rate / the reference's rate."""
        found = self._ratio
        return None if found is None else found[0]

    @property
    def rate_ratio_ci95(self) -> tuple[float, float] | None:
        found = self._ratio
        return None if found is None else found[1]

    @property
    def ratio_basis(self) -> str:
        """``ledger`` (the two runs' recorded figures) or ``interleaved, N rounds`` (its own
        rounds), with why they stopped where that was not the target."""
        if self.race is None:
            return "ledger"
        why = self.stopped or ("beaten" if self.race.dropped is not None else None)
        return f"interleaved, {self.race.rounds} rounds" + (f" (stopped: {why})" if why and why != "target" else "")

    @property
    def why_no_rate(self) -> str | None:
        """Why it has no rate: ``score-only`` (evaluated so: scored on the inputs, never
        measured), its status where it did not finish, or ``not measured`` (its rounds failed);
        None when it has one."""
        if self.rate_fps is not None:
            return None
        if Flag.SCORE_ONLY in self.run.flags:
            return SCORE_ONLY
        return "not measured" if self.status == Status.OK else str(self.status)

    @property
    def stopped(self) -> str | None:
        """Why its rounds ended: ``target`` (its interval met ``measure.target_ratio_pct``),
        ``not narrowing`` or ``budget`` (short of the target: its interval is wider), ``beaten``;
        None where it was not raced (or raced before this was recorded)."""
        return None if self.race is None else self.race.stopped

    @property
    def ratio_floor_pct(self) -> float | None:
        """How far two sessions of the reference differed (inside the ratio's interval)."""
        return None if self.race is None else self.race.floor_pct

    @property
    def flags(self) -> tuple[str, ...]:
        race = () if self.race is None else self.race.flags
        return tuple(dict.fromkeys((*(str(f) for f in self.run.flags), *race)))

    # -- fit to compare ------------------------------------------------------------------

    @cached_property
    def why(self) -> str | None:
        """Why it is not usable, in one line; None when it is. A ratio whose rounds met their
        target is usable on a busy host: load both sides shared cancels in it, and the race's
        ``host-busy`` flag stays for anyone who reads the absolute rate."""
        why, race = _why(self.run), self.race
        if race is None:
            return why
        if why is not None and why.startswith(HOST_BUSY) and race.met:
            return None  # the protocol's own figures were of a busy host; the ratio is not
        if why is None and Flag.HOST_BUSY in race.flags and not race.met:
            target = race.target_pct or 0
            return f"{HOST_BUSY}, and its ratio's interval is wider than measure.target_ratio_pct ({target:g}%)"
        return why

    @property
    def usable(self) -> bool:
        """Finished, audited, not confounded and not measured on a busy host."""
        return self.why is None

    def value(self, key: str) -> float | None:
        """A score by name, or ``rate_fps``, ``rate_ratio``, ``ttfo_ms``, ``weight_bytes``."""
        own = ("rate_fps", "rate_ratio", "ttfo_ms", "weight_bytes")
        found = getattr(self, key) if key in own else self.scores.get(key)
        return None if found is None else float(found)

    def better(self, key: str) -> float | None:
        """``value(key)`` signed so that higher is better (``LOWER_KEYS`` negated): what ``best``
        and ``pareto`` rank by."""
        found = self.value(key)
        return None if found is None else -found if key in LOWER_KEYS else found

    def interval(self, key: str) -> tuple[float, float]:
        """The value's 95% interval where it has one (a raced ratio's already holds its A/A
        floor; a score's is over its scoring frames), else the value itself at both ends."""
        ci = self.rate_ci95 if key == "rate_fps" else self.rate_ratio_ci95 if key == "rate_ratio" else None
        if ci is None and key in self.scores:
            ci = self.run.scores.interval(key)
        if ci is not None:
            return ci
        value = self.value(key)
        return (value, value) if value is not None else (float("-inf"), float("-inf"))

    def to_dict(self) -> dict[str, Any]:
        """The flat view (``VIEW_KEYS``, then ``tied``), plain JSON."""
        out: dict[str, Any] = {k: _plain(getattr(self, k)) for k in VIEW_KEYS}
        return {**out, "tied": [t.to_dict() for t in self.tied]}


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    return value.value if isinstance(value, Kind) else value


def _why(run: RunRecord) -> str | None:
    apart = run.why_apart
    if apart is not None or run.status != Status.OK:
        return apart or str(run.status)
    if Flag.HOST_BUSY in {*run.flags, *run.measure.flags}:
        busy = run.measure.others_core_pct
        return HOST_BUSY + (f": others used {busy:.0f}% of a core" if busy is not None else "")
    return None


def result_of(index: int, run: RunRecord, ref: RunRecord | None = None, reused: bool = False) -> Result:
    """The result of candidate ``index`` from its run, compared with ``ref``."""
    return Result(index, run, ref, reused=reused)


def with_race(result: Result, raced: dict[int, RatioRow]) -> Result:
    """The result with its ratio and its own rate from the generation's rounds, where it was raced."""
    row = raced.get(result.run_id if result.run_id is not None else -1)
    return result if row is None else replace(result, race=row)


def signed_interval(result: Result, key: str) -> tuple[float, float]:
    """The key's interval with higher better: a ``LOWER_KEYS`` one negated (its ends swapped)."""
    low, high = result.interval(key)
    return (-high, -low) if key in LOWER_KEYS else (low, high)


def pareto(results: Sequence[Result], keys: Sequence[str] = PARETO_KEYS) -> list[Result]:
    """The usable results no other usable one beats on ``keys`` (higher is better, fewer for
    ``LOWER_KEYS``: ``weight_bytes``, ``ttfo_ms``), in order: one
    beats another when it is better beyond both intervals on one key and not worse beyond them on
    any, so two within noise of each other are both kept. ``Study.pareto`` and the report's front.

    Each result against all the others at once, as arrays: pair by pair in Python it took
    seconds at 2,000 candidates."""
    pool = [r for r in results if r.usable and all(r.value(k) is not None for k in keys)]
    if not pool:
        return []
    spans = np.array([[signed_interval(r, k) for k in keys] for r in pool], dtype=float).reshape(
        len(pool), len(keys), 2
    )
    low, high = spans[..., 0], spans[..., 1]
    front = []
    for i, r in enumerate(pool):
        beats = (high >= low[i]).all(axis=1) & (low > high[i]).any(axis=1)
        beats[i] = False  # a result never beats itself, whatever its interval
        if not beats.any():
            front.append(r)
    return front
