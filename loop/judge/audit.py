"""The audit: observed changes against the declared footprint, and one verdict.

Verdicts: ``reference`` (the base itself), ``clean`` (every change inside the footprint),
``confounded`` (something outside it changed; kept in the ledger, left out of comparisons),
``no-effect`` (nothing changed: the perturbation missed), ``n/a`` (own base),
``no-reference`` (the base it should be audited against failed: unknown, left out too).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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


ROUNDING = ("bias-rounding", "kernel-rounding")  # a value re-rounded on a moved grid: never a confound


def _bias_change(base: LayerPrint, variant: LayerPrint) -> Change | None:
    if base.bias_sha == variant.bias_sha:
        return None
    if base.bias is None or variant.bias is None or len(base.bias) != len(variant.bias):
        return Change(base.name, "bias", "bias added, removed or reshaped")
    moved = np.abs(np.subtract(variant.bias, base.bias))
    if base.bias_step is None or variant.bias_step is None:  # kept in float: no grid to round on
        if not np.any(moved):
            return None
        worst = int(np.argmax(moved))
        count = int(np.count_nonzero(moved))
        detail = f"float bias: max |Δ| {moved[worst]:.3g} at channel {worst}; {count}/{len(moved)} channels moved"
        return Change(base.name, "bias", detail)
    bound = 0.5 * np.asarray(base.bias_step) + 0.5 * np.asarray(variant.bias_step)
    steps = moved / np.where(bound > 0, bound, np.inf)
    worst = int(np.argmax(steps))
    detail = (
        f"max |Δ| {moved[worst]:.3g} at channel {worst} = {steps[worst]:.1f}x the rounding bound "
        f"{bound[worst]:.3g}; {int(np.count_nonzero(steps > 1))}/{len(steps)} channels beyond it"
    )
    if steps[worst] <= 1.0:
        return Change(base.name, "bias-rounding", detail)
    if base.bias_int_sha is not None and base.bias_int_sha == variant.bias_int_sha:
        scaled = _ratios_text(_bias_ratios(base, variant))
        return Change(base.name, "bias-scale", f"{detail}; integers unchanged, scale {scaled}")
    return Change(base.name, "bias", detail)


def _bias_ratios(base: LayerPrint, variant: LayerPrint) -> tuple[float, ...] | None:
    """A bias whose integers are the base's: its new step over the base's, per channel."""
    if base.bias_int_sha is None or base.bias_int_sha != variant.bias_int_sha:
        return None
    return _ratios(base.bias_step, variant.bias_step)


def _ratios(old: Sequence[float] | None, new: Sequence[float] | None) -> tuple[float, ...] | None:
    if not old or not new or len(old) != len(new) or not all(old):
        return None
    return tuple(float(n) / float(o) for o, n in zip(old, new, strict=True))


def _ratios_text(ratios: tuple[float, ...] | None) -> str:
    if not ratios:
        return "moved"
    lo, hi = min(ratios), max(ratios)
    return f"x{lo:.6g}" + (f" to x{hi:.6g}" if f"{lo:.6g}" != f"{hi:.6g}" else "")


def ratio_text(new: float, old: float) -> str:
    """``new/old`` to three significant figures, so 0.00123x never prints as 0.00x."""
    return f"{new / old:.3g}x"


def _scale_changes(base: LayerPrint, variant: LayerPrint) -> Iterable[Seen]:
    for side in ("in", "out"):
        b = (getattr(base, f"{side}_scale"), getattr(base, f"{side}_zero_point"), getattr(base, f"{side}_bits"))
        v = (
            getattr(variant, f"{side}_scale"),
            getattr(variant, f"{side}_zero_point"),
            getattr(variant, f"{side}_bits"),
        )
        if b != v:
            ratio = f" ({ratio_text(v[0], b[0])})" if b[0] and v[0] else ""
            bits = f", {b[2] or 8} -> {v[2] or 8} bits" if (b[2] or 8) != (v[2] or 8) else ""
            tensor = getattr(variant, f"{side}_tensor")
            scaled = b[1:] == v[1:] and b[0] and v[0]  # the same grid's integers, only its scale moved
            change = Change(
                base.name,
                f"{side}_scale",
                f"{tensor}: scale {b[0]:.4g} -> {v[0]:.4g}{ratio}, zero point {b[1]} -> {v[1]}{bits}",
            )
            yield change, (v[0] / b[0],) if scaled else None


def observe(base: Sequence[LayerPrint], variant: Sequence[LayerPrint]) -> list[Change]:
    """Every difference between two fingerprints, layer by layer."""
    return [c for c, _ in _observed(base, variant)]


Seen = tuple[Change, tuple[float, ...] | None]  # a change, and its scale ratios where it is a pure scale change


def _observed(base: Sequence[LayerPrint], variant: Sequence[LayerPrint]) -> list[Seen]:
    changes: list[Seen] = []
    by_name = {lp.name: lp for lp in variant}
    for b in base:
        v = by_name.pop(b.name, None)
        if v is None:
            changes.append((Change(b.name, "kernel", "layer missing from the variant"), None))
            continue
        found: list[Seen] = []
        if b.kernel_sha != v.kernel_sha:
            kernel = _kernel_change(b, v)
            found.append((kernel, _ratios(b.weight_scale, v.weight_scale) if kernel.what == "kernel-scale" else None))
        bias = _bias_change(b, v)
        if bias is not None:
            found.append((bias, _bias_ratios(b, v) if bias.what == "bias-scale" else None))
        found.extend(_scale_changes(b, v))
        changes += [(_unmapped(c, v), r) for c, r in found]
    changes += [(Change(name, "kernel", "layer not in the base"), None) for name in by_name]
    return changes


def _unmapped(change: Change, layer: LayerPrint) -> Change:
    """A compiled layer no ONNX node stands behind is compared by its compiled name, and says so."""
    if not layer.unmapped:
        return change
    return Change(change.layer, change.what, f"unmapped layer (no ONNX node): {change.detail}", change.allowed)


def _kernel_change(b: LayerPrint, v: LayerPrint) -> Change:
    """A kernel whose integers changed is rounding when both stand for the same float kernel,
    each exactly rounded on its own grid (so only a moved weight scale can have changed it);
    anything else is a change of what the kernel stands for."""
    detail = _kernel_detail(b, v)
    same_float = b.float_sha is not None and b.float_sha == v.float_sha
    widths = (b.weight_bits or 8, v.weight_bits or 8)
    if widths[0] != widths[1]:
        rounded = same_float and v.off_grid == 0
        how = "the float kernel rounded on its grid" if rounded else "not the float kernel rounded: re-derived"
        return Change(
            b.name, "kernel-bits" if rounded else "kernel", f"{detail}; {widths[0]} -> {widths[1]} bits, {how}"
        )
    if same_float and b.off_grid == 0 and v.off_grid == 0:
        return Change(b.name, "kernel-rounding", f"{detail}; float kernel unchanged, re-rounded: {_moved_grid(b, v)}")
    if b.kernel_int_sha is not None and b.kernel_int_sha == v.kernel_int_sha:
        return Change(b.name, "kernel-scale", f"{detail}; integers unchanged, only the weight scales moved")
    if same_float and v.off_grid:
        return Change(
            b.name, "kernel", f"{detail}; float kernel unchanged, {v.off_grid} values off its grid: re-derived"
        )
    if b.float_sha is not None and v.float_sha is not None and not same_float:
        return Change(b.name, "kernel", f"{detail}; float kernel changed")
    return Change(b.name, "kernel", detail)


def _moved_grid(b: LayerPrint, v: LayerPrint) -> str:
    """Where the grid moved, and why where it can be told: ONNX Runtime raises the weight scale of
    channels whose int32 bias would overflow at the input's scale, so a moved input scale moves them."""
    if len(b.weight_scale) != len(v.weight_scale):
        return "weight grid reshaped"
    moved = [i for i, (x, y) in enumerate(zip(b.weight_scale, v.weight_scale, strict=True)) if x != y]
    if not moved:
        return "zero point moved"
    shown = ", ".join(str(i) for i in moved[:8]) + (", …" if len(moved) > 8 else "")
    text = f"weight scale moved on {len(moved)}/{len(v.weight_scale)} channels ({shown})"
    if b.in_scale and v.in_scale and b.in_scale != v.in_scale:
        text += f" after the input scale moved {ratio_text(v.in_scale, b.in_scale)} (int32-bias weight adjustment)"
    return text


