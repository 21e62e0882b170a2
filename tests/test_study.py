"""Studies through the Python API: generations that count themselves, a reference per compile
options, reuse by content, results that say why, and best/pareto."""

import json
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import yaml
from authored import FAST_MEASURE, exported_classifier
from report_records import raced

from loop.api import Result
from loop.core.errors import LoopError
from loop.core.record import Scores
from loop.flow.resume import ContentChanged
from loop.study import Study

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
    assert first[3].verdict == "reference"  # an empty candidate is the base: the reference run answers it
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
    db = sqlite3.connect(tmp_path / "runs" / "ledger.sqlite")
    assert [r[0] for r in db.execute("SELECT name FROM studies")] == ["s"]  # the refused ones wrote nothing
    db.close()
    assert not (tmp_path / "runs" / "studies").exists()


UP = [{"op": "scale_weights", "layer": "/features/0/Conv", "factor": 1.05}]


def _forget_inputs_sha(ledger: Path) -> None:
    """Rows as a loop from before the scoring frames' hash was recorded wrote them."""
    db = sqlite3.connect(ledger)
    with db:
        for run_id, text in db.execute("SELECT id, record FROM runs").fetchall():
            record = json.loads(text)
            record.get("info", {}).pop("inputs_sha", None)
            db.execute("UPDATE runs SET record=? WHERE id=?", (json.dumps(record), run_id))
    db.close()


def test_a_base_rewritten_in_place_is_a_new_reference_measured_afresh_and_said_so(tmp_path):
    base, runs = tmp_path / "x.onnx", tmp_path / "runs"
    onnx.save(exported_classifier(seed=0), str(base))
    first = Study("s", base=base, runs=runs, inputs={"count": 2}, measure={**MEASURE, "budget_s": 2}).evaluate([UP])
    _forget_inputs_sha(runs / "ledger.sqlite")  # a study already on disk: its seeded frames follow from its settings
    assert Study("s", runs=runs).evaluate([UP])[0].reused
    onnx.save(exported_classifier(seed=1), str(base))  # other weights, same path
    told = r"^base \S*x\.onnx changed since generation 0 \(sha \w{8} -> \w{8}\): measured afresh$"
    with pytest.warns(ContentChanged, match=told):
        fresh = Study("s", runs=runs).evaluate([UP])
    # the evaluate answered from the ledger alone claimed no generation: this one is generation 1
    assert not fresh[0].reused and fresh[0].run_id != first[0].run_id and fresh[0].generation == 1
    assert fresh[0].scores["snr_db"] != first[0].scores["snr_db"]
    again = Study("s", runs=runs).evaluate([UP])
    assert again[0].reused and again[0].run_id == fresh[0].run_id  # over the new base, reused again
    assert [r.run_id for r in Study("s", runs=runs).results()] == [fresh[0].run_id]  # the latest of each


def test_a_new_compiler_revision_measures_a_study_afresh(tmp_path, recipe, monkeypatch):
    from loop.compilers.onnxruntime import OnnxRuntimeCompiler

    first = study(tmp_path, recipe).evaluate([scale(1.05)])
    describe = OnnxRuntimeCompiler.describe
    monkeypatch.setattr(OnnxRuntimeCompiler, "describe", lambda self: {**describe(self), "loop_compile": "next"})
    with pytest.warns(ContentChanged, match=r"^the compiler changed since generation 0 \(loop_compile \w+ -> next\)"):
        fresh = Study("s", runs=tmp_path / "runs").evaluate([scale(1.05)])
    assert not fresh[0].reused and fresh[0].run_id != first[0].run_id


def test_a_calibration_file_rewritten_in_place_is_measured_afresh_and_said_so(tmp_path, recipe):
    frames, runs = tmp_path / "calib.npy", tmp_path / "runs"
    rng = np.random.default_rng(0)
    np.save(frames, rng.normal(0, 1, (4, 3, 8, 8)).astype(np.float32))
    settings = {"calibration": {"path": str(frames)}, "inputs": {"count": 2}, "measure": {**MEASURE, "budget_s": 2}}
    first = Study("s", base=recipe, runs=runs, **settings).evaluate([scale(1.05)])
    np.save(frames, rng.normal(0, 2, (4, 3, 8, 8)).astype(np.float32))
    with pytest.warns(ContentChanged, match=r"^calibration frames \S*calib\.npy changed since generation 0 \(sha"):
        fresh = Study("s", runs=runs).evaluate([scale(1.05)])
    assert not fresh[0].reused and fresh[0].run_id != first[0].run_id


