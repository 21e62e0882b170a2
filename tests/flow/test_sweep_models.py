"""Networks shaped like the ones users bring (benchmarks/RETIRED.md has the real exports'):
every op on a layer of every kind, with bias correction on and off, and the verdicts the
footprint table promises. Also attention, old-style exports, and the smaller promises."""

from __future__ import annotations

import textwrap

import numpy as np
import onnx
import pytest
from authored import FAST_MEASURE, attention_model, old_style_model, patterns_model
from sweeps import _sweep_runs

RANGES = {  # each a real change of scale, and none past a removed activation's bounds
    "in-pool": ("force_range_in", "after_pool", [0, 3]),
    "in-resize": ("force_range_in", "after_resize", [-2, 3]),
    "in-flatten": ("force_range_in", "head", [-2, 3]),
    "out-depthwise": ("force_range_out", "depthwise", [0, 3]),
    "out-add": ("force_range_out", "to_add", [-3, 3]),
    "out-concat": ("force_range_out", "to_concat_a", [-3, 3]),
}
WEIGHTS = {
    "w-depthwise": ("scale_weights", "depthwise", "factor: 1.05"),
    "w-add": ("add_weight_noise", "to_add", "std: 0.02"),
    "w-last": ("scale_weights", "last", "factor: 1.1"),
}


def _sweep_text(base: str, bc: bool) -> str:
    lines = [
        f"sweep: patterns-{bc}",
        f"base: {base}",
        "calibration: {count: 12}",
        "inputs: {count: 3}",
        f"compile: {{bias_correction: {str(bc).lower()}}}",
        FAST_MEASURE,
        "variants:",
        "  - name: base",
        "  - {name: calib, perturb: [{op: calibration, count: 16, seed: 5}]}",
        "  - {name: in-range-only, perturb: [{op: force_range_in, layer: after_pool, range: [0, 3]}]}",
    ]
    lines += [
        f"  - {{name: {n}, perturb: [{{op: {op}, layer: {layer}, range: {rng}}}]}}"
        for n, (op, layer, rng) in RANGES.items()
        if n != "in-pool"
    ]
    lines += [
        f"  - {{name: {n}, perturb: [{{op: {op}, layer: {layer}, {arg}}}]}}" for n, (op, layer, arg) in WEIGHTS.items()
    ]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, dict[str, dict]]:
    folder = tmp_path_factory.mktemp("patterns")
    onnx.save(patterns_model(), str(folder / "patterns.onnx"))
    out = {}
    for bc in (False, True):
        path = folder / f"bc{bc}.yaml"
        path.write_text(_sweep_text("patterns.onnx", bc))
        out[bc] = _sweep_runs(path, folder / "runs", jobs=2)
    return out


def test_every_op_lands_without_bias_correction(swept):
    runs = swept[False]
    assert {r["status"] for r in runs.values()} == {"ok"}
    assert {n: r["verdict"] for n, r in runs.items() if n != "base"} == {n: "clean" for n in runs if n != "base"}


def test_with_bias_correction_ranges_are_the_seed_confound(swept):
    runs = swept[True]
    assert {r["status"] for r in runs.values()} == {"ok"}
    assert runs["calib"]["verdict"] == "clean"  # re-derived biases are calibration's own effect
    assert all(runs[n]["verdict"] == "clean" for n in WEIGHTS)
    ranges = [n for n in runs if n.startswith(("in-", "out-"))]
    assert {runs[n]["verdict"] for n in ranges} == {"confounded"}
    outside = {c["what"] for c in runs["out-add"]["changes"] if not c["allowed"]}
    assert outside == {"bias"}


def test_bias_correction_does_not_lower_quality(swept):
    assert swept[True]["base"]["scores"]["snr_db"] > swept[False]["base"]["scores"]["snr_db"] - 0.5


