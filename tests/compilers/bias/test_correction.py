"""Bias correction layer by layer: the segmented run gives what one full run per layer gives."""

from __future__ import annotations

import numpy as np
import onnx
from authored import one_linear, patterns_model

from loop.compilers.bias import correction as bc
from loop.compilers.onnxruntime import OnnxRuntimeCompiler, _quantize
from loop.compilers.qdq import QdqGraph
from loop.core.sessions import session
from loop.core.vocab import CompileOptions


def _frames(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random((count, 3, 16, 16), dtype=np.float32)


def _one_layer_at_a_time(float_model: onnx.ModelProto, quantized: onnx.ModelProto, frames: np.ndarray) -> None:
    """The plain definition: each layer in graph order, measured on the whole quantized model
    with every earlier correction applied."""
    g = QdqGraph(quantized)
    feeds = [{"x": f[None]} for f in frames]
    todo = bc.targets(g, bc.Correction())
    expected = {n: v.mean(axis=0) for n, v in bc.frame_means(float_model, [t.f_out for t in todo], feeds, 1).items()}
    for t in todo:
        measured = bc.frame_means(quantized, [t.q_out], feeds, 1, optimize="none")[t.q_out].mean(axis=0)
        bc._apply(g, t, expected[t.f_out] - measured)


def _biases(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {
        t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer if t.data_type == onnx.TensorProto.INT32
    }


def test_segmented_equals_one_layer_at_a_time():
    model, frames = patterns_model(), _frames(6, 0)
    quantized = _quantize(model.SerializeToString(), frames, CompileOptions())
    plain = onnx.ModelProto()
    plain.CopyFrom(quantized)
    correction = bc.correct(model, quantized, [{"x": f[None]} for f in frames], 1, rule="always", guard=False)
    _one_layer_at_a_time(model, plain, frames)
    assert correction.corrected == [
        "first",
        "after_pool",
        "depthwise",
        "to_add",
        "to_concat_a",
        "to_concat_b",
        "after_resize",
        "head",
    ]
    assert correction.skipped == {"last": "no bias"}  # a MatMul has no bias slot
    assert correction.depths < len(correction.corrected)  # layers of equal depth went together
    mine, theirs = _biases(quantized), _biases(plain)
    assert mine.keys() == theirs.keys() and any(
        (mine[k] != _biases(_quantize(model.SerializeToString(), frames, CompileOptions()))[k]).any() for k in mine
    )
    for name in mine:
        np.testing.assert_array_equal(mine[name], theirs[name], err_msg=name)


def _snr(model: bytes, quantized: bytes, frames: np.ndarray) -> float:
    ref, got = session(model), session(quantized)
    a = np.concatenate([np.concatenate([o.ravel() for o in ref.run(None, {"x": f[None]})]) for f in frames])
    b = np.concatenate([np.concatenate([o.ravel() for o in got.run(None, {"x": f[None]})]) for f in frames])
    return float(10 * np.log10(np.sum(a**2) / np.sum((a - b) ** 2)))


def test_a_conv_without_bias_gets_one_and_is_corrected():
    model = patterns_model()
    conv = next(n for n in model.graph.node if n.name == "after_resize")
    del conv.input[2]
    data, frames = model.SerializeToString(), _frames(8, 1)
    q = OnnxRuntimeCompiler().optimize(data, frames, CompileOptions(bias_correction=True))
    assert q.info.zero_bias_added == ("after_resize",)
    assert "after_resize" not in q.info.bias_correction["skipped"]
    assert len(q.info.bias_correction["corrected"]) == 8
    off = OnnxRuntimeCompiler().optimize(data, frames, CompileOptions(bias_correction=False))
    held_out = _frames(8, 2)
    assert _snr(data, q.data, held_out) > _snr(data, off.data, held_out) - 0.5


def test_a_range_that_excludes_zero_is_recorded_as_used():
    from loop.core.vocab import RangeOverride

    model = patterns_model()
    options = CompileOptions(bias_correction=False, overrides=(RangeOverride("first", "out", "r0", 1.0, 4.0),))
    q = OnnxRuntimeCompiler().optimize(model.SerializeToString(), _frames(4, 0), options)
    used = q.info.overrides["r0"]
    assert used["asked"] == [1.0, 4.0] and used["used"][0] == 0.0 and abs(used["used"][1] - 4.0) < 0.02
    assert any("asked [1, 4]" in w and "used [0, 4" in w for w in q.info.warnings)


def test_entropy_and_percentile_differ_from_minmax():
    data, frames = patterns_model().SerializeToString(), _frames(8, 3)
    kernels = {}
    for method in ("minmax", "entropy", "percentile"):
        q = OnnxRuntimeCompiler().optimize(
            data, frames, CompileOptions(bias_correction=False, calibration_method=method)
        )
        kernels[method] = q.data
    assert kernels["entropy"] != kernels["minmax"] and kernels["percentile"] != kernels["minmax"]


def test_constant_only_subgraphs_are_not_kept_per_frame():
    """A weight's DequantizeLinear is run where needed, never stored once per frame."""
    model, frames = patterns_model(), _frames(3, 0)
    quantized = _quantize(model.SerializeToString(), frames, CompileOptions())
    segments = bc._Segments(QdqGraph(quantized), {"first", "after_pool"}, [{"x": f[None]} for f in frames], 1)
    segments.advance(0, [], ["first"])
    segments.advance(1, [], ["after_pool"])
    weights = {t.name for t in quantized.graph.initializer}
    dq_of_weights = {
        n.output[0] for n in quantized.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in weights
    }
    assert not dq_of_weights & set(segments.kept[0])


def test_a_linear_layer_written_as_matmul_and_add_is_corrected():
    """The exporters' linear layer: its bias is the Add's constant (on a uint8 grid of its own),
    its channels the last axis. Corrected like any biased layer, and the mean error of each
    corrected output shrinks; the fingerprint carries that bias too."""
    from authored import linear_model

    model = linear_model()
    rng = np.random.default_rng(0)
    calib = rng.random((32, 10, 16), dtype=np.float32)
    compiler = OnnxRuntimeCompiler()
    plain = compiler.optimize(model.SerializeToString(), calib, CompileOptions(bias_correction=False))
    fixed = compiler.optimize(model.SerializeToString(), calib, CompileOptions(bias_correction=True))
    assert (
        fixed.info.bias_correction["corrected"] == ["fc1", "fc2"] and "fc1" not in fixed.info.bias_correction["skipped"]
    )
    prints = {lp.name: lp for lp in compiler.fingerprint(fixed)}
    before = {lp.name: lp for lp in compiler.fingerprint(plain)}
    assert prints["fc1"].bias is not None and len(prints["fc1"].bias) == 12
    assert prints["fc2"].bias_sha != before["fc2"].bias_sha  # the correction moved the Add's constant

    def mean_error(quantized: bytes) -> float:
        ref, got = session(model), session(quantized, optimize="none")
        diffs = [got.run(None, {"x": f[None]})[0] - ref.run(None, {"x": f[None]})[0] for f in calib]
        return float(np.abs(np.mean(diffs, axis=(0, 1, 2))).mean())

    assert mean_error(fixed.data) < mean_error(plain.data)


def _output_error(model: onnx.ModelProto, quantized: bytes, frames: np.ndarray) -> np.ndarray:
    """Per frame and channel, the quantized model's output minus the float one's."""
    ref, got = session(model), session(quantized, optimize="none")
    return np.stack([got.run(None, {"x": f[None]})[0][0] - ref.run(None, {"x": f[None]})[0][0] for f in frames])


def test_a_correction_that_is_noise_is_weighed_on_held_out_frames_and_dropped():
    """Inputs of zero mean: the layer's output error has no mean to correct, so a correction
    from 6 frames is their noise alone. It would raise the error on other frames; it is
    skipped, and said why."""
    rng = np.random.default_rng(3)
    model = one_linear("fc", rng.normal(0, 0.3, (64, 16)).astype(np.float32), np.zeros(16, np.float32), False)
    calib, held_out = rng.normal(0, 1, (6, 64)).astype(np.float32), rng.normal(0, 1, (256, 64)).astype(np.float32)
    compiler, data = OnnxRuntimeCompiler(), model.SerializeToString()
    on = compiler.optimize(data, calib, CompileOptions(bias_correction=True))
    off = compiler.optimize(data, calib, CompileOptions(bias_correction=False))
    assert list(on.info.bias_correction["skipped"]) == ["fc"]
    assert "did not lower" in on.info.bias_correction["skipped"]["fc"]  # on that layer, or at the outputs
    alone = bc.correct(model, onnx.load_from_string(off.data), [{"x": f[None]} for f in calib], 1, guard=False)
    assert alone.skipped == {"fc": "did not lower the held-out error"}
    assert on.info.bias_correction["corrected"] == []
    forced = onnx.load_from_string(off.data)
    bc.correct(model, forced, [{"x": f[None]} for f in calib], 1, rule="always", guard=False)
    mse = {k: float(np.mean(_output_error(model, q, held_out) ** 2)) for k, q in (("on", on.data), ("off", off.data))}
    assert float(np.mean(_output_error(model, forced.SerializeToString(), held_out) ** 2)) > mse["off"]  # noise hurts
    guarded = bc.correct(model, onnx.load_from_string(off.data), [{"x": f[None]} for f in calib], 1, rule="always")
    assert guarded.skipped == {"fc": bc.GUARD_WORSE}  # applied regardless, it fails at the outputs on held-out frames
    assert guarded.guard == "dropped" and guarded.guard_gain is not None  # the decision, not a figure's sign
    assert mse["on"] <= mse["off"]
    # without the guard (compile.bias_correction_guard: false) only the layer's own rule decides
    unguarded = compiler.optimize(data, calib, CompileOptions(bias_correction=True, bias_correction_guard=False))
    assert unguarded.info.bias_correction["guard"] == "off"
    assert unguarded.info.bias_correction["skipped"] == {"fc": "did not lower the held-out error"}


def test_a_matmul_add_correction_beyond_the_constants_grid_widens_the_grid():
    """ONNX Runtime gives an Add's constant a uint8 grid spanning its values and 0: the largest
    bias sits at the grid's end. Every weight of channel 1 rounds down, so that channel's output
    is low and its correction raises the largest bias past the grid. The grid widens to hold
    it (no channel pinned), the record says so, and channel 1's mean error is gone."""
    k = 64
    weight = np.full((k, 2), 0.2, np.float32)
    weight[:, 1] = (np.arange(k) % 100 + 0.45) / 127  # each 0.45 of a step above its integer: rounds down
    weight[0, 1] = 1.0  # the channel's scale: 1/127
    model = one_linear("fc", weight, np.array([0.5, 1.0], np.float32), True)
    rng = np.random.default_rng(0)
    calib, held_out = rng.random((16, k), dtype=np.float32), rng.random((64, k), dtype=np.float32)
    q = OnnxRuntimeCompiler().optimize(model.SerializeToString(), calib, CompileOptions(bias_correction=True))
    record = q.info.bias_correction
    assert record["corrected"] == ["fc"] and record["clipped"] == {} and "fc" in record["regridded"]
    error = _output_error(model, q.data, held_out).mean(axis=0)
    off = OnnxRuntimeCompiler().optimize(model.SerializeToString(), calib, CompileOptions(bias_correction=False))
    assert _output_error(model, off.data, held_out).mean(axis=0)[1] < -0.05  # the error corrected
    assert abs(error[1]) < 0.02


def test_an_int32_bias_pinned_at_its_grid_end_is_reported_clipped():
    """A bias that cannot move as far as asked is clipped, and the record says which and how far."""
    g_model = patterns_model()
    frames = _frames(4, 0)
    quantized = _quantize(g_model.SerializeToString(), frames, CompileOptions())
    g = QdqGraph(quantized)
    target = bc.targets(g, bc.Correction())[0]
    correction = bc.Correction()
    ints = g.required(target.bias)
    scale = g.required(target.bias_scale).astype(np.float64)
    move = np.zeros(ints.size)
    move[0] = (np.iinfo(np.int32).max - float(ints[0]) + 10) * float(np.ravel(scale)[0])
    bc._apply(g, target, move, correction)
    assert target.node in correction.clipped and "1 of" in correction.clipped[target.node]
    assert target.node not in correction.corrected and g.required(target.bias)[0] == np.iinfo(np.int32).max


def test_every_layer_has_a_record():
    """Each quantized layer is corrected, clipped or skipped with a reason: no layer is left out."""
    model, frames = patterns_model(), _frames(8, 4)
    q = OnnxRuntimeCompiler().optimize(model.SerializeToString(), frames, CompileOptions(bias_correction=True))
    record = q.info.bias_correction
    named = record["corrected"] + list(record["clipped"]) + list(record["skipped"])
    layers = [lp.name for lp in OnnxRuntimeCompiler().fingerprint(q)]
    assert sorted(named) == sorted(layers) and len(named) == len(set(named))
    assert record["rule"] == bc.DEFAULT_RULE and record["frames"] == 8
    assert all(why for why in record["skipped"].values())
