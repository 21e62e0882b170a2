"""scale_grid on the Hailo compiler: the quantized HAR's translated params edited, loaded back and
compiled without optimizing, against the DFC's TEST DOUBLE (hailo_fakes.py), whose switch
``edits_reach_hef`` says whether loaded params reach the HEF (no public source shows either)."""

from __future__ import annotations

import sys
from types import ModuleType

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from loop.compilers.base import run_compile
from loop.compilers.hailo import HailoCompiler
from loop.compilers.hailo_params import HailoCompileError
from loop.compilers.hailo_rescale import rescale_params
from loop.core.vocab import CompileOptions, Rescale

HEF = b"LOOPBACK 4 4 3 4 4 2\n"


def two_convs() -> bytes:
    """Conv_0 -> Relu_0 -> Conv_1, biases on both, so each has an int32 bias on its own step."""
    rng = np.random.default_rng(7)
    arrays = {"w0": (4, 3, 1, 1), "b0": (4,), "w1": (2, 4, 1, 1), "b1": (2,)}
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], name="Conv_0"),
            helper.make_node("Relu", ["c0"], ["r0"], name="Relu_0"),
            helper.make_node("Conv", ["r0", "w1", "b1"], ["y"], name="Conv_1"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])],
        [numpy_helper.from_array(rng.normal(0, 0.5, s).astype(np.float32), n) for n, s in arrays.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def compiled(fake: ModuleType, edits: tuple[Rescale, ...], reach: bool) -> tuple[dict, dict]:
    """The base and the edited variant compiled by one compiler, one optimize between them: the HEFs'
    params (as the double compiled them) and the variant's compile result."""
    fake.edits_reach_hef, fake.hef_carries_params, fake.hef = reach, True, HEF
    compiler = HailoCompiler()
    frames = np.random.default_rng(1).normal(0, 1, (8, 3, 4, 4)).astype(np.float32)
    base = run_compile(compiler, two_convs(), frames, CompileOptions())
    assert base.ok, base.error
    variant = run_compile(compiler, two_convs(), frames, CompileOptions(rescales=edits), base.quantized)
    assert variant.ok, variant.error
    read = sys.modules["hailo_dfc_double"].hef_params  # loaded beside the fake (hailo_fakes.py)
    hefs = {"base": read(base.artifact.data), "variant": read(variant.artifact.data)}
    return hefs, {"base": base, "variant": variant, "calls": fake.names()}


def test_weights_by_1_1_reach_the_hef_when_the_double_honours_loaded_params(fake_hailo_sdk_client):
    hefs, got = compiled(fake_hailo_sdk_client, (Rescale("Conv_0", "weights", (1.1,)),), reach=True)
    assert got["calls"].count("optimize") == 1 and got["calls"].count("load_params") == 1
    base, mine = hefs["base"]["loop_net/conv1"], hefs["variant"]["loop_net/conv1"]
    assert np.allclose(mine["kernel_scale:0"], base["kernel_scale:0"] * 1.1, rtol=1e-6)
    assert np.allclose(mine["bias_scale:0"], base["bias_scale:0"] * 1.1, rtol=1e-6)
    assert np.array_equal(mine["kernel:0"], base["kernel:0"]) and np.array_equal(mine["bias:0"], base["bias:0"])
    assert hefs["variant"]["loop_net/conv2"]["kernel_scale:0"] == hefs["base"]["loop_net/conv2"]["kernel_scale:0"]
    variant, before = got["variant"], got["base"]
    assert "optimize_s" not in variant.stages and variant.info.quantized_from == "cache"
    assert variant.info.rescaled["edits"][0]["keys"] == [
        "loop_net/conv1/kernel_scale:0",
        "loop_net/conv1/bias_scale:0",
    ]
    printed = {lp.name: lp for lp in variant.layers}
    reference = {lp.name: lp for lp in before.layers}
    assert printed["Conv_0"].kernel_int_sha == reference["Conv_0"].kernel_int_sha is not None
    assert printed["Conv_0"].bias_int_sha == reference["Conv_0"].bias_int_sha is not None
    assert printed["Conv_0"].kernel_sha != reference["Conv_0"].kernel_sha
    assert printed["Conv_0"].weight_scale[0] == pytest.approx(reference["Conv_0"].weight_scale[0] * 1.1, rel=1e-6)


def test_an_ignored_edit_compiles_the_base_params_though_the_har_holds_the_new_ones(fake_hailo_sdk_client):
    hefs, got = compiled(fake_hailo_sdk_client, (Rescale("Conv_0", "weights", (1.1,)),), reach=False)
    assert got["variant"].artifact.data == got["base"].artifact.data  # the HEF is the base's
    assert hefs["variant"]["loop_net/conv1"]["kernel_scale:0"] == hefs["base"]["loop_net/conv1"]["kernel_scale:0"]
    printed = {lp.name: lp for lp in got["variant"].layers}  # the params loop reads say it moved
    reference = {lp.name: lp for lp in got["base"].layers}
    assert printed["Conv_0"].weight_scale[0] == pytest.approx(reference["Conv_0"].weight_scale[0] * 1.1, rel=1e-6)


def test_output_scale_moves_the_readers_input_and_bias_scales(fake_hailo_sdk_client):
    hefs, _ = compiled(fake_hailo_sdk_client, (Rescale("Conv_0", "output", (2.0,)),), reach=True)
    base, mine = hefs["base"], hefs["variant"]
    assert mine["loop_net/conv1"]["qp_out:0"][1] == pytest.approx(base["loop_net/conv1"]["qp_out:0"][1] * 2)
    assert mine["loop_net/conv1"]["qp_out:0"][0] == base["loop_net/conv1"]["qp_out:0"][0]  # zero point kept
    assert mine["loop_net/conv2"]["qp_in:0"][1] == pytest.approx(base["loop_net/conv2"]["qp_in:0"][1] * 2)
    assert mine["loop_net/conv2"]["bias_scale:0"] == pytest.approx(base["loop_net/conv2"]["bias_scale:0"] * 2)
    assert mine["loop_net/conv1"]["kernel_scale:0"] == base["loop_net/conv1"]["kernel_scale:0"]


def flat() -> dict[str, np.ndarray]:
    return {
        "net/conv1/kernel:0": np.ones((1, 1, 3, 2), np.int8),
        "net/conv1/kernel_scale:0": np.float32([0.5]),
        "net/conv1/bias:0": np.ones(2, np.float32),
        "net/conv1/qp_out:0": np.float64([3, 0.25]),
    }


def test_a_float_bias_keeps_its_values_and_only_the_kernel_scale_moves():
    edited, done = rescale_params(flat(), [(Rescale("Conv_0", "weights", (2.0,)), "net/conv1")], {})
    assert done[0]["keys"] == ["net/conv1/kernel_scale:0"] and edited["net/conv1/kernel_scale:0"][0] == 1.0
    assert flat()["net/conv1/kernel_scale:0"][0] == 0.5  # its argument as it was


def test_per_channel_factors_on_one_kernel_scale_are_refused_in_one_line():
    with pytest.raises(HailoCompileError) as err:
        rescale_params(flat(), [(Rescale("Conv_0", "weights", (1.1, 1.2)), "net/conv1")], {})
    assert str(err.value) == (
        "scale_grid: 2 factors for layer 'Conv_0', whose weight grid (net/conv1/kernel_scale:0) has 1 scale(s)"
    )


def test_a_layer_without_the_scale_an_edit_needs_is_refused_naming_what_it_has():
    params = {"net/conv1/kernel:0": np.ones(2, np.int8)}
    with pytest.raises(HailoCompileError) as err:
        rescale_params(params, [(Rescale("Conv_0", "output", (2.0,)), "net/conv1")], {})
    assert str(err.value) == "scale_grid: DFC layer net/conv1 (Conv_0) has no output scale among its params: kernel"
