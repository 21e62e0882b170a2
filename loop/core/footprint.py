"""A footprint: what a perturbation is allowed to change (docs/audit.md, "Footprints").

Here, below both rooms, because ``spec`` writes footprints (each op declares its own, a
variant's ``expect:`` widens or narrows it) and ``judge`` reads them (the audit), and neither
may import the other's side of that exchange.

A footprint is a set of :class:`Allow` rules over observed changes. ``what`` is one of
``kernel`` (what a kernel stands for changed), ``kernel-rounding`` (the same float kernel
re-rounded on a moved weight grid), ``kernel-scale`` (the same integers, only the weight scales
moved), ``kernel-bits`` (the same float kernel rounded on a grid of another width: 4-bit weights),
``bias`` (a real bias change), ``bias-rounding`` (a dequantized bias that moved no more
than half an old step plus half a new one), ``bias-scale`` (the same integers on a moved
scale), ``in_scale`` and ``out_scale`` (scale, zero point or bits of the tensor a layer reads or
writes), and ``function`` (what a layer computes). Rounding is never a confound: the audit allows
both kinds anywhere, unless a variant's ``expect: deny`` names them. A rule allowing ``kernel``
or ``bias`` allows their rounding and their ``-scale`` change too.

A rule with ``factors`` allows a scale change only by those factors: each moved scale over the
base's (per channel, one factor for all) within float32 rounding, its zero point and bits
unchanged (``scale_grid``, whose edits must land where and as asked).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from loop.core.errors import LoopError

WHATS = (
    "kernel",
    "kernel-rounding",
    "kernel-scale",
    "kernel-bits",
    "bias",
    "bias-rounding",
    "bias-scale",
    "in_scale",
    "out_scale",
    "function",
)
# each allowed by its head's rule
SUBKINDS = ("bias-rounding", "kernel-rounding", "bias-scale", "kernel-scale", "kernel-bits")
RATIO_TOLERANCE = 1e-6  # a float32 scale times a factor, rounded to float32: well inside this


@dataclass(frozen=True)
class Allow:
    """Changes of kind ``what`` at layers matching ``layer`` (a glob) are inside the footprint."""

    layer: str
    what: str
    factors: tuple[float, ...] | None = None  # a scale change by exactly these, else not covered

    def covers(self, layer: str, what: str, ratios: tuple[float, ...] | None = None) -> bool:
        """``ratios``: a scale change's new scale over the base's, per channel (None: not a pure
        scale change), which a rule with ``factors`` must match."""
        if self.factors is not None and not self.matches(ratios):
            return False
        if what in SUBKINDS and self.what == what.partition("-")[0]:
            return fnmatch.fnmatchcase(layer, self.layer)
        return fnmatch.fnmatchcase(layer, self.layer) and fnmatch.fnmatchcase(what, self.what)

    def matches(self, ratios: tuple[float, ...] | None) -> bool:
        if not ratios or self.factors is None:
            return False
        want = self.factors * len(ratios) if len(self.factors) == 1 else self.factors
        return len(want) == len(ratios) and all(
            abs(r / f - 1.0) <= RATIO_TOLERANCE for r, f in zip(ratios, want, strict=True)
        )


@dataclass(frozen=True)
class Expect:
    """A variant's own widening (``allow``) or narrowing (``deny``) of its footprint."""

    allow: tuple[Allow, ...] = ()
    deny: tuple[Allow, ...] = field(default_factory=tuple)


def parse_expect(raw: Mapping[str, Any] | None) -> Expect:
    """``expect:`` as the sweep file's schema validated it: ``allow`` and ``deny`` lists."""
    return Expect(_rules((raw or {}).get("allow")), _rules((raw or {}).get("deny")))


def _rules(items: Any) -> tuple[Allow, ...]:
    rules = []
    for item in items or ():
        layer, sep, what = str(item).partition(":")
        if not sep or not any(fnmatch.fnmatchcase(w, what) for w in WHATS):
            raise LoopError(f"'{item}' is not LAYER:WHAT with WHAT one of {', '.join(WHATS)}", field="expect")
        rules.append(Allow(layer, what))
    return tuple(rules)