def _kernel_detail(b: LayerPrint, v: LayerPrint) -> str:
    detail = f"kernel {(b.kernel_sha or 'none')[:8]} -> {(v.kernel_sha or 'none')[:8]}"
    if b.weight_scale != v.weight_scale and len(b.weight_scale) == len(v.weight_scale) and b.weight_scale:
        # per channel, the channels that moved: channel 0 alone may not have
        ratios = [y / x for x, y in zip(b.weight_scale, v.weight_scale, strict=True) if x != y and x]
        lo, hi = min(ratios, default=1.0), max(ratios, default=1.0)
        detail += f", weight scale x{lo:.3g}" + (f" to x{hi:.3g}" if f"{lo:.3g}" != f"{hi:.3g}" else "")
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


Grid = tuple[float | None, int | None, int]


def _grid(layer: LayerPrint, side: str) -> Grid:
    return getattr(layer, f"{side}_scale"), getattr(layer, f"{side}_zero_point"), getattr(layer, f"{side}_bits") or 8


def _range(grid: Grid) -> tuple[float, float]:
    """What an activation grid can hold. Activations are unsigned (ONNX Runtime's QUInt8, the
    DFC's uint8/uint16 streams), so ``bits`` spans 0 to 2**bits - 1."""
    s, zp = grid[0] or 0.0, grid[1] or 0
    return (0 - zp) * s, ((1 << grid[2]) - 1 - zp) * s