def _r(snr: float, ratio: tuple[float, float, float]) -> Result:
    return raced(0, snr, ratio)


def test_pareto_beats_only_beyond_the_intervals(tmp_path, recipe, monkeypatch):
    """Study.pareto is the one rule (loop.measure.results.pareto), the report's front too."""
    s = study(tmp_path, recipe)
    plain = _r(30, (0.98, 1.00, 1.02))
    for other, kept in [
        (_r(30, (1.10, 1.12, 1.14)), 1),  # faster beyond both intervals, as accurate: it alone
        (_r(30, (0.99, 1.01, 1.03)), 2),  # within noise: both
        (_r(31, (0.90, 0.92, 0.94)), 2),  # a trade-off: both
    ]:
        monkeypatch.setattr(s, "results", lambda other=other: [plain, other])
        assert s.pareto() == [plain, other][2 - kept :]
    monkeypatch.setattr(s, "results", lambda: [plain, _r(29, (1.10, 1.12, 1.14))])
    assert s.pareto(("rate_ratio",)) == [s.results()[1]] and len(s.pareto(("snr_db", "rate_ratio"))) == 2


def test_best_names_the_candidates_within_its_noise(tmp_path, recipe, monkeypatch):
    s = study(tmp_path, recipe)
    pool = [_r(30, (1.00, 1.05, 1.10)), _r(31, (0.98, 1.00, 1.02)), _r(29, (0.90, 0.92, 0.94))]
    monkeypatch.setattr(s, "results", lambda: pool)
    by_ratio = s.best("rate_ratio")
    assert by_ratio == replace(pool[0], tied=[pool[1]])  # its interval reaches 1.00; 0.94 does not
    assert pool[0].tied == []  # a view: best() never changes the result it picked
    by_snr = s.best("snr_db")  # a point without an interval: ties only at the same value
    assert by_snr == pool[1] and by_snr.tied == []


def test_a_result_reads_in_one_short_line(tmp_path, recipe, monkeypatch):
    """A Result's repr is what a person reads at a prompt: the candidate, its verdict, its SNR and
    ratio with their intervals; its run's hashes are behind ``result.run`` (it ran to 11,325 characters)."""
    s = study(tmp_path, recipe)

    def scored(index: int, snr: float, low: float, high: float) -> Result:
        r = _r(snr, (1.0, 1.0, 1.0))
        return replace(
            r, index=index, run=replace(r.run, scores=Scores.from_json({"snr_db": snr, "snr_db_ci95": [low, high]}))
        )

    pool = [scored(0, 28.6, 22.0, 31.0), scored(1, 23.5, 19.5, 26.0)]
    monkeypatch.setattr(s, "results", lambda: pool)
    line = repr(s.best("snr_db"))
    assert len(line) < 200 and "\n" not in line, line
    assert "snr_db 28.6 [22, 31]" in line and "tied with 1" in line and repr(pool[0].variant) in line


def test_a_studys_dataframe_has_a_row_per_candidate(tmp_path, recipe, monkeypatch):
    """pandas comes with the search extra (docs/studies.md); a row per result, its fields as columns."""
    pytest.importorskip("pandas", reason="pandas comes with loop[search]")
    s = study(tmp_path, recipe)
    pool = [_r(30, (1.00, 1.05, 1.10)), _r(29, (0.90, 0.92, 0.94))]
    monkeypatch.setattr(s, "results", lambda: pool)
    frame = s.dataframe()
    assert len(frame) == 2 and list(frame["variant"]) == [r.variant for r in pool]


def test_best_ties_scores_whose_frame_intervals_overlap(tmp_path, recipe, monkeypatch):
    """Scores carry their interval over the scoring frames: two candidates whose SNR intervals
    overlap are tied, however far apart their points; one clear of the best's is not."""
    s = study(tmp_path, recipe)

    def scored(index: int, snr: float, low: float, high: float) -> Result:
        r = _r(snr, (1.0, 1.0, 1.0))
        scores = Scores.from_json({"snr_db": snr, "snr_db_ci95": [low, high]})
        return replace(r, index=index, run=replace(r.run, scores=scores))

    pool = [scored(0, 28.6, 22.0, 31.0), scored(1, 23.5, 19.5, 26.0), scored(2, 12.0, 10.0, 14.0)]
    monkeypatch.setattr(s, "results", lambda: pool)
    found = s.best("snr_db")
    assert found.index == 0 and [t.index for t in found.tied] == [1]  # 26.0 reaches into [22, 31]; 14 does not
    assert pool[0].interval("snr_db") == (22.0, 31.0)
    assert [r.index for r in s.pareto(("snr_db",))] == [0, 1]


