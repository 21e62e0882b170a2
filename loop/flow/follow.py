"""The bias-correction guard's decision is the reference's: made once, on the reference, and
followed by every variant judged against it (issue 42).

The guard keeps a compile's bias correction only where it lowers the output error on held-out
frames. Decided per compile, a near tie could go one way on the reference and the other on a
variant, so every bias downstream differed by a choice the user never made, and a clean
``scale_weights`` read ``confounded``. A variant in the reference's group shares its compile
options (``author.group_of``), so it sets no ``bias_correction`` of its own; one that does is in
a group of its own, with its own reference.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Literal

from loop.author.author import Authored
from loop.core.facts import CompileFacts
from loop.core.registry import compiler_class

Decision = Literal["kept", "dropped"]


def decision(info: CompileFacts) -> Decision | None:
    """What a compile's guard decided, as a variant follows it: "too few frames" kept the pass
    unguarded, so its variants keep it too; None: no guard ran (off, another backend, failed)."""
    guard = info.bias_guard
    if guard in ("kept", "too few frames"):
        return "kept"
    return "dropped" if guard == "dropped" else None


def leads(a: Authored, backend: str) -> bool:
    """A reference whose variants wait for its decision: its guard runs (a backend whose
    compiler refuses the guard, the Dataflow Compiler's, has none to wait for)."""
    return a.reference and _guarded(a) and "bias_correction_guard" not in compiler_class(backend).refused_compile_keys


def following(a: Authored, decided: Mapping[str, Decision | None]) -> Authored:
    """``a`` set to follow its reference's decision, where it has one to follow. The base again
    (no ops: a measurement knob's A/B) is the reference's own compile, and shares its cache entry."""
    given = decided.get(a.group)
    if a.reference or not a.variant.ops or a.variant.own_base or given is None or not _guarded(a):
        return a
    return replace(a, options=a.options.model_copy(update={"bias_guard_given": given}))


def _guarded(a: Authored) -> bool:
    return a.options.bias_correction and a.options.bias_correction_guard


__all__ = ["Decision", "decision", "following", "leads"]
