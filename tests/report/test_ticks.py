"""Tick labels a person can read (issue 45), checked on matplotlib's own text extents before the
SVG is written: plain numbers on every log axis, none printed over another, legends off the data,
and the noise plot's long ONNX names cut to what tells them apart, whole in their tooltips."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("matplotlib", reason="loop report needs the report extra")

from matplotlib.figure import Figure
from report_records import SEED, run

from loop.measure.link import fit, rungs_of
from loop.report.noise_plot import noise_figure, shared_prefix
from loop.report.plots import RC, depth_ladder, generations, link_ladder, pareto, roofline, svg, ttfo_bars
from loop.report.ticks import crowded, labels, plain_number, unclutter

MATHTEXT = re.compile(r"\\mathdefault|\\times|\$")


def drawn(fig: Figure) -> Figure:
    """The figure as ``svg`` leaves it: plain log ticks, thinned, then drawn under the report's rc."""
    import matplotlib

    svg(fig)
    with matplotlib.rc_context(RC):
        fig.draw_without_rendering()
    return fig


def tick_texts(fig: Figure) -> list[str]:
    return [t.get_text() for ax in fig.axes for axis in (ax.xaxis, ax.yaxis) for t in labels(axis)]


@pytest.mark.parametrize(("x", "text"), [(2000, "2k"), (16384, "16.4k"), (5e6, "5M"), (0.5, "0.5"), (300, "300")])
def test_a_number_reads_plain(x: float, text: str):
    assert plain_number(x) == text


def log_figures() -> dict[str, Figure]:
    model = fit("seed", rungs_of(SEED), "test")
    by = [
        {"depth": d, "rate_fps": {"median": f}, "spread_pct": 1.0} for d, f in ((1, 724.0), (2, 1400.0), (32, 2094.0))
    ]
    runs = [run(f"variant-{i}", 2000.0 + 500 * i, 2048 * (i + 1), 512) for i in range(4)]
    return {
        "roofline": roofline(runs, model),
        "roofline of the seed": roofline(SEED, model),
        "link ladder": link_ladder(SEED, model),
        "depth ladder": depth_ladder(run("d", 2094.0, 16_384, measure={"by_depth": by}), 32),
    }


@pytest.mark.parametrize("name", list(log_figures()))
def test_every_log_axis_reads_plain_numbers_none_over_another(name: str):
    fig = drawn(log_figures()[name])
    texts = tick_texts(fig)
    assert texts and not [t for t in texts if MATHTEXT.search(t)], texts
    assert all(re.fullmatch(r"[0-9.]+[kMGT]?|[−-]?[0-9.]+", t) for t in texts), texts
    assert not any(crowded(axis) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)), texts
    assert "mathdefault" not in svg(log_figures()[name])


def test_labels_that_would_overlap_are_thinned_until_none_do():
    import matplotlib

    fig = Figure(figsize=(2, 2), layout="constrained")
    ax = fig.add_subplot()
    ax.set_xticks(range(40), [f"label {i}" for i in range(40)])
    with matplotlib.rc_context(RC):
        fig.draw_without_rendering()
        assert crowded(ax.xaxis)
        unclutter(fig)
    assert not crowded(ax.xaxis) and len(labels(ax.xaxis)) > 1


def test_legends_sit_below_the_axes_off_the_data():
    from report_records import raced

    from loop.core.record import Scores

    gens = [
        run(f"c{i}", 10.0, 100, id=i, generation=i // 2, scores=Scores.from_json({"snr_db": 10.0 + i}))
        for i in range(4)
    ]
    results = [raced(0, 30.0, (0.98, 1.0, 1.02)), raced(1, 28.0, (1.0, 1.05, 1.1))]
    for fig in (
        ttfo_bars(SEED),
        generations(gens, "snr_db"),
        pareto(results, results[:1], "t"),
        *log_figures().values(),
    ):
        drawn(fig)
        for legend in fig.legends:
            box, axes = legend.get_window_extent(), fig.axes[0].get_window_extent()
            assert box.y1 <= axes.y0, (box, axes)
        assert not [leg for ax in fig.axes if (leg := ax.get_legend()) is not None]


def test_the_noise_plot_drops_the_prefix_its_names_share_and_keeps_each_whole_in_a_tooltip():
    stem = "/encoder/layer.0/attention/output/"
    names = ["x", *(f"{stem}LayerNorm/{op}" for op in ("mean", "var", "sqrt")), f"{stem}dense/MatMul"]
    assert shared_prefix(names) == stem
    assert shared_prefix(["/a/layer.1/Conv", "/a/layer.12/Conv"]) == "/a/"  # never a number cut in two
    fig = noise_figure("t", [(n, 20.0, 30.0) for n in names], [names[2]])
    text = svg(fig, "noise-0")
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks == ["x", "LayerNorm/mean", "LayerNorm/var", "LayerNorm/sqrt", "dense/MatMul"]
    assert stem in fig.axes[0].get_xlabel()
    for n in names:
        assert f"<title>{n}</title>" in text
    assert len(set(re.findall(r'id="(noise-0-tip-\d+)"', text))) == len(names)
    assert "10 dB floor" in [t.get_text() for t in fig.legends[0].get_texts()]  # the dotted line is named
