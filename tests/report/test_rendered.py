"""The report as a person sees it (issue 45): rendered by a real headless Chromium with the network
cut off, its laid-out text read back, its sections photographed (:mod:`browser`). The reports of
the example sweep, of a study of three candidates and of a base flagged quantization-ruined
(:mod:`report_folders`) carry no raw mathtext, no tick labels over one another, no ``running at
None``, and nothing cut at the page's right edge. Skipped where Chromium is missing, failed there
under ``LOOP_REQUIRE_BROWSER=1`` (CI)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="loop report needs the report extra")

from browser import chromium, console, faults, need_chromium, screenshot, section_shots, seen
from report_folders import PICTURES

SHOT_BYTES = 150_000


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    need_chromium()  # before the sweeps
    from report_folders import reports

    return reports(tmp_path_factory.mktemp("rendered"))


def test_the_console_check_can_fail(tmp_path: Path):
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>missing();</script></body></html>")
    done = chromium(bad, f"--screenshot={tmp_path / 'bad.png'}")
    assert any("missing is not defined" in line for line in console(done))


def test_what_a_person_would_see_wrong_is_found(tmp_path: Path):
    """The checks fail on the faults issue 45 saw: log ticks as raw mathtext in a smear (matplotlib's
    own formatter under math parsing off), ``running at None`` over a list of ``name: -``, and a
    grid wider than the window."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 2))
    ax = fig.add_subplot()
    ax.plot([2e3, 3e3, 5e3, 9e3], [1, 2, 3, 4])
    ax.set_xscale("log")
    buf = io.StringIO()
    import matplotlib

    with matplotlib.rc_context({"text.parse_math": False, "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg")
    wide = "<div class='grid' style='overflow-x:auto'><table><tr>" + "<td>XXXXXXXX</td>" * 300 + "</tr></table></div>"
    page = tmp_path / "bad.html"
    page.write_text(
        f"<html><body>{buf.getvalue()[buf.getvalue().index('<svg') :]}<p>running at None</p>"
        f"<ul><li>base: -</li></ul><ul></ul>{wide}</body></html>"
    )
    found = "\n".join(faults(seen(page)))
    for fault in ("raw mathtext", "tick labels overlap", "'None'", "'running at'", "says nothing", "an empty list"):
        assert fault in found, found
    assert "an audit grid" in found


@pytest.mark.parametrize("name", list(PICTURES))
def test_each_report_reads_in_chromium(pages: dict[str, Path], name: str, tmp_path: Path):
    view = seen(pages[name])
    assert faults(view) == []
    assert sum(len(f["ticks"]) for f in view.figures) > 5  # the checks had labels to check
    done = screenshot(pages[name], tmp_path / "page.png", int(view.height) + 10)
    assert console(done) == []
    shots = section_shots(pages[name], tmp_path, name, PICTURES[name])  # as tools/report_screenshots.py does
    assert sorted(shots) == sorted(PICTURES[name])
    assert all(p.stat().st_size < SHOT_BYTES for p in shots.values()), {
        p.name: p.stat().st_size for p in shots.values()
    }


def test_a_study_page_shows_each_candidates_rate_and_ratio_as_loop_study_does(pages: dict[str, Path]):
    """Every candidate ``loop study --json`` lists has its rate and rate ratio, with their intervals,
    on the study's page, in its row; dead rows read ``interrupted``."""
    import json
    import re

    from click.testing import CliRunner

    from loop.cli import main

    runs = pages["study"].parent / "study" / "runs"
    listed = json.loads(CliRunner().invoke(main, ["study", "range", "--runs", str(runs), "--json"]).output)
    text = seen(pages["study"]).text
    assert len(listed) == 4
    for r in listed:
        row = next(line for line in text.splitlines() if f"{r['sweep']}/{r['variant']} (run {r['run_id']})" in line)
        lo, hi = r["rate_ci95"]
        low, high = r["rate_ratio_ci95"]
        assert f"{r['rate_fps']:.1f} [{lo:.1f}, {hi:.1f}]" in row, row
        assert f"{r['rate_ratio']:.3f} [{low:.3f}, {high:.3f}]" in row, row
    reused = [line for line in text.splitlines() if "yes, run in g0" in line]
    assert len(reused) == 1 and reused[0].startswith("g1")
    assert len(re.findall(r"^(base|c0)\tinterrupted", text, re.M)) == 2, text


def test_a_ruined_bases_page_carries_the_fix_the_terminal_printed(pages: dict[str, Path]):
    """The measured variant a ruined base's flag prints on the terminal, with its precision lines to
    paste, is on its page too (it was only on the terminal)."""
    text = seen(pages["ruined"]).text
    assert "flagged quantization-ruined" in text and "the signal is lost at:" in text
    assert "- name: sixteen-bits" in text and "{op: precision, layer: " in text
