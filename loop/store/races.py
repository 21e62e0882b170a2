"""A generation's race file (``runs/studies/SWEEP.race.json``, written by a study after its
rounds) read back and checked: each raced run's ratio to its reference, by run id. A file that
is not what a race writes is one :class:`LoopError` naming it, never a traceback; its
generation then keeps the ratios from the runs' own figures."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from loop.core.errors import LoopError
from loop.store.files import read_regular, safe_component
from loop.store.studies import Ratio, RatioRow

KEPT = ("rounds", "flags", "floor_pct")  # the race's own figures, copied to each of its runs


def _positive(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _sound(row: dict[str, Any]) -> bool:
    dropped, floor = row.get("dropped"), row.get("floor_pct")
    return (
        all(_positive(row.get(k)) for k in ("ratio", "low", "high"))
        and (dropped is None or (isinstance(dropped, int) and not isinstance(dropped, bool) and dropped >= 0))
        and (floor is None or floor == 0 or _positive(floor))
    )


def read_race(path: Path) -> dict[int, dict[str, Any]]:
    """Each raced run's row (ratio, low, high, dropped: the round it left or None; rounds,
    flags, floor_pct) by run id; {} where there is no file."""
    try:
        safe_component(path.name)
        data = json.loads(read_regular(path))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, LoopError, RecursionError) as exc:
        raise LoopError(f"{path}: unreadable ({exc.__class__.__name__}); ratios from the ledger") from None
    try:
        by_sha = {str(c["artifact_sha"]): c for c in data["candidates"]}
        found = {int(i): {**by_sha[sha], **{k: data.get(k) for k in KEPT}}
                 for i, sha in data["runs"].items() if sha in by_sha}  # fmt: skip
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise LoopError(f"{path}: not a race ({exc.__class__.__name__}); ratios from the ledger") from None
    if not all(_sound(row) for row in found.values()):
        raise LoopError(f"{path}: a ratio, round or floor out of range; ratios from the ledger")
    return found


def as_rows(found: dict[int, dict[str, Any]]) -> dict[int, RatioRow]:
    """``read_race``'s rows as the ledger keeps ratios (no reference run per row, no rate)."""
    out = {}
    for run_id, row in found.items():
        floor = row.get("floor_pct")
        out[run_id] = RatioRow(
            run_id,
            0,  # the file named its reference beside the rows, not in them
            Ratio(float(row["ratio"]), float(row["low"]), float(row["high"])),
            row.get("rounds"),
            None if floor is None else float(floor),
            row.get("dropped"),
            tuple(str(f) for f in row.get("flags") or ()),
            None,
        )
    return out


__all__ = ["as_rows", "read_race"]
