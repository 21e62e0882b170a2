"""Studies through the Python API: generations that count themselves, a reference per compile
options, reuse by content, results that say why, and best/pareto."""

from pathlib import Path

import pytest
import yaml
from authored import FAST_MEASURE

from loop.api import Result
from loop.core.errors import LoopError
from loop.study import Study, _dominates

MEASURE = yaml.safe_load(FAST_MEASURE)["measure"]


def scale(factor: float) -> list[dict]:
    return [{"op": "scale_weights", "layer": "conv1", "factor": factor}]


def study(tmp_path: Path, recipe: Path, **more) -> Study:
    measure = {**MEASURE, "budget_s": 2}
    return Study("s", base=recipe, runs=tmp_path / "runs", inputs={"count": 2}, measure=measure, **more)


def test_generations_count_up_reuse_by_content_and_say_why(tmp_path, recipe):
    s = study(tmp_path, recipe)
    own = {"perturb": scale(1.05), "compile": {"bias_correction": False}}
    first = s.evaluate([scale(1.05), scale(1.05), own, []])
    assert first[3].verdict == "no-effect"  # an empty candidate perturbs nothing
    assert [r.generation for r in first] == [0] * 4 and not any(r.reused for r in first)
    assert first[0].run_id == first[1].run_id  # identical candidates in one generation run once
    assert first[2].verdict == "clean" and first[2].sweep.startswith("s-g0-o")  # own options: a real verdict
    assert first[0].sweep == "s-g0" and first[0].ratio_basis.startswith("interleaved, ")
    lo, hi = first[0].rate_ratio_ci95
    assert lo <= first[0].rate_ratio <= hi and first[2].ratio_basis.startswith("interleaved")
    for r in first:
        assert r.usable == (r.why is None)
        assert r.why is None or "host-busy" in r.why or r.verdict in ("confounded", "no-reference")
    again = Study("s", runs=tmp_path / "runs").evaluate([scale(1.05), own, scale(1.07)])
    assert [r.reused for r in again] == [True, True, False]
    assert again[0].run_id == first[0].run_id and again[1].run_id == first[2].run_id
    assert again[2].generation == 1 and again[2].sweep == "s-g1"
    fresh = s.evaluate([scale(1.05)], remeasure=True)
    assert not fresh[0].reused and fresh[0].run_id != first[0].run_id and fresh[0].generation == 2
    with pytest.raises(LoopError, match="has a generation 0 already"):  # never a generation file overwritten
        s.evaluate([scale(1.2)], generation=0)


def test_a_study_is_refused_another_base_or_a_name_it_never_had(tmp_path, recipe, exported_onnx):
    study(tmp_path, recipe)
    with pytest.raises(LoopError, match="study 's' was started with base"):
        Study("s", base=exported_onnx, runs=tmp_path / "runs")
    with pytest.raises(LoopError, match="no study 'other'"):
        Study("other", runs=tmp_path / "runs")
    with pytest.raises(LoopError, match=r"base .*nowhere\.onnx is not a file"):
        Study("third", base=tmp_path / "nowhere.onnx", runs=tmp_path / "runs")
    assert sorted(p.name for p in (tmp_path / "runs" / "studies").iterdir()) == ["s.json"]


def _r(snr: float, ratio: tuple[float, float, float]) -> Result:
    return Result(0, "c", 1, "ok", "clean", {"snr_db": snr}, rate_ratio=ratio[1], rate_ratio_ci95=(ratio[0], ratio[2]))


def test_dominance_only_beyond_the_intervals():
    keys = ("snr_db", "rate_ratio")
    assert _dominates(_r(30, (1.10, 1.12, 1.14)), _r(30, (0.98, 1.00, 1.02)), keys)
    assert not _dominates(_r(30, (0.99, 1.01, 1.03)), _r(30, (0.98, 1.00, 1.02)), keys)  # within noise
    assert not _dominates(_r(31, (0.90, 0.92, 0.94)), _r(30, (0.98, 1.00, 1.02)), keys)  # a trade-off