def test_the_optuna_example_runs_two_generations(tmp_path):
    """graphs/optuna_search.py: Optuna's multi-objective sampler driving a study (the
    ``search`` extra, which CI installs)."""
    optuna, _, told, done = _two_generations(tmp_path, "optuna_search")
    assert all(len(t.values) == 2 and t.values[1] > 0 for t in done)
    failed = [t for t in told if t.state == optuna.trial.TrialState.FAIL]
    assert all(t.user_attrs.get("why") for t in failed)  # told why, never its figures


def test_loop_study_lists_best_and_front(tmp_path, recipe):
    from click.testing import CliRunner

    from loop.cli import main

    study(tmp_path, recipe).evaluate([scale(1.05), scale(0.95)])
    runs = str(tmp_path / "runs")
    listed = json.loads(CliRunner().invoke(main, ["study", "s", "--runs", runs, "--json"]).output)
    assert [r["sweep"] for r in listed] == ["s-g0", "s-g0"] and all(r["ratio_basis"] for r in listed)
    table = CliRunner().invoke(main, ["study", "s", "--runs", runs]).output
    assert "rate ratio (95% CI)" in table and table.count("s-g0") == 2
    best = CliRunner().invoke(main, ["study", "s", "--runs", runs, "--best", "snr_db", "--json"])
    found = json.loads(best.output)
    assert best.exit_code == 0 and len(found) <= 1 and all("tied" in r for r in found)
    shown = CliRunner().invoke(main, ["study", "s", "--runs", runs, "--best", "snr_db"]).output
    assert ("; within its noise: " in shown) == bool(found)  # none where a busy host left none usable
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


def test_the_mixed_precision_example_runs_two_generations(tmp_path):
    """graphs/mixed_precision.py (issue 36): Optuna choosing which layers go to 16 bits; a candidate
    with a layer at 16 bits scores at or above one with none, within a few hundredths of a dB."""
    optuna, study, told, done = _two_generations(tmp_path, "mixed_precision")
    assert all(len(t.values) == 2 and t.values[1] > 0 for t in done)  # host-busy ones are told as failed
    # SNR does not depend on the host: read every candidate's, usable or not
    from loop.store.ledger import Ledger

    with Ledger(tmp_path / "runs" / "ledger.sqlite") as book:
        runs = [book.record(r.run_id) for r in study.results() if r.run_id is not None]
    snr = [(any(op.get("op") == "precision" for op in run.perturb), run.scores.snr_db) for run in runs]
    sixteen = [v for p, v in snr if p and v is not None]
    eight = [v for p, v in snr if not p and v is not None]
    assert sixteen and eight and min(sixteen) >= max(eight) - 0.05
    assert all(t.user_attrs.get("why") for t in told if t.state == optuna.trial.TrialState.FAIL)


# --- issue 34: one store, each candidate measured once, ratios that hold on a busy host ------------


def test_a_study_lives_in_the_ledger_alone(tmp_path, recipe):
    """The generation files are for people: with studies/ and generations/ gone, the study opens by
    name and gives the same results; every candidate was measured once, in the generation's rounds
    (its run holds no rate of its own; its rate and ratio come from the same rounds)."""
    import shutil

    from loop.store.ledger import Ledger

    s = study(tmp_path, recipe)
    s.evaluate([scale(1.05), scale(0.95)])
    s.evaluate([scale(1.05), scale(1.1)])
    before = Study("s", runs=tmp_path / "runs").results()
    for folder in ("studies", "generations"):
        shutil.rmtree(tmp_path / "runs" / folder, ignore_errors=True)
    after = Study("s", runs=tmp_path / "runs").results()
    assert after == before and len(after) == 3
    with Ledger(tmp_path / "runs" / "ledger.sqlite", readonly=True) as ledger:
        runs = {r.id: r for r in ledger.records()}
    for r in after:
        assert runs[r.run_id].measure.median_fps is None  # the sweep answered the inputs only
        assert r.rate_fps is not None and r.rate_ci95[0] <= r.rate_fps <= r.rate_ci95[1]
        assert r.ratio_basis.startswith("interleaved, ") and r.rate_ratio_ci95[0] <= r.rate_ratio


