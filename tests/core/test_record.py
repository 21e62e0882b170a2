"""One measurement from the device to the ledger and back (issue 35): the protocol's own type is
the run record's, and it round-trips through its own ``to_dict``/``from_dict`` unchanged."""

from __future__ import annotations

import json

import numpy as np

from loop.author.sweepfile import MeasureSpec
from loop.core.record import VENDOR_BENCHMARK, Measurement, RunRecord
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
    assert m.to_dict()[VENDOR_BENCHMARK] is None
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
    assert Measurement.from_dict({VENDOR_BENCHMARK: None}).to_dict() == {VENDOR_BENCHMARK: None}
    assert Measurement(given=()).with_vendor(None).to_dict() == {VENDOR_BENCHMARK: None}
    assert RunRecord(1, "s", "v", "failed").to_json(["measure"]) == {"measure": {}}


def test_a_measurement_of_another_shape_is_refused_not_read() -> None:
    """A row whose figures have the wrong shape raises TypeError, which the ledger turns into a
    corrupt row (its id and why), rather than a reader meeting a list where a mapping belongs."""
    import pytest

    for bad in ({"ttfo_parts": []}, {"host": [1]}, {"flags": "host-busy"}, {"warnings": [1]}):
        with pytest.raises(TypeError):
            Measurement.from_dict(bad)
