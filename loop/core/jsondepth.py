"""JSON read from a file someone else could have written (a ledger row, a link file), with its
nesting bounded before it is parsed.

``json.loads`` recurses once per level, and so does every reader after it (``json.dumps``, a
report walking the data): a value nested a few thousand deep raises ``RecursionError`` somewhere
past the one place that could say which file or row held it. Counting the depth first, without
recursing, turns it into one :class:`TooDeep` (a ``ValueError``, as a parse error is) at the door.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64  # what loop writes nests under 10 deep; a user scorer's scores get room to spare

# a JSON string, escapes and all (unrolled so a long string costs one pass): its brackets are text
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


class TooDeep(ValueError):
    """JSON nested deeper than the reader allows."""


def depth(text: str) -> int:
    """How deep ``text``'s arrays and objects nest (0 for a scalar), counted without recursing."""
    bare = _STRING.sub('""', text)
    if bare.count("[") + bare.count("{") <= 1:
        return int("[" in bare or "{" in bare)
    level = deepest = 0
    for bracket in _BRACKET.findall(bare):
        level += 1 if bracket in "[{" else -1
        deepest = max(deepest, level)
    return deepest


def loads(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads(text)``, refused with :class:`TooDeep` when it nests deeper than ``max_depth``."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    found = depth(text)
    if found > max_depth:
        raise TooDeep(f"nested {found} deep (at most {max_depth})")
    return json.loads(text)


__all__ = ["MAX_DEPTH", "TooDeep", "depth", "loads"]
