"""The Hailo compiler: pure pieces pinned exactly, the driver checked against a FAKE
hailo_sdk_client (conftest.py) that records calls. No Hailo software runs here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper

from loop.compilers.base import run_compile
from loop.compilers.hailo import (
    HailoCompileError,
    HailoCompiler,
    clear_error,
    discover_prints,
    flat_params,
    layer_names_from_hn,
    model_script,
    nchw_to_nhwc,
    optimization_level,
)
from loop.core.vocab import CompileOptions, Precision, RangeOverride, WeightPrecision
from loop.devices.base import RuntimeOptions
from loop.devices.hailo_emulator import HailoEmulatorDevice


def _fakes() -> ModuleType:
    name = "loop_tests_hailo_fakes"
    if name not in sys.modules:  # shared with conftest.py, which may have loaded it first
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("hailo_fakes.py"))
        assert spec and spec.loader
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


FAKE_HEF, FAKE_HN = _fakes().FAKE_HEF, _fakes().FAKE_HN


def tiny_conv_onnx() -> bytes:
    weight = helper.make_tensor("w", TensorProto.FLOAT, [2, 3, 1, 1], [0.1] * 6)
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="Conv_0")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])],
        [weight],
    )
    return helper.make_model(graph).SerializeToString()


def options(**backend: object) -> CompileOptions:
    return CompileOptions(backend_options=tuple(backend.items()))


# -- model script -------------------------------------------------------------------------


def test_model_script_minimal() -> None:
    assert model_script(options(), 64, {}) == (
        "pre_quantization_optimization(equalization, policy=enabled)\n"
        "model_optimization_config(calibration, batch_size=8, calibset_size=64)\n"
        "post_quantization_optimization(bias_correction, policy=enabled)\n"
        "post_quantization_optimization(finetune, policy=disabled)\n"
    )


def test_model_script_every_op() -> None:
    opts = CompileOptions(
        bias_correction=False,
        overrides=(RangeOverride("Conv_0", "out", "y", 0.0, 8.0), RangeOverride("Conv_1", "in", "y", -1.5, 2.25)),
        backend_options=(
            ("optimization_level", 2),
            ("compression_level", 0),
            ("calibration_batch_size", 2),
            ("model_script", ["performance_param(compiler_optimization_level=max)"]),
        ),
    )
    assert model_script(opts, 64, {"Conv_0": "conv1", "Conv_1": "conv2"}) == (
        "quantization_param(conv1, force_range_out=[0.0, 8.0])\n"
        "quantization_param(conv2, force_range_in=[-1.5, 2.25])\n"
        "model_optimization_flavor(optimization_level=2, compression_level=0)\n"
        "pre_quantization_optimization(equalization, policy=enabled)\n"
        "model_optimization_config(calibration, batch_size=2, calibset_size=64)\n"
        "post_quantization_optimization(bias_correction, policy=disabled)\n"
        "post_quantization_optimization(finetune, policy=disabled)\n"
        "performance_param(compiler_optimization_level=max)\n"
    )


def test_model_script_single_level_and_small_calibration() -> None:
    text = model_script(options(optimization_level=0), 3, {})
    assert text.splitlines()[:3] == [
        "model_optimization_flavor(optimization_level=0)",
        "pre_quantization_optimization(equalization, policy=enabled)",
        "model_optimization_config(calibration, batch_size=3, calibset_size=3)",
    ]


def test_layer_names_from_hn() -> None:
    assert layer_names_from_hn(FAKE_HN) == {"Conv_0": "conv1"}


# -- calibration layout -------------------------------------------------------------------


def test_nchw_to_nhwc() -> None:
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)
    y = nchw_to_nhwc(x)
    assert y.shape == (2, 4, 5, 3) and y.dtype == np.float32 and y.flags.c_contiguous
    assert y[1, 2, 3, 0] == x[1, 0, 2, 3] and y[0, 1, 4, 2] == x[0, 2, 1, 4]
    assert nchw_to_nhwc(np.zeros((5, 7))).shape == (5, 7)


# -- parameter discovery --------------------------------------------------------------------


def quantized_params(kernel: np.ndarray, scale: float, bias: list[int]) -> dict[str, np.ndarray]:
    return {
        "net/conv1/kernel:0": kernel,
        "net/conv1/kernel_scale:0": np.float32([scale]),
        "net/conv1/bias:0": np.int32(bias),
        "net/conv1/bias_scale:0": np.float32([0.5]),
        "net/conv1/stats/output_0/stats_limvals:0": np.float32([0.0, 8.0]),
        "net/relu1/stats/output_0/stats_limvals:0": np.float32([0.0, 6.0]),
        "net/conv2/kernel:0": np.full((1, 1, 2, 2), 3, np.int8),
    }


def test_discovery_groups_layers_in_order() -> None:
    kernel = np.arange(12, dtype=np.int8).reshape(1, 1, 3, 4)
    prints, keys = discover_prints(quantized_params(kernel, 0.1, [2, -4]))
    assert [p.name for p in prints] == ["conv1", "conv2"]
    assert len(keys) == 7
    conv1 = prints[0]
    assert conv1.op == "conv"
    assert conv1.weight_scale == pytest.approx((0.1,))
    assert conv1.bias == (1.0, -2.0) and conv1.bias_step == (0.5, 0.5)
    assert conv1.out_scale == pytest.approx(8.0 / 255) and conv1.out_zero_point == 0
    assert prints[1].bias_sha is None and prints[1].bias is None


def test_kernel_hash_covers_the_weight_scale() -> None:
    kernel = np.arange(12, dtype=np.int8).reshape(1, 1, 3, 4)
    base = discover_prints(quantized_params(kernel, 0.1, [2, -4]))[0][0]
    rescaled = discover_prints(quantized_params(kernel, 0.105, [2, -4]))[0][0]
    rebiased = discover_prints(quantized_params(kernel, 0.1, [2, -3]))[0][0]
    assert base.kernel_sha != rescaled.kernel_sha  # same integers, new scale: a changed kernel
    assert base.bias_sha == rescaled.bias_sha
    assert base.kernel_sha == rebiased.kernel_sha and base.bias_sha != rebiased.bias_sha


def test_native_float_parameters() -> None:
    prints, _ = discover_prints(
        {"net/conv1/kernel:0": np.ones((3, 3, 1, 2), np.float32), "net/conv1/bias:0": np.float32([0.25, -1.0])}
    )
    assert prints[0].bias == (0.25, -1.0) and prints[0].bias_step is None and prints[0].weight_scale == ()


def test_no_kernel_is_refused_listing_the_keys() -> None:
    with pytest.raises(HailoCompileError) as err:
        discover_prints({"net/conv1/weights_q:0": np.ones(2), "net/conv1/stats/output_0/stats_limvals:0": np.ones(2)})
    assert "no kernel-like parameter" in str(err.value)
    assert "net/conv1/weights_q:0" in str(err.value)


# -- errors users meet -----------------------------------------------------------------------


def test_clear_error_lines() -> None:
    assert "does not fit" in (clear_error("Compilation failed: Mapping Failed (allocator)") or "")
    # 93, not 26, is HailoRT's status for a HEF of another architecture (4.23 and 5.2 hailort.h)
    assert "another architecture" in (
        clear_error("Failed to configure: HAILO_HEF_NOT_COMPATIBLE_WITH_DEVICE(93)") or ""
    )
    assert "not a HEF" in (clear_error("Failed to configure: HAILO_INVALID_HEF(26)") or "")
    assert "another architecture" not in (clear_error("HAILO_INVALID_HEF(26)") or "")
    assert "versions do not match" in (clear_error("Driver version mismatch: 4.23.0 != 5.2.0") or "")
    assert clear_error("KeyError: 'conv9'") is None


# -- driver against the fake --------------------------------------------------------------------


def test_a_model_with_external_data_goes_to_the_dfc_by_its_path(fake_hailo_sdk_client: Any, tmp_path: Path) -> None:
    """The DFC's parser reads the ONNX by path, its tensors from beside it: loop hands it the
    model's own file, never a copy in bytes, and the compile is the one a self-contained model gets."""
    import onnx

    calibration = np.random.default_rng(0).random((5, 3, 4, 4), dtype=np.float32)
    model = tmp_path / "model" / "tiny.onnx"
    model.parent.mkdir()
    onnx.save(onnx.load_from_string(tiny_conv_onnx()), str(model), save_as_external_data=True, size_threshold=0)
    by_path = run_compile(HailoCompiler(workdir=tmp_path / "a"), model, calibration, CompileOptions())
    assert dict(fake_hailo_sdk_client.calls)["translate_onnx_model"]["path"] == str(model)
    by_bytes = run_compile(HailoCompiler(workdir=tmp_path / "b"), tiny_conv_onnx(), calibration, CompileOptions())
    assert by_path.ok and by_bytes.ok, (by_path.error, by_bytes.error)
    assert [lp.kernel_sha for lp in by_path.layers] == [lp.kernel_sha for lp in by_bytes.layers]


