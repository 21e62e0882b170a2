"""The seed's first number as arithmetic: weights at each precision against the device, and one
load over the link where they fit (never per inference)."""

from __future__ import annotations

from typing import Any

import pytest

from loop.core.facts import CompileFacts
from loop.core.links import LinkModel
from loop.core.record import RunRecord
from loop.judge.weights import Weights
from loop.measure.fit import Memory, compiled, describe, describe_load, weighed, weight_load, with_run

LINK_300 = LinkModel("usb", 300.0, 0.0, 0.9, "test", {})
GiB8 = Memory("hailo10h", 8 * 2**30, "8 GiB, an upper bound")
PIXAL3D = Weights({"bfloat16": 12_022_500_000})  # the seed's checkpoints: 24.045 GB at bf16


def test_the_seeds_checkpoints_fit_at_four_bits_only() -> None:
    report = weighed("pixal3d.onnx", PIXAL3D, GiB8, LINK_300)
    at = report.precisions
    assert [(f.bytes, f.fits) for f in at.values()] == [
        (24_045_000_000, False),
        (12_022_500_000, False),
        (6_011_250_000, True),
    ]
    assert report.as_stored == at["bf16"]
    assert (at["bf16"].load_ms, at["int8"].load_ms) == (None, None)  # HailoRT refuses it: it never loads
    assert at["int4"].load_ms == pytest.approx(6_011_250_000 / 300e6 * 1e3)  # once, when the model is created
    lines = describe(report)
    assert "12,022,500,000 weights" in lines[0] and "stored as bfloat16" in lines[0]
    int4 = next(line for line in lines if line.lstrip().startswith("int4"))
    assert "6,011,250,000 B" in int4 and "6.011 GB" in int4 and "70% of the device: fits" in int4
    assert "at least 20.0 s" in int4
    assert "a lower bound" in lines[-1] and "never per inference" in lines[-1]


def test_a_device_with_no_figure_judges_no_fit() -> None:
    report = weighed("m.onnx", Weights({"float32": 10}), Memory("hailo8", None, ""), LINK_300)
    assert {f.fits for f in report.precisions.values()} == {None}
    assert report.precisions["bf16"].load_ms is not None
    assert "no figure for what it can hold" in describe(report)[1]


def test_a_hef_is_weighed_as_compiled() -> None:
    report = compiled("m.hef", 3_503_356, None, GiB8, LINK_300)
    assert report.precisions == {} and report.as_compiled is not None and report.as_compiled.fits
    assert report.to_json()["as_compiled"]["bytes"] == 3_503_356
    assert "bf16, int8 and int4 do not apply" in describe(report)[0]
    assert "lower bound" not in describe(report)[-1]  # the file itself crosses: exact


def test_a_runs_own_mix_stands_beside_the_precisions() -> None:
    facts = CompileFacts(
        weights={"bytes": 6_500_000_000, "weights_by_bits": {"4": 11_000_000_000, "8": 1_022_500_000}},
        hef_residency={"hef_bytes": 6_700_000_000},
    )
    report = with_run(weighed("m.onnx", PIXAL3D, GiB8, LINK_300), RunRecord(3, "s", "v", "ok", compiled=facts))
    run = report.to_json()["run"]
    assert (run["id"], run["bytes"], run["fits"], run["hef_bytes"]) == (3, 6_500_000_000, True, 6_700_000_000)
    assert run["weights_by_bits"] == {"4": 11_000_000_000, "8": 1_022_500_000}
    text = "\n".join(describe(report))
    assert "run 3 " in text and "11,000,000,000 at 4 bits" in text and "its HEF 6,700,000,000 B" in text


def test_a_run_that_recorded_no_weights_says_so() -> None:
    report = with_run(weighed("m.onnx", PIXAL3D, GiB8, LINK_300), RunRecord(4, "s", "v", "ok"))
    assert report.to_json()["run"] == {
        "id": 4,
        "bytes": None,
        "fits": None,
        "load_ms": None,
        "weights_by_bits": {},
        "hef_bytes": None,
    }
    assert any("run 4 recorded no weights" in line for line in describe(report))


# A run's weights on a link: the HEF crosses once when the model is created, never per inference.
BYTES_8GIB = 8 * 2**30


def run_with(weights: Any, hef: Any = None) -> RunRecord:
    facts = CompileFacts(weights=weights or None, hef_residency=hef)
    return RunRecord(id=1, sweep="s", variant="v", status="ok", compiled=facts)


def test_the_hef_crosses_the_link_once_at_load() -> None:
    """The seed's case at 4 bits: 6.01 GB of weights in a 6.2 GB HEF stay in 8 GiB; loading
    them takes one crossing, ~20.7 s at 300 MB/s, and no inference pays it again."""
    fit = {"hef_bytes": 6_200_000_000, "device_bytes": BYTES_8GIB, "resident": "yes"}
    load = weight_load(LINK_300, run_with({"bytes": 6_011_250_000, "resident": "yes"}, fit))
    assert load is not None and load.resident == "yes" and load.hef_bytes == 6_200_000_000
    assert load.load_ms == pytest.approx(6_200_000_000 / 300e6 * 1e3)
    line = describe_load(load, "usb")
    assert "HEF 6,200,000,000 B against 8,589,934,592 B: resident yes" in line
    assert "crosses usb once, 20,666.7 ms when the model is created (not per inference)" in line
    assert "stream" not in line


def test_a_run_compiled_before_the_hef_size_was_recorded_says_so() -> None:
    load = weight_load(
        LINK_300, run_with({"bytes": 6_011_250_000, "device_memory_bytes": BYTES_8GIB, "resident": "unknown"})
    )
    assert load is not None and (load.hef_bytes, load.load_ms) == (None, None)
    assert describe_load(load, "usb").endswith("no HEF size recorded: resident unknown")


def test_a_run_without_a_weights_record_says_nothing() -> None:
    assert weight_load(LINK_300, run_with(None)) is None
    assert weight_load(LINK_300, run_with({"weights_by_bits": {}})) is None
    with pytest.raises(TypeError, match="a count of bytes"):  # refused where it is read: the ledger's row is corrupt
        CompileFacts.of({"weights": {"bytes": "many"}})
