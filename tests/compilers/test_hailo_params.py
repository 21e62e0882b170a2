"""Issue 32: Hailo prints named as the sweep names layers (the HN's ``original_names``), with the
float kernel they stand for, their integers off its grid, and bits read from the params. The
driver runs against the DFC's TEST DOUBLE (hailo_fakes.py, hailo_dfc_double.py), not Hailo's DFC."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from loop.compilers.base import run_compile
from loop.compilers.hailo import HailoCompiler
from loop.compilers.hailo_params import kernel_grid, named_prints, output_names
from loop.core.hashing import array_sha
from loop.core.vocab import CompileOptions, LayerPrint, RangeOverride


def fused_onnx() -> bytes:
    """Conv_0 + BatchNormalization_0 + Relu_0 -> Conv_1, one output."""
    rng = np.random.default_rng(5)
    arrays = {
        "w0": rng.uniform(-1, 1, (4, 3, 1, 1)),
        "g": rng.uniform(0.5, 1.5, 4),
        "be": rng.uniform(-0.1, 0.1, 4),
        "m": rng.uniform(-0.1, 0.1, 4),
        "v": rng.uniform(0.5, 1.5, 4),
        "w1": rng.uniform(-1, 1, (2, 4, 1, 1)),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["c0"], name="Conv_0"),
        helper.make_node("BatchNormalization", ["c0", "g", "be", "m", "v"], ["n0"], name="BatchNormalization_0"),
        helper.make_node("Relu", ["n0"], ["r0"], name="Relu_0"),
        helper.make_node("Conv", ["r0", "w1"], ["y"], name="Conv_1"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])],
        [numpy_helper.from_array(a.astype(np.float32), k) for k, a in arrays.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _compile(tmp_path: Path, opts: CompileOptions = CompileOptions()) -> Any:  # noqa: B008
    calibration = np.random.default_rng(1).random((8, 3, 4, 4), dtype=np.float32)
    result = run_compile(HailoCompiler(workdir=tmp_path), fused_onnx(), calibration, opts)
    assert result.ok, result.error
    return result


def test_prints_are_named_by_the_onnx_nodes_they_fuse(fake_hailo_sdk_client: Any, tmp_path: Path) -> None:
    """Before: ``conv1``/``conv2``, which no ONNX footprint names, and no float kernel nor bits."""
    fused, second = _compile(tmp_path).layers
    assert (fused.name, fused.compiled_name, fused.onnx_names) == (
        "Conv_0",
        "loop_net/conv1",
        ("Conv_0", "BatchNormalization_0", "Relu_0"),
    )
    assert (fused.in_tensor, fused.out_tensor, second.in_tensor) == ("x", "r0", "r0")  # ONNX tensors
    assert not fused.unmapped and fused.answers_to == ("Conv_0", "BatchNormalization_0", "Relu_0")
    runner = fake_hailo_sdk_client.ClientRunner(har=str(tmp_path / "loop_net.har"))
    folded = runner.get_params()["loop_net/conv1/kernel:0"]  # BN folded in, as the DFC's native params hold it
    assert fused.float_sha == array_sha(np.asarray(folded, np.float32))
    assert (fused.off_grid, fused.weight_bits, fused.in_bits, fused.out_bits) == (0, 8, 8, 8)


def test_a_forced_range_leaves_integers_off_the_float_grid(fake_hailo_sdk_client: Any, tmp_path: Path) -> None:
    """The double re-derives a forced layer's kernel, as the seed's rig saw the DFC do: the float
    kernel is the same, its integers are not that kernel rounded. (Equalization off: it would move the
    kernels this small test rounds onto values where the two roundings happen to agree.)"""
    plain = (("equalization", "disabled"),)
    base = _compile(tmp_path / "base", CompileOptions(backend_options=plain)).layers
    opts = CompileOptions(overrides=(RangeOverride("Conv_0", "out", "r0", 0.0, 6.0),), backend_options=plain)
    forced = _compile(tmp_path / "forced", opts).layers
    assert forced[0].float_sha == base[0].float_sha and forced[0].kernel_sha != base[0].kernel_sha
    assert forced[0].off_grid and not forced[1].off_grid


def test_sixteen_bit_layers_read_their_bits(fake_hailo_sdk_client: Any, tmp_path: Path) -> None:
    opts = CompileOptions(backend_options=(("model_script", ("quantization_param(conv1, precision_mode=a16_w16)",)),))
    fused, second = _compile(tmp_path, opts).layers
    assert (fused.out_bits, fused.weight_bits, fused.off_grid) == (16, 16, 0)
    assert (second.in_bits, second.out_bits) == (16, 8)


def test_a_float_bias_has_no_step(fake_hailo_sdk_client: Any, tmp_path: Path) -> None:
    fake_hailo_sdk_client.float_bias = {"conv2"}
    fused, second = _compile(tmp_path).layers
    assert fused.bias_step is not None and second.bias is not None and second.bias_step is None


def _print(name: str) -> LayerPrint:
    return LayerPrint(name=name, weight_scale=(0.5,), weight_zero_point=(0,))


def test_a_layer_without_original_names_is_unmapped() -> None:
    hn = {"name": "net", "layers": {"net/conv7": {"type": "conv", "input": ["net/input_layer1"]}}}
    (lp,) = named_prints([_print("conv7")], {}, hn, {"conv7": [16, 8], "input_layer1": [8, 8]})
    assert (lp.name, lp.compiled_name, lp.onnx_names, lp.unmapped) == ("conv7", "net/conv7", (), True)
    assert (lp.in_bits, lp.out_bits, lp.weight_bits) == (8, 16, 8)


@pytest.mark.parametrize(
    "ints, dtype, off", [([2, -4, 127], np.int8, 0), ([2, -3, 127], np.int8, 1), ([2, -4, 200], np.int16, 0)]
)
def test_off_grid_counts_integers_that_are_not_the_float_rounded(ints: list[int], dtype: Any, off: int) -> None:
    """On the layer's own grid: an 8-bit kernel clips at 127, a 16-bit one does not."""
    w = np.float32([1.1, -2.2, 100.0]).reshape(1, 1, 1, 3)
    q = np.asarray(ints, dtype).reshape(1, 1, 1, 3)
    (lp,) = kernel_grid({"net/conv1/kernel:0": q}, {"net/conv1/kernel:0": w}, [_print("net/conv1")])
    assert (lp.off_grid, lp.weight_bits) == (off, np.dtype(dtype).itemsize * 8)