def test_driver_call_order_layout_and_files(fake_hailo_sdk_client: Any, tmp_path: Path) -> None:
    calibration = np.random.default_rng(0).random((5, 3, 4, 4), dtype=np.float32)
    opts = CompileOptions(
        overrides=(RangeOverride("Conv_0", "out", "y", 0.0, 8.0),), backend_options=(("hw_arch", "hailo8"),)
    )
    result = run_compile(HailoCompiler(workdir=tmp_path), tiny_conv_onnx(), calibration, opts)
    assert result.ok, result.error
    assert [
        n for n in fake_hailo_sdk_client.names() if not n.startswith(("ClientRunner", "save_params", "get_hn"))
    ] == [
        "translate_onnx_model",
        "load_model_script",
        "optimize",
        "save_har",
        "compile",
    ]
    calls = dict(fake_hailo_sdk_client.calls)
    assert calls["save_params"].name == "TRANSLATED"
    assert calls["ClientRunner"]["hw_arch"] == "hailo8"
    assert calls["translate_onnx_model"]["net_input_shapes"] == {"x": [1, 3, 4, 4]}
    assert calls["optimize"].shape == (5, 4, 4, 3) and calls["optimize"].dtype == np.float32
    assert np.array_equal(calls["optimize"], calibration.transpose(0, 2, 3, 1))
    assert calls["load_model_script"].startswith("quantization_param(conv1, force_range_out=[0.0, 8.0])\n")
    assert result.info.model_script == calls["load_model_script"]
    assert "loop_net/conv1/kernel:0" in result.info.param_keys
    assert "parse_s" in result.stages and "compile_s" in result.stages
    artifact = result.artifact
    assert artifact is not None and artifact.data == FAKE_HEF and artifact.suffix == ".hef"
    assert (tmp_path / "loop_net.hef").read_bytes() == FAKE_HEF
    assert artifact.extras["har"] == (tmp_path / "loop_net.har").read_bytes()
    assert calls["save_har"] == str(tmp_path / "loop_net.har")
    (inp,), (out,) = artifact.inputs, artifact.outputs  # no hailo_platform nor shim here: the HN's guess
    assert (inp.shape, inp.dtype, inp.scale) == ((1, 4, 4, 3), "uint8", None)
    # named as HailoRT names an output vstream (the layer feeding the output layer), on that layer's
    # forced grid [0, 8]
    assert (out.name, out.shape, out.scale, out.zero_point) == ("loop_net/conv1", (1, 4, 4, 2), 8 / 255, 0)
    assert result.info.layout_source.startswith("hn (guessed, the HEF could not be read: hailo_platform: ")
    assert [(p.name, p.compiled_name, p.onnx_names) for p in result.layers] == [
        ("Conv_0", "loop_net/conv1", ("Conv_0",))
    ]
    assert result.info.output_names == {"loop_net/conv1": "y"}


