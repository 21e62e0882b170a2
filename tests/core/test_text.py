"""Text for a person: hidden characters escaped, long text cut, a huge text never scanned whole."""

from loop.core import text
from loop.core.text import CUT, for_person


def test_control_characters_and_bidi_overrides_are_shown_escaped() -> None:
    assert for_person("a\x1b[2Jb\u202etxt.exe\r\x07") == "a\\x1b[2Jb\\u202etxt.exe\\r\\x07"
    assert for_person("zero\u200bwidth") == "zero\\u200bwidth"
    assert for_person("ünïcode, 漢字 and spaces stay") == "ünïcode, 漢字 and spaces stay"


def test_long_text_is_cut_with_a_mark_and_escapes_count_toward_the_limit() -> None:
    assert for_person("x" * 300) == "x" * 199 + CUT
    assert len(for_person("\x1b" * 300)) == 200 and for_person("\x1b" * 300).endswith(CUT)
    assert for_person("x" * 300, limit=None) == "x" * 300


def test_a_huge_text_is_cut_before_it_is_scanned(monkeypatch) -> None:
    seen = []
    real = text._hidden
    monkeypatch.setattr(text, "_hidden", lambda c: seen.append(c) or real(c))
    assert for_person("y" * 1_000_000 + "\x1b") == "y" * 199 + CUT
    assert len(seen) <= 201  # the characters kept, not the million cut
