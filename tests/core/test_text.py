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


def test_a_name_is_cut_in_the_middle_and_prose_at_the_end_to_the_width() -> None:
    name = "/backbone/stage3/block2/conv/Conv"
    assert text.cut(name, 20) == "/backb" + CUT + "ck2/conv/Conv" and len(text.cut(name, 20)) == 20
    assert text.cut("the reference failed at compile", 12, middle=False) == "the referen" + CUT
    assert text.cut(name, len(name)) == name and text.cut(name, 1) == CUT and text.cut(name, 0) == ""


def test_the_screen_is_the_terminals_width_else_120(monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "87")
    assert text.screen_width() == 87
    monkeypatch.delenv("COLUMNS")
    monkeypatch.setattr(text.shutil, "get_terminal_size", lambda fallback: __import__("os").terminal_size(fallback))
    assert text.screen_width() == 120