def test_mapping_failed_becomes_a_failed_run(fake_hailo_sdk_client: Any, tmp_path: Path) -> None:
    fake_hailo_sdk_client.compile_error = "Compilation failed: Mapping Failed\nallocator details"
    result = run_compile(
        HailoCompiler(workdir=tmp_path), tiny_conv_onnx(), np.zeros((2, 3, 4, 4), np.float32), CompileOptions()
    )
    assert not result.ok and result.stage == "compile"
    assert result.error is not None and "does not fit" in result.error and "\n" not in result.error


def test_available(fake_hailo_sdk_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ok, reason = HailoCompiler.available()
    assert (ok, reason) == (
        (True, "hailo_sdk_client 0.0-fake") if sys.platform.startswith("linux") else (False, reason)
    )
    monkeypatch.setitem(sys.modules, "hailo_sdk_client", None)
    ok, reason = HailoCompiler.available()
    assert not ok and ("not importable" in reason or "Linux" in reason)


def test_emulator_scores_the_har(fake_hailo_sdk_client: Any, tmp_path: Path) -> None:
    calibration = np.full((2, 3, 4, 4), 2.0, np.float32)
    compiled = run_compile(HailoCompiler(workdir=tmp_path), tiny_conv_onnx(), calibration, CompileOptions())
    assert compiled.artifact is not None
    with HailoEmulatorDevice().open(compiled.artifact, RuntimeOptions()) as session:
        assert [(t.dtype, t.scale) for t in session.inputs + session.outputs] == [("float32", None)] * 2
        (out,) = session.infer([np.full((1, 4, 4, 3), 2.0, np.float32)])
    calls = dict(fake_hailo_sdk_client.calls)
    assert calls["infer_context"] == "SDK_QUANTIZED"
    assert calls["ClientRunner"]["har"] is not None  # the last runner was opened from the HAR
    # the double's emulation of 3 x 0.1 x 2.0, on the output grid [0, 0.6]: float32, not re-gridded
    assert out.dtype == np.float32 and out.shape == (1, 4, 4, 2) and np.allclose(out, 0.6)


def test_emulator_gets_the_float_frames_not_a_uint8_grid(fake_hailo_sdk_client: Any, tmp_path: Path) -> None:
    """Item 5: [0, 1) inputs reached the emulator as zeros when wrapped in the artifact's uint8 grid."""
    from loop.flow.device_child import answer

    compiled = run_compile(
        HailoCompiler(workdir=tmp_path), tiny_conv_onnx(), np.zeros((2, 3, 4, 4), np.float32), CompileOptions()
    )
    assert compiled.artifact is not None and compiled.artifact.inputs[0].scale is None  # nothing to grid with
    inputs = np.random.default_rng(1).random((2, 3, 4, 4), dtype=np.float32)
    answer(HailoEmulatorDevice(), compiled.artifact, inputs, lambda stage: None)
    seen = [x for name, x in fake_hailo_sdk_client.calls if name == "infer"]
    assert seen[0].dtype == np.float32
    assert np.array_equal(seen[0], inputs[:1].transpose(0, 2, 3, 1))  # float NHWC, exactly


# -- issue 12: what the review against HailoRT 5.2.0 and public DFC callers found ---------------


def test_model_script_numbers_are_fixed_point() -> None:
    """Item 10: repr() wrote 1e-05, which the DFC's script parser is not known to accept."""
    opts = CompileOptions(overrides=(RangeOverride("Conv_0", "out", "y", 1e-05, 2.5e-07),))
    assert (
        model_script(opts, 4, {"Conv_0": "conv1"}).splitlines()[0]
        == "quantization_param(conv1, force_range_out=[0.00001, 0.00000025])"
    )


def test_translated_parameters_come_from_save_params(fake_hailo_sdk_client: Any, tmp_path: Path) -> None:
    """Item 4: get_params_translated() is indexed per layer, so dict() of it held no kernel key."""
    result = run_compile(
        HailoCompiler(workdir=tmp_path), tiny_conv_onnx(), np.zeros((2, 3, 4, 4), np.float32), CompileOptions()
    )
    assert result.ok, result.error
    assert result.info.param_source == "save_params(TRANSLATED)"
    assert "loop_net/conv1/kernel:0" in result.info.param_keys
    (conv1,) = result.layers
    assert conv1.weight_scale == (pytest.approx(0.1 / 127),)  # one scale per layer, from the kernel's range


def test_per_layer_params_flatten_to_keys() -> None:
    view = {"net/conv1": {"kernel:0": np.ones(2), "stats/output_0/stats_limvals:0": np.float32([0, 6])}}
    assert sorted(flat_params(view)) == ["net/conv1/kernel:0", "net/conv1/stats/output_0/stats_limvals:0"]
    assert list(flat_params({"net/conv1/kernel:0": np.ones(2)})) == ["net/conv1/kernel:0"]


def test_options_the_dfc_would_ignore_are_refused(fake_hailo_sdk_client: Any, tmp_path: Path) -> None:
    """Item 10: io, calibration_method and per_channel were silently ignored by the hailo backend."""
    for opts in (
        CompileOptions(io="float32"),
        CompileOptions(calibration_method="entropy"),
        CompileOptions(per_channel=False),
    ):
        result = run_compile(
            HailoCompiler(workdir=tmp_path), tiny_conv_onnx(), np.zeros((2, 3, 4, 4), np.float32), opts
        )
        assert not result.ok and result.stage == "optimize" and "would ignore" in (result.error or "")
    assert "optimize" not in fake_hailo_sdk_client.names()


@pytest.mark.parametrize("key, value", [("io", "float32"), ("calibration_method", "entropy"), ("per_channel", "false")])
def test_sweep_file_refuses_ignored_keys_for_hailo(write_sweep: Any, key: str, value: str) -> None:
    """Item 10, at parse time: exit 2 with file, line and field, before anything is written."""
    from loop.author.sweepfile import parse
    from loop.core.errors import LoopError

    path = write_sweep(
        f"sweep: s\nbase: tiny.yaml\nbackend: hailo\ncompile:\n  {key}: {value}\nvariants:\n  - name: base\n"
    )
    with pytest.raises(LoopError) as err:
        parse(path)
    text = str(err.value)
    assert f"compile.{key}" in text and "sweep.yaml:5" in text and "hailo backend" in text


def test_lowered_optimization_level_is_recorded(fake_hailo_sdk_client: Any, tmp_path: Path) -> None:
    """Item 10: the DFC lowers the level itself with little calibration data (or no GPU)."""
    result = run_compile(
        HailoCompiler(workdir=tmp_path),
        tiny_conv_onnx(),
        np.zeros((4, 3, 4, 4), np.float32),
        CompileOptions(backend_options=(("optimization_level", 2),)),
    )
    level = result.info.optimization_level
    assert (level["requested"], level["effective"], level["effective_from"]) == (2, 0, "the DFC's log")
    assert "reducing optimization level to 0" in level["evidence"][0]
    quiet = optimization_level(1, ["Starting Model Optimization"])
    assert quiet == {
        "requested": 1,
        "effective": 1,
        "effective_from": "as requested (the DFC said nothing)",
        "evidence": [],
    }


class _Enum:
    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return f"FormatType.{self.name}"


def _fake_platform(infos_in: list[Any], infos_out: list[Any]) -> ModuleType:
    """A FAKE ``hailo_platform`` whose HEF answers with the given vstream infos (not Hailo's)."""
    module = ModuleType("hailo_platform")

    class HEF:
        def __init__(self, path: str) -> None:
            self.path = path

        def get_input_vstream_infos(self) -> list[Any]:
            return infos_in

        def get_output_vstream_infos(self) -> list[Any]:
            return infos_out

    module.HEF = HEF  # type: ignore[attr-defined]
    return module


def _info(name: str, shape: tuple[int, ...], kind: str, scale: float, zp: float) -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(
        name=name,
        shape=shape,
        format=SimpleNamespace(type=_Enum(kind)),
        quant_info=SimpleNamespace(qp_scale=scale, qp_zp=zp),
    )


def test_layouts_are_read_from_the_hef(
    fake_hailo_sdk_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 4: uint8 was hard-coded and names came from the HN; an a16_w16 output is uint16, and an
    output with several quantization params is read as float32 (what the device session reports)."""
    platform = _fake_platform(
        [_info("loop_net/input_layer1", (4, 4, 3), "UINT8", 1 / 128, 128)],
        [_info("loop_net/conv2", (4, 4, 2), "UINT16", 0.001, 7), _info("loop_net/conv3", (4, 4, 2), "UINT8", 0.0, 0)],
    )
    monkeypatch.setitem(sys.modules, "hailo_platform", platform)
    result = run_compile(
        HailoCompiler(workdir=tmp_path), tiny_conv_onnx(), np.zeros((2, 3, 4, 4), np.float32), CompileOptions()
    )
    assert result.ok and result.artifact is not None, result.error
    assert result.info.layout_source == "hailo_platform"
    (inp,), (wide, multi) = result.artifact.inputs, result.artifact.outputs
    assert (inp.dtype, inp.scale, inp.zero_point) == ("uint8", 1 / 128, 128)
    assert (wide.name, wide.dtype, wide.frame_bytes, wide.zero_point) == ("loop_net/conv2", "uint16", 64, 7)
    assert (multi.dtype, multi.scale, multi.frame_bytes) == ("float32", None, 128)


# -- issue 25: the DFC path, second review (compiler side) ---------------------------------------


def _compile(fake: Any, tmp_path: Path, opts: CompileOptions) -> Any:
    return run_compile(HailoCompiler(workdir=tmp_path), tiny_conv_onnx(), np.zeros((2, 3, 4, 4), np.float32), opts)


def test_override_on_a_node_the_dfc_does_not_know_is_refused() -> None:
    """Item 4: ``quantization_param(Conv_1, ...)`` was written raw; the DFC refuses it or applies
    it to another layer."""
    names = {"Conv_0": "conv1", "Relu_0": "conv1", "Gemm_7": "fc1"}
    opts = CompileOptions(overrides=(RangeOverride("Conv_1", "out", "y", 0.0, 8.0),))
    with pytest.raises(HailoCompileError) as err:
        model_script(opts, 8, names)
    text = str(err.value)
    assert "\n" not in text and "ONNX node 'Conv_1'" in text
    assert text.endswith("nearest DFC layers: conv1 (from Conv_0), fc1 (from Gemm_7)")  # each DFC layer once


def test_unresolved_override_fails_the_compile_before_optimizing(fake_hailo_sdk_client: Any, tmp_path: Path) -> None:
    """Item 4, through the driver: the fake's HN maps only Conv_0."""
    result = _compile(
        fake_hailo_sdk_client, tmp_path, CompileOptions(overrides=(RangeOverride("Conv_9", "in", "x", 0.0, 1.0),))
    )
    assert not result.ok and result.stage == "optimize"
    assert "ONNX node 'Conv_9'" in (result.error or "") and "conv1 (from Conv_0)" in (result.error or "")
    assert "optimize" not in fake_hailo_sdk_client.names() and "load_model_script" not in fake_hailo_sdk_client.names()


@pytest.mark.parametrize("bias_correction", [True, False])
def test_finetune_is_off_unless_asked(fake_hailo_sdk_client: Any, tmp_path: Path, bias_correction: bool) -> None:
    """Item 5: hailo_model_zoo's scripts that enable bias correction all disable finetune; loop
    left it to the DFC's default."""
    result = _compile(fake_hailo_sdk_client, tmp_path, CompileOptions(bias_correction=bias_correction))
    script = dict(fake_hailo_sdk_client.calls)["load_model_script"].splitlines()
    policy = "enabled" if bias_correction else "disabled"
    assert result.ok and script[-2:] == [
        f"post_quantization_optimization(bias_correction, policy={policy})",
        "post_quantization_optimization(finetune, policy=disabled)",
    ]
    asked = model_script(options(finetune=True), 8, {}).splitlines()
    assert asked[-1] == "post_quantization_optimization(finetune, policy=enabled)"


def test_sweep_file_takes_finetune_for_hailo(write_sweep: Any) -> None:
    """Item 5: the sweep asks for finetune with a hailo compile key."""
    from loop.author.sweepfile import parse

    path = write_sweep(
        "sweep: s\nbase: tiny.yaml\nbackend: hailo\ncompile:\n  finetune: true\nvariants:\n  - name: base\n"
    )
    spec = parse(path)
    assert ("finetune", True) in spec.compile.backend_options


def _params_with(**leaves: np.ndarray) -> dict[str, np.ndarray]:
    kernel = {"net/conv1/kernel:0": np.ones((1, 1, 3, 2), np.int8), "net/conv1/kernel_scale:0": np.float32([0.5])}
    return {**kernel, **{f"net/conv1/{k}:0": v for k, v in leaves.items()}}


@pytest.mark.parametrize("bits, scale", [(8, 8.0 / 255 * 1.01), (16, 8.0 / 65535 * 1.01)])
def test_scales_come_from_the_layers_own_entries(bits: int, scale: float) -> None:
    """Item 6: out_scale was stats range / 255, 257x off for a 16-bit layer, and blind to the
    layer's own scale (a force_range_out the DFC widened would not show)."""
    limvals = np.float32([0.0, 8.0])
    params = _params_with(
        qp_out=np.float64([3, scale]), qp_in=np.float64([128, 0.004]), **{"stats/output_0/stats_limvals": limvals}
    )
    sources: dict[str, str] = {}
    (conv1,), _ = discover_prints(params, {"conv1": bits}, sources)
    assert (conv1.out_scale, conv1.out_zero_point) == (pytest.approx(scale), 3)
    assert (conv1.in_scale, conv1.in_zero_point) == (pytest.approx(0.004), 128)
    assert sources == {"conv1:out": "qp_out", "conv1:in": "qp_in"}


@pytest.mark.parametrize("bits, steps", [(8, 255), (16, 65535)])
def test_range_fallback_is_per_width_and_recorded(bits: int, steps: int) -> None:
    """Item 6: without a scale entry the range is spread over the layer's own width, and says so."""
    sources: dict[str, str] = {}
    params = _params_with(**{"stats/output_0/stats_limvals": np.float32([0.0, 8.0])})
    (conv1,), _ = discover_prints(params, {"conv1": bits}, sources)
    assert conv1.out_scale == pytest.approx(8.0 / steps)
    assert sources == {"conv1:out": f"stats_limvals / {steps} (fallback: no scale entry)"}


def test_fingerprint_reads_the_dfcs_scale_and_records_where(fake_hailo_sdk_client: Any, tmp_path: Path) -> None:
    """Item 6, through the driver: an a16_w16 layer's own qp_out, not its range / 255."""
    fake_hailo_sdk_client.params = {
        "loop_net/conv1": {
            "kernel:0": np.ones((1, 1, 3, 2), np.int16),
            "qp_out:0": np.float64([0, 8.0 / 65535]),
            "stats/output_0/stats_limvals:0": np.float32([0.0, 8.0]),
        }
    }
    fake_hailo_sdk_client.hn_layers = [("conv1", 6, "a16_w16")]
    result = _compile(fake_hailo_sdk_client, tmp_path, CompileOptions())
    assert result.ok, result.error
    assert result.layers[0].out_scale == pytest.approx(8.0 / 65535)
    assert result.info.scale_from == {"conv1:out": "qp_out"}
    assert result.info.activation_bits == {"conv1": 16}


def test_stage_times_hold_their_own_call_only(
    fake_hailo_sdk_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 7: optimize_s held parse, start-up, save_har and the params dump; compile_s the HEF's
    layout reading. On the fake's virtual clock each call costs a distinct power of two."""
    import loop.compilers.hailo as hailo

    delays = _fakes().DELAYS
    monkeypatch.setattr(hailo, "_clock", lambda: fake_hailo_sdk_client.now, raising=False)
    result = _compile(fake_hailo_sdk_client, tmp_path, CompileOptions())
    assert result.ok, result.error
    # the fingerprint (loop's own reading of the parameters) is timed on the real clock, not the fake's
    stages = {k: v for k, v in result.stages.items() if k not in ("reopen_s", "fingerprint_s")}
    assert stages == {
        "startup_s": delays["ClientRunner"],
        "parse_s": delays["translate_onnx_model"],
        "script_s": delays["load_model_script"],
        "optimize_s": delays["optimize"],
        "save_s": delays["save_har"],
        "params_s": delays["save_params"] + delays["get_hn_model"],
        "compile_s": delays["compile"],
        # no HEF reader here: the HN's guess reads the HN and the parameters again
        "layout_s": delays["get_hn_dict"] + delays["save_params"],
    }
    assert result.stages["reopen_s"] == 0.0  # the runner optimize left live was reused


@pytest.mark.parametrize("mode", ["a16_w16", "a8_w4"])
def test_weights_are_counted_and_residency_is_the_hefs(fake_hailo_sdk_client: Any, tmp_path: Path, mode: str) -> None:
    """The seed's weights: 12.0225 G are 24.045 GB at 16 bits and about 6 GB at 4 bits, recorded as such.
    Issue 33: they no longer decide residency (this said "no" at 16 bits, as if HailoRT streamed them):
    HailoRT on Hailo-10H loads the HEF whole, so the HEF's size decides, here 14 bytes against 8 GiB."""
    fake_hailo_sdk_client.hn_layers = [("input_layer1", 0, "a8_w8"), ("conv1", 12_022_500_000, mode)]
    result = _compile(fake_hailo_sdk_client, tmp_path, CompileOptions())
    weights = result.info.weights
    bits = int(mode.split("_w")[1])
    assert weights["bytes"] == 12_022_500_000 * bits // 8 and weights["from"] == "runner.get_hn_model()"
    assert (weights["device_memory_bytes"], weights["resident"]) == (8 * 2**30, "yes")
    fit = result.info.hef_residency
    assert (fit["hef_bytes"], fit["device_bytes"], fit["resident"]) == (len(b"FAKE-HEF-BYTES"), 8 * 2**30, "yes")
    assert weights["weights_by_bits"] == {str(bits): 12_022_500_000}  # layers without weights are left out


def test_a_reopened_har_is_compiled_with_its_model_script(fake_hailo_sdk_client: Any, tmp_path: Path) -> None:
    """Issue 33, item 3: a compile in another process (or a resumed sweep) reopens the HAR and compiled it
    without the script's compile-time commands. hailo_model_zoo loads the script again before it compiles
    a reopened HAR (main_driver.py ``compile`` -> core/main_utils.py ``compile_model``); so does loop now."""
    opts = options(model_script=["performance_param(compiler_optimization_level=max)"])
    calibration = np.zeros((2, 3, 4, 4), np.float32)
    quantized = HailoCompiler(workdir=tmp_path / "optimize").optimize(tiny_conv_onnx(), calibration, opts)
    HailoCompiler(workdir=tmp_path / "compile").compile(quantized, opts)  # a fresh compiler: the HAR reopened
    compiled_with = [detail for name, detail in fake_hailo_sdk_client.calls if name == "compile"]
    assert compiled_with == [quantized.info.model_script]
    assert "performance_param(compiler_optimization_level=max)" in compiled_with[0]


@pytest.mark.parametrize("hw_arch, refused", [("hailo10h", True), ("hailo8", False)])
def test_a_hef_is_judged_by_its_size_against_the_device(
    fake_hailo_sdk_client: Any, tmp_path: Path, hw_arch: str, refused: bool
) -> None:
    """Issue 33, item 1: a 9 GiB HEF cannot be loaded by a Hailo-10H (HailoRT sends it whole and the
    server allocates a buffer of its size): refused at compile, one line with the sizes, its bytes never
    made. No figure for Hailo-8: not judged, and said so."""
    fake_hailo_sdk_client.hef = 9 * 2**30
    result = _compile(fake_hailo_sdk_client, tmp_path, options(hw_arch=hw_arch))
    assert not result.ok and result.stage == "compile"
    if refused:
        assert result.error.startswith("HailoCompileError: compile: HEF 9,663,676,416 B > 8,589,934,592 B (8 GiB")
        assert "\n" not in result.error
    else:  # got past the judgement, to the bytes the double never makes
        assert "not materialized" in result.error


def test_equalization_is_written_and_recorded(fake_hailo_sdk_client: Any, tmp_path: Path) -> None:
    """Issue 33, item 4: equalization was left to the DFC's default. Now the script says it either way, and
    the run records which layers it moved (none here: one conv has no neighbour to equalize with)."""
    for policy in ("enabled", "disabled"):
        result = _compile(fake_hailo_sdk_client, tmp_path / policy, options(equalization=policy))
        assert result.ok, result.error
        assert f"pre_quantization_optimization(equalization, policy={policy})" in result.info.model_script
        assert result.info.equalization == {"policy": policy, "layers": []}
        assert result.info.kernel_causes == {}


# -- issue 44: weight precision on the hailo backend ----------------------------------------------


def three_conv_onnx() -> bytes:
    """Conv_0 -> Relu_0 -> Conv_1 (3x3, 288 weights) -> Conv_2: the DFC's double fuses Conv_0 and Relu_0
    into conv1; conv2 is the largest layer."""
    rng = np.random.default_rng(7)
    arrays = {"w0": (8, 3, 1, 1), "w1": (4, 8, 3, 3), "w2": (2, 4, 1, 1)}
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w0"], ["c0"], name="Conv_0"),
            helper.make_node("Relu", ["c0"], ["r0"], name="Relu_0"),
            helper.make_node("Conv", ["r0", "w1"], ["c1"], name="Conv_1", pads=[1, 1, 1, 1]),
            helper.make_node("Conv", ["c1", "w2"], ["y"], name="Conv_2"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])],
        [
            helper.make_tensor(n, TensorProto.FLOAT, s, rng.normal(0, 0.5, s).ravel().tolist())
            for n, s in arrays.items()
        ],
    )
    return helper.make_model(graph).SerializeToString()


