"""Where the signal is lost (issue 36): the falls of accumulated SNR, their regions, and the flag of a
ruined base that names them, on a LayerNorm written out as ``E[x^2] - E[x]^2`` (as jax2tf exports
it in magika), fed frames with a large mean and a small spread: two nearly equal 8-bit values
subtracted, then a reciprocal square root of their small difference. And the variant ``loop noise``
prints, measured step by step until one meets its target (issue 42)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import yaml
from authored import CLASSES, FAST_MEASURE, FEATURES, TOKENS, layer_norm_written_out
from authored import ln_frames as frames
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper
from sweeps import _sweep_runs

from loop import api
from loop.cli import main
from loop.core.record import RunRecord
from loop.judge.falls import ROOT, dominators, float_inputs
from loop.report import ruined_lines
from loop.report.page import write_report
from loop.store.ledger import Ledger


def sweep(folder: Path, variants: list[dict[str, object]]) -> Path:
    onnx.save(layer_norm_written_out(), folder / "net.onnx")
    np.save(folder / "calib.npy", frames(32, 1))
    np.save(folder / "score.npy", frames(8, 2))
    doc = {
        "sweep": "ln",
        "base": "net.onnx",
        "calibration": {"path": "calib.npy"},
        "inputs": {"path": "score.npy"},
        "measure": yaml.safe_load(FAST_MEASURE.removeprefix("measure: ")),
        "variants": variants,
    }
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_dominators_of_a_diamond_and_a_chain() -> None:
    reads = {"x": [ROOT], "a": ["x"], "b": ["x"], "c": ["a", "b"], "d": ["c"]}
    assert dominators(reads) == {ROOT: ROOT, "x": ROOT, "a": "x", "b": "x", "c": "x", "d": "c"}


def test_the_signal_flows_through_float_activations_only() -> None:
    """Constants and integer shape paths are not where the signal flows: the variance's dominator is
    the input, not the graph's root through a Shape."""
    reads = float_inputs(layer_norm_written_out())
    assert reads["var_eps"] == ["var"] and reads["x"] == [ROOT]
    assert dominators(reads)["var"] == "x"


def test_the_fall_is_named_and_its_region_brings_the_base_back(tmp_path: Path) -> None:
    """The base is flagged quantization-ruined and names where the signal is lost; loop noise lists
    those layers first; the variant the flag prints, run as a sweep, is clean and scores 25 dB or more."""
    path = sweep(tmp_path, [{"name": "base"}])
    runs = _sweep_runs(path, tmp_path / "runs")
    base = runs["base"]
    assert "quantization-ruined" in base["flags"], base["scores"]
    assert base["scores"]["snr_db"] < 10
    found = base_record(tmp_path).judged.quantization_ruined
    lost = [w["layer"] for w in found["worst_layers"]]
    assert lost[0] == "ln/var", lost  # where E[x^2] - E[x]^2 cancels
    assert all(w["before_db"] - w["after_db"] >= 6 for w in found["worst_layers"])
    page = write_report(tmp_path / "runs", None, tmp_path / "report.html").read_text()
    assert page.count('id="falls') == 1 and "no run stored a noise analysis" not in page  # the plot beside the audit
    assert found["try_measured"] is False and found["measure_with"] == f"loop noise {path} --variant base"
    assert any("a first guess, unmeasured (`loop noise " in line for line in ruined_lines(base_record(tmp_path)))
    report = api.noise(path, "base")
    assert [t.layer for t in report.layers[: len(lost)]] == lost  # loop noise lists them first
    assert report.to_try() == found["try"]
    # the first guess, measured by loop noise, meets the default target at once: it is the one printed
    assert report.widening is not None
    (before, first), chosen = report.widening.steps, report.widening.met()
    assert before.verdict == "reference" and before.snr_db is not None and before.snr_db < 10
    assert chosen is first and first.entries() == found["try"] and first.verdict == "clean"
    assert first.rate is not None and first.wide == len(first.layers)
    assert [line for line in report.lines() if "<- meets the target" in line] == [first.line(met=True)]
    entries = [yaml.safe_load(line) for line in found["try"]]
    assert {"ln/square", "ln/sq_mean"} <= {e["layer"] for e in entries}  # the grids the subtraction amplifies
    fixed = _sweep_runs(sweep(tmp_path, [{"name": "base"}, {"name": "sixteen", "perturb": entries}]), tmp_path / "r2")
    assert fixed["sixteen"]["verdict"] == "clean"
    assert fixed["sixteen"]["scores"]["snr_db"] >= 25, fixed["sixteen"]["scores"]


