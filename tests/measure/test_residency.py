"""A run's weights on a link: the HEF crosses once when the model is created, never per
inference (HailoRT sends the whole file; one that does not fit is refused at compile)."""

from __future__ import annotations

from typing import Any

import pytest

from loop.core.facts import CompileFacts
from loop.core.links import LinkModel
from loop.core.record import RunRecord
from loop.measure.residency import describe, weight_load

LINK_300 = LinkModel("usb", 300.0, 0.0, 0.9, "test", {})
GiB8 = 8 * 2**30


def run_with(weights: Any, hef: Any = None) -> RunRecord:
    facts = CompileFacts(weights=weights or None, hef_residency=hef)
    return RunRecord(id=1, sweep="s", variant="v", status="ok", compiled=facts)


def test_the_hef_crosses_the_link_once_at_load() -> None:
    """The seed's case at 4 bits: 6.01 GB of weights in a 6.2 GB HEF stay in 8 GiB; loading
    them takes one crossing, ~20.7 s at 300 MB/s, and no inference pays it again."""
    fit = {"hef_bytes": 6_200_000_000, "device_bytes": GiB8, "resident": "yes"}
    load = weight_load(LINK_300, run_with({"bytes": 6_011_250_000, "resident": "yes"}, fit))
    assert load is not None and load.resident == "yes" and load.hef_bytes == 6_200_000_000
    assert load.load_ms == pytest.approx(6_200_000_000 / 300e6 * 1e3)
    line = describe(load, "usb")
    assert "HEF 6,200,000,000 B against 8,589,934,592 B: resident yes" in line
    assert "crosses usb once, 20,666.7 ms when the model is created (not per inference)" in line
    assert "stream" not in line


def test_a_run_compiled_before_the_hef_size_was_recorded_says_so() -> None:
    load = weight_load(LINK_300, run_with({"bytes": 6_011_250_000, "device_memory_bytes": GiB8, "resident": "unknown"}))
    assert load is not None and (load.hef_bytes, load.load_ms) == (None, None)
    assert describe(load, "usb").endswith("no HEF size recorded: resident unknown")


def test_a_run_without_a_weights_record_says_nothing() -> None:
    assert weight_load(LINK_300, run_with(None)) is None
    assert weight_load(LINK_300, run_with({"weights_by_bits": {}})) is None
    with pytest.raises(TypeError, match="a count of bytes"):  # refused where it is read: the ledger's row is corrupt
        CompileFacts.of({"weights": {"bytes": "many"}})
