"""``loop report``: each plot checked against known data, at its coordinates in the SVG."""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="loop report needs the report extra")

from report_records import SEED, confounded, run

from loop.core.record import Change, Scores
from loop.measure.link import LinkModel, fit, rungs_of
from loop.report.page import render
from loop.report.plots import (
    audit_cells,
    depth_ladder,
    device_bars,
    generations,
    link_ladder,
    roofline,
    svg,
    ttfo_bars,
)

SVG = "{http://www.w3.org/2000/svg}"
XLINK = "{http://www.w3.org/1999/xlink}"


def marks(text: str, gid: str) -> list[tuple[float, float]]:
    """Every vertex drawn under the element with id ``gid``: marker positions and path points."""
    root = ET.fromstring(text)
    node = next(e for e in root.iter() if e.get("id") == gid)
    defs = {id(p) for d in node.iter(f"{SVG}defs") for p in d.iter()}
    points = [(float(u.get("x")), float(u.get("y"))) for u in node.iter(f"{SVG}use")]
    for path in node.iter(f"{SVG}path"):
        if id(path) not in defs:
            nums = [float(n) for n in re.findall(r"-?[0-9.]+(?:e-?[0-9]+)?", path.get("d", ""))]
            points += list(zip(nums[::2], nums[1::2], strict=False))
    return points


def expected(fig, ax, xy: tuple[float, float]) -> tuple[float, float]:
    """Where data point ``xy`` lands in the SVG: matplotlib draws SVG at 72 dpi, y downwards."""
    fig.set_dpi(72)
    x, y = ax.transData.transform(xy)
    return float(x), fig.bbox.height - float(y)


