"""The README a newcomer reads in two minutes (issue 35): at most 200 lines, and every file it or a
page under docs/ names lies inside the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NAMED = re.compile(r"`((?:docs|graphs|benchmarks|shim|tools|loop|tests)/[A-Za-z0-9_./-]+)`|\]\(([^)#]+)\)")


def test_the_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def test_every_file_a_page_names_exists_in_the_repository() -> None:
    missing = []
    for page in PAGES:
        for match in NAMED.finditer(page.read_text()):
            name = (match[1] or match[2]).rstrip(".,:")  # shim/build/: built here, never committed
            if name.startswith(("http://", "https://", "shim/build")) or "*" in name or "<" in name:
                continue
            target = (ROOT / name).resolve()
            if ROOT not in target.parents or not target.exists():
                missing.append(f"{page.relative_to(ROOT)}: {name}")
    assert missing == []