def test_every_stage_is_timed_and_range_only_variants_reuse_the_base_bytes(swept):
    runs = swept[True]
    assert {"author_s", "optimize_s", "compile_s", "audit_s", "score_s", "measure_s"} <= set(runs["base"]["stages"])
    assert runs["in-range-only"]["onnx_sha"] == runs["calib"]["onnx_sha"] == runs["base"]["onnx_sha"]
    assert runs["w-add"]["onnx_sha"] != runs["base"]["onnx_sha"]


def test_attention_sweeps_with_unweighted_layers(tmp_path):
    onnx.save(attention_model(), str(tmp_path / "attn.onnx"))
    text = textwrap.dedent(f"""\
        sweep: attention
        base: attn.onnx
        calibration: {{count: 8}}
        inputs: {{count: 2}}
        {FAST_MEASURE}
        variants:
          - name: base
          - {{name: proj, perturb: [{{op: scale_weights, layer: q_proj, factor: 1.1}}]}}
          - {{name: scores, perturb: [{{op: force_range_out, layer: qk, range: [-8, 8]}}]}}
        """)
    (tmp_path / "s.yaml").write_text(text)
    runs = _sweep_runs(tmp_path / "s.yaml", tmp_path / "runs")
    assert {r["status"] for r in runs.values()} == {"ok"}
    layers = {lp["name"]: lp for lp in runs["base"]["layers"]}
    assert layers["qk"]["kernel_sha"] is None and layers["av"]["kernel_sha"] is None
    assert layers["q_proj"]["kernel_sha"] is not None
    assert runs["proj"]["verdict"] == "clean" and runs["scores"]["verdict"] in ("clean", "confounded")
    assert any(c["layer"] == "qk" and c["what"] == "out_scale" for c in runs["scores"]["changes"])


def test_old_style_export_sweeps_and_says_what_was_changed(tmp_path):
    onnx.save(old_style_model(), str(tmp_path / "old.onnx"))
    text = (
        f"sweep: old\nbase: old.onnx\ncalibration: {{count: 8}}\ninputs: {{count: 2}}\n{FAST_MEASURE}\n"
        "variants:\n  - name: base\n  - {name: w, perturb: [{op: scale_weights, layer: conv, factor: 1.2}]}\n"
    )
    (tmp_path / "s.yaml").write_text(text)
    runs = _sweep_runs(tmp_path / "s.yaml", tmp_path / "runs")
    assert runs["base"]["status"] == "ok" and runs["w"]["verdict"] == "clean"
    from loop.store.ledger import Ledger

    with Ledger(tmp_path / "runs" / "ledger.sqlite") as ledger:
        notes = ledger.record(runs["base"]["id"]).notes
    assert "1 Constant nodes made initializers" in notes


def test_a_range_the_quantizer_widened_is_a_warning(write_sweep, tmp_path):
    path = write_sweep(
        f"sweep: w\nbase: tiny.yaml\ncalibration: {{count: 4}}\ninputs: {{count: 2}}\n{FAST_MEASURE}\n"
        "variants:\n  - name: base\n  - {name: r, perturb: [{op: force_range_out, layer: conv1, range: [1, 4]}]}\n"
    )
    runs = _sweep_runs(path, tmp_path / "runs")
    assert any("asked [1, 4]" in w for w in runs["r"]["warnings"])


def test_integer_frames_need_a_scale(write_sweep, tmp_path):
    from loop.author.sweepfile import parse
    from loop.core.errors import LoopError

    np.save(tmp_path / "frames.npy", np.random.default_rng(0).integers(0, 255, (4, 3, 8, 8), dtype=np.uint8))
    head = "sweep: f\nbase: tiny.yaml\ncalibration: {path: frames.npy"
    with pytest.raises(LoopError, match=r"calibration\.scale"):
        parse(write_sweep(head + "}\nvariants: [{name: base}]\n"))
    spec = parse(write_sweep(head + ", scale: 0.00392156862745098}\nvariants: [{name: base}]\n"))
    from loop.author.author import make_frames

    frames = make_frames(spec.calibration, (1, 3, 8, 8), tmp_path)
    assert frames.dtype == np.float32 and frames.max() <= 1.0


