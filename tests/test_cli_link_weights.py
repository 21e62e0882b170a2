"""``loop link predict`` prices a run's HEF as HailoRT loads it: one crossing, not one per inference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from report_records import run

from loop.cli import main
from loop.core.facts import CompileFacts
from loop.core.record import RunRecord


def ledger(runs: Path, records: list[RunRecord]) -> None:
    """``records`` written into ``runs/ledger.sqlite`` as a sweep writes them (begin, finish)."""
    from loop.store.ledger import Ledger

    runs.mkdir(parents=True, exist_ok=True)
    with Ledger(runs / "ledger.sqlite") as book:
        for r in records:
            book.finish(book.begin(r.sweep, r.sweep, r.variant, "0" * 64, "hailo", r.generation), r)


WEIGHTS = {"bytes": 6_011_250_000, "resident": "yes"}
FIT = {"hef_bytes": 6_200_000_000, "device_bytes": 8 * 2**30, "resident": "yes"}


def test_predict_prices_the_hef_once_at_load(tmp_path: Path) -> None:
    ledger(tmp_path, [run("w4", 100.0, 150_528, 1_000, compiled=CompileFacts(weights=WEIGHTS, hef_residency=FIT))])
    result = CliRunner().invoke(main, ["link", "predict", "1", "--runs", str(tmp_path), "--link", "300MB/s"])
    assert result.exit_code == 0, result.output
    assert "HEF 6,200,000,000 B against 8,589,934,592 B: resident yes" in result.output
    assert "crosses 300MB/s once, 20,666.7 ms when the model is created (not per inference)" in result.output
    result = CliRunner().invoke(main, ["link", "predict", "1", "--runs", str(tmp_path), "--link", "300MB/s", "--json"])
    assert json.loads(result.output)["weights"]["load_ms"] == pytest.approx(20666.67, rel=1e-4)


def test_predict_without_a_weights_record_prints_no_weights_line(tmp_path: Path) -> None:
    ledger(tmp_path, [run("plain", 100.0, 150_528)])
    result = CliRunner().invoke(main, ["link", "predict", "1", "--runs", str(tmp_path), "--link", "300MB/s"])
    assert result.exit_code == 0 and "weights" not in result.output
