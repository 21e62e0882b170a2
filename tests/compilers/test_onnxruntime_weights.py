"""Weights at 4, 8 or 16 bits on ONNX Runtime, end to end through a sweep: ``precision`` with
``weights:`` (``TensorQuantOverrides`` on the kernel, INT4 packed two to a byte), the share
``weights_4bit_share`` chooses, what each run's weights weigh, and the audit of a kernel on its
new grid."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from authored import FAST_MEASURE
from onnx import TensorProto, helper, numpy_helper
from sweeps import _sweep_runs

from loop.compilers import qdq_weights
from loop.core.vocab import LayerPrint, WeightPrecision
from loop.flow.evaluate import _unapplied_bits
from loop.judge.audit import Audit
from loop.judge.structure import analyse
from loop.store.ledger import Ledger


def three_convs(seed: int = 0) -> onnx.ModelProto:
    """Three convs of 4,096, 9,216 and 576 weights: enough weights that biases weigh little."""
    rng = np.random.default_rng(seed)
    shapes = {"w1": (64, 16, 2, 2), "w2": (16, 64, 3, 3), "w3": (4, 16, 3, 3)}
    inits = [helper.make_tensor(k, TensorProto.FLOAT, s, rng.normal(0, 0.1, s).flatten()) for k, s in shapes.items()]
    inits += [
        helper.make_tensor(f"b{i}", TensorProto.FLOAT, (s[0],), rng.normal(0, 0.05, s[0]))
        for i, s in ((1, shapes["w1"]), (2, shapes["w2"]), (3, shapes["w3"]))
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", strides=[2, 2]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["y"], name="conv3", pads=[1, 1, 1, 1]),
    ]
    graph = helper.make_graph(
        nodes,
        "three",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


SWEEP = f"""\
sweep: weights
base: three.onnx
calibration: {{count: 8}}
inputs: {{count: 4}}
compile: {{bias_correction: false}}
{FAST_MEASURE}
variants:
  - name: base
  - name: all4
    perturb: [{{op: precision, layer: "*", weights: 4}}]
  - name: one4
    perturb: [{{op: precision, layer: conv2, weights: 4}}]
  - name: all16
    perturb: [{{op: precision, layer: "conv*", weights: 16}}]
  - name: half
    compile: {{weights_4bit_share: 0.5}}