def test_a_4_bit_kernel_in_int8_is_read_at_4_bits_and_clips_at_its_own_ends() -> None:
    """Issue 44: a kernel the DFC put at 4 bits, held in int8, is on a grid that ends at -8 and 7; the
    float 4.5 (9 steps of 0.5) rounds to 9 and clips to 7 there, which is on its grid, not off it."""
    w = np.float32([4.5, -2.0, 0.5]).reshape(1, 1, 1, 3)
    q = np.int8([7, -4, 1]).reshape(1, 1, 1, 3)
    (lp,) = kernel_grid({"net/conv1/kernel:0": q}, {"net/conv1/kernel:0": w}, [_print("net/conv1")])
    assert (lp.off_grid, lp.weight_bits) == (0, 4)
    (wide,) = kernel_grid(
        {"net/conv1/kernel:0": q}, {"net/conv1/kernel:0": w}, [replace(_print("net/conv1"), weight_bits=8)]
    )
    assert wide.off_grid == 1  # read at 8 bits, 9 would fit: 7 is off that grid


def test_outputs_are_named_by_the_onnx_output_their_stream_carries() -> None:
    """HailoRT lists a stream's original names (``Hef::get_original_names_from_vstream_name``); the
    last one that makes an ONNX output names it."""
    originals = {"net/conv3": ["Conv_2", "Relu_2"], "net/conv2": ["Conv_1"], "net/conv9": ["Mystery"]}
    made_by = {"a": "Conv_1", "b": "Relu_2"}
    found = output_names(["net/conv2", "net/conv3", "net/conv9"], originals.__getitem__, made_by)
    assert found == {"net/conv2": "a", "net/conv3": "b"}


def test_compiled_outputs_take_the_hefs_original_names(
    fake_hailo_sdk_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the driver, with a FAKE ``hailo_platform`` (not Hailo's) whose HEF answers vstream
    infos and original names as pyhailort's ``HEF`` does."""
    module = ModuleType("hailo_platform")

    def info(name: str, shape: tuple[int, ...]) -> Any:
        return SimpleNamespace(
            name=name,
            shape=shape,
            format=SimpleNamespace(type="FormatType.UINT8"),
            quant_info=SimpleNamespace(qp_scale=0.1, qp_zp=0.0),
        )

    class HEF:
        def __init__(self, path: str) -> None:
            self.path = path

        def get_input_vstream_infos(self) -> list[Any]:
            return [info("loop_net/input_layer1", (4, 4, 3))]

        def get_output_vstream_infos(self) -> list[Any]:
            return [info("loop_net/conv2", (4, 4, 2))]

        def get_original_names_from_vstream_name(self, name: str) -> list[str]:
            return {"loop_net/conv2": ["Conv_1"]}[name]

    module.HEF = HEF  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "hailo_platform", module)
    result = _compile(tmp_path)
    assert result.info.layout_source == "hailo_platform"
    assert result.info.output_names == {"loop_net/conv2": "y"}


def test_a_range_past_a_fused_relu_changes_the_function(fake_hailo_sdk_client: Any, tmp_path: Path) -> None:
    """The issue: ``function_changes`` never fired on Hailo (prints carried DFC names, not the ONNX
    tensors a removed clamp bounds). Conv_0 + Relu_0 is one DFC layer; forcing its range below 0
    lets values the float model clips pass."""
    import onnx

    from loop.judge.audit import function_changes
    from loop.judge.structure import analyse

    rng = np.random.default_rng(2)
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w0"], ["c0"], name="Conv_0"),
            helper.make_node("Relu", ["c0"], ["r0"], name="Relu_0"),
            helper.make_node("Conv", ["r0", "w1"], ["y"], name="Conv_1"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])],
        [
            numpy_helper.from_array(rng.uniform(-1, 1, (4, 3, 1, 1)).astype(np.float32), "w0"),
            numpy_helper.from_array(rng.uniform(-1, 1, (2, 4, 1, 1)).astype(np.float32), "w1"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    calibration = rng.random((8, 3, 4, 4), dtype=np.float32)
    compiler = HailoCompiler(workdir=tmp_path)
    base = run_compile(compiler, model.SerializeToString(), calibration, CompileOptions()).layers
    opts = CompileOptions(overrides=(RangeOverride("Conv_0", "out", "r0", -1.0, 6.0),))
    forced = run_compile(compiler, model.SerializeToString(), calibration, opts).layers
    bounds = analyse(onnx.load_from_string(model.SerializeToString())).bounds
    (change,) = function_changes(base, forced, bounds)
    assert (change.layer, change.what, change.allowed) == ("Conv_0", "function", False)
