"""``precision`` on ONNX Runtime, end to end through a sweep: a layer's output at 16 bits
(``TensorQuantOverrides`` with ``QUInt16``) or the layer left out of quantization
(``nodes_to_exclude``), audited against the base."""

from __future__ import annotations

import textwrap

import numpy as np
import onnx
import pytest
from authored import FAST_MEASURE
from onnx import TensorProto, helper, numpy_helper
from sweeps import _sweep_runs

from loop.core.vocab import LayerPrint
from loop.store.ledger import Ledger


def outlier_model(seed: int = 0) -> onnx.ModelProto:
    """Three 1x1 convs; the first writes one channel 300x the others, so on 8 bits the small
    channels fall within a step of zero, and the second writes a wide output too."""
    rng = np.random.default_rng(seed)
    w1 = rng.normal(0, 0.3, (8, 4, 1, 1)).astype(np.float32)
    w1[0] *= 300.0
    w2 = rng.normal(0, 0.3, (8, 8, 1, 1)).astype(np.float32)
    w2[:, 0] /= 300.0
    w2[1] *= 100.0
    w3 = rng.normal(0, 0.3, (4, 8, 1, 1)).astype(np.float32)
    w3[:, 1] /= 100.0
    arrays = {"w1": w1, "w2": w2, "w3": w3}
    arrays.update({f"b{i}": rng.normal(0, 0.05, n).astype(np.float32) for i, n in ((1, 8), (2, 8), (3, 4))})
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="stage/conv_a"),
        helper.make_node("Relu", ["c1"], ["r1"], name="stage/relu_a"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="stage/conv_b"),
        helper.make_node("Conv", ["c2", "w3", "b3"], ["y"], name="head"),
    ]
    graph = helper.make_graph(
        nodes,
        "outliers",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])],
        [numpy_helper.from_array(v, k) for k, v in arrays.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _sweep(folder, variants: str, bc: bool = True) -> dict[str, dict]:
    onnx.save(outlier_model(), str(folder / "m.onnx"))
    text = textwrap.dedent(f"""\
        sweep: precision
        base: m.onnx
        calibration: {{count: 16}}
        inputs: {{count: 4}}
        compile: {{bias_correction: {str(bc).lower()}}}
        {FAST_MEASURE}
        variants:
          - name: base
        """) + textwrap.indent(textwrap.dedent(variants), "  ")
    (folder / "s.yaml").write_text(text)
    return _sweep_runs(folder / "s.yaml", folder / "runs")


def _layers(run: dict, folder) -> dict[str, LayerPrint]:
    with Ledger(folder / "runs" / "ledger.sqlite") as ledger:
        return {lp.name: lp for lp in ledger.record(run["id"]).layers}


@pytest.mark.parametrize("bc", [False, True])
def test_a_layer_at_16_bits_is_clean_and_recorded(tmp_path, bc):
    runs = _sweep(tmp_path, "- {name: wide, perturb: [{op: precision, layer: stage/conv_a, bits: 16}]}\n", bc)
    base, wide = runs["base"], runs["wide"]
    assert {r["status"] for r in runs.values()} == {"ok"}
    assert wide["verdict"] == "clean", [c for c in wide["changes"] if not c["allowed"]]
    layers = _layers(wide, tmp_path)
    assert layers["stage/conv_a"].out_bits == 16 and layers["stage/conv_b"].in_bits == 16
    assert (_layers(base, tmp_path)["stage/conv_a"].out_bits or 8) == 8
    assert any("8 -> 16 bits" in c["detail"] for c in wide["changes"])
    assert wide["scores"]["snr_db"] >= base["scores"]["snr_db"]


def test_a_glob_puts_every_layer_it_matches_at_16_bits(tmp_path):
    runs = _sweep(tmp_path, "- {name: both, perturb: [{op: precision, layer: 'stage/*', bits: 16}]}\n")
    both = runs["both"]
    assert both["verdict"] == "clean", [c for c in both["changes"] if not c["allowed"]]
    layers = _layers(both, tmp_path)
    assert layers["stage/conv_a"].out_bits == layers["stage/conv_b"].out_bits == 16
    assert (layers["head"].out_bits or 8) == 8 and layers["head"].in_bits == 16
    assert both["scores"]["snr_db"] > runs["base"]["scores"]["snr_db"] + 5


def test_32_bits_leaves_the_layer_out_of_quantization(tmp_path):
    runs = _sweep(tmp_path, "- {name: float, perturb: [{op: precision, layer: stage/conv_b, bits: 32}]}\n")
    kept = runs["float"]
    assert kept["verdict"] == "clean", [c for c in kept["changes"] if not c["allowed"]]
    assert "stage/conv_b" not in _layers(kept, tmp_path) and "stage/conv_b" in _layers(runs["base"], tmp_path)
    assert any(c["layer"] == "stage/conv_b" and c["what"] == "kernel" for c in kept["changes"])


def _compile(model: onnx.ModelProto, **options):
    from loop.author.frames import seeded
    from loop.compilers.base import run_compile
    from loop.compilers.onnxruntime import OnnxRuntimeCompiler
    from loop.core.vocab import CompileOptions

    result = run_compile(
        OnnxRuntimeCompiler(), model.SerializeToString(), seeded((1, 4, 6, 6), 8, 0), CompileOptions(**options)
    )
    assert result.ok, result.error
    return result


def test_a_16_bit_output_comes_back_as_uint16_on_its_own_grid():
    """The same compile with its output at 8 and at 16 bits: read back, the two differ by the
    8-bit rounding alone."""
    import onnxruntime as ort

    from loop.author.frames import dequantize, quantize
    from loop.core.vocab import Precision

    x = np.random.default_rng(3).normal(size=(1, 4, 6, 6)).astype(np.float32)
    read = {}
    for bits, precisions in ((8, ()), (16, (Precision("head", 16, "y"),))):
        art = _compile(outlier_model(), bias_correction=False, precisions=precisions).artifact
        session = ort.InferenceSession(art.data, providers=["CPUExecutionProvider"])
        out = session.run(None, {"x": quantize(x, art.inputs[0])})[0]
        assert out.dtype == np.dtype(art.outputs[0].dtype) == np.dtype(f"uint{bits}")
        read[bits] = (dequantize(out, art.outputs[0], x.shape), art.outputs[0].scale)
    (a, step8), (b, step16) = read[8], read[16]
    assert step16 < step8 / 200
    assert np.abs(a - b).max() <= 0.5 * step8 + 0.5 * step16 + 1e-6


def test_a_forced_range_and_16_bits_on_one_tensor_both_hold():
    from loop.core.vocab import Precision, RangeOverride

    forced = RangeOverride("stage/conv_b", "out", "c2", -40.0, 40.0)
    both = _compile(
        outlier_model(), bias_correction=False, overrides=(forced,), precisions=(Precision("stage/conv_b", 16, "c2"),)
    )
    conv_b = next(lp for lp in both.layers if lp.name == "stage/conv_b")
    assert conv_b.out_bits == 16 and conv_b.out_scale == pytest.approx(80.0 / 65535, rel=1e-5)