def test_the_optuna_example_runs_two_generations(tmp_path):
    """graphs/optuna_search.py: Optuna's multi-objective sampler driving a study (the
    ``search`` extra, which CI installs)."""
    import importlib.util

    optuna = pytest.importorskip("optuna")
    path = Path(__file__).resolve().parents[1] / "graphs" / "optuna_search.py"
    spec = importlib.util.spec_from_file_location("optuna_search", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    search, study = module.run(tmp_path / "runs", 2, 3, inputs={"count": 2}, measure={**MEASURE, "budget_s": 2})
    told = [t for t in search.trials if t.state != optuna.trial.TrialState.RUNNING]
    assert len(told) == 6 and {r.generation for r in study.results()} == {0, 1}
    done = [t for t in told if t.state == optuna.trial.TrialState.COMPLETE]
    assert all(len(t.values) == 2 and t.values[1] > 0 for t in done)
    failed = [t for t in told if t.state == optuna.trial.TrialState.FAIL]
    assert all(t.user_attrs.get("why") for t in failed)  # told why, never its figures


def test_loop_study_lists_best_and_front(tmp_path, recipe):
    import json

    from click.testing import CliRunner

    from loop.cli import main

    study(tmp_path, recipe).evaluate([scale(1.05), scale(0.95)])
    runs = str(tmp_path / "runs")
    listed = json.loads(CliRunner().invoke(main, ["study", "s", "--runs", runs, "--json"]).output)
    assert [r["sweep"] for r in listed] == ["s-g0", "s-g0"] and all(r["ratio_basis"] for r in listed)
    table = CliRunner().invoke(main, ["study", "s", "--runs", runs]).output
    assert "rate ratio (95% CI)" in table and table.count("s-g0") == 2
    best = CliRunner().invoke(main, ["study", "s", "--runs", runs, "--best", "snr_db", "--json"])
    assert best.exit_code == 0 and len(json.loads(best.output)) <= 1
    missing = CliRunner().invoke(main, ["study", "other", "--runs", runs])
    assert missing.exit_code == 2 and "no study 'other'" in missing.output


def test_a_sweep_file_runs_as_the_next_generation_of_a_study(tmp_path, write_sweep):
    from test_cli import invoke

    text = """
        sweep: s
        base: tiny.yaml
        inputs: {count: 2}
        measure:
          {warmup: 2, frames: 20, repeats: 2, ttfo_repeats: 1, latency_frames: 5, min_duration_s: 0, budget_s: 2}
        variants:
          - name: base
          - name: up
            perturb: [{op: scale_weights, layer: conv1, factor: 1.05}]
          - name: own
            perturb: [{op: scale_weights, layer: conv1, factor: 1.05}]
            compile: {bias_correction: false}
    """
    path, runs = write_sweep(text), str(tmp_path / "runs")
    first = invoke("sweep", str(path), "--study", "st", "--runs", runs, "--quiet")
    assert first.exit_code == 0, first.output
    results = Study("st", runs=runs).results()
    assert sorted(r.variant for r in results) == ["own", "up"]  # the plain base is every group's reference
    sweeps = {r.variant: r.sweep for r in results}
    assert sweeps["up"] == "st-g0" and sweeps["own"].startswith("st-g0-o")  # own options: a group of its own
    assert all(r.verdict == "clean" and r.ratio_basis.startswith("interleaved") for r in results)
    again = invoke("sweep", str(path), "--study", "st", "--runs", runs, "--quiet")
    assert again.exit_code == 0 and "2 reused" in again.output

    measured = write_sweep(text.replace("compile: {bias_correction: false}", "measure: {repeats: 3}"), "m.yaml")
    refused = invoke("sweep", str(measured), "--study", "other", "--runs", runs)
    assert refused.exit_code != 0 and "variant 'own' sets ['measure']" in refused.output
    assert len(refused.output.strip().splitlines()) == 1
    assert not (tmp_path / "runs" / "studies" / "other.json").exists()  # nothing written
