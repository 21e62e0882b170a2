"""The report as a person sees it: rendered by a real headless Chromium with the network cut off,
screenshot taken, console read. Where Chromium is not installed this says so and skips
(Debian: ``apt-get install chromium``)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="loop report needs the report extra")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed here (apt-get install chromium)")


def render_in_chromium(page: Path, shot: Path) -> list[str]:
    """Screenshot ``page`` with every network request sent to a closed port; the console's lines."""
    done = subprocess.run(
        [CHROMIUM or "chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--proxy-server=127.0.0.1:9", "--enable-logging=stderr", "--v=0", "--window-size=1200,2400",
         f"--screenshot={shot}", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    return [line for line in done.stderr.splitlines() if re.search(r":CONSOLE[:(]", line)]


def test_the_console_check_can_fail(tmp_path: Path):
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>missing();</script></body></html>")
    assert any("missing is not defined" in line for line in render_in_chromium(bad, tmp_path / "bad.png"))


def test_the_report_renders_with_no_console_errors_and_no_network(tmp_path: Path):
    from PIL import Image
    from report_records import SEED, confounded

    from loop.report.page import render

    page = tmp_path / "report.html"
    page.write_text(render([*SEED, confounded()], "rendered", "hailo10h-usb-1.5a", tmp_path))
    shot = tmp_path / "report.png"
    assert render_in_chromium(page, shot) == []
    image = Image.open(shot).convert("L")
    # drawn, not blank: the plots put thousands of dark pixels on the page
    assert image.histogram()[:128] and sum(image.histogram()[:128]) > 5000
