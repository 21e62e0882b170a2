"""The report for searches (issue 23): SNR against rate ratio with its front, generations by any
score, and a race file read as a study reads it, or set aside in one line when it is not one."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="loop report needs the report extra")

from click.testing import CliRunner
from report_records import generation, ledger

from loop.cli import main
from loop.core.record import Change, Measurement
from loop.measure.results import pareto as front
from loop.measure.stats import widened
from loop.report.page import render
from loop.report.plots import pareto, svg
from loop.report.searches import search_results


def study(tmp_path: Path) -> list:
    """Two generations of study ``s``: g0 plain; in g1, c1 confounded and c2 host-busy, and
    a race file whose ratios for c0 and c3 replace the ledger's."""
    g0 = generation("s-g0", 0, 3)
    g1 = generation("s-g1", 1, 4, start_id=10)
    g1[2] = replace(g1[2], verdict="confounded", changes=(Change("conv1", "kernel", "kernel a -> b", allowed=False),))
    busy = {**g1[3].measure.to_dict(), "flags": ["host-busy"]}
    g1[3] = replace(g1[3], measure=Measurement.from_dict(busy))
    race = {
        "reference_run": g1[0].id,
        "runs": {str(g1[1].id): "aaa", str(g1[4].id): "ddd"},
        "candidates": [
            {"artifact_sha": "aaa", "ratio": 1.2, "low": 1.15, "high": 1.25, "dropped": None},
            {"artifact_sha": "ddd", "ratio": 0.9, "low": 0.88, "high": 0.92, "dropped": 4},
        ],
        "rounds": 20,
        "floor_pct": 1.0,
    }
    (tmp_path / "studies").mkdir(exist_ok=True)
    (tmp_path / "studies" / "s-g1.race.json").write_text(json.dumps(race))
    return [*g0, *g1]


def test_a_study_reads_as_results_with_the_races_ratios(tmp_path: Path):
    studies, notes = search_results(study(tmp_path), tmp_path)
    assert notes == [] and list(studies) == ["s"]
    by = {(r.sweep, r.variant): r for r in studies["s"]}
    assert len(by) == 7  # the references are not candidates
    raced = by[("s-g1", "c0")]
    assert raced.rate_ratio == 1.2 and raced.ratio_basis == "interleaved, 20 rounds"
    assert raced.interval("rate_ratio") == pytest.approx(widened((1.2, 1.15, 1.25), 1.0)[1:])
    assert by[("s-g0", "c2")].rate_ratio == pytest.approx(102.0 / 100.0) and by[("s-g0", "c2")].ratio_basis == "ledger"
    assert not by[("s-g1", "c1")].usable and not by[("s-g1", "c2")].usable


def test_the_pareto_view_draws_intervals_keeps_the_apart_off_the_front(tmp_path: Path):
    results = search_results(study(tmp_path), tmp_path)[0]["s"]
    on_front = front(results)
    fig = pareto(results, on_front, "Search: s")
    ax = fig.axes[0]
    lines = {line.get_gid(): line.get_xydata().tolist() for line in ax.lines}
    usable = [r for r in results if r.usable]
    assert sorted(lines["usable"]) == sorted([r.rate_ratio, r.value("snr_db")] for r in usable)
    apart = {(r.variant, r.rate_ratio, r.value("snr_db")) for r in results if not r.usable}
    assert {(round(x, 6), y) for x, y in lines["apart"]} == {(round(x, 6), y) for _, x, y in apart}
    # each usable ratio's interval as a bar from its low to its high end, at its SNR
    bars = [c for c in ax.collections if c.get_gid() == "usable-ratio-ci"]
    segments = sorted((round(s[0][0], 9), round(s[1][0], 9), s[0][1]) for c in bars for s in c.get_segments())
    want = sorted(
        (round(r.interval("rate_ratio")[0], 9), round(r.interval("rate_ratio")[1], 9), r.value("snr_db"))
        for r in usable
    )
    assert len(bars) == 1 and segments == want
    # c0 of g1 was raced 1.2x [1.15, 1.25] at SNR 20: nothing usable beats it on rate, so it is on the front;
    # c3 of g1 has the best SNR (23) of all: on the front too
    names = {(r.sweep, r.variant) for r in on_front}
    assert ("s-g1", "c0") in names and ("s-g1", "c3") in names
    assert not names & {("s-g1", "c1"), ("s-g1", "c2")}
    assert sorted(lines["front"]) == sorted([r.rate_ratio, r.value("snr_db")] for r in on_front)
    text = svg(fig)
    assert all(f'id="{gid}"' in text for gid in ("usable", "apart", "front", "usable-ratio-ci"))