def test_a_study_of_the_file_layout_opens_and_moves_into_the_ledger(tmp_path, recipe):
    """A study written before the ledger held studies (its settings file, its generation file,
    its race file) is read once into the ledger; its ratios are the race file's."""
    from loop.author.sweepfile import parse
    from loop.flow.sweep import SweepOptions, run_sweep
    from loop.store.generations import prepare, write
    from loop.store.ledger import Ledger

    runs = tmp_path / "runs"
    settings = {"inputs": {"count": 2}, "measure": {**MEASURE, "budget_s": 2}}
    asked = [{"name": "c0", "perturb": scale(1.05)}]
    path = write(prepare(runs, "s-g0", recipe, "onnxruntime", asked, settings), "s-g0").path
    run_sweep(parse(path), runs, SweepOptions(progress=False, generation=0))
    with Ledger(runs / "ledger.sqlite", readonly=True) as ledger:
        ids = {r.variant: r.id for r in ledger.records("s-g0")}
    asked = {"base": str(recipe.resolve()), "backend": "onnxruntime", "settings": settings}
    (runs / "studies").mkdir()
    (runs / "studies" / "s.json").write_text(json.dumps(asked))
    race = {
        "reference_run": ids["base"],
        "runs": {str(ids["c0"]): "sha-c0"},
        "candidates": [{"artifact_sha": "sha-c0", "ratio": 0.9, "low": 0.88, "high": 0.92, "dropped": None}],
        "rounds": 7,
        "floor_pct": 0,
    }
    (runs / "studies" / "s-g0.race.json").write_text(json.dumps(race))
    (found,) = Study("s", runs=runs).results()
    assert found.run_id == ids["c0"] and found.rate_ratio == 0.9 and found.ratio_basis == "interleaved, 7 rounds"
    for name in ("studies", "generations"):
        (runs / name).rename(tmp_path / f"{name}.moved")  # read once: the ledger holds it now
    assert Study("s", runs=runs).results() == [found]
    again = Study("s", runs=runs).evaluate([scale(1.05)])
    assert again[0].reused and again[0].run_id == ids["c0"] and Study("s", runs=runs).next_generation() == 1


def test_a_ratio_that_met_its_target_is_usable_on_a_busy_host():
    """Load both sides share cancels in a ratio from interleaved rounds: one that met its target is
    usable with host-busy among its flags; one that did not stays apart, as a busy run alone does."""
    from loop.core.record import Measurement
    from loop.measure.results import with_race
    from loop.store.studies import Ratio, RatioRow

    busy_figures = Measurement.from_dict(
        {"rate_fps": {"median": 300}, "flags": ["host-busy"], "host": {"others_core_pct": 148}}
    )
    busy = replace(_r(30, (0.99, 1.0, 1.01)), race=None)
    busy = replace(busy, run=replace(busy.run, id=5, measure=busy_figures))
    assert busy.why == "measured host-busy: others used 148% of a core"
    met = RatioRow(5, 1, Ratio(1.0, 0.98, 1.02), 12, 1.0, None, ("host-busy",), Ratio(400, 390, 410), 3.0)
    held = with_race(busy, {5: met})
    assert held.usable and "host-busy" in held.flags and held.rate_fps == 400
    quiet = replace(busy, run=replace(busy.run, measure=Measurement.from_dict({"rate_fps": {"median": 300}})))
    wide = replace(met, ratio=Ratio(1.0, 0.9, 1.1))
    assert quiet.usable and not with_race(quiet, {5: wide}).usable  # a busy race that missed its target
    assert with_race(quiet, {5: replace(wide, flags=())}).usable  # a quiet one that ran out of budget
    confounded = replace(busy, run=replace(busy.run, verdict="confounded"))
    assert not with_race(confounded, {5: met}).usable


def test_a_ratio_whose_rounds_stopped_short_says_so_and_never_met():
    """Issue 42: a candidate that left the rounds before its interval reached the target (it
    stopped narrowing, or the budget ran out) says why in its result, its dict and ``loop study``,
    and is never taken as having met the target, even where its rounds' own part is within it."""
    from loop.measure.results import with_race
    from loop.report import study_table
    from loop.store.studies import Ratio, RatioRow

    row = RatioRow(5, 1, Ratio(1.0, 0.98, 1.02), 12, 2.9, None, ("host-busy",), None, 3.0, "target")
    base = replace(_r(30, (0.99, 1.0, 1.01)), race=None)
    base = replace(base, run=replace(base.run, id=5))
    met = with_race(base, {5: row})
    assert met.race.met and met.usable and met.stopped == "target" and met.ratio_basis == "interleaved, 12 rounds"
    for why in ("not narrowing", "budget"):
        short = with_race(base, {5: replace(row, stopped=why)})
        assert not short.race.met and short.stopped == why and short.to_dict()["stopped"] == why
        assert short.ratio_basis == f"interleaved, 12 rounds (stopped: {why})"
        assert "host-busy" in (short.why or "") and why in study_table([short])


