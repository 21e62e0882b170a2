"""``loop link predict`` prices weights that do not fit the device, per inference (the seed's 8 GB)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from report_records import run

from loop.cli import main
from loop.core.record import RunRecord


def ledger(runs: Path, records: list[RunRecord]) -> None:
    """``records`` written into ``runs/ledger.sqlite`` as a sweep writes them (begin, finish)."""
    from loop.store.ledger import Ledger

    runs.mkdir(parents=True, exist_ok=True)
    with Ledger(runs / "ledger.sqlite") as book:
        for r in records:
            book.finish(book.begin(r.sweep, r.sweep, r.variant, "0" * 64, "hailo", r.generation), r)


NOT_RESIDENT = {"bytes": 24_045_000_000, "device_memory_bytes": 8 * 2**30, "resident": "no"}


def test_predict_adds_the_weights_streamed_per_inference(tmp_path: Path) -> None:
    ledger(tmp_path, [run("bf16", 100.0, 150_528, 1_000, info={"weights": NOT_RESIDENT})])
    result = CliRunner().invoke(main, ["link", "predict", "1", "--runs", str(tmp_path), "--link", "300MB/s"])
    assert result.exit_code == 0, result.output
    assert "weights 24.045 GB at the compiled precision against 8.59 GB: not resident" in result.output
    assert "80,150.0 ms per inference on 300MB/s" in result.output
    result = CliRunner().invoke(main, ["link", "predict", "1", "--runs", str(tmp_path), "--link", "300MB/s", "--json"])
    assert json.loads(result.output)["weights"]["stream_ms"] == pytest.approx(80150.0)


def test_predict_without_a_weights_record_prints_no_weights_line(tmp_path: Path) -> None:
    ledger(tmp_path, [run("plain", 100.0, 150_528)])
    result = CliRunner().invoke(main, ["link", "predict", "1", "--runs", str(tmp_path), "--link", "300MB/s"])
    assert result.exit_code == 0 and "weights" not in result.output
