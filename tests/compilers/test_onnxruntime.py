"""The embedded compiler on tiny authored models: real QDQ quantization, real rounding."""

from pathlib import Path

import numpy as np
import onnx
import pytest

from loop.author.frames import seeded
from loop.author.graphs import build_recipe
from loop.compilers.base import run_compile
from loop.compilers.onnxruntime import OnnxRuntimeCompiler
from loop.core.vocab import CompileOptions, RangeOverride

CAL = seeded((1, 3, 8, 8), 16, 0)


@pytest.fixture
def model(recipe: Path) -> bytes:
    return build_recipe(recipe).SerializeToString()


def compile_(model: bytes, **options) -> "object":
    result = run_compile(OnnxRuntimeCompiler(), model, CAL, CompileOptions(**options))
    assert result.ok, result.error
    return result


def test_deterministic(model):
    a, b = compile_(model), compile_(model)
    assert [lp.kernel_sha for lp in a.layers] == [lp.kernel_sha for lp in b.layers]
    assert a.artifact.data == b.artifact.data


def test_two_compiles_of_one_file_at_once_keep_apart(model, tmp_path, monkeypatch):
    """ONNX Runtime's calibrator writes ``<model>-inferred.onnx`` beside the file it reads and
    deletes it after: two compiles of one file at once (an optimizer's population) shared it,
    and one failed with FileNotFoundError. Each now reads the file under a name of its own.
    (Two processes at once, in a sweep; two threads here, calling the quantizer itself, since a
    whole compile redirects this process's stderr.)"""
    import threading

    from loop.compilers.onnxruntime import _quantize

    (tmp_path / "models").mkdir()
    path = tmp_path / "models" / "m.onnx"
    path.write_bytes(model)
    written: list[str] = []
    both = threading.Barrier(2, timeout=20)
    real = onnx.shape_inference.infer_shapes_path

    def infer_shapes_path(src: str, dst: str = "", *args, **kwargs) -> None:
        real(src, dst, *args, **kwargs)
        written.append(dst)
        both.wait()  # both drafts written before either is read and deleted

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes_path", infer_shapes_path)
    results: list = []

    def quantize() -> None:
        try:
            results.append(_quantize(path, CAL, CompileOptions()))
        except Exception as exc:  # said below
            results.append(exc)

    threads = [threading.Thread(target=quantize) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(isinstance(r, onnx.ModelProto) for r in results), results
    assert len(set(written)) == 2 and path.read_bytes() == model
    assert [p.name for p in path.parent.iterdir()] == ["m.onnx"]  # no alias left behind


def test_fingerprint_reads_every_quantized_layer(model):
    layers = compile_(model).layers
    assert [lp.name for lp in layers] == ["conv1", "conv2"]
    conv1 = layers[0]
    assert conv1.out_tensor == "conv1_out" and conv1.in_tensor == "input"
    assert layers[1].in_tensor == "conv1_out" and layers[1].in_scale == conv1.out_scale
    assert conv1.bias is not None and len(conv1.bias) == 8 and all(s > 0 for s in conv1.bias_step)


def test_a_patch_counts_off_grid_only_where_its_base_prints_do_not_say(model, monkeypatch):
    """A scale_grid patch of a base carrying its prints counts the moved layer alone (the first
    patch of a search used to read and count every float kernel: 4.5 s at 1.1 GB of weights),
    and prints exactly what a patch counted from scratch prints."""
    from dataclasses import replace

    from loop.compilers import qdq
    from loop.core.vocab import Rescale

    base = compile_(model)
    counted: list[tuple[int, ...]] = []
    real = qdq.off_grid

    def counting(q, *args, **kwargs):
        counted.append(q.shape)
        return real(q, *args, **kwargs)

    monkeypatch.setattr(qdq, "off_grid", counting)
    patch = CompileOptions(rescales=(Rescale("conv1", "weights", (1.05,)),))
    bare = run_compile(OnnxRuntimeCompiler(), b"", {}, patch, base.quantized)
    assert bare.ok, bare.error
    assert len(counted) == 2  # nothing known: both layers counted
    counted.clear()
    told = run_compile(OnnxRuntimeCompiler(), b"", {}, patch, replace(base.quantized, prints=tuple(base.layers)))
    assert told.ok, told.error
    assert counted == [onnx.numpy_helper.to_array(_kernel_of(base, "conv1")).shape]
    assert told.layers == bare.layers
    assert told.layers[0].kernel_int_sha == base.layers[0].kernel_int_sha
    assert told.layers[1] == base.layers[1]


def test_a_patch_stays_parsed_from_its_rescale_to_its_compile(model):
    """A rescale leaves its model parsed (serializing 268 MB took most of a patch); the fingerprint
    reads it, the compile takes it, and anything that must carry it serializes it then."""
    from loop.core.errors import LoopError
    from loop.core.vocab import Rescale
    from loop.store.codec import decode_quantized, encode_quantized

    base = compile_(model)
    compiler = OnnxRuntimeCompiler()
    patched = compiler.rescale(base.quantized, (Rescale("conv1", "weights", (1.05,)),))
    assert patched.data == b"" and patched.parsed is not None
    carried, _ = decode_quantized(*encode_quantized(patched))
    assert onnx.load_from_string(carried.data) == patched.parsed
    assert compiler.fingerprint(patched) == compiler.fingerprint(carried)
    assert compiler.compile(patched, CompileOptions()).data == compiler.compile(carried, CompileOptions()).data
    with pytest.raises(LoopError, match="taken by its compile"):
        compiler.fingerprint(patched)


def _kernel_of(result, layer: str) -> onnx.TensorProto:
    """The integer kernel of ``layer`` in the quantized model a compile made."""
    from loop.compilers.qdq import QdqGraph

    g = QdqGraph(onnx.load_from_string(result.quantized.data))
    node = next(n for n in g.layers() if n.name == layer)
    return g.inits[g.weight(node).values]


def test_uniformly_scaled_kernel_keeps_integers_but_changes_hash(recipe):
    from loop.author.perturb import ScaleWeights
    from loop.judge.structure import analyse

    base = build_recipe(recipe)
    scaled = build_recipe(recipe)
    ScaleWeights(layer="conv1", factor=1.05).apply(scaled, analyse(scaled))
    a, b = compile_(base.SerializeToString()), compile_(scaled.SerializeToString())
    _qa, _qb = (onnx.load_from_string(r.artifact.data) for r in (a, b))
    assert a.layers[0].kernel_sha != b.layers[0].kernel_sha
    assert b.layers[0].weight_scale[0] == pytest.approx(a.layers[0].weight_scale[0] * 1.05, rel=1e-5)
    assert a.layers[1].kernel_sha == b.layers[1].kernel_sha


def test_override_on_the_quantized_tensor_moves_its_scale(model):
    base = compile_(model, bias_correction=False)
    forced = compile_(model, bias_correction=False, overrides=(RangeOverride("conv1", "out", "conv1_out", 0.0, 8.0),))
    assert forced.layers[0].out_scale == pytest.approx(8.0 / 255, rel=1e-6)
    assert forced.layers[1].in_scale == forced.layers[0].out_scale
    assert base.layers[0].kernel_sha == forced.layers[0].kernel_sha
    assert base.layers[0].bias_sha == forced.layers[0].bias_sha


def test_bias_correction_rederives_biases(model):
    plain, corrected = compile_(model, bias_correction=False), compile_(model, bias_correction=True)
    assert plain.layers[0].kernel_sha == corrected.layers[0].kernel_sha
    assert plain.layers[0].bias_sha != corrected.layers[0].bias_sha


def test_artifact_takes_and_returns_uint8(model):
    import onnxruntime as ort

    art = compile_(model).artifact
    assert [t.dtype for t in art.inputs + art.outputs] == ["uint8", "uint8"]
    assert art.inputs[0].scale and art.outputs[0].scale
    assert art.bytes_in == 3 * 8 * 8 and art.bytes_out == 4 * 8 * 8
    session = ort.InferenceSession(art.data, providers=["CPUExecutionProvider"])
    out = session.run(None, {"input": np.zeros((1, 3, 8, 8), np.uint8)})[0]
    assert out.dtype == np.uint8 and out.shape == (1, 4, 8, 8)


def test_float_io_keeps_float(model):
    art = compile_(model, io="float32").artifact
    assert art.inputs[0].dtype == "float32" and art.inputs[0].scale is None


def test_failure_is_a_value_with_stage(model):
    bad = (RangeOverride("conv1", "out", "no_such_tensor", 0.0, 1.0),)
    result = run_compile(OnnxRuntimeCompiler(), model, CAL, CompileOptions(overrides=bad))
    assert not result.ok and result.stage == "optimize"
    assert "no_such_tensor" in result.error


def _near_dead_channel_model() -> onnx.ModelProto:
    """conv2's channel 0 has tiny weights and a live bias: at the input's scale its int32 bias
    would overflow, so ONNX Runtime raises that channel's weight scale with the input scale."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1 = rng.normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32)
    w2 = rng.normal(0, 0.3, (4, 4, 1, 1)).astype(np.float32)
    w2[0] = rng.normal(0, 1e-9, (4, 1, 1))
    inits = [
        numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (w2, "w2"), (np.float32([1.5, 0.1, -0.2, 0.3]), "b2"))
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["y"], name="conv2"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])
    return helper.make_model(
        helper.make_graph(nodes, "g", [x], [y], inits), opset_imports=[helper.make_opsetid("", 17)]
    )


@pytest.mark.parametrize("adjust", [True, False])
def test_a_moved_input_scale_re_rounds_an_adjusted_kernel_and_the_audit_calls_it_rounding(adjust):
    from loop.author.perturb import ScaleWeights
    from loop.judge.audit import audit
    from loop.judge.structure import analyse

    base, scaled = _near_dead_channel_model(), _near_dead_channel_model()
    op = ScaleWeights(layer="conv1", factor=1.1)
    op.apply(scaled, analyse(scaled))
    a = compile_(base.SerializeToString(), int32_bias_weight_adjust=adjust)
    b = compile_(scaled.SerializeToString(), int32_bias_weight_adjust=adjust)
    assert all(lp.off_grid == 0 and lp.float_sha for lp in a.layers + b.layers)
    result = audit(a.layers, b.layers, op.footprint(analyse(base), CompileOptions(int32_bias_weight_adjust=adjust)))
    conv2 = {c.what for c in result.changes if c.layer == "conv2"}
    assert result.verdict.value == "clean"
    # with the adjustment, channel 0's weight scale follows the input's, so its integers re-round
    assert ("kernel-rounding" in conv2) == adjust and "kernel" not in conv2
