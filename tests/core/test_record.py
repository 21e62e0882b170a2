"""One measurement from the device to the ledger and back (issue 35): the protocol's own type is
the run record's, and it round-trips through its own ``to_dict``/``from_dict`` unchanged."""

from __future__ import annotations

import json

import numpy as np

from loop.author.sweepfile import MeasureSpec
from loop.core.record import Measurement, RunRecord
from loop.devices.onnxruntime import OnnxRuntimeDevice
from loop.measure.protocol import measure
from loop.store.ledger import Ledger

SPEC = MeasureSpec(
    warmup=1, frames=5, repeats=3, ttfo_repeats=1, latency_frames=3, min_duration_s=0.0, depth=(1, 2), host_busy_pct=1e4
)


def test_a_measurement_round_trips_through_json_and_the_ledger(tmp_path, artifact) -> None:
    frame = [np.full(artifact.inputs[0].shape, 3, np.uint8)]
    m = measure(OnnxRuntimeDevice(), artifact, frame, SPEC).with_vendor(None)
    text = json.dumps(m.to_dict())
    back = Measurement.from_dict(json.loads(text))
    assert back == m and json.dumps(back.to_dict()) == text
    assert back.rate is not None and [d.depth for d in back.by_depth] == [1, 2]
    assert list(m.to_dict())[:4] == ["ttfo_ms", "ttfo_parts", "first_infer_ms", "rate_fps"]
    assert m.to_dict()["vendor_benchmark"] is None
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        run_id = ledger.begin("s", "key", "base", "sha", "onnxruntime")
        ledger.finish(run_id, RunRecord(run_id, "s", "base", "ok", measure=m))
        assert ledger.record(run_id).measure == m


def test_an_older_or_newer_record_is_written_back_as_read() -> None:
    """A ledger row without today's keys gets none added; one with keys this loop does not know
    keeps them; an unmeasured run's stays as it was recorded."""
    old = {"rate_fps": {"median": 50.0, "min": 49.0, "max": 51.0}, "spread_pct": 4.0, "flags": ["host-busy"]}
    assert Measurement.from_dict(old).to_dict() == old
    newer = {**old, "watts": {"median": 2.5}}
    read = Measurement.from_dict(newer)
    assert read.to_dict() == newer and read.more == {"watts": {"median": 2.5}} and read.flags == ("host-busy",)
    assert Measurement.from_dict({"vendor_benchmark": None}).to_dict() == {"vendor_benchmark": None}
    assert Measurement(given=()).with_vendor(None).to_dict() == {"vendor_benchmark": None}
    assert RunRecord(1, "s", "v", "failed").to_json(["measure"]) == {"measure": {}}


def test_the_vendor_benchmark_is_recorded_as_such_and_names_its_tool() -> None:
    """Issue 42: the record says "the vendor's benchmark"; which tool ran it is the device's to say."""
    stick = {"tool": "hailortcli", "fps": 1168.0, "agree": True, "comparable": True}
    m = Measurement(spread_pct=1.0).with_vendor(stick)
    assert m.to_dict()["vendor_benchmark"] == stick and "hailortcli" not in m.to_dict()
    assert Measurement.from_dict(m.to_dict()) == m


def test_an_old_row_with_the_hailortcli_key_reads_as_it_is() -> None:
    """Rows written before issue 42 keyed the benchmark "hailortcli", with no tool inside: read as
    the vendor's benchmark, and written back with the key and figures they had."""
    stick = {"fps": 1168.0, "version": "5.2.0", "ratio": 1.01, "agree": True, "device_released": True}
    old = {"rate_fps": {"median": 1180.0, "min": 1170.0, "max": 1190.0}, "hailortcli": stick}
    read = Measurement.from_dict(old)
    assert read.vendor_benchmark == stick and read.more == {} and read.to_dict() == old
    assert Measurement.from_dict({"hailortcli": None}).to_dict() == {"hailortcli": None}
    again = read.with_vendor({"tool": "hailortcli", "fps": 1170.0})  # measured anew: under today's key
    assert list(again.to_dict()) == ["rate_fps", "vendor_benchmark"]


def test_a_measurement_of_another_shape_is_refused_not_read() -> None:
    """A row whose figures have the wrong shape raises TypeError, which the ledger turns into a
    corrupt row (its id and why), rather than a reader meeting a list where a mapping belongs."""
    import pytest

    for bad in ({"ttfo_parts": []}, {"host": [1]}, {"flags": "host-busy"}, {"warnings": [1]}):
        with pytest.raises(TypeError):
            Measurement.from_dict(bad)


def test_a_device_agreement_recorded_with_nulls_reads_as_none() -> None:
    """A further device's agreement whose SNR or largest difference was recorded as null reads back
    as None; the run is not read as corrupt for it."""
    from loop.core.record import Scores

    raw = {"devices": {"emu": {"snr_db_vs_first": None, "max_abs_diff": None, "values_differ": 0, "values_total": 4}}}
    (found,) = Scores.from_json(raw).devices
    assert (found.device, found.snr_db_vs_first, found.max_abs_diff, found.values_total) == ("emu", None, None, 4)