def test_two_ranges_on_one_tensor_name_both(write_sweep):
    from loop.author.sweepfile import parse
    from loop.core.errors import LoopError

    path = write_sweep(
        "sweep: t\nbase: tiny.yaml\nvariants:\n  - name: both\n    perturb:\n"
        "      - {op: force_range_out, layer: conv1, range: [0, 4]}\n"
        "      - {op: force_range_in, layer: conv2, range: [0, 5]}\n"
    )
    with pytest.raises(LoopError) as err:
        parse(path)
    assert "force_range_out(conv1) and force_range_in(conv2) both force tensor 'conv1_out'" in str(err.value)
    assert ":7:" in str(err.value)


def test_a_calibration_method_far_below_the_sweeps_is_flagged():
    from types import SimpleNamespace

    from loop.core.vocab import CompileOptions
    from loop.flow.evaluate import Reference, _score_flags

    spec = SimpleNamespace(compile=CompileOptions())
    variant = SimpleNamespace(own_base=False)
    worse = SimpleNamespace(reference=False, variant=variant, options=CompileOptions(calibration_method="distribution"))
    ref = Reference((), None, 30.0)
    assert _score_flags(spec, worse, {"snr_db": 25.0}, ref) == ["calibration-worse"]
    assert _score_flags(spec, worse, {"snr_db": 10.0}, ref) == ["calibration-worse", "below-reference"]
    assert _score_flags(spec, worse, {"snr_db": 29.0}, ref) == []
    wide = {"snr_db": 10.0, "snr_db_ci95": [4.0, 26.0]}  # far below, but its interval reaches within 6 dB
    assert _score_flags(spec, worse, wide, ref) == ["calibration-worse"]
    assert _score_flags(spec, worse, {"snr_db": 10.0}, None) == []


def test_a_model_with_two_inputs_sweeps_with_seeded_and_stored_frames(tmp_path):
    from authored import two_input_model

    onnx.save(two_input_model(), str(tmp_path / "two.onnx"))
    rng = np.random.default_rng(0)
    np.savez(
        tmp_path / "calib.npz",
        image=rng.random((6, 3, 8, 8), dtype=np.float32),
        side=rng.random((6, 4), dtype=np.float32),
    )
    for name, calib in (("seeded", "{count: 6}"), ("stored", "{path: calib.npz}")):
        text = (
            f"sweep: {name}\nbase: two.onnx\ncalibration: {calib}\ninputs: {{count: 3}}\n{FAST_MEASURE}\n"
            "variants:\n  - name: base\n  - {name: w, perturb: [{op: scale_weights, layer: head, factor: 1.1}]}\n"
        )
        (tmp_path / f"{name}.yaml").write_text(text)
        runs = _sweep_runs(tmp_path / f"{name}.yaml", tmp_path / "runs")
        assert {r["status"] for r in runs.values()} == {"ok"}, runs["base"]["error"]
        assert runs["w"]["verdict"] == "clean" and runs["base"]["measure"]["bytes_in"] == 3 * 8 * 8 + 4
        assert runs["base"]["scores"]["snr_db"] > 20


def test_stored_frames_for_two_inputs_must_name_both(tmp_path):
    from authored import two_input_model

    from loop.author.sweepfile import parse
    from loop.core.errors import LoopError

    onnx.save(two_input_model(), str(tmp_path / "two.onnx"))
    np.savez(tmp_path / "calib.npz", image=np.zeros((2, 3, 8, 8), np.float32))
    np.save(tmp_path / "calib.npy", np.zeros((2, 3, 8, 8), np.float32))
    for path, words in (("calib.npz", "no frames for input 'side'"), ("calib.npy", "keyed by input name")):
        (tmp_path / "s.yaml").write_text(
            f"sweep: s\nbase: two.onnx\ncalibration: {{path: {path}}}\nvariants: [{{name: base}}]\n"
        )
        with pytest.raises(LoopError, match=words):
            parse(tmp_path / "s.yaml")


