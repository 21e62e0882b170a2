"""``loop report`` against hostile names, targets and sizes (issue 24, items 1, 2, 10)."""

from __future__ import annotations

import io
import os
import re
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="loop report needs the report extra")

from click.testing import CliRunner
from report_records import SEED, confounded, generation, ledger, run

from loop.cli import main
from loop.core.errors import LoopError
from loop.core.record import Change
from loop.core.vocab import LayerPrint
from loop.measure.link import LinkModel
from loop.report import page as page_module
from loop.report import plots
from loop.report.page import render, write_page, write_report
from loop.report.plots import roofline, svg

MATH = ("$\\frac{a$", "$\\undefinedmacro$", "$x^{$")  # each ended the report with a ParseSyntaxException


@pytest.mark.parametrize("name", MATH)
def test_a_dollar_sign_in_any_name_is_text_not_mathtext(tmp_path: Path, name: str):
    layers = (LayerPrint(name), LayerPrint("conv2"))
    node = (Change(name, "out_scale", "t: scale 0.1 -> 0.2 (2.00x), zero point 0 -> 0"),)
    hostile = [
        replace(confounded(), variant=name, layers=layers, changes=(*confounded().changes, *node)),
        *[
            replace(r, sweep=f"{name}-g0", variant=name if r.variant == "c1" else r.variant)
            for r in generation("x", 0, 3)
        ],
        *SEED,
    ]
    page = render(hostile, name, "hailo10h-usb-1.5a", tmp_path)
    assert page.count(name) >= 5  # as it was given: text in the SVG and the HTML, not markup
    linked = svg(roofline(SEED, LinkModel(name, 100.0, 0.5, 1.0, "test", {})))
    assert f"{name} ceiling" in linked


def test_a_huge_stored_string_is_cut_on_the_page(tmp_path: Path):
    huge = "E" * 2_000_000
    failed = replace(run("boom", 0.0, 0), status="failed", stage="compile", verdict=None, error=huge)
    node = replace(confounded(), changes=(Change("conv2", "kernel", huge, allowed=False),))
    page = render([failed, node], "t", "hailo10h-usb-1.5a", tmp_path)
    # cut: an error at 200 characters, a change that keeps a run apart at 600 (its own line)
    assert len(page) < 200_000 and re.search("E{100,200}…", page) and "E" * 601 not in page


def test_each_figure_is_written_before_the_next_is_made_and_then_cleared(tmp_path: Path, monkeypatch):
    events: list[str] = []
    made: list[object] = []
    plot = plots.generations

    def spy(*args, **kw):
        events.append("made")
        made.append(fig := plot(*args, **kw))
        return fig

    class Out(io.StringIO):
        def write(self, text: str) -> int:
            events.extend("wrote" for _ in range(text.count("<svg")))
            return super().write(text)

    monkeypatch.setattr(plots, "generations", spy)
    runs = [*generation("s-g0", 0, 3), *generation("s-g1", 1, 3, start_id=10)]
    out = Out()
    write_page(out, runs, "t", "hailo10h-usb-1.5a", tmp_path, scores=("snr_db", "output_mean"))
    assert events.count("made") == 2 and "made', 'wrote', 'made', 'wrote" in str(events)  # streamed
    assert all(not fig.axes for fig in made)  # cleared as soon as written
    assert "Generations of s: snr_db" in out.getvalue() and "Generations of s: output_mean" in out.getvalue()


def test_a_generation_is_one_audit_grid_not_a_figure_a_variant(tmp_path: Path):
    page = render(generation("s-g0", 0, 40), "t", "hailo10h-usb-1.5a", tmp_path)
    audit = page[page.index("The audit") : page.index("<h2>", page.index("The audit"))]
    assert audit.count("<svg") == 0 and audit.count("<table class='audit'>") == 1 and audit.count("data-cell=") == 40


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    ledger(folder, generation("s-g0", 0, 2))
    for sub in ("artifacts", "cache", "studies"):
        (folder / sub).mkdir()
    return folder