def test_loop_sweep_measures_the_variant_a_ruined_base_prints(tmp_path: Path) -> None:
    """``loop sweep`` measures the flag's variant before it prints it: the steps as ``loop noise``
    takes them (no rate race), the chosen step's entries in place of the first guess."""
    path = sweep(tmp_path, [{"name": "base"}])
    ran = CliRunner().invoke(main, ["sweep", str(path), "--runs", str(tmp_path / "runs"), "--quiet"])
    assert ran.exit_code == 0, ran.output
    found = base_record(tmp_path).judged.quantization_ruined
    widening = found["widening"]
    assert found["try_measured"] is True and widening["met"] == widening["chosen"] is not None
    chosen = widening["steps"][widening["chosen"]]
    assert chosen["snr_db"] >= 25 and chosen["verdict"] == "clean" and found["try"] == chosen["entries"]
    assert widening["rate_note"].startswith("rates not measured here")
    printed = "\n".join(ruined_lines(base_record(tmp_path)))
    assert f"measured: step {chosen['index']}" in printed and "meets the target 25 dB, clean" in printed
    assert "unmeasured" not in printed and printed in ran.output


def base_record(folder: Path) -> RunRecord:
    with Ledger(folder / "runs" / "ledger.sqlite", readonly=True) as book:
        return next(r for r in book.records() if r.variant == "base")


def test_a_first_guess_short_of_the_target_is_widened_until_one_meets_it(tmp_path: Path) -> None:
    """loop noise measures each step before it prints one. Past a target nothing reaches, it widens
    through the rungs to every activation and prints the best, saying it fell short; with a target
    between the first guess and that best, it widens past the first guess and marks the step that
    met it. The target comes from the first run's figures, so the test holds whatever they are."""
    path, runs = sweep(tmp_path, [{"name": "base"}]), str(tmp_path / "runs")
    noise = ["noise", str(path), "--variant", "base", "--runs", runs]
    unreached = CliRunner().invoke(main, [*noise, "--target-db", "200", "--json"])
    assert unreached.exit_code == 0, unreached.output
    found = json.loads(unreached.stdout)["widening"]
    steps = found["steps"]
    assert (found["target_from"], found["met"]) == ("--target-db", None)
    assert steps[1]["why"].startswith("the falls' regions") and steps[-1]["layers"] == ["*"]
    assert all(s["verdict"] == "clean" and s["rate"] is not None for s in steps[1:])
    best = max(steps, key=lambda s: s["snr_db"])
    assert found["chosen"] == best["index"] and found["variant"] == best["entries"]
    assert best["snr_db"] > steps[1]["snr_db"]  # widening past the first guess gains something here
    target = (steps[1]["snr_db"] + best["snr_db"]) / 2
    met = CliRunner().invoke(main, [*noise, "--target-db", str(target)])
    assert met.exit_code == 0, met.output
    marked = [line for line in met.stdout.splitlines() if line.endswith("<- meets the target")]
    assert len(marked) == 1 and not marked[0].startswith("  step 1 "), met.output
    index = int(marked[0].split()[1])
    assert [s["snr_db"] >= target for s in steps[1 : index + 1]] == [False] * (index - 1) + [True]
    assert f"the variant to paste (step {index}, met the target: " in met.output
    assert "  step 1  the falls' regions" in met.output and f"  step {index + 1} " not in met.output


def test_a_wider_grid_shared_through_a_reshape_is_asked_for(tmp_path: Path) -> None:
    """A 16-bit precision on a Reshape widens the grid it shares with the node before it (the
    quantizer puts one Q there): the audit sees the writer's grid move, inside the op's footprint.
    Without the footprint following the shared grid this read confounded; without the recorded
    wide grids it read no-effect (a Mul has no print of its own)."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Mul", ["x", "x"], ["sq"], "square"),
        helper.make_node("Reshape", ["sq", "shape"], ["flat"], "flat"),
        helper.make_node("MatMul", ["flat", "w"], ["y"], "head"),
    ]
    consts = [
        numpy_helper.from_array(np.array([1, TOKENS * FEATURES], np.int64), "shape"),
        numpy_helper.from_array(rng.normal(0, 0.1, (TOKENS * FEATURES, CLASSES)).astype(np.float32), "w"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, TOKENS, FEATURES])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, CLASSES])],
        consts,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "net.onnx")
    (tmp_path / "s.yaml").write_text(
        "sweep: r\nbase: net.onnx\ncalibration: {count: 8}\ninputs: {count: 3}\n"
        + FAST_MEASURE
        + "\nvariants:\n  - name: base\n  - {name: wide, perturb: [{op: precision, layer: flat, bits: 16}]}\n"
    )
    runs = _sweep_runs(tmp_path / "s.yaml", tmp_path / "runs")
    wide = runs["wide"]
    assert wide["verdict"] == "clean", wide["changes"]
    assert any(c["layer"] == "square" and "8 -> 16 bits" in c["detail"] for c in wide["changes"])