def close(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return abs(a[0] - b[0]) < 0.05 and abs(a[1] - b[1]) < 0.05


def test_the_link_ladder_draws_each_rung_and_the_plateau_at_the_fitted_value():
    model = fit("seed", rungs_of(SEED), "test")
    fig = link_ladder(SEED, model)
    text = svg(fig)
    ax = fig.axes[0]
    drawn = marks(text, "rungs")
    for r in SEED:
        mb_s = (r.measure.bytes_in + r.measure.bytes_out) * r.measure.median_fps / 1e6
        want = expected(fig, ax, (r.measure.bytes_in + r.measure.bytes_out, mb_s))
        assert any(close(want, d) for d in drawn), (r.variant, want, drawn)
    plateau_y = {round(y, 2) for _, y in marks(text, "plateau")}
    assert plateau_y == {round(expected(fig, ax, (1e6, model.bandwidth_mb_s))[1], 2)}
    assert 285 < model.bandwidth_mb_s < 305 and f"fitted {model.bandwidth_mb_s:.0f} MB/s; plateau" in text


def test_the_depth_ladder_marks_its_knee():
    by = [
        {"depth": d, "rate_fps": {"median": f}, "spread_pct": 1.0}
        for d, f in ((1, 724.0), (2, 1400.0), (32, 2094.0), (64, 2090.0))
    ]
    r = run("block16k", 2094.0, 16_384, measure={"by_depth": by})
    fig = depth_ladder(r, 32)
    text = svg(fig)
    ax = fig.axes[0]
    assert all(
        any(close(expected(fig, ax, (d["depth"], d["rate_fps"]["median"])), p) for p in marks(text, "depths"))
        for d in by
    )
    assert {round(x, 2) for x, _ in marks(text, "knee")} == {round(expected(fig, ax, (32, 1000.0))[0], 2)}


def test_the_roofline_puts_runs_under_the_links_ceiling():
    model = LinkModel("l", 100.0, 0.5, 1.0, "test", {})
    runs = [run("small", 900.0, 10_000), run("big", 30.0, 4_000_000)]
    fig = roofline(runs, model)
    text = svg(fig)
    ax = fig.axes[0]
    for r in runs:
        assert any(close(expected(fig, ax, (r.measure.bytes_in, r.measure.median_fps)), p) for p in marks(text, "runs"))
    ceiling = marks(text, "ceiling")
    assert len(ceiling) == 64
    x0 = 10_000 / 4  # the ceiling's first point: a quarter of the smallest run's bytes
    assert close(ceiling[0], expected(fig, ax, (x0, 1 / model.busy_s(x0))))


def test_roofline_labels_sit_on_their_own_runs_and_huddled_ones_are_joined():
    # a run with no rate is not drawn, and must not shift the labels after it onto other points
    runs = [run("failed", 0.0, 10_000), run("base", 900.0, 10_000), run("weights", 910.0, 10_000)]
    fig = roofline([*runs, run("big", 30.0, 4_000_000)], LinkModel("l", 100.0, 0.5, 1.0, "test", {}))
    assert {t.get_text(): t.xy for t in fig.axes[0].texts} == {
        "base, weights": (10_000.0, 900.0),
        "big": (4_000_000.0, 30.0),
    }


def test_time_to_first_output_stacks_open_then_first():
    r = run("v", 10.0, 100, measure={"ttfo_parts": {"open_ms": 8.0, "transfer_ms": 1.5, "first_ms": 4.0}})
    fig = ttfo_bars([r])
    text = svg(fig)
    ax = fig.axes[0]
    for gid, (lo, hi) in {"ttfo-open-0": (0, 8.0), "ttfo-transfer-0": (8.0, 9.5), "ttfo-first-0": (9.5, 13.5)}.items():
        xs = [x for x, _ in marks(text, gid)]
        assert min(xs) == pytest.approx(expected(fig, ax, (lo, 0))[0], abs=0.05), gid
        assert max(xs) == pytest.approx(expected(fig, ax, (hi, 0))[0], abs=0.05), gid


def test_the_first_output_legend_names_only_the_parts_drawn():
    """A part no run timed (HailoRT's transfer, where the device does not say) is not in the legend."""
    untimed = ttfo_bars([run("v", 10.0, 100)])  # open and first timed, transfer not
    named = [t.get_text() for t in untimed.legends[0].get_texts()]
    assert named == ["open", "first"]
    timed = run("w", 10.0, 100, measure={"ttfo_parts": {"open_ms": 8.0, "transfer_ms": 1.5, "first_ms": 4.0}})
    assert [t.get_text() for t in ttfo_bars([timed]).legends[0].get_texts()] == ["open", "transfer", "first"]


def test_generations_draw_the_best_so_far_and_mark_the_confounded():
    gens = [
        run("c0", 1.0, 1, generation=0, verdict="clean", scores=Scores.from_json({"snr_db": 20.0})),
        run("c1", 1.0, 1, generation=1, verdict="confounded", scores=Scores.from_json({"snr_db": 40.0})),
        run("c2", 1.0, 1, generation=1, verdict="clean", scores=Scores.from_json({"snr_db": 18.0})),
        run("c3", 1.0, 1, generation=2, verdict="clean", scores=Scores.from_json({"snr_db": 25.0})),
    ]
    fig = generations(gens, "snr_db")
    text = svg(fig)
    ax = fig.axes[0]
    best = marks(text, "best")  # a step line: 20 at 0 and 1 (the confounded 40 does not count), then 25
    for point in ((0, 20.0), (1, 20.0), (2, 25.0)):
        assert any(close(expected(fig, ax, point), p) for p in best), point
    assert any(close(expected(fig, ax, (1, 40.0)), p) for p in marks(text, "confounded"))


def test_devices_side_by_side_bars_are_each_devices_snr():
    agree = {"snr_db_vs_first": 31.5, "max_abs_diff": 0.2, "values_differ": 3, "values_total": 64}
    r = run("v", 1.0, 1, scores=Scores.from_json({"devices": {"hailo-emulator": agree}}))
    fig = device_bars([r])
    text = svg(fig)
    top = min(y for _, y in marks(text, "devices-0"))
    assert top == pytest.approx(expected(fig, fig.axes[0], (0, 31.5))[1], abs=0.05)


def test_the_audit_grid_shows_outside_cells_unmistakably():
    from loop.report.grid import audit_grid

    r = confounded()
    cells = audit_cells(r)
    assert cells[("conv1", "out_scale")].state == "inside" and cells[("conv1", "out_scale")].magnitude == 2.0
    assert cells[("conv2", "bias")].state == "outside" and cells[("conv2", "bias")].magnitude == 7.5
    clean = run("weights", 10.0, 100, layers=r.layers, changes=(Change("conv1", "kernel", "weight scale x1.05"),))
    grid = "".join(audit_grid([r, clean], "s"))
    ET.fromstring(grid)  # well-formed: one table
    # a row per candidate, a column per layer: what changed there, and the largest magnitude
    found = re.findall(r"<td class='(\w+)' data-cell='([0-9-]+\w+)' title='([^']*)'>([^<]*)</td>", grid)
    assert [(c, d) for c, d, _, _ in found] == [
        ("inside", "0-0-inside"),
        ("outside", "0-1-outside"),
        ("inside", "1-0-inside"),
    ]
    assert [t for *_, t in found] == ["O 2x", "KB 7.5x", "K 1.05x"]
    assert "kernel: kernel aaaa -&gt; bbbb; bias: max |Δ| 0.3" in found[1][2]  # the tooltip says it in full
    assert found[1][2].startswith("K kernel; B bias (or its rounding) | ")  # its marks in words, where they are read
    assert re.findall(r"<tr><th>([^<]*)</th>", grid) == ["", "scale: confounded", "weights: n/a"]
    assert re.findall(r"<th class='layer[^']*'[^>]*>([^<]*)</th>", grid) == ["conv1", "conv2"]


def test_every_kind_of_change_has_its_own_mark_and_a_legend_entry(tmp_path: Path):
    """A function confound read ``K`` (a kernel change) and the legend had no word for it."""
    from loop.core.footprint import WHATS
    from loop.report.plots import MARKS, layer_cells, legend

    clamp = "t now spans [-1, 9], past the removed clamp's [0, 6]: values the float model clips now pass"
    changes = (
        Change("conv1", "function", clamp, allowed=False),
        Change("conv2", "kernel-rounding", "kernel aaaa -> bbbb, weight scale x1.02; float kernel unchanged"),
        Change("conv3", "unmapped", "a kind this report does not know"),
    )
    r = run("clip", 10.0, 100, verdict="confounded", changes=changes)
    assert {k: (c.state, c.detail) for k, c in layer_cells(r).items()} == {
        "conv1": ("outside", "F"),
        "conv2": ("inside", "k 1.02x"),
        "conv3": ("inside", "?"),
    }
    page = render([r], "t", "hailo10h-usb-1.5a", tmp_path)
    assert f"a cell says what changed there ({html.escape(legend())})" in page
    for what in (*WHATS, "kernel-rounding"):  # every kind the audit writes, the lead's new rounding one too
        mark = MARKS["bias" if what == "bias-rounding" else what][0]  # a scale alone has a mark of its own
        assert mark != "?" and f"{mark} " in legend(), what
    assert "F function" in legend() and "k kernel re-rounded on a moved grid" in legend()


def test_the_page_holds_every_section_and_loads_nothing(tmp_path: Path):
    gens = [
        run(
            f"c{i}",
            10.0,
            100,
            id=10 + i,
            generation=i // 2,
            verdict="clean" if i != 3 else "confounded",
            scores=Scores.from_json({"snr_db": 10.0 + i}),
        )
        for i in range(6)
    ]
    two = Scores.from_json(
        {
            "devices": {
                "hailo-emulator": {"snr_db_vs_first": 31.5, "max_abs_diff": 0.2, "values_differ": 3, "values_total": 64}
            }
        }
    )
    page = render(
        [*SEED, confounded(), *gens, run("two", 5.0, 100, id=30, scores=two)], "test", "hailo10h-usb-1.5a", tmp_path
    )
    for title in (
        "at a glance",
        "The audit",
        "Ladders",
        "bus roofline",
        "Time to first output",
        "Generations",
        "Devices side by side",
    ):
        assert title in page
    assert 'id="devices-0"' in page and 'id="best"' in page and 'id="confounded"' in page and 'id="ceiling"' in page
    assert "Recorded, not used in comparisons" in page and "kernel aaaa -&gt; bbbb" in page
    assert not re.search(r"""(src|href)=["']https?:""", page) and "<script" not in page
    ET.fromstring(re.search(r"<svg.*?</svg>", page, re.S).group(0))  # inline SVG that parses
    # a clip path or marker a figure refers to is defined once in the page, not by another figure too
    referred = set(re.findall(r"""(?:url\(#|href=["']#)([\w-]+)""", page))
    defined = re.findall(r"""\bid=["']([\w-]+)["']""", page)
    assert referred and all(defined.count(i) == 1 for i in referred)


def test_the_audit_heading_names_a_perturbed_layer_only_where_one_was(tmp_path: Path):
    plain = run("base", 10.0, 100, layers=confounded().layers)
    assert "perturbed:" not in render([plain], "t", "hailo10h-usb-1.5a", tmp_path)
    forced = run("f", 10.0, 100, layers=confounded().layers, perturb=({"op": "force_range_out", "layer": "conv2"},))
    assert "The audit (perturbed: conv2)" in render([plain, forced], "t", "hailo10h-usb-1.5a", tmp_path)
    other = run("g", 10.0, 100, layers=confounded().layers, perturb=({"op": "scale_weights", "layer": "conv1"},))
    both = render([plain, forced, other], "t", "hailo10h-usb-1.5a", tmp_path)
    assert "The audit (perturbed: conv2, conv1)" in both  # every candidate's layer, not the first run's


def test_each_reason_a_run_is_apart_names_its_layer():
    from loop.report.glance import glance

    text = glance([run("base", 10.0, 100, verdict="reference"), confounded()])
    assert "<li>scale: conv2 kernel: kernel aaaa -&gt; bbbb</li>" in text  # a change a line
    assert "<li>scale: conv2 bias: max |Δ| 0.3 at channel 1" in text


def test_a_clean_run_far_below_its_reference_is_marked_with_its_interval():
    """The verdict speaks of the footprint; the mark of the answer: a clean run whose SNR lies far
    below its reference's is marked beside its SNR, which carries its interval over the frames."""
    from loop.report.glance import glance

    scores = Scores.from_json({"snr_db": -4.6, "snr_db_ci95": [-6.0, -3.1]})
    wrong = run("eight", 10.0, 100, verdict="clean", scores=scores, flags=("below-reference",), id=2)
    fine = run("base", 10.0, 100, verdict="reference", scores=Scores.from_json({"snr_db": 30.0}))
    text = glance([fine, wrong])
    assert "-4.6 <span class='note'>[-6.0, -3.1]</span>" in text
    assert text.count("below its reference</span>") == 1


def test_only_the_latest_attempt_of_a_variant_is_shown():
    from dataclasses import replace

    from loop.report.page import latest

    failed = replace(run("w", 10.0, 100, id=2), status="failed", verdict=None)
    again = run("w", 11.0, 100, id=5)
    other_sweep = replace(run("w", 12.0, 100, id=3), sweep="s-g2")
    kept = latest([run("base", 9.0, 100, id=1), failed, other_sweep, again])
    assert [(r.sweep, r.variant, r.id) for r in kept] == [("s", "base", 1), ("s-g2", "w", 3), ("s", "w", 5)]


def test_a_row_of_a_dead_process_reads_interrupted_and_no_list_says_nothing():
    """Issue 45: a killed study's rows read ``running at None``, over a list of ``base: -``."""
    from dataclasses import replace

    from loop.report.glance import glance
    from loop.report.page import _ended

    rows = [replace(run(n, 10.0, 100, id=i), status="running", verdict=None) for i, n in enumerate(("base", "c0"))]
    live, dead = rows[0], _ended(rows[1], {rows[1].id})
    text = glance([live, dead])
    assert "None" not in text and "<td>running</td>" in text and "<td>interrupted</td>" in text
    assert "<ul" not in text  # neither row has more to say than its status
    failed = replace(run("w", 10.0, 100, id=5), status="failed", stage="compile", verdict=None, error="boom")
    text = glance([failed])
    assert "<td>failed at compile</td>" in text and "<li>w: boom</li>" in text


def test_an_audit_grid_wider_than_the_page_is_wrapped_into_blocks_of_every_layer():
    from loop.core.vocab import LayerPrint
    from loop.report.grid import audit_grid

    names = [f"/model/features/features.{i}/conv/Conv" for i in range(60)]
    changes = tuple(Change(n, "out_scale", "t: scale 0.1 -> 0.2 (2.00x), zero point 0 -> 0") for n in names)
    wide = run("c0", 10.0, 100, layers=tuple(LayerPrint(n) for n in names), changes=changes, verdict="clean")
    html_ = "".join(audit_grid([wide], "g0"))
    blocks = re.findall(r"<caption>g0 \(layers (\d+)-(\d+) of 60\)</caption>", html_)
    assert len(blocks) > 1 and blocks[0][0] == "1" and blocks[-1][1] == "60"
    assert [int(a) for a, _ in blocks[1:]] == [int(b) + 1 for _, b in blocks[:-1]]  # each goes on from the last
    assert sorted(re.findall(r"data-cell='0-(\d+)-", html_), key=int) == [str(i) for i in range(60)]


def test_a_study_glance_gives_each_candidate_its_rate_and_ratio_with_intervals():
    from report_records import raced

    from loop.report.glance import glance
    from loop.report.searches import Candidate, StudyView

    first, second = (
        raced(0, 30.0, (0.98, 1.0, 1.02), id=2, generation=0),
        raced(1, 28.0, (1.0, 1.05, 1.1), verdict="confounded", id=3, generation=0),
    )
    from dataclasses import replace

    again = replace(first, reused=True)
    study = StudyView("s", [Candidate(0, first), Candidate(0, second), Candidate(1, again)], [], {0: "done", 1: "done"})
    text = glance([first.run, second.run], [study])
    assert text.count("1.000 <span class='note'>[0.980, 1.020]</span>") == 2
    assert "1.050 <span class='note'>[1.000, 1.100]</span>" in text and "yes, run in g0" in text
    assert "Recorded, not used" not in text  # the study's own runs are its rows, not the glance's


def test_a_measured_studys_page_draws_its_raced_rates_on_the_roofline(tmp_path: Path, recipe: Path):
    """A study's generations race their rates in rounds, and its runs record their bytes per
    inference: the roofline draws each candidate at the rate its table shows (it drew nothing beside
    a table of rates), and the first-output section says why it has none."""
    from loop.store.ledger import Ledger
    from loop.study import Study

    fast = {"warmup": 2, "frames": 20, "repeats": 1, "min_duration_s": 0.05}
    study = Study("m", base=recipe, runs=tmp_path / "runs", measure=fast, inputs={"count": 2})
    (result,) = study.evaluate([[{"op": "scale_weights", "layer": "conv1", "factor": 1.05}]])
    study.close()
    assert result.rate_fps is not None and result.run.measure.median_fps is None
    assert result.bytes_in == 3 * 8 * 8 and result.bytes_out == 4 * 8 * 8  # the session's layout
    with Ledger(tmp_path / "runs" / "ledger.sqlite", readonly=True) as ledger:
        runs = ledger.records()
    page = html.unescape(render(runs, "t", "hailo10h-usb-1.5a", tmp_path / "runs"))
    roof = page[page.index("<h2>The bus roofline") : page.index("<h2>Time to first output")]
    assert "<svg" in roof and "c0</text>" in roof and "at the rate its rounds timed" in roof, roof[:2000]
    assert 'id="raced"' in roof and 'id="runs"' not in roof  # its own mark: a rounds' rate, not a median
    assert page.count("come from its generations' interleaved rounds") == 1, page


def test_a_score_only_run_reads_score_only_where_it_timed_nothing(tmp_path: Path):
    """A run that timed no first output says so in one word, not a dash for each of four figures."""
    from loop.core.record import Measurement

    timed = run("timed", 10.0, 100)
    scored = replace(run("scored", 10.0, 100), measure=Measurement(), flags=("score-only",))
    page = render([timed, scored], "t", "hailo10h-usb-1.5a", tmp_path)
    assert "(- / - / -)" not in page and "12.00 <span class='note'>(8.00 / - / 4.00)</span>" in page
    glance = page[: page.index("<h2>The audit")]
    assert glance.count("score-only") >= 2  # its time to first output and its rate


def test_a_confounded_runs_changes_are_listed_whole_never_cut_mid_word(tmp_path: Path):
    """Each change outside the footprint is its own line, whole up to 600 characters and cut only
    where a word ends; past eight, the rest are counted (a note read '5/8 channels bey…')."""
    long = "scale moved " + "far " * 60 + "5/8 channels beyond it"
    changes = tuple(Change(f"conv{i}", "bias", long, allowed=False) for i in range(10))
    bad = replace(confounded(), changes=changes)
    page = html.unescape(render([run("base", 10.0, 100), bad], "t", "hailo10h-usb-1.5a", tmp_path))
    listed = re.findall(r"<li>[^<]*: conv\d bias: ([^<]*)</li>", page)
    assert len(listed) == 8 and all(item == long for item in listed), listed[:1]
    assert "and 2 more</li>" in page
    cut = html.unescape(
        render(
            [replace(confounded(), changes=(Change("c", "bias", "word " * 200, False),))],
            "t",
            "hailo10h-usb-1.5a",
            tmp_path,
        )
    )
    (item,) = re.findall(r"<li>[^<]*: c bias: ([^<]*)</li>", cut)
    assert item.endswith("word…") and len(item) <= 601
