"""A page as a person sees it: opened by a real headless Chromium with the network cut off, its
laid-out text measured by a script added to a copy of the page, its sections photographed.

Chromium is Debian's ``chromium`` package (``apt-get install chromium``; ``.ci/run`` installs it
where it is missing). Where it is not installed the rendered tests skip, unless
``LOOP_REQUIRE_BROWSER=1`` (``.ci/run`` sets it): then they fail, so CI never passes them unrun.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTH = 1200  # the window: the page's body is at most 1100 px wide
QUIET = [  # root, no GPU, and nothing fetched: no update checks, no sync, every request to a closed port
    "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
    "--proxy-server=127.0.0.1:9", "--enable-logging=stderr", "--v=0",
]  # fmt: skip


def need_chromium() -> str:
    """Chromium's path; a skip where it is missing, or a failure where LOOP_REQUIRE_BROWSER=1."""
    if CHROMIUM is None:
        why = "Chromium is not installed here (apt-get install chromium)"
        if os.environ.get("LOOP_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{why}, and LOOP_REQUIRE_BROWSER=1 asks for the rendered tests to run")
        pytest.skip(why)
    return CHROMIUM


def chromium(page: Path, *args: str, height: int = 2400) -> subprocess.CompletedProcess[str]:
    """Chromium run once over ``page`` with a profile of its own, thrown away after."""
    with tempfile.TemporaryDirectory(prefix="loop-chromium-") as profile:
        return subprocess.run(
            [need_chromium(), *QUIET, f"--user-data-dir={profile}", f"--window-size={WIDTH},{height}", *args,
             page.as_uri()],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip


def console(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The page's console lines in Chromium's log."""
    return [line for line in done.stderr.splitlines() if re.search(r":CONSOLE[:(]", line)]


# Run in the copy once the page has loaded: what the browser laid out, as JSON in a <pre>.
MEASURE = """<script>
(() => {
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const out = {figures: [], lists: [], sections: [], grids: []};
  document.querySelectorAll("svg").forEach((svg) => {
    const ticks = [], labels = [];
    svg.querySelectorAll('g[id^="xtick_"] text, g[id^="ytick_"] text').forEach((t) => {
      if (t.textContent.trim()) ticks.push({text: t.textContent, box: box(t)});
    });
    svg.querySelectorAll("text").forEach((t) => {
      if (t.textContent.trim()) labels.push({text: t.textContent, box: box(t)});
    });
    const texts = [...svg.querySelectorAll("text")].map((t) => t.textContent);
    out.figures.push({texts: texts, ticks: ticks, labels: labels});
  });
  document.querySelectorAll("ul").forEach((ul) => {
    out.lists.push([...ul.querySelectorAll("li")].map((li) => li.innerText));
  });
  document.querySelectorAll(".grid").forEach((g) => {
    const table = g.querySelector("table"), head = g.querySelector("tr");
    const wide = table ? box(table)[2] - box(table)[0] : 0, tall = head ? box(head)[3] - box(head)[1] : 0;
    out.grids.push([g.scrollWidth, g.clientWidth, wide, tall]);
  });
  document.querySelectorAll("h2").forEach((h) => {
    let drawn = false;  // a table or a plot before the next heading: something to look at
    for (let e = h.nextElementSibling; e && e.tagName !== "H2"; e = e.nextElementSibling) {
      drawn = drawn || e.matches("table, svg, .grid, .plots") || !!e.querySelector("table, svg");
    }
    out.sections.push([h.textContent, box(h)[1] + window.scrollY, drawn]);
  });
  out.text = document.body.innerText;
  out.width = document.documentElement.scrollWidth;
  out.viewport = window.innerWidth;
  out.height = document.documentElement.scrollHeight;
  const pre = document.createElement("pre");
  pre.id = "loop-measured";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


@dataclass(frozen=True)
class Seen:
    """What Chromium laid out: each figure's texts, and its tick labels and texts with their boxes
    (px), each list's items, each audit grid's scroll and client widths, its table's width and its
    header's height, each section's title, top and whether it holds a table or a plot, the page's
    visible text, and its widths and height."""

    figures: list[dict]
    lists: list[list[str]]
    grids: list[list[float]]
    sections: list[list]
    text: str
    width: float
    viewport: float
    height: float


def seen(page: Path) -> Seen:
    """``page`` laid out by Chromium, measured by :data:`MEASURE` in a copy of it beside it."""
    copy = page.with_name(page.stem + ".measured.html")
    copy.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
    done = chromium(copy, "--dump-dom")
    found = re.search(r'<pre id="loop-measured">(.*?)</pre>', done.stdout, re.S)
    assert done.returncode == 0 and found, done.stderr[-2000:]
    import html

    return Seen(**json.loads(html.unescape(found[1])))


MATHTEXT = re.compile(r"\\mathdefault|\\times|\^\{|\$[^$\n]*\$")
NOT_SAID = re.compile(r"\bNone\b|\bnan\b|running at|\S-g\d+-o[0-9a-f]{8}\b")  # the last: a study group's hash


def overlaps(ticks: list[dict], slack: float = 0.5) -> list[tuple[str, str]]:
    """Pairs of tick labels whose boxes overlap by more than ``slack`` px both ways."""
    out = []
    for i, a in enumerate(ticks):
        for b in ticks[i + 1 :]:
            (ax0, ay0, ax1, ay1), (bx0, by0, bx1, by1) = a["box"], b["box"]
            if min(ax1, bx1) - max(ax0, bx0) > slack and min(ay1, by1) - max(ay0, by0) > slack:
                out.append((a["text"], b["text"]))
    return out


def faults(view: Seen) -> list[str]:
    """What a person would see wrong: raw mathtext, tick labels or any two texts of a figure (a
    point's label, a title) printed over one another, a ``None``, a ``running at`` or a study
    group's hash in the text, an empty list or an item with nothing after its name, a grid or a
    page wider than the window (cut at its right edge in a screenshot), an audit grid whose header
    is taller than the grid is wide (a short grid's names on end: a tall empty box)."""
    found = []
    for n, fig in enumerate(view.figures):
        found += [f"figure {n}: raw mathtext {t!r}" for t in fig["texts"] if MATHTEXT.search(t)]
        found += [f"figure {n}: tick labels overlap: {a!r} and {b!r}" for a, b in overlaps(fig["ticks"])]
        said = set(overlaps(fig["ticks"]))
        found += [
            f"figure {n}: texts overlap: {a!r} and {b!r}" for a, b in overlaps(fig["labels"]) if (a, b) not in said
        ]
    found += [f"page text: {m[0]!r} in {line!r}" for line in view.text.splitlines() for m in NOT_SAID.finditer(line)]
    found += [f"page text: raw mathtext in {line!r}" for line in view.text.splitlines() if MATHTEXT.search(line)]
    found += ["an empty list" for items in view.lists if not items]
    found += [
        f"a list item that says nothing: {i!r}" for items in view.lists for i in items if re.search(r":\s*-?\s*$", i)
    ]
    found += [f"an audit grid {w:.0f} px wide in {c:.0f}: cut at its edge" for w, c, *_ in view.grids if w > c + 1]
    found += [
        f"an audit grid {wide:.0f} px wide under a header {tall:.0f} px tall: an empty box"
        for *_, wide, tall in view.grids
        if tall > wide
    ]
    if view.width > view.viewport:
        found.append(f"the page is {view.width:.0f} px wide in a {view.viewport:.0f} px window")
    return found


def screenshot(page: Path, shot: Path, height: int) -> subprocess.CompletedProcess[str]:
    done = chromium(page, f"--screenshot={shot}", height=height)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    return done


SHOT_WIDTH = 900  # px of a section's picture in the docs: the page's 1100 px body, scaled
SHOT_COLORS = 128  # a palette: each picture stays well under 150 KB


def section_shots(page: Path, folder: Path, prefix: str, only: Collection[str] = ()) -> dict[str, Path]:
    """Each section of ``page`` (from its heading to the next) that holds a table or a plot (of
    ``only``, where given), as a small PNG in ``folder`` named ``PREFIX-SLUG.png`` by its heading,
    by which it is returned (``The audit (perturbed: conv1)``: ``The audit``)."""
    from PIL import Image

    view = seen(page)
    folder.mkdir(parents=True, exist_ok=True)
    whole = folder / f"{prefix}.full.png"
    screenshot(page, whole, int(view.height) + 10)
    image = Image.open(whole).convert("RGB")
    tops = [*(top for _, top, _ in view.sections), view.height]
    out = {}
    for (heading, top, drawn), bottom in zip(view.sections, tops[1:], strict=True):
        title = heading.split(" (")[0]
        if not drawn or (only and title not in only):
            continue
        part = image.crop((40, int(top) - 8, 1160, int(bottom) - 8))
        part = part.resize((SHOT_WIDTH, round(part.height * SHOT_WIDTH / part.width)), Image.LANCZOS)
        slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
        path = out[title] = folder / f"{prefix}-{slug}.png"
        part.quantize(SHOT_COLORS, Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE).save(path, optimize=True)
    whole.unlink()
    return out
