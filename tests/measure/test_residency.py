"""Weights that do not stay on the device, priced per inference on a link (the seed's 8 GB)."""

from __future__ import annotations

from typing import Any

import pytest

from loop.core.links import LinkModel
from loop.core.record import RunRecord
from loop.measure.residency import describe, weight_stream

LINK_300 = LinkModel("usb", 300.0, 0.0, 0.9, "test", {})
GiB8 = 8 * 2**30


def run_with(weights: Any) -> RunRecord:
    return RunRecord(id=1, sweep="s", variant="v", status="ok", info={"weights": weights} if weights else {})


def test_bf16_weights_stream_every_inference() -> None:
    """The seed's case: 24.045 GB at 16 bits cannot stay in 8 GB, so each inference carries them."""
    stream = weight_stream(LINK_300, run_with({"bytes": 24_045_000_000, "device_memory_bytes": GiB8, "resident": "no"}))
    assert stream is not None and stream.resident == "no"
    assert stream.stream_ms == pytest.approx(24_045_000_000 / 300e6 * 1e3)  # 80.15 s per inference
    assert stream.rate_bound_fps == pytest.approx(300e6 / 24_045_000_000)
    assert "not resident" in describe(stream, "usb") and "80,150.0 ms per inference on usb" in describe(stream, "usb")


def test_four_bit_weights_stay_and_cost_nothing_per_inference() -> None:
    stream = weight_stream(LINK_300, run_with({"bytes": 6_011_250_000, "device_memory_bytes": GiB8, "resident": "yes"}))
    assert stream is not None and (stream.stream_ms, stream.rate_bound_fps) == (None, None)
    assert describe(stream, "usb").endswith("resident yes")


def test_a_run_without_a_weights_record_says_nothing() -> None:
    assert weight_stream(LINK_300, run_with(None)) is None
    assert weight_stream(LINK_300, run_with({"bytes": "many"})) is None