def _weights_compile(tmp_path: Path, opts: CompileOptions) -> Any:
    calibration = np.random.default_rng(0).random((4, 3, 4, 4), dtype=np.float32)
    return run_compile(HailoCompiler(workdir=tmp_path), three_conv_onnx(), calibration, opts)


def test_weights_4_quantizes_the_named_layer_at_4_bits_and_the_run_records_them(
    fake_hailo_sdk_client: Any, tmp_path: Path
) -> None:
    """``weights: 4`` on Conv_1 writes a8_w4 for its DFC layer (conv2, through original_names); the
    params hold its kernel in [-8, 7], the print and ``info.weights`` count it at 4 bits, two per byte."""
    result = _weights_compile(tmp_path, CompileOptions(weight_bits=(WeightPrecision("Conv_1", 4, "w1"),)))
    assert result.ok, result.error
    assert "quantization_param(conv2, precision_mode=a8_w4)\n" in result.info.model_script
    assert {p.name: p.weight_bits for p in result.layers} == {"Conv_0": 8, "Conv_1": 4, "Conv_2": 8}
    params = _fakes().double.read_har(result.artifact.extras["har"])[1]  # the HAR's translated params
    kernel = params["loop_net/conv2"]["kernel:0"]
    assert kernel.min() >= -8 and kernel.max() <= 7 and np.abs(kernel).max() == 7
    weights = result.info.weights
    assert weights["weights_by_bits"] == {"4": 288, "8": 32} and weights["bytes"] == (288 * 4 + 32 * 8) // 8
    assert result.info.weights_4bit == {
        "asked": None,
        "layers": ["Conv_1"],
        "dfc_layers": ["conv2"],
        "weights": 288,
        "share": 0.9,
        "from": "runner.get_hn_model()",
    }