def _passes(grid: Grid, lo: float, hi: float) -> bool:
    if grid[0] is None:
        return False
    rlo, rhi = _range(grid)
    return rlo < lo - grid[0] or rhi > hi + grid[0]


def _allowed(
    change: Change,
    names: tuple[str, ...],
    rules: Sequence[Allow],
    expect: Expect,
    ratios: tuple[float, ...] | None = None,
) -> bool:
    """Judged under every name the layer answers to (a fused layer, each of its ONNX nodes)."""
    covered = lambda rule: any(rule.covers(n, change.what, ratios) for n in names)  # noqa: E731
    if change.what == "function" and not any(covered(r) for r in expect.allow):
        return False
    if any(covered(r) for r in expect.deny):
        return False
    if change.what in ROUNDING:
        return True
    return any(covered(r) for r in [*rules, *expect.allow])


def audit(
    base: Sequence[LayerPrint],
    variant: Sequence[LayerPrint],
    footprint: Sequence[Allow],
    expect: Expect = Expect(),  # noqa: B008 - frozen, so one shared default is safe
    bounds: dict[str, tuple[float, float]] | None = None,
    grids: Sequence[Change] = (),
) -> Audit:
    """``grids``: changes of activation grids the prints do not hold (:func:`grid_changes`)."""
    extra: list[Seen] = [(c, None) for c in function_changes(base, variant, bounds or {}) + list(grids)]
    observed = _observed(base, variant) + extra
    names = {lp.name: lp.answers_to for lp in [*base, *variant]}
    judged = tuple(
        Change(c.layer, c.what, c.detail, _allowed(c, names.get(c.layer, (c.layer,)), footprint, expect, r))
        for c, r in observed
    )
    if not judged:
        return Audit(Verdict.NO_EFFECT)
    return Audit(Verdict.CONFOUNDED if any(not c.allowed for c in judged) else Verdict.CLEAN, judged)


def grid_changes(
    base: Mapping[str, Mapping[str, Any]], variant: Mapping[str, Mapping[str, Any]], printed: Iterable[str]
) -> list[Change]:
    """A grid wider than 8 bits on one side only, or of another width, on a node with no print of
    its own (``printed``: the layers fingerprinted, whose ``out_bits`` already say it): each side's
    ``{tensor: {"bits", "node"}}`` as the compile recorded them, 8 bits where a side has none."""
    shown = set(printed)
    found = []
    for tensor in sorted(set(base) | set(variant)):
        b, v = base.get(tensor, {}), variant.get(tensor, {})
        node = str(v.get("node") or b.get("node") or tensor)
        before, after = b.get("bits", 8), v.get("bits", 8)
        if before != after and node not in shown:
            found.append(Change(node, "out_scale", f"{tensor}: {before} -> {after} bits"))
    return found