def test_loop_study_is_importable_from_loop():
    import loop

    assert loop.Study is Study


def test_a_generation_left_by_a_dead_process_is_taken_over(tmp_path, recipe):
    """A process killed after claiming generation 0 leaves it claimed; the next evaluate of the
    same candidates finishes it under the same number, and a study has no generation twice."""
    import subprocess
    import sys

    runs = tmp_path / "runs"
    s = study(tmp_path, recipe)
    claim = (
        "import sys; from pathlib import Path; from loop.store.ledger import Ledger; "
        "from loop.store.studies import Asked, StudyStore; from loop.study import content_key; "
        "key = content_key([{'op': 'scale_weights', 'layer': 'conv1', 'factor': 1.05}], {}); "
        "print(StudyStore(Ledger(Path(sys.argv[1])), 's').claim([Asked(0, key, 'c0')])[0])"
    )
    left = subprocess.run([sys.executable, "-c", claim, str(runs / "ledger.sqlite")], capture_output=True, text=True)
    assert left.stdout.strip() == "0", left.stderr
    assert s.generations() == {0: "claimed"}
    (found,) = s.evaluate([scale(1.05)])
    assert found.generation == 0 and s.generations() == {0: "done"}
    s.evaluate([scale(1.1)])
    assert s.generations() == {0: "done", 1: "done"}


def _claim_in_a_dead_process(runs: Path, candidates: list[list[dict]]) -> int:
    """A process that claims the next generation of study ``s`` for ``candidates``, then exits."""
    import subprocess
    import sys

    claim = (
        "import json, sys; from pathlib import Path; from loop.store.ledger import Ledger; "
        "from loop.store.studies import Asked, StudyStore; from loop.study import content_key; "
        "asked = [Asked(i, content_key(p, {}), f'c{i}') for i, p in enumerate(json.loads(sys.argv[2]))]; "
        "print(StudyStore(Ledger(Path(sys.argv[1])), 's').claim(asked)[0])"
    )
    args = [sys.executable, "-c", claim, str(runs / "ledger.sqlite"), json.dumps(candidates)]
    left = subprocess.run(args, capture_output=True, text=True)
    assert left.returncode == 0, left.stderr
    return int(left.stdout)


def test_a_rerun_claims_no_number_for_what_it_only_reuses(tmp_path, recipe):
    """A search rerun from its start asks its generations again (issue 42): those answered already
    come back reused under no new number, the one a killed process left claimed is taken over under
    its own number, and nothing is abandoned; a generation asked again by its number is replayed."""
    runs, gens = tmp_path / "runs", [[scale(1.05)], [scale(1.06)], [scale(1.07)]]
    s = study(tmp_path, recipe)
    for g in gens[:2]:
        s.evaluate(g)
    assert _claim_in_a_dead_process(runs, gens[2]) == 2  # killed before it ran anything
    again = Study("s", runs=runs)
    found = [again.evaluate(g) for g in gens]
    assert [r.reused for (r,) in found] == [True, True, False]
    assert [r.generation for (r,) in found] == [0, 1, 2]
    assert again.generations() == {0: "done", 1: "done", 2: "done"}
    (replayed,) = again.evaluate(gens[0], generation=0)
    assert replayed.reused and replayed.run_id == found[0][0].run_id
    with pytest.raises(LoopError, match="has a generation 0 already"):  # other candidates: still refused
        again.evaluate(gens[1], generation=0)
    assert again.next_generation() == 3


def test_the_next_evaluate_marks_the_studys_dead_rows_interrupted(tmp_path, recipe):
    """Rows a killed process left ``running`` in the study's sweeps are ``interrupted`` after the
    study's next evaluate, as a sweep's resume marks its own, even one that runs nothing; a row of
    a live process is left alone."""
    import subprocess
    import sys

    from loop.store.ledger import Ledger

    runs = tmp_path / "runs"
    s = study(tmp_path, recipe)
    s.evaluate([scale(1.05)])
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with Ledger(runs / "ledger.sqlite") as ledger:
            ids = [ledger.begin("s-g0", "k", name, "sha", "onnxruntime", 0) for name in ("dead", "alive")]
            with ledger.write() as db:
                db.executemany("UPDATE runs SET pid=? WHERE id=?", zip((int(gone.stdout), live.pid), ids, strict=True))
        (r,) = s.evaluate([scale(1.05)])  # all reused: nothing runs
        with Ledger(runs / "ledger.sqlite", readonly=True) as ledger:
            assert [str(ledger.record(i).status) for i in ids] == ["interrupted", "running"]
    finally:
        live.kill()
        live.wait()
    assert r.reused and s.generations() == {0: "done"}


