"""loop.evaluate, the optimizer's API: results in order, generations in the ledger."""

import importlib.util
import sqlite3
from pathlib import Path

import pytest
from authored import exported_classifier

import loop
from loop.core.errors import LoopError
from loop.store.ledger import Ledger

FAST = {
    "measure": {"warmup": 1, "frames": 10, "repeats": 2, "ttfo_repeats": 1, "latency_frames": 2, "min_duration_s": 0},
    "calibration": {"count": 8},
    "inputs": {"count": 2},
}


def test_perturbation_candidates_in_order_with_verdicts(recipe: Path, tmp_path: Path):
    cands = [[{"op": "force_range_out", "layer": "conv1", "range": [0.0, hi]}] for hi in (8.0, 2.0)]
    cands.append([{"op": "scale_weights", "layer": "conv2", "factor": 1.2}])
    results = loop.evaluate(
        cands, generation=3, runs=tmp_path / "runs", base=recipe, compile={"bias_correction": False}, **FAST
    )
    assert [r.variant for r in results] == ["c0", "c1", "c2"]
    assert all(r.status == "ok" and r.verdict == "clean" for r in results)
    assert all(r.usable or "host-busy" in (r.why or "") for r in results)  # a busy host is not the candidate's
    assert results[0].scores["snr_db"] != results[1].scores["snr_db"]
    assert all(r.rate_fps and r.ttfo_ms and r.bytes_in == 3 * 8 * 8 for r in results)
    db = sqlite3.connect(tmp_path / "runs" / "ledger.sqlite")
    assert {g for (g,) in db.execute("SELECT generation FROM runs")} == {3}
    assert (tmp_path / "runs" / "generations" / "evaluate-g3.yaml").exists()


def test_confounded_candidates_are_marked_unusable(recipe: Path, tmp_path: Path):
    results = loop.evaluate(
        [[{"op": "force_range_out", "layer": "conv1", "range": [0.0, 8.0]}]],
        generation=0,
        runs=tmp_path / "runs",
        base=recipe,
        **FAST,
    )
    assert results[0].verdict == "confounded" and not results[0].usable


def test_onnx_candidates_are_their_own_base(tmp_path: Path):
    results = loop.evaluate(
        [exported_classifier(seed=1), exported_classifier(seed=2)], generation=0, runs=tmp_path / "runs", **FAST
    )
    assert [r.verdict for r in results] == ["n/a", "n/a"]
    assert results[0].scores["output_sha"] != results[1].scores["output_sha"]


def test_bad_candidate_writes_nothing(recipe: Path, tmp_path: Path):
    with pytest.raises(LoopError, match="unknown layer"):
        loop.evaluate(
            [[{"op": "scale_weights", "layer": "nope", "factor": 2.0}]],
            generation=0,
            runs=tmp_path / "runs",
            base=recipe,
            **FAST,
        )
    assert not (tmp_path / "runs").exists()


def test_example_optimizer_runs(tmp_path: Path, capsys):
    path = Path(__file__).resolve().parents[1] / "graphs" / "optimize_range.py"
    spec = importlib.util.spec_from_file_location("optimize_range", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.SETTINGS.update(FAST)
    hi, snr = module.search(generations=2, population=2, runs=tmp_path / "runs")
    out = capsys.readouterr().out
    with Ledger(tmp_path / "runs" / "ledger.sqlite", readonly=True) as ledger:  # what went wrong, if any
        apart = [(r.variant, r.status, r.stage, r.error, r.why_apart) for r in ledger.records() if r.why_apart]
    assert out.count("verdict=clean") == 4 and snr > 0 and 0.25 <= hi <= 16, apart


def test_candidate_failing_onnx_checking_writes_nothing(tmp_path: Path):
    broken = exported_classifier()
    broken.graph.node[0].input[1] = "no_such_weight"
    with pytest.raises(LoopError, match="unreadable ONNX model"):
        loop.evaluate([broken], generation=0, runs=tmp_path / "runs", **FAST)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("name", ["../../x", "a/b", ".hidden", "nul\x00", "back\\slash"])
def test_a_name_that_is_not_one_path_component_is_refused(recipe: Path, tmp_path: Path, name: str):
    cands = [[{"op": "scale_weights", "layer": "conv1", "factor": 1.1}]]
    with pytest.raises(LoopError, match="cannot name a file"):
        loop.evaluate(cands, generation=0, runs=tmp_path / "a" / "b" / "runs", base=recipe, name=name, **FAST)
    assert not (tmp_path / "a").exists() and not list(tmp_path.glob("*-g0.yaml"))


def test_a_unicode_name_names_its_generation(recipe: Path, tmp_path: Path):
    cands = [[{"op": "scale_weights", "layer": "conv1", "factor": 1.1}]]
    [result] = loop.evaluate(cands, generation=1, runs=tmp_path / "runs", base=recipe, name="étude-名前", **FAST)
    assert result.status == "ok" and (tmp_path / "runs" / "generations" / "étude-名前-g1.yaml").exists()