def test_bias_changes_the_guard_made_by_going_two_ways_name_it():
    """The output guard keeps bias correction on the reference and drops it on a variant (a
    near tie): every corrected bias moves, a real confound; its detail says why and how to pin it."""
    from loop.core.kinds import Verdict
    from loop.core.record import Change
    from loop.flow.evaluate import _guard_cause
    from loop.judge.audit import Audit

    found = Audit(
        Verdict.CONFOUNDED,
        (Change("conv0", "bias", "max |d| 0.1", False), Change("conv3", "kernel", "scaled", True)),
    )
    named = _guard_cause(found, "kept", "dropped")
    assert named.verdict == Verdict.CONFOUNDED
    assert "guard dropped the pass here and kept it on the reference" in named.changes[0].detail
    assert "bias_correction_guard: false" in named.changes[0].detail
    assert named.changes[1] == found.changes[1]
    for same in (("kept", "kept"), ("dropped", "dropped"), (None, "kept"), ("off", "kept")):
        assert _guard_cause(found, *same) == found


def _sequence_first_model() -> onnx.ModelProto:
    """A CTC-style head: conv features read as a sequence and returned ``[T, 1, C]``, batch second
    (as ddddocr's recogniser returns them, [seqlen, 1, 8210])."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.normal(0, 0.3, (6, 1, 3, 3)).astype(np.float32), "w")
    shape = numpy_helper.from_array(np.array([1, 6, 10], np.int64), "to_seq")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["f"], name="conv", pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Reshape", ["f", "to_seq"], ["s"], name="seq"),
        helper.make_node("Transpose", ["s"], ["y"], name="time_first", perm=[2, 0, 1]),
    ]
    graph = helper.make_graph(
        nodes,
        "ctc",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [10, 1, 6])],
        [w, shape],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_an_output_with_its_batch_second_is_read_whole(tmp_path):
    """One frame of a [T, 1, C] output is all T x C values, not C (the leading dimension is no batch)."""
    onnx.save(_sequence_first_model(), str(tmp_path / "ctc.onnx"))
    text = (
        f"sweep: ctc\nbase: ctc.onnx\ncalibration: {{count: 8}}\ninputs: {{count: 3}}\n{FAST_MEASURE}\n"
        "variants:\n  - name: base\n  - {name: w, perturb: [{op: scale_weights, layer: conv, factor: 1.1}]}\n"
    )
    (tmp_path / "ctc.yaml").write_text(text)
    runs = _sweep_runs(tmp_path / "ctc.yaml", tmp_path / "runs")
    assert {r["status"] for r in runs.values()} == {"ok"}, runs["base"]["error"]
    assert runs["base"]["measure"]["bytes_out"] == 10 * 1 * 6  # uint8
    assert runs["base"]["scores"]["snr_db"] > 20 and runs["w"]["verdict"] == "clean"


def test_a_base_below_the_ruined_threshold_is_flagged_and_said_so(tmp_path):
    """measure.ruined_snr_db: every run scoring under it is flagged quantization-ruined, with its
    figures (a fast wrong answer must not look good); where the signal is lost is the base's."""
    from authored import pooled_two_conv

    from loop.report import ruined_lines

    onnx.save(pooled_two_conv(), str(tmp_path / "net.onnx"))
    variants = "variants:\n  - name: base\n  - {name: w, perturb: [{op: scale_weights, layer: conv2, factor: 1.1}]}\n"
    for threshold, flagged in ((200.0, True), (-50.0, False)):
        measure = FAST_MEASURE.replace("measure: {", f"measure: {{ruined_snr_db: {threshold}, ")
        text = f"sweep: r\nbase: net.onnx\ncalibration: {{count: 8}}\ninputs: {{count: 3}}\n{measure}\n{variants}"
        (tmp_path / "r.yaml").write_text(text)
        runs = _sweep_runs(tmp_path / "r.yaml", tmp_path / f"runs{flagged}")
        assert ("quantization-ruined" in runs["base"]["flags"]) is flagged
        assert ("quantization-ruined" in runs["w"]["flags"]) is flagged
    from loop.store.ledger import Ledger

    with Ledger(tmp_path / "runsTrue" / "ledger.sqlite") as book:
        base = next(r for r in book.records() if r.variant == "base")
        w = next(r for r in book.records() if r.variant == "w")
    assert w.judged.quantization_ruined["threshold_db"] == 200.0 and "worst_layers" not in w.judged.quantization_ruined
    found = base.judged.quantization_ruined
    assert found["threshold_db"] == 200.0 and found["snr_db"] < 200.0
    assert ruined_lines(base)[0].startswith("  base: flagged quantization-ruined: SNR ")


