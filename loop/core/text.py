"""Text for a person: every name and stored string passes here before a terminal, a page or an
error line shows it. Control characters (ESC, CR, BEL...) and bidi overrides are shown escaped
(``\\x1b``, ``\\u202e``), so a crafted name cannot move the cursor, retitle the terminal or
turn ``txt.exe`` into ``exe.txt``; long text is cut with a mark."""

from __future__ import annotations

import shutil

CUT = "…"
LIMIT = 200
SCREEN = 120  # columns a table fits where the terminal's width is unknown (a pipe, a file)


def _hidden(c: str) -> bool:
    """Not printable: Python's own test (Cc, Cf with the bidi overrides and zero-width marks,
    Cs, Co, Cn, and every separator but the space)."""
    return not c.isprintable()


def _escaped(c: str) -> str:
    return repr(c)[1:-1]  # Python's escape: \r, \x1b, \u202e


def for_person(text: object, limit: int | None = LIMIT) -> str:
    """``text`` as a person may safely see it: hidden characters escaped, then at most
    ``limit`` characters (the cut marked with an ellipsis)."""
    s = str(text)
    if limit is not None and len(s) > limit:  # cut first: a 100 MB text is not scanned whole
        s = s[:limit] + CUT
    if not s.isprintable():
        s = "".join(_escaped(c) if _hidden(c) else c for c in s)
    if limit is not None and len(s) > limit:
        s = s[: max(limit - 1, 0)] + CUT
    return s


def cut(text: str, width: int, middle: bool = True) -> str:
    """``text`` (already as :func:`for_person` shows it) in at most ``width`` characters, the
    cut marked: in the middle for a name, whose both ends tell (``/backbone/stag…/conv/Conv``),
    at the end for prose (``middle=False``)."""
    if len(text) <= width:
        return text
    if width < 2:
        return CUT[:width]
    head = (width - 1) // 3 if middle else width - 1
    return text[:head] + CUT + text[len(text) - (width - 1 - head) :]


def screen_width() -> int:
    """The terminal's columns (``COLUMNS`` first, as ``shutil`` reads it), else :data:`SCREEN`."""
    return shutil.get_terminal_size((SCREEN, 24)).columns


__all__ = ["cut", "for_person", "screen_width"]
