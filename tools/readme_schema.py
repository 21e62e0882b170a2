"""Rewrite docs/sweep-file.md's sweep-file reference tables from loop/author/schema.py (run after changing it)."""

from __future__ import annotations

from pathlib import Path

from loop.author.schema_doc import splice

README = Path(__file__).resolve().parent.parent / "docs" / "sweep-file.md"


def main() -> None:
    README.write_text(splice(README.read_text()))


if __name__ == "__main__":
    main()