def test_generations_are_plotted_by_each_score_asked_and_the_rest_named(tmp_path: Path):
    runs = study(tmp_path)
    page = render(runs, "t", "hailo10h-usb-1.5a", tmp_path, scores=("output_mean", "accuracy"))
    gens = page[page.index("<h2>Generations") :]
    assert "Generations of s: output_mean" in gens and "Generations of s: snr_db" not in gens
    assert "No generation has accuracy; scores here: output_mean, snr_db" in gens


NOT_RACES = {
    "a negative ratio": (
        '{"runs": {"11": "aaa"}, "candidates": [{"artifact_sha": "aaa", "ratio": -1}]}',
        "out of range",
    ),
    "a dropped round that is no round": (
        '{"runs": {"11": "a"}, "candidates": [{"artifact_sha": "a", "ratio": 1, "low": 1, "high": 1, "dropped": true}]}',  # noqa: E501
        "out of range",
    ),
    "a list": ("[1, 2]", "not a race"),
    "not JSON": ("{", "unreadable"),
    "a folder": (None, "unreadable"),
}


@pytest.mark.parametrize("case", list(NOT_RACES))
def test_a_race_file_that_is_not_one_is_named_and_the_ledger_ratios_kept(tmp_path: Path, case: str):
    runs = study(tmp_path)
    text, said = NOT_RACES[case]
    path = tmp_path / "studies" / "s-g1.race.json"
    if text is None:
        path.unlink()
        path.mkdir()
    else:
        path.write_text(text)
    studies, notes = search_results(runs, tmp_path)
    assert len(notes) == 1 and "s-g1.race.json: " in notes[0] and said in notes[0], notes
    assert all(r.ratio_basis == "ledger" for r in studies["s"])
    page = render(runs, "t", "hailo10h-usb-1.5a", tmp_path)
    assert "s-g1.race.json: " in page and 'id="front"' in page


def test_each_search_has_its_own_generations_chart(tmp_path: Path):
    """Two searches in one ledger are two charts, each with its own best so far, never one line."""
    runs = [*generation("s-g0", 0, 3), *generation("t-g0", 0, 3, start_id=10)]
    gens = render(runs, "t", "hailo10h-usb-1.5a", tmp_path)
    gens = gens[gens.index("<h2>Generations") :]
    assert "Generations of s: snr_db" in gens and "Generations of t: snr_db" in gens
    assert gens.count('id="best"') == 2


def test_loop_report_takes_a_score_key(tmp_path: Path):
    runs_dir = tmp_path / "runs"
    ledger(runs_dir, generation("s-g0", 0, 3))
    out = tmp_path / "r.html"
    result = CliRunner().invoke(main, ["report", "--runs", str(runs_dir), "--score", "output_mean", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "Generations of s: output_mean" in out.read_text() and "Search: s" in out.read_text()


def test_the_front_is_named_in_a_table_beside_its_plot(tmp_path: Path):
    page = render(study(tmp_path), "t", "hailo10h-usb-1.5a", tmp_path)
    table = page[page.index("On the front:") :]
    table = table[: table.index("</table>")]
    # its generation as "s g1", the sweep's own name its tooltip
    assert "<td><span title='s-g1'>s g1</span></td><td>c0</td><td>1.200 <span class='note'>[1.151, 1.2" in table
    assert "interleaved, 20 rounds" in table and "<td>c1</td>" not in table  # c1 of g1 is confounded


def test_a_groups_name_keeps_its_hash_only_where_two_would_share_a_name():
    """A study's generation reads ``range g1``, a group with compile options of its own too (its sweep,
    ``range-g1-o<hash>``, read as a hash); the hash stays only where another group takes the name."""
    from loop.report.searches import group_names

    assert group_names(["range-g0", "range-g1-od34fb3c3", "plain"]) == {
        "range-g0": "range g0",
        "range-g1-od34fb3c3": "range g1",
        "plain": "plain",
    }
    both = group_names(["range-g1", "range-g1-od34fb3c3", "range-g1-o0123abcd"])
    assert both == {
        "range-g1": "range g1",
        "range-g1-od34fb3c3": "range g1, options d34fb3c3",
        "range-g1-o0123abcd": "range g1, options 0123abcd",
    }
    assert group_names(["range-g0", "range g0"]) == {"range-g0": "range-g0", "range g0": "range g0"}
