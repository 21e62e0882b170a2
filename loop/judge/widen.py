"""The variant ``loop noise`` prints, measured before it is printed (issue 42): each step of 16-bit
grids tried, what it reached on the sweep's scoring frames, and the first that met the target.

A first guess (the falls' regions) can fall short: on magika it put 11 grids at 16 bits and
reached 7.8 dB where every grid at 16 bits reaches 34.9. So the flow (:mod:`loop.flow.widen`)
widens step by step (:func:`loop.judge.falls.widened`) and this module words what each step
reached. Pure: figures in, values and lines out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

TARGET_DB = 25.0  # a usable model: the base's figure once its falls are mended (magika: 28-35 dB)
ABOVE_RUINED_DB = 15.0  # over a sweep's own ruined line: ruined_snr_db's default 10 + 15 is TARGET_DB
EVERY = "*"  # the precision entry's glob for every node: every activation grid at 16 bits


@dataclass(frozen=True)
class Target:
    """The SNR a step must reach, and where that figure comes from (said beside the steps)."""

    db: float
    source: str


def target_of(given: float | None, ruined_snr_db: float | None) -> Target:
    """``--target-db`` when given; else 15 dB over the sweep's ``measure.ruined_snr_db`` when its
    file sets one (the line it calls ruined, plus a margin a usable model keeps); else 25 dB."""
    if given is not None:
        return Target(given, "--target-db")
    if ruined_snr_db is not None:
        return Target(ruined_snr_db + ABOVE_RUINED_DB, f"measure.ruined_snr_db {ruined_snr_db:g} + {ABOVE_RUINED_DB:g}")
    return Target(TARGET_DB, "default")


@dataclass(frozen=True)
class RateCost:
    """A step's rate over the base's, measured with it in interleaved rounds (the geometric mean
    of the rounds' ratios and its 95% interval)."""

    ratio: float
    low: float
    high: float
    rounds: int
    flags: tuple[str, ...] = ()

    def words(self) -> str:
        return f"rate {self.ratio:.2f}x [{self.low:.2f}, {self.high:.2f}]"


@dataclass(frozen=True)
class Step:
    """One variant tried: why it was widened so, the layers its entries put at 16 bits, and what
    its compile and scoring gave (``error`` instead, when it failed)."""

    index: int
    why: str
    layers: tuple[str, ...]  # the precision entries' layers, in order; (EVERY,) for every activation
    frames: int
    snr_db: float | None = None
    top1: Mapping[str, float] = field(default_factory=dict)  # agreement with the float model, per output
    wide: int = 0  # nodes whose output grid the compile made 16 bits wide (its ``wide_grids``)
    verdict: str | None = None
    rate: RateCost | None = None  # None: the base itself, or not measured (its compile failed)
    error: str | None = None

    def entries(self) -> list[str]:
        return [precision_line(layer) for layer in self.layers]

    def meets(self, target: Target) -> bool:
        return self.error is None and self.snr_db is not None and self.snr_db >= target.db

    def line(self, met: bool) -> str:
        head = f"  step {self.index}  {self.why}"
        if self.error is not None:
            return f"{head}: failed: {self.error}"
        snr = "-" if self.snr_db is None else f"{self.snr_db:.1f} dB"
        base = self.verdict == "reference"
        rate = self.rate.words() if self.rate is not None else ("rate 1.00x (the base)" if base else "rate -")
        mark = "  <- meets the target" if met else ""
        return (
            f"{head}: {snr}, top-1 {self.agreement()}, {self.wide} layers at 16 bits, {rate}, "
            f"{self.verdict or '-'}{mark}"
        )

    def agreement(self) -> str:
        """The lowest top-1 agreement over the outputs, as frames of frames ("-": not a classifier)."""
        if not self.top1:
            return "-"
        return f"{round(min(self.top1.values()) * self.frames)}/{self.frames}"

    def to_json(self) -> dict[str, Any]:
        row = asdict(self)
        row["entries"] = self.entries()
        row["top1"] = dict(self.top1)
        row["snr_db"] = None if self.snr_db is None or not math.isfinite(self.snr_db) else self.snr_db
        return row


@dataclass
class Widening:
    """The steps ``loop noise`` measured, against its target."""

    target: Target
    steps: list[Step]
    rate_note: str = ""  # how the rates were measured, or why they were not

    def met(self) -> Step | None:
        return next((s for s in self.steps if s.meets(self.target)), None)

    def chosen(self) -> Step | None:
        """The step that met the target; else the best measured, which says it fell short."""
        done = [s for s in self.steps if s.error is None and s.snr_db is not None]
        return self.met() or max(done, key=lambda s: s.snr_db or -math.inf, default=None)

    def lines(self) -> list[str]:
        met, chosen = self.met(), self.chosen()
        frames = self.steps[0].frames if self.steps else 0
        out = [f"measured on the {frames} scoring frames, widened until {self.target.db:g} dB ({self.target.source}):"]
        out += [s.line(s is met) for s in self.steps]
        out += [f"  {self.rate_note}"] if self.rate_note else []
        if chosen is None:
            return [*out, "no step could be measured: nothing to paste"]
        if not chosen.layers:
            return [*out, "it meets the target as it is: nothing to widen"]
        how = "met the target" if chosen is met else f"the best reached, short of {self.target.db:g} dB"
        out.append(f"the variant to paste (step {chosen.index}, {how}: {chosen.snr_db:.1f} dB, {chosen.verdict}):")
        return out + [f"  - {entry}" for entry in chosen.entries()]

    def to_json(self) -> dict[str, Any]:
        met, chosen = self.met(), self.chosen()
        return {
            "target_db": self.target.db,
            "target_from": self.target.source,
            "steps": [s.to_json() for s in self.steps],
            "met": None if met is None else met.index,
            "chosen": None if chosen is None else chosen.index,
            "variant": [] if chosen is None else chosen.entries(),
            "rate_note": self.rate_note,
        }


def precision_line(layer: str) -> str:
    """The sweep entry that would keep ``layer``'s output at 16 bits."""
    return "{op: precision, layer: " + _yaml_scalar(layer) + ", bits: 16}"


def _yaml_scalar(text: str) -> str:
    plain = text and all(c.isalnum() or c in "_-./" for c in text) and text[0] not in "-."
    return text if plain else '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