def test_a_ruined_base_is_analysed_once_and_never_by_a_score_only_run(tmp_path, monkeypatch):
    """The noise analysis of a ruined base (a second optimize and three models per frame) is made
    once per content: a second sweep of the same base reads it back; a score-only sweep gives the
    command that makes it and waits for nothing."""
    from authored import pooled_two_conv

    from loop.flow import evaluate, noise

    calls = []
    real = noise.of_authored
    monkeypatch.setattr(noise, "of_authored", lambda *a: calls.append(a[1].variant.name) or real(*a))
    monkeypatch.setattr(evaluate, "_ANALYSED", type(evaluate._ANALYSED)())
    onnx.save(pooled_two_conv(), str(tmp_path / "net.onnx"))
    measure = FAST_MEASURE.replace("measure: {", "measure: {ruined_snr_db: 200, ")
    text = f"sweep: NAME\nbase: net.onnx\ncalibration: {{count: 8}}\ninputs: {{count: 3}}\n{measure}\n"
    text += "variants:\n  - name: base\n"
    from loop.author.sweepfile import parse
    from loop.flow.sweep import SweepOptions, run_sweep

    found = {}
    for name, measured in (("quick", False), ("first", True), ("second", True)):
        (tmp_path / f"{name}.yaml").write_text(text.replace("NAME", name))
        options = SweepOptions(progress=False, measure=measured, score_only=not measured)
        run_sweep(parse(tmp_path / f"{name}.yaml"), tmp_path / "runs", options)
    from loop.store.ledger import Ledger

    with Ledger(tmp_path / "runs" / "ledger.sqlite") as book:
        found = {r.sweep: r.judged.quantization_ruined for r in book.records()}
    assert calls == ["base"]  # the first measured sweep made it; the second read it back
    assert "worst_layers" not in found["quick"] and found["quick"]["measure_with"].startswith("loop noise ")
    assert found["first"]["worst_layers"] == found["second"]["worst_layers"] and found["second"]["worst_layers"]


def test_a_clean_variant_far_below_its_reference_is_marked(tmp_path):
    """A weight grid moved 8x is inside its footprint (``clean``) and ruins the answer: flagged
    below-reference with both SNRs, and said so under the table; a small move is not."""
    from authored import pooled_two_conv

    from loop.report import sweep_summary
    from loop.store.ledger import Ledger

    onnx.save(pooled_two_conv(), str(tmp_path / "net.onnx"))
    variants = (
        "variants:\n  - name: base\n"
        "  - {name: eight, perturb: [{op: scale_grid, layer: conv1, of: weights, factor: 8}]}\n"
        "  - {name: small, perturb: [{op: scale_grid, layer: conv1, of: weights, factor: 1.01}]}\n"
    )
    text = f"sweep: b\nbase: net.onnx\ncalibration: {{count: 8}}\ninputs: {{count: 8}}\n{FAST_MEASURE}\n{variants}"
    (tmp_path / "b.yaml").write_text(text)
    runs = _sweep_runs(tmp_path / "b.yaml", tmp_path / "runs", score_only=True)
    assert runs["eight"]["verdict"] == "clean" and "below-reference" in runs["eight"]["flags"]
    assert "below-reference" not in runs["small"]["flags"]
    with Ledger(tmp_path / "runs" / "ledger.sqlite") as book:
        records = book.records()
    eight = next(r for r in records if r.variant == "eight")
    assert eight.judged.below_reference["snr_db"] < eight.judged.below_reference["reference_snr_db"] - 6
    assert "  eight: flagged below-reference: SNR " in sweep_summary(records)