"""


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, dict], dict[str, list[LayerPrint]]]:
    folder = tmp_path_factory.mktemp("weights")
    onnx.save(three_convs(), folder / "three.onnx")
    (folder / "sweep.yaml").write_text(SWEEP)
    runs = _sweep_runs(folder / "sweep.yaml", folder / "runs", score_only=True)
    with Ledger(folder / "runs" / "ledger.sqlite") as ledger:
        prints = {name: list(ledger.record(r["id"]).layers) for name, r in runs.items()}
        for r in runs.values():  # what the compile recorded beside the pinned keys
            r["info"] = ledger.record(r["id"]).compiled
    return runs, prints


def _bits(prints: list[LayerPrint]) -> dict[str, int | None]:
    return {p.name: p.weight_bits for p in prints}


def test_every_kernel_at_4_bits_is_clean_and_weighs_about_half(swept):
    runs, prints = swept
    assert runs["all4"]["verdict"] == "clean"
    assert _bits(prints["all4"]) == {"conv1": 4, "conv2": 4, "conv3": 4} and _bits(prints["base"])["conv1"] == 8
    base, four = runs["base"]["weight_bytes"], runs["all4"]["weight_bytes"]
    assert four <= 0.55 * base
    # 13,888 kernel values: as many bytes at 8 bits, half at 4; and 84 int32 biases, 336 bytes, either way
    assert (base, four) == (13888 + 336, 13888 // 2 + 336)
    assert runs["all4"]["scores"]["snr_db"] < runs["base"]["scores"]["snr_db"]
    whats = {c["what"] for c in runs["all4"]["changes"]}
    assert "kernel-bits" in whats and "kernel" not in whats  # the float kernels rounded on 4-bit grids


def test_one_layer_at_4_and_every_one_at_16(swept):
    runs, prints = swept
    assert runs["one4"]["verdict"] == "clean" and _bits(prints["one4"]) == {"conv1": 8, "conv2": 4, "conv3": 8}
    assert runs["one4"]["weight_bytes"] == 13888 - 9216 // 2 + 336
    assert runs["all16"]["verdict"] == "clean" and set(_bits(prints["all16"]).values()) == {16}
    assert runs["all16"]["weight_bytes"] == 2 * 13888 + 336
    assert runs["all16"]["scores"]["snr_db"] > runs["base"]["scores"]["snr_db"]


def test_a_share_at_4_bits_stays_within_it_and_records_the_layers(swept):
    runs, prints = swept
    bits = _bits(prints["half"])
    four = [name for name, b in bits.items() if b == 4]
    share = sum({"conv1": 4096, "conv2": 9216, "conv3": 576}[n] for n in four) / 13888
    # conv2 alone is 66% of the weights: the share takes the two others, never past a half
    assert four == ["conv1", "conv3"] and share <= 0.5
    assert runs["half"]["weight_bytes"] == 13888 - (4096 + 576) // 2 + 336
    # audited against the 8-bit base as weights: 4 is, with its verdict; asked and given both said
    assert runs["half"]["verdict"] == runs["all4"]["verdict"] == "clean", runs["half"]["changes"]
    assert {c["layer"] for c in runs["half"]["changes"] if c["what"] == "kernel-bits"} == {"conv1", "conv3"}
    info = runs["half"]["info"]
    share_info = info.weights_4bit_share
    assert share_info["asked"] == 0.5 and share_info["share"] == pytest.approx(4672 / 13888)
    assert share_info["passed_over"] == {"layer": "conv2", "weights": 9216, "share": pytest.approx(9216 / 13888)}
    said = [w for w in info.warnings if w.startswith("weights_4bit_share")]
    assert said == [
        "weights_4bit_share: asked 0.5, given 0.336 (2 layers at 4 bits); "
        "conv2 (66% of the weights) would pass the share, so it stays at 8 bits"
    ]


def test_the_share_rule_ranks_by_error_per_weight_and_never_passes_the_share():
    model = three_convs()
    chosen, info = qdq_weights.share_layers(model, analyse(model), 0.5, ())
    assert (
        info["share"] <= 0.5 and info["layers"] == [w.layer for w in chosen] and info["rule"] == qdq_weights.SHARE_RULE
    )
    given = (WeightPrecision("conv1", 8, "w1"),)  # a layer a precision op set keeps its width
    again, _ = qdq_weights.share_layers(model, analyse(model), 1.0, given)
    assert {w.layer for w in again} == {"conv2", "conv3"}


def test_weights_asked_at_4_bits_that_compiled_at_8_are_kept_apart():
    held = [LayerPrint("conv1", "Conv", "k", weight_bits=8)]
    found = _unapplied_bits(Audit("clean"), (WeightPrecision("conv1", 4, "w1"),), held)  # type: ignore[arg-type]
    assert found.verdict == "confounded"
    (change,) = found.changes
    assert change.detail == "weights asked at 4 bits; the compiled layer holds 8" and not change.allowed


def test_weights_left_at_their_width_are_named_with_why():
    """Every layer asked at 4 bits, and a BatchNormalization's scale the quantizer quantized as a
    weight stays at 8: named, with its reader and why, in one line; the asked kernel is not."""
    from loop.compilers.qdq_weights import apart_line, held_apart

    inits = [
        numpy_helper.from_array(np.ones((4, 3, 1, 1), np.int8), "w_quantized"),
        numpy_helper.from_array(np.ones(4, np.int8), "bn_scale_quantized"),
        numpy_helper.from_array(np.ones(4, np.int32), "b_quantized"),
        numpy_helper.from_array(np.array(0.1, np.float32), "s"),
    ]
    nodes = [
        helper.make_node("DequantizeLinear", ["w_quantized", "s"], ["w"]),
        helper.make_node("DequantizeLinear", ["bn_scale_quantized", "s"], ["bn_scale"]),
        helper.make_node("DequantizeLinear", ["b_quantized", "s"], ["b"]),
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv"),
        helper.make_node("BatchNormalization", ["c", "bn_scale", "b", "b", "b"], ["y"], name="bn"),
    ]
    graph = helper.make_graph(nodes, "g", [], [], inits)
    asked = [WeightPrecision("conv", 4, "w")]
    found = held_apart(helper.make_model(graph), asked)
    assert [(f["tensor"], f["reader"], f["weights"], f["bits"]) for f in found] == [
        ("bn_scale_quantized", "BatchNormalization", 4, 8)
    ]
    assert apart_line(found, asked).startswith("weights asked at 4 bits; 4 stay as quantized: 4 read by BatchNorm")
    assert held_apart(helper.make_model(graph), []) == []  # nothing asked: nothing to name
    graph.node.append(helper.make_node("DequantizeLinear", ["w_quantized", "s"], ["w2"]))
    graph.node.append(helper.make_node("Conv", ["y", "w2"], ["z"], name="other"))
    graph.initializer[0].name = "v_quantized"  # another layer's kernel, not asked: one layer at 4 bits
    graph.node[0].input[0] = "v_quantized"
    graph.node[-2].input[0] = "w_quantized"
    graph.initializer.append(numpy_helper.from_array(np.ones((4, 3, 1, 1), np.int8), "w_quantized"))
    assert held_apart(helper.make_model(graph), [WeightPrecision("other", 4, "v")]) == []