@pytest.mark.parametrize(
    "where",
    ["ledger.sqlite", "ledger.sqlite-wal", "artifacts/x.html", "studies/s-g0.race.json", "links/a.html", "x.json"],
)
def test_the_runs_folders_own_files_are_refused(runs_dir: Path, where: str):
    target = runs_dir / where
    before = target.read_bytes() if target.is_file() else None
    with pytest.raises(LoopError, match=r"-o: .* in the runs folder"):
        write_report(runs_dir, None, target)
    assert (target.read_bytes() if target.is_file() else None) == before


def test_a_folder_a_pipe_or_a_link_is_refused_and_left_alone(runs_dir: Path, tmp_path: Path):
    (tmp_path / "pipe").unlink(missing_ok=True)
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "link").symlink_to(runs_dir / "ledger.sqlite")
    for target, kind in (
        (tmp_path, "a folder"),
        (tmp_path / "pipe", "not a regular file"),
        (tmp_path / "link", "a link"),
    ):
        with pytest.raises(LoopError, match=rf"-o: .* is {kind}"):
            write_report(runs_dir, None, target)
    assert (tmp_path / "pipe").is_fifo() and (tmp_path / "link").is_symlink()


def test_cli_refuses_a_bad_target_in_one_line(runs_dir: Path):
    ledger_bytes = (runs_dir / "ledger.sqlite").read_bytes()
    for target in (runs_dir / "ledger.sqlite", runs_dir.parent):
        result = CliRunner().invoke(main, ["report", "--runs", str(runs_dir), "-o", str(target)])
        assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "Traceback" not in result.output
    assert (runs_dir / "ledger.sqlite").read_bytes() == ledger_bytes


def test_the_runs_folder_takes_an_html_page_at_its_top(runs_dir: Path, tmp_path: Path):
    assert write_report(runs_dir, None, None) == runs_dir / "report.html"
    assert write_report(runs_dir, None, runs_dir / "mine.html").read_text().startswith("<!doctype html>")


def test_a_report_that_fails_midway_leaves_the_old_page_and_no_temporary_file(
    runs_dir: Path, tmp_path: Path, monkeypatch
):
    target = tmp_path / "out" / "r.html"
    target.parent.mkdir()
    target.write_text("old page")

    def broken(self):
        yield "<p>half"
        raise RuntimeError("drawing failed")

    monkeypatch.setattr(page_module.Page, "ttfo", broken)
    with pytest.raises(RuntimeError):
        write_report(runs_dir, None, target)
    assert target.read_text() == "old page" and os.listdir(target.parent) == ["r.html"]


def test_an_unknown_link_is_refused_and_nothing_is_written(runs_dir: Path, tmp_path: Path):
    with pytest.raises(LoopError, match="unknown link 'nowhere'"):
        write_report(runs_dir, None, tmp_path / "r.html", "nowhere")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]


def test_a_refused_target_is_named_escaped(runs_dir: Path, tmp_path: Path):
    target = tmp_path / "out\x1b]0;owned\x07"
    target.mkdir()
    with pytest.raises(LoopError) as refused:
        write_report(runs_dir, None, target)
    assert "\x1b" not in str(refused.value) and "out\\x1b]0;owned\\x07 is a folder" in str(refused.value)


def test_long_texts_read_from_the_ledger_are_let_go_before_the_page_is_drawn(tmp_path: Path, monkeypatch):
    huge = "E" * 3_000_000
    failed = replace(run("boom", 0.0, 0), status="failed", stage="compile", verdict=None, error=huge, stderr_tail=huge)
    node = replace(confounded(), changes=(Change("conv2", "kernel", huge, allowed=False),))
    ledger(tmp_path / "runs", [failed, node])
    seen: list = []
    monkeypatch.setattr(page_module, "write_page", lambda out, runs, *a: seen.extend(runs))
    write_report(tmp_path / "runs", None, tmp_path / "r.html")
    texts = [t for r in seen for t in (r.error or "", r.stderr_tail, *(c.detail for c in r.changes))]
    assert len(seen) == 2 and max(map(len, texts)) == 201
