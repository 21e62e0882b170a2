"""Rewrite docs/report/*.png, the pictures of docs/report.md: the three runs folders the rendered
test builds (tests/report_folders.py), reported, opened in Chromium and photographed a section at a
time as that test does (tests/browser.py). Needs Chromium (``apt-get install chromium``) and
``loop[report]``; takes about half a minute.

    python tools/report_screenshots.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "report"


def main() -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from browser import section_shots
    from report_folders import PICTURES, reports

    DOCS.mkdir(exist_ok=True)
    for old in DOCS.glob("*.png"):
        old.unlink()
    with tempfile.TemporaryDirectory(prefix="loop-shots-") as scratch:
        for name, page in reports(Path(scratch)).items():
            for title, path in section_shots(page, DOCS, name, PICTURES[name]).items():
                print(f"{path.relative_to(ROOT)}  {path.stat().st_size // 1024} KB  {title}")


if __name__ == "__main__":
    main()
