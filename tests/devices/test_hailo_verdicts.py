"""Issue 32, item 2: verdicts on the Hailo path, with the DFC's TEST DOUBLE naming, fusing and
quantizing as the real DFC does (tests/compilers/hailo_dfc_double.py: layers ``conv1``, ...,
Conv+BatchNormalization+Relu as one layer listing each node, params that move with the float
model, the calibration and the model script). The device is the DFC's emulator over that double,
not silicon. The ONNX is authored here: a fused Conv_0 feeding Conv_1 (output ``a``) and Conv_2
(output ``b``), its outputs declared ``b`` first, where the double lists them in its layers' order."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from loop.author.sweepfile import parse
from loop.core.vocab import LayerPrint
from loop.flow.sweep import SweepOptions, run_sweep
from loop.store.ledger import Ledger

FAKE_SDK = Path(__file__).resolve().parents[1] / "fake_sdk"


def fake_sdk(monkeypatch: pytest.MonkeyPatch, float_bias: str = "") -> None:
    """The FAKE hailo_sdk_client on the import path of this process and of its compile and device
    children; ``float_bias``: DFC layers whose bias the double keeps in float."""
    from joblib.externals.loky import get_reusable_executor

    get_reusable_executor().shutdown(wait=True)  # compile workers outlive a test: give them this environment
    monkeypatch.setenv("LOOP_FAKE_FLOAT_BIAS", float_bias)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKE_SDK), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.syspath_prepend(str(FAKE_SDK))
    for name in ("hailo_sdk_client", "hailo_sdk_client.hailo_archive", "hailo_sdk_client.hailo_archive.hailo_archive"):
        monkeypatch.delitem(sys.modules, name, raising=False)


def fused_two_output_model(path: Path) -> None:
    rng = np.random.default_rng(3)

    def init(name: str, shape: tuple[int, ...], lo: float = -0.6, hi: float = 0.6) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.uniform(lo, hi, shape).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], name="Conv_0"),
        helper.make_node("BatchNormalization", ["c0", "g0", "be0", "m0", "v0"], ["n0"], name="BatchNormalization_0"),
        helper.make_node("Relu", ["n0"], ["r0"], name="Relu_0"),
        helper.make_node("Conv", ["r0", "w1", "b1"], ["a"], name="Conv_1", pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["r0", "w2", "b2"], ["b"], name="Conv_2"),
    ]
    initializers = [
        init("w0", (6, 3, 1, 1)),
        init("b0", (6,)),
        init("g0", (6,), 0.5, 1.5),
        init("be0", (6,), -0.1, 0.1),
        init("m0", (6,), -0.1, 0.1),
        init("v0", (6,), 0.5, 1.5),
        init("w1", (2, 6, 3, 3)),
        init("b1", (2,)),
        init("w2", (3, 6, 1, 1)),
        init("b2", (3,)),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 3, 4, 4]),
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 2, 4, 4]),
        ],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def sweep(tmp_path: Path, variants: str, compile_keys: str = "{optimization_level: 0}") -> dict[str, dict[str, Any]]:
    fused_two_output_model(tmp_path / "net.onnx")
    path = tmp_path / "sweep.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        sweep: hailo-verdicts
        base: net.onnx
        backend: hailo
        devices: [hailo-emulator]
        calibration: {{count: 16}}
        inputs: {{count: 4}}
        compile: {compile_keys}
        measure: {{warmup: 1, frames: 4, repeats: 1, depth: [1], ttfo_repeats: 1, latency_frames: 2, min_duration_s: 0}}
        variants:
          - name: base
        """)
        + textwrap.indent(textwrap.dedent(variants), "  ")
    )
    result = run_sweep(parse(path), tmp_path / "runs", SweepOptions(jobs=1, progress=False))
    ledger = Ledger(tmp_path / "runs" / "ledger.sqlite")
    runs = {o.variant: ledger.record(o.run_id).to_json() for o in result.outcomes}
    for outcome in result.outcomes:
        run = runs[outcome.variant]
        assert run["status"] == "ok", run["error"]
        run["prints"] = {lp.name: lp for lp in ledger.record(outcome.run_id).layers}
    return runs


def outside(run: dict[str, Any]) -> set[tuple[str, str]]:
    return {(c["layer"], c["what"]) for c in run["changes"] if not c["allowed"]}


SCALED = """\
- name: scaled
  perturb: [{op: scale_weights, layer: Conv_0, factor: 1.1}]
"""
FORCED = """\
- name: forced
  perturb: [{op: force_range_out, layer: Conv_0, range: [0.0, 6.0]}]
"""


def test_hailo_verdicts_name_onnx_nodes_and_outputs_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: every print was named ``conv1``, ``conv2`` (no ONNX node), the double's params never
    moved (every perturbation ``no-effect``), and outputs were scored by position."""
    fake_sdk(monkeypatch)
    runs = sweep(tmp_path, SCALED + FORCED)
    base, scaled, forced = runs["base"], runs["scaled"], runs["forced"]
    prints: dict[str, LayerPrint] = base["prints"]
    assert {(lp.name, lp.compiled_name) for lp in prints.values()} == {
        ("Conv_0", "loop_net/conv1"),
        ("Conv_1", "loop_net/conv2"),
        ("Conv_2", "loop_net/conv3"),
    }
    assert prints["Conv_0"].onnx_names == ("Conv_0", "BatchNormalization_0", "Relu_0")
    assert all(lp.off_grid == 0 and lp.float_sha for lp in prints.values())
    assert forced["prints"]["Conv_0"].off_grid  # re-derived: no longer its float kernel rounded
    # scale_weights on the fused layer: its kernel, and biases and scales downstream (bias correction)
    assert scaled["verdict"] == "clean", outside(scaled)
    # the double's one symmetric scale per kernel: x1.1 keeps the integers and moves the scale, which the
    # integer-only hashes (issue 43) now name as such
    assert {(c["layer"], c["what"]) for c in scaled["changes"] if c["what"].startswith("kernel")} == {
        ("Conv_0", "kernel-scale")
    }
    # a forced range with bias correction: the double re-derives Conv_0's kernel, and the biases
    # its consumers correct against the new grid move beyond rounding
    assert forced["verdict"] == "confounded"
    assert ("Conv_0", "kernel") in outside(forced)
    assert {layer for layer, what in outside(forced) if what == "bias"} >= {"Conv_1", "Conv_2"}
    # outputs matched by name: the double lists a (conv2) before b (conv3), the ONNX b before a
    assert base["scores"]["snr_db"] > 25 and base["scores"]["cosine"] > 0.99


def test_a_16_bit_layer_is_judged_at_16_bits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: bits were assumed 8, so a 16-bit kernel read on an 8-bit grid was all off it."""
    fake_sdk(monkeypatch)
    runs = sweep(
        tmp_path, SCALED, "{optimization_level: 0, model_script: ['quantization_param(conv2, precision_mode=a16_w16)']}"
    )
    wide = runs["base"]["prints"]["Conv_1"]
    assert (wide.out_bits, wide.weight_bits, wide.in_bits, wide.off_grid) == (16, 16, 8, 0)
    assert runs["scaled"]["verdict"] == "clean", outside(runs["scaled"])


def test_a_float_bias_layer_gets_a_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: a bias the DFC keeps in float (no integer step) crashed the audit with a TypeError."""
    fake_sdk(monkeypatch, float_bias="conv3")
    runs = sweep(tmp_path, SCALED)
    floating = runs["base"]["prints"]["Conv_2"]
    assert floating.bias is not None and floating.bias_step is None
    assert runs["scaled"]["verdict"] == "clean", outside(runs["scaled"])
