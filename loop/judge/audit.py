"""The audit: observed changes against the declared footprint, and one verdict.

Verdicts: ``reference`` (the base itself), ``clean`` (every change inside the footprint),
``confounded`` (something outside it changed; kept in the ledger, left out of comparisons),
``no-effect`` (nothing changed: the perturbation missed), ``n/a`` (own base),
``no-reference`` (the base it should be audited against failed: unknown, left out too).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from loop.core.footprint import Allow, Expect
from loop.core.kinds import Verdict
from loop.core.record import Change
from loop.core.vocab import LayerPrint


@dataclass(frozen=True)
class Audit:
    verdict: Verdict
    changes: tuple[Change, ...] = ()

    @property
    def outside(self) -> list[Change]:
        return [c for c in self.changes if not c.allowed]


def _bias_change(base: LayerPrint, variant: LayerPrint) -> Change | None:
    if base.bias_sha == variant.bias_sha:
        return None
    if base.bias is None or variant.bias is None or len(base.bias) != len(variant.bias):
        return Change(base.name, "bias", "bias added, removed or reshaped")
    moved = np.abs(np.subtract(variant.bias, base.bias))
    bound = 0.5 * np.asarray(base.bias_step) + 0.5 * np.asarray(variant.bias_step)
    steps = moved / np.where(bound > 0, bound, np.inf)
    worst = int(np.argmax(steps))
    detail = (
        f"max |Δ| {moved[worst]:.3g} at channel {worst} = {steps[worst]:.1f}x the rounding bound "
        f"{bound[worst]:.3g}; {int(np.count_nonzero(steps > 1))}/{len(steps)} channels beyond it"
    )
    return Change(base.name, "bias" if steps[worst] > 1.0 else "bias-rounding", detail)


def _scale_changes(base: LayerPrint, variant: LayerPrint) -> Iterable[Change]:
    for side in ("in", "out"):
        b = (getattr(base, f"{side}_scale"), getattr(base, f"{side}_zero_point"))
        v = (getattr(variant, f"{side}_scale"), getattr(variant, f"{side}_zero_point"))
        if b != v:
            ratio = f" ({v[0] / b[0]:.2f}x)" if b[0] and v[0] else ""
            tensor = getattr(variant, f"{side}_tensor")
            yield Change(
                base.name,
                f"{side}_scale",
                f"{tensor}: scale {b[0]:.4g} -> {v[0]:.4g}{ratio}, zero point {b[1]} -> {v[1]}",
            )


def observe(base: Sequence[LayerPrint], variant: Sequence[LayerPrint]) -> list[Change]:
    """Every difference between two fingerprints, layer by layer."""
    changes: list[Change] = []
    by_name = {lp.name: lp for lp in variant}
    for b in base:
        v = by_name.pop(b.name, None)
        if v is None:
            changes.append(Change(b.name, "kernel", "layer missing from the variant"))
            continue
        if b.kernel_sha != v.kernel_sha:
            changes.append(Change(b.name, "kernel", _kernel_detail(b, v)))
        bias = _bias_change(b, v)
        if bias is not None:
            changes.append(bias)
        changes.extend(_scale_changes(b, v))
    changes += [Change(name, "kernel", "layer not in the base") for name in by_name]
    return changes


def _kernel_detail(b: LayerPrint, v: LayerPrint) -> str:
    detail = f"kernel {(b.kernel_sha or 'none')[:8]} -> {(v.kernel_sha or 'none')[:8]}"
    if b.weight_scale != v.weight_scale and b.weight_scale and v.weight_scale:
        detail += f", weight scale x{v.weight_scale[0] / b.weight_scale[0]:.3f}"
    return detail


def function_changes(
    base: Sequence[LayerPrint], variant: Sequence[LayerPrint], bounds: dict[str, tuple[float, float]]
) -> list[Change]:
    """A quantized range that newly passes values a removed clamp clipped (a Relu below 0, a
    ReLU6 above 6, whatever produced the tensor) changes the function, which no footprint
    covers. Each tensor is judged once, at the first layer that writes or reads it."""
    changes = []
    seen: set[str] = set()
    base_by_name = {lp.name: lp for lp in base}
    for v in variant:
        b = base_by_name.get(v.name)
        for side in ("out", "in"):
            tensor = getattr(v, f"{side}_tensor")
            if b is None or tensor not in bounds or tensor in seen:
                continue
            seen.add(tensor)
            lo, hi = bounds[tensor]
            if _passes(_grid(v, side), lo, hi) and not _passes(_grid(b, side), lo, hi):
                rlo, rhi = _range(_grid(v, side))
                changes.append(
                    Change(
                        v.name,
                        "function",
                        f"{tensor} now spans [{rlo:.3g}, {rhi:.3g}], past the removed clamp's [{lo:g}, {hi:g}]: "
                        "values the float model clips now pass",
                        allowed=False,
                    )
                )
    return changes


def _grid(layer: LayerPrint, side: str) -> tuple[float | None, int | None]:
    return getattr(layer, f"{side}_scale"), getattr(layer, f"{side}_zero_point")


def _range(grid: tuple[float | None, int | None]) -> tuple[float, float]:
    s, zp = grid[0] or 0.0, grid[1] or 0
    return (0 - zp) * s, (255 - zp) * s


def _passes(grid: tuple[float | None, int | None], lo: float, hi: float) -> bool:
    if grid[0] is None:
        return False
    rlo, rhi = _range(grid)
    return rlo < lo - grid[0] or rhi > hi + grid[0]


def _allowed(change: Change, rules: Sequence[Allow], expect: Expect) -> bool:
    if change.what == "function" and not any(r.covers(change.layer, "function") for r in expect.allow):
        return False
    if any(r.covers(change.layer, change.what) for r in expect.deny):
        return False
    return any(r.covers(change.layer, change.what) for r in [*rules, *expect.allow])


def audit(
    base: Sequence[LayerPrint],
    variant: Sequence[LayerPrint],
    footprint: Sequence[Allow],
    expect: Expect = Expect(),  # noqa: B008 - frozen, so one shared default is safe
    bounds: dict[str, tuple[float, float]] | None = None,
) -> Audit:
    observed = observe(base, variant) + function_changes(base, variant, bounds or {})
    judged = tuple(Change(c.layer, c.what, c.detail, _allowed(c, footprint, expect)) for c in observed)
    if not judged:
        return Audit(Verdict.NO_EFFECT)
    return Audit(Verdict.CONFOUNDED if any(not c.allowed for c in judged) else Verdict.CLEAN, judged)
