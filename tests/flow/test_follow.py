"""The bias-correction guard decides once, on the reference, and every variant judged against
it follows (issue 42): a variant never differs from its reference by a choice it did not make."""

from __future__ import annotations

import json
import sqlite3

import pytest

from loop.author.author import author
from loop.author.sweepfile import parse
from loop.core.facts import CompileFacts
from loop.core.kinds import Status
from loop.core.record import RunRecord
from loop.flow.follow import decision
from loop.flow.sweep import SweepOptions, _decided, run_sweep
from loop.store.ledger import Ledger

SWEEP = """\
sweep: follow
base: tiny.yaml
calibration: {count: 16}
inputs: {count: 4}
measure: {warmup: 1, frames: 4, repeats: 1, ttfo_repeats: 1, latency_frames: 2, min_duration_s: 0}
variants:
  - name: base
  - name: weights
    perturb: [{op: scale_weights, layer: conv1, factor: 1.05}]
  - name: noise
    perturb: [{op: add_weight_noise, layer: conv2, std: 0.01, seed: 1}]
  - name: calib
    perturb: [{op: calibration, count: 8, seed: 3}]
  - name: bc-off
    compile: {bias_correction: false}
    perturb: [{op: scale_weights, layer: conv1, factor: 1.05}]
"""


def _records(path, runs, **options) -> dict[str, RunRecord]:
    result = run_sweep(parse(path), runs, SweepOptions(jobs=1, progress=False, **options))
    with Ledger(runs / "ledger.sqlite") as ledger:
        return {o.variant: ledger.record(o.run_id) for o in result.outcomes}


def _correction(run: RunRecord) -> dict:
    return run.compiled.bias_correction


def test_every_variant_follows_its_references_guard(write_sweep, tmp_path):
    runs = _records(write_sweep(SWEEP), tmp_path / "runs")
    base = _correction(runs["base"])
    assert base["guard"] in ("kept", "dropped") and base["guard_from"] == "here" and len(base["guard_folds"]) == 4
    for name in ("weights", "noise", "calib"):
        mine = _correction(runs[name])
        assert (mine["guard"], mine["guard_from"]) == (base["guard"], "reference"), name
        assert runs[name].options["bias_guard_given"] == base["guard"]
        assert mine["guard_folds"] == []  # followed, not estimated again
    # a variant that sets bias_correction itself is judged in a group of its own, against its own base
    assert runs["bc-off"].compiled.bias_correction is None and runs["bc-off"].options["bias_guard_given"] is None
    assert runs["weights"].verdict == "clean" and runs["bc-off"].verdict == "clean"


def test_a_resumed_sweep_follows_the_decision_its_reference_recorded(write_sweep, tmp_path):
    """A reference finished by an earlier run is not compiled again: the decision it recorded is
    the one its variants follow (here the recorded one is flipped, so following it shows)."""
    path, runs = write_sweep(SWEEP), tmp_path / "runs"
    first = _records(path, runs)
    flipped = {"kept": "dropped", "dropped": "kept"}[_correction(first["base"])["guard"]]
    with sqlite3.connect(runs / "ledger.sqlite") as db:
        (text,) = db.execute("SELECT record FROM runs WHERE id = ?", (first["base"].id,)).fetchone()
        record = json.loads(text)
        record["info"]["bias_correction"]["guard"] = flipped
        db.execute("UPDATE runs SET record = ? WHERE id = ?", (json.dumps(record), first["base"].id))
        # the variant's run left by a process that is gone: a resume redoes it
        db.execute("UPDATE runs SET status = 'running', pid = ? WHERE id = ?", (2**22 + 7, first["weights"].id))
    again = _records(path, runs)
    assert again["base"].id == first["base"].id  # finished: not run again
    assert again["weights"].id != first["weights"].id
    assert (_correction(again["weights"])["guard"], again["weights"].options["bias_guard_given"]) == (flipped, flipped)


def _record(guard: str | None, status: Status = Status.OK) -> RunRecord:
    facts = CompileFacts() if guard is None else CompileFacts(bias_correction={"guard": guard})
    return RunRecord(1, "s", "base", status, compiled=facts)


@pytest.mark.parametrize(
    ("guard", "followed"),
    [("kept", "kept"), ("dropped", "dropped"), ("too few frames", "kept"), ("off", None), (None, None)],
)
def test_what_a_variant_follows(guard, followed):
    assert decision(_record(guard).compiled) == followed


def test_a_failed_reference_gives_nothing_to_follow(write_sweep, tmp_path):
    spec = parse(write_sweep(SWEEP))
    base = author(spec, spec.variants[0], True)
    assert _decided({"": base}, {"base": _record("kept")}, "onnxruntime") == {"": "kept"}
    assert _decided({"": base}, {"base": _record("kept", Status.FAILED)}, "onnxruntime") == {}
    assert _decided({"": base}, {}, "onnxruntime") == {}
    assert _decided({"": base}, {"base": _record("kept")}, "hailo") == {}  # no guard: nothing to wait for
