"""Text for a person: every name and stored string passes here before a terminal, a page or an
error line shows it. Control characters (ESC, CR, BEL...) and bidi overrides are shown escaped
(``\\x1b``, ``\\u202e``), so a crafted name cannot move the cursor, retitle the terminal or
turn ``txt.exe`` into ``exe.txt``; long text is cut with a mark."""

from __future__ import annotations

import unicodedata

CUT = "…"
LIMIT = 200


def _escaped(c: str) -> str:
    code = ord(c)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _hidden(c: str) -> bool:
    """Not printable (Cc, Cf incl. the bidi overrides and zero-width marks, Cs, Co, Cn, Zl, Zp)."""
    return not c.isprintable() or unicodedata.category(c) == "Cf"


def for_person(text: object, limit: int | None = LIMIT) -> str:
    """``text`` as a person may safely see it: hidden characters escaped, then at most
    ``limit`` characters (the cut marked with an ellipsis)."""
    s = str(text)
    if limit is not None and len(s) > limit:  # cut first: a 100 MB text is not scanned whole
        s = s[:limit] + CUT
    if any(map(_hidden, s)):
        s = "".join(_escaped(c) if _hidden(c) else c for c in s)
    if limit is not None and len(s) > limit:
        s = s[: max(limit - 1, 0)] + CUT
    return s


__all__ = ["for_person"]