@pytest.mark.parametrize("hn_model", [True, False])
def test_the_4bit_share_is_asked_of_the_dfc_and_its_choice_is_read_back(
    fake_hailo_sdk_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hn_model: bool
) -> None:
    """``weights_4bit_share: 0.5`` writes the DFC's ``auto_4bit_weights_ratio=0.5``; the layers the DFC
    (here its double, largest first) put at 4 bits are read back from the HN model's precision_config,
    or, on a DFC without ``get_hn_model``, from the kernels' integers."""
    if not hn_model:
        monkeypatch.delattr(fake_hailo_sdk_client.ClientRunner, "get_hn_model")
    result = _weights_compile(tmp_path, CompileOptions(weights_4bit_share=0.5))
    assert result.ok, result.error
    assert "model_optimization_config(compression_params, auto_4bit_weights_ratio=0.5)" in result.info.model_script
    assert "precision_mode" not in result.info.model_script  # the DFC chose, not loop
    record = result.info.weights_4bit
    assert (record["asked"], record["layers"], record["share"]) == (0.5, ["Conv_1"], 0.9)
    assert record["from"] == ("runner.get_hn_model()" if hn_model else result.info.weights["from"])
    assert {p.name: p.weight_bits for p in result.layers} == {"Conv_0": 8, "Conv_1": 4, "Conv_2": 8}
    assert result.info.weights["bytes"] == (288 * 4 + 32 * 8) // 8


def test_a_16_bit_output_with_4_bit_weights_fails_before_any_dfc_call(
    fake_hailo_sdk_client: Any, tmp_path: Path
) -> None:
    opts = CompileOptions(
        precisions=(Precision("Conv_0", 16, "r0"),), weight_bits=(WeightPrecision("Conv_0", 4, "w0"),)
    )
    result = _weights_compile(tmp_path, opts)
    assert (result.ok, result.stage) == (False, "optimize")
    assert "\n" not in (result.error or "") and "precision on 'Conv_0'" in (result.error or "")
    assert "a16_w4" in (result.error or "") and fake_hailo_sdk_client.names() == []
