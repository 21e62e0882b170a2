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
    """The checks fail on the faults issues 45 and 51 saw: log ticks as raw mathtext in a smear
    (matplotlib's own formatter under math parsing off), two points' labels one on another,
    ``running at None`` over a list of ``name: -``, a study group's hash, a grid wider than the
    window, and a grid of one layer whose name on end makes it a tall empty box."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 2))
    ax = fig.add_subplot()
    ax.plot([2e3, 3e3, 5e3, 9e3], [1, 2, 3, 4])
    ax.set_xscale("log")
    ax.annotate("near-a", (3e3, 2))
    ax.annotate("near-b", (3e3, 2.05))
    buf = io.StringIO()
    import matplotlib

    with matplotlib.rc_context({"text.parse_math": False, "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg")
    wide = "<div class='grid' style='overflow-x:auto'><table><tr>" + "<td>XXXXXXXX</td>" * 300 + "</tr></table></div>"
    name = "<th style='writing-mode:vertical-rl'>/encoder/layer.0/attention/output/dense/MatMul</th>"
    tall = f"<div class='grid'><table><tr><th></th>{name}</tr><tr><th>c0</th><td>O</td></tr></table></div>"
    page = tmp_path / "bad.html"
    page.write_text(
        f"<html><body>{buf.getvalue()[buf.getvalue().index('<svg') :]}<p>running at None</p>"
        f"<ul><li>base: -</li></ul><ul></ul><p>range-g1-od34fb3c3/c0</p>{wide}{tall}</body></html>"
    )
    found = "\n".join(faults(seen(page)))
    for fault in ("raw mathtext", "tick labels overlap", "'None'", "'running at'", "says nothing", "an empty list"):
        assert fault in found, found
    assert "texts overlap: 'near-a' and 'near-b'" in found and "e-g1-od34fb3c3" in found
    assert "cut at its edge" in found and "an empty box" in found


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
    from loop.report.searches import group_names

    runs = pages["study"].parent / "study" / "runs"
    listed = json.loads(CliRunner().invoke(main, ["study", "range", "--runs", str(runs), "--json"]).output)
    text = seen(pages["study"]).text
    names = group_names(r["sweep"] for r in listed)
    assert len(listed) == 5
    for r in listed:
        named = f"{names[r['sweep']]}/{r['variant']} (run {r['run_id']})"
        row = next(line for line in text.splitlines() if named in line)
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


def test_a_study_pages_rates_are_drawn_on_its_roofline(pages: dict[str, Path]):
    """A measured study's candidates are raced in rounds: the roofline draws each at the rate its
    table shows (it drew nothing: raced runs recorded no bytes per inference)."""
    view = seen(pages["study"])
    roofline = next(s for s in view.sections if s[0] == "The bus roofline")
    assert roofline[2], "the roofline section draws nothing"
    drawn = next(f for f in view.figures if "Bus roofline" in f["texts"])
    assert any("range g0/c1" in t for t in drawn["texts"]), drawn["texts"]


def test_points_a_few_pixels_apart_keep_their_labels_apart(tmp_path: Path):
    """Labels of points a few pixels apart (too far apart in decades to share one label, on a
    roofline spanning six) were printed one on another: the browser finds no two texts over one another."""
    from report_records import run

    from loop.report.page import render

    runs = [run("slow", 1.0, 100, id=1), run("fast", 1e6, 100_000_000, id=2)]
    runs += [run(f"near-{i}", 1000.0 * 1.15**i, 10_000, id=3 + i) for i in range(3)]
    page = tmp_path / "roofline.html"
    page.write_text(render(runs, "t", "hailo10h-usb-1.5a", tmp_path))
    view = seen(page)
    drawn = next(f for f in view.figures if "Bus roofline" in f["texts"])
    assert {"near-0", "near-1", "near-2"} <= set(drawn["texts"])
    assert faults(view) == []


@pytest.mark.parametrize("name", ["sweep", "study"])
def test_a_run_far_below_its_reference_is_marked_in_the_table_and_the_audit(pages: dict[str, Path], name: str):
    """Whatever its verdict (the study's clean output grid 8 times as coarse, at -4.6 dB), a run
    flagged below-reference has a mark on its row in the page's table and in the audit grid."""
    from loop.core.kinds import Flag
    from loop.store.ledger import Ledger

    with Ledger(pages[name].parent / name / "runs" / "ledger.sqlite", readonly=True) as ledger:
        flagged = [r for r in ledger.records() if Flag.BELOW_REFERENCE in r.flags]
    assert flagged and (name == "sweep" or any(r.verdict == "clean" for r in flagged))
    lines = seen(pages[name]).text.splitlines()
    for r in flagged:  # a study's row names the run; a sweep's starts with its variant
        mine = [line for line in lines if f"/{r.variant} (run {r.id})" in line or line.startswith(f"{r.variant}\t")]
        assert any("\u25bc below its reference" in line for line in mine), mine
    audited = [line for line in lines if line.endswith("\u25bc") or "\u25bc\t" in line]
    assert len(audited) == len(flagged), audited