def test_a_bad_candidate_is_one_line_and_claims_nothing(tmp_path, recipe):
    s = study(tmp_path, recipe)
    with pytest.raises(LoopError, match="unknown layer 'nope'"):
        s.evaluate([[{"op": "scale_weights", "layer": "nope", "factor": 1.1}]])
    assert s.generations() == {} and s.next_generation() == 0


def _two_generations(tmp_path: Path, example: str) -> tuple[Any, Study, list[Any], list[Any]]:
    """graphs/EXAMPLE.py run for two generations of three trials: optuna, the study, the trials
    told and those complete; both generations asked, and done (with four possible candidates the
    second may be all reused, and then claims no number)."""
    import importlib.util

    optuna = pytest.importorskip("optuna")
    path = Path(__file__).resolve().parents[1] / "graphs" / f"{example}.py"
    spec = importlib.util.spec_from_file_location(example, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    search, study = module.run(tmp_path / "runs", 2, 3, inputs={"count": 2}, measure={**MEASURE, "budget_s": 2})
    told = [t for t in search.trials if t.state != optuna.trial.TrialState.RUNNING]
    assert len(told) == 6 and study.generations() in ({0: "done"}, {0: "done", 1: "done"})
    done = [t for t in told if t.state == optuna.trial.TrialState.COMPLETE]
    return optuna, study, told, done


def test_score_only_scores_and_audits_with_no_rate_and_says_why(tmp_path, recipe):
    s = study(tmp_path, recipe)
    first = s.evaluate([scale(1.05), scale(1.1)], measure=False)
    for r in first:
        assert r.verdict == "clean" and r.scores["snr_db"] is not None and r.usable
        assert r.rate_fps is None and r.rate_ratio is None and r.ttfo_ms is None and r.stopped is None
        assert r.why_no_rate == "score-only" and r.to_dict()["why_no_rate"] == "score-only"
        assert "score-only" in r.flags and r.ratio_basis == "ledger"
    assert s.best("snr_db") is not None  # a score key ranks them
    for ask in (lambda: s.best("rate_ratio"), lambda: s.best("rate_fps"), lambda: s.pareto()):
        with pytest.raises(
            LoopError, match=r"evaluated score-only and have no rate: c0 \(generation 0\), c1.*measure=True"
        ):
            ask()
    assert len(s.pareto(("snr_db",))) >= 1
    with sqlite3.connect(tmp_path / "runs" / "ledger.sqlite") as db:  # recorded so, the reference too
        flagged = {v: json.loads(f) for v, f in db.execute("SELECT variant, flags FROM runs WHERE sweep='s-g0'")}
    assert set(flagged) == {"base", "c0", "c1"} and all("score-only" in f for f in flagged.values())


def test_score_only_is_reused_score_only_and_measured_when_asked_then_reused_measured(tmp_path, recipe):
    s = study(tmp_path, recipe)
    first = s.evaluate([scale(1.05), scale(1.1)], measure=False)
    again = s.evaluate([scale(1.05)], measure=False)
    assert again[0].reused and again[0].run_id == first[0].run_id and again[0].why_no_rate == "score-only"
    measured = s.evaluate([scale(1.05)])
    assert not measured[0].reused and measured[0].run_id != first[0].run_id and measured[0].generation == 1
    assert measured[0].rate_ratio is not None and measured[0].why_no_rate is None
    assert measured[0].run.cache_hit  # compiled by the score-only generation already
    for ask in (True, False):
        later = s.evaluate([scale(1.05)], measure=ask)
        assert later[0].reused and later[0].run_id == measured[0].run_id and later[0].rate_ratio is not None
    with pytest.raises(LoopError, match=r"1 candidate\(s\) were evaluated score-only"):  # scale(1.1) still is
        s.best("rate_ratio")
    s.evaluate([scale(1.1)])
    # measured now: ranked (usable_only=False: a busy host may leave its ratio short of the target)
    assert s.best("rate_ratio", usable_only=False) is not None
    assert s.generations() == {0: "done", 1: "done", 2: "done"}


def ranged(hi: Any) -> list[dict]:
    return [{"op": "force_range_out", "layer": "conv1", "range": hi}]


def test_array_valued_candidates_are_kept_by_hash_and_are_the_list_of_their_numbers(tmp_path, recipe):
    from loop.core.arrays import ref_of
    from loop.store.arrays import load_array

    runs = tmp_path / "runs"
    s = study(tmp_path, recipe, compile={"bias_correction": False})
    a = np.array([0.0, 8.0], np.float32)
    sha = ref_of(a)["array"]
    first = s.evaluate([ranged(a), ranged(np.array([0.1, 8.0], np.float32))], measure=False)
    assert first[0].verdict == "clean" and first[0].scores["snr_db"] is not None
    assert first[0].run.perturb[0]["range"] == {"array": sha, "dtype": "float32", "shape": [2]}
    assert (first[0].run.perturb[0]["lo"], first[0].run.perturb[0]["hi"]) == (0.0, 8.0)
    assert np.array_equal(load_array(runs, first[0].run.perturb[0]["range"]), a)  # kept, hash-checked
    written = yaml.safe_load((runs / "generations" / "s-g0.yaml").read_text())  # plain YAML naming the file
    assert written["variants"][1]["perturb"][0]["range"] == {
        "array": sha,
        "dtype": "float32",
        "shape": [2],
        "path": f"../arrays/{sha}.npy",
    }
    again = s.evaluate([ranged([0.0, 8.0]), ranged(a.astype(np.float64)), ranged([0.1, 8.0])], measure=False)
    assert [r.reused for r in again] == [True, True, False]  # the same numbers: the same candidate
    assert again[0].run_id == again[1].run_id == first[0].run_id
    # float32's 0.1 is 0.10000000149011612, not 0.1: another candidate, run on its own
    assert again[2].run_id != first[1].run_id
    with pytest.raises(LoopError, match="dtype object"):  # never pickled, refused before a number is claimed
        s.evaluate([ranged(np.array([0.0, {}], dtype=object))], measure=False)
    with pytest.raises(LoopError, match=r"range"):
        s.evaluate([ranged(np.zeros(3))], measure=False)
    assert s.generations() == {0: "done", 1: "done"}


def test_an_error_through_the_api_names_the_candidate_and_the_element(tmp_path, recipe):
    """As the CLI names a file's line and field with the element's index, the API names the
    candidate and the field, never a file loop wrote in a scratch folder."""
    s = study(tmp_path, recipe)
    factors = np.ones(16, np.float32)
    factors[15] = -1.0
    grid = [{"op": "scale_grid", "layer": "conv1", "of": "weights", "factors": factors}]
    with pytest.raises(LoopError) as refused:
        s.evaluate([scale(1.1), grid], measure=False)
    assert str(refused.value) == "candidate c1: perturb[0].factors[15]: should be greater than 0, got -1.0"
    with pytest.raises(LoopError) as refused:
        s.evaluate([[{"op": "scale_weights", "layer": "conv9", "factor": 1.1}]], names=["wide"], measure=False)
    assert str(refused.value).startswith("candidate wide: perturb[0].layer: unknown layer 'conv9'")
    assert s.generations() == {}


def test_per_channel_factors_are_recorded_by_reference_and_kept(tmp_path, recipe):
    """A scale_grid's factors are in its op (by reference) and in the compile options it became:
    there too by reference, not thousands of numbers in every record, and the array is kept."""
    from loop.core.arrays import ref_of
    from loop.store.arrays import load_array

    factors = np.linspace(0.9, 1.1, 8)
    s = study(tmp_path, recipe, compile={"bias_correction": False})
    (r,) = s.evaluate([[{"op": "scale_grid", "layer": "conv1", "of": "weights", "factors": factors}]], measure=False)
    assert r.verdict == "clean"
    (recorded,) = r.run.options["rescales"]
    assert recorded["factors"] == ref_of(factors) and recorded["layer"] == "conv1"
    assert np.array_equal(load_array(tmp_path / "runs", recorded["factors"]), factors)


def _qzo(tmp_path: Path, heldout: np.ndarray, steps: int) -> Any:
    """graphs/qzo.py over the example sweep, run as a user runs it, with ``heldout`` as its frames."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    np.save(tmp_path / "heldout.npy", heldout)
    script, sweep = str(root / "graphs" / "qzo.py"), str(root / "graphs" / "variants.yaml")
    runs, frames = str(tmp_path / "runs"), str(tmp_path / "heldout.npy")
    args = [sys.executable, script, sweep, "--steps", str(steps), "--runs", runs, "--heldout", frames]
    return subprocess.run(args, capture_output=True, text=True, timeout=600)


def test_the_qzo_example_steps_on_scale_only_candidates(tmp_path):
    """graphs/qzo.py: Q-SPSA over every weight grid of the example sweep's base, each step two
    score-only scale_grid probes and its centre; every candidate clean; the study of centres'
    best is a centre (the base or a step's), never a probe; the last line its figures."""
    from loop.author.frames import seeded_set

    ran = _qzo(tmp_path, seeded_set({"input": (1, 3, 32, 32)}, 8, 99), 2)
    assert ran.returncode == 0, ran.stderr[-2000:]
    found = json.loads(ran.stdout.strip().splitlines()[-1])
    assert found["candidates"] == 6 and found["clean"] == 6
    assert found["best"] in ("base", "step1", "step2") and set(found["best_tied"]) <= {"base", "step1", "step2"}
    assert 0 <= found["steps_resolved"] <= 2
    assert np.isfinite(found["heldout_snr_db_before"]) and np.isfinite(found["heldout_snr_db_after"])
    low, high = found["heldout_ci95_after"]
    assert low <= found["heldout_snr_db_after"] <= high  # every SNR with its interval over its frames
    assert found["resolved"] == (found["gain_ci95"][0] > 0 or found["gain_ci95"][1] < 0)
    assert "step 2: +-: " in ran.stdout and " dB [" in ran.stdout and "centre " in ran.stdout


def test_an_example_script_given_bad_frames_says_so_in_one_line(tmp_path):
    """graphs/ scripts answer bad input as loop's commands do: one line naming the file and field,
    exit 2, no traceback (frames of the wrong shape for the held-out study)."""
    ran = _qzo(tmp_path, np.zeros((4, 3, 8, 8), np.float32), 1)
    assert ran.returncode == 2, ran.stderr[-2000:]
    assert ran.stderr.count("\n") == 1 and "Traceback" not in ran.stderr
    assert ran.stderr.startswith("qzo.py: inputs.path: ") and "holds frames of shape (4, 3, 8, 8)" in ran.stderr


def test_the_fit_budget_example_finds_the_best_snr_that_fits(tmp_path):
    """graphs/fit_budget.py on the example graph: a candidate within the budget, the best SNR of
    those it tried that fit, and on the study's front over SNR and weight bytes."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    script, sweep = str(root / "graphs" / "fit_budget.py"), str(root / "graphs" / "variants.yaml")
    runs = tmp_path / "runs"
    ran = subprocess.run(
        [sys.executable, script, sweep, "--budget-frac", "0.7", "--runs", str(runs), "--trials", "3"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    found = json.loads(ran.stdout.strip().splitlines()[-1])
    best = found["best"]
    assert best["weight_bytes"] <= found["budget_bytes"] < found["base_bytes"] and best["layers_4bit"]
    assert found["on_pareto"] and found["tried"] >= 4
    tried = Study("fit-variants", runs=runs).results()
    fitting = [r.value("snr_db") for r in tried if r.usable and (r.weight_bytes or 0) <= found["budget_bytes"]]
    assert best["snr_db"] == max(v for v in fitting if v is not None)


def test_score_only_generations_write_one_reference_row(tmp_path, recipe):
    """A search's steps are score-only generations over one base: the reference's scores stand as
    the first generation recorded them, so the study holds one reference row, however many steps,
    and each later candidate is audited against that row."""
    from loop.store.ledger import Ledger

    s = study(tmp_path, recipe)
    for factor in (1.01, 1.02, 1.03):
        (result,) = s.evaluate([scale(factor)], measure=False)
        assert result.verdict == "clean" and result.ref is not None
    with Ledger(tmp_path / "runs" / "ledger.sqlite") as book:
        rows = book.records()
    references = [r for r in rows if r.verdict == "reference"]
    assert len(references) == 1 and len(rows) == 4
    assert result.ref.id == references[0].id  # the last step judged against the first step's reference
    measured = s.evaluate([scale(1.04)])  # a measured generation races its reference: measured afresh
    assert measured[0].ref is not None and measured[0].ref.id != references[0].id


def test_measured_generations_race_one_reference_row(tmp_path, recipe):
    """A measured generation races its reference in its rounds beside its candidates, and the
    reference's row stands from the first: each candidate's ratio is to that one row."""
    from loop.store.ledger import Ledger

    s = study(tmp_path, recipe)
    first = s.evaluate([scale(1.01)])
    second = s.evaluate([scale(1.02)])
    with Ledger(tmp_path / "runs" / "ledger.sqlite") as book:
        references = [r for r in book.records() if r.verdict == "reference"]
    assert len(references) == 1 and first[0].ref.id == second[0].ref.id == references[0].id
    assert second[0].generation == 1 and second[0].ratio_basis.startswith("interleaved")
