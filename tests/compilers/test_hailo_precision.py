"""``precision`` in the Dataflow Compiler's model script (no DFC needed: the script is text)."""

from __future__ import annotations

import pytest

from loop.compilers.hailo import model_script, precision_lines
from loop.compilers.hailo_params import HailoCompileError
from loop.core.vocab import CompileOptions, Precision, WeightPrecision

# as layer_names_from_hn maps an HN whose conv1 fused Conv_0, bn_0 and relu_0 (original_names)
NAMES = {"Conv_0": "conv1", "bn_0": "conv1", "relu_0": "conv1", "Conv_1": "conv2"}


def test_the_nodes_of_one_fused_layer_write_one_line_for_it():
    wide = tuple(Precision(n, 16, "t") for n in ("Conv_0", "relu_0", "Conv_1"))
    assert precision_lines(CompileOptions(precisions=wide), NAMES) == [
        "quantization_param(conv1, precision_mode=a16_w16)",
        "quantization_param(conv2, precision_mode=a16_w16)",
    ]
    script = model_script(CompileOptions(precisions=wide[:1]), 8, NAMES).splitlines()
    assert script[0] == "quantization_param(conv1, precision_mode=a16_w16)"


def test_a_node_no_dfc_layer_lists_names_the_nearest():
    with pytest.raises(HailoCompileError, match=r"no Dataflow Compiler layer.*nearest DFC layers"):
        precision_lines(CompileOptions(precisions=(Precision("Conv_9", 16, "t"),)), NAMES)


def test_32_bits_is_refused_in_one_line():
    with pytest.raises(HailoCompileError) as err:
        precision_lines(CompileOptions(precisions=(Precision("Conv_0", 32, "t"),)), NAMES)
    assert "no float layer" in str(err.value) and "\n" not in str(err.value)


# -- issue 44: weight precision --------------------------------------------------------------


def weights(*pairs: tuple[str, int]) -> tuple[WeightPrecision, ...]:
    return tuple(WeightPrecision(layer, bits, "w") for layer, bits in pairs)


@pytest.mark.parametrize("bits, mode", [(4, "a8_w4"), (8, "a8_w8"), (16, "a16_w16")])
def test_weights_write_the_mode_for_the_fused_dfc_layer(bits: int, mode: str) -> None:
    """``weights: 4`` is hailo_model_zoo's ``quantization_param(conv45, precision_mode=a8_w4)``
    (cfg/alls/generic/yolov5m.alls), on the DFC layer whose original_names list the node; 16 is
    a16_w16, the only public mode with 16-bit weights."""
    opts = CompileOptions(weight_bits=weights(("Conv_0", bits)))
    assert precision_lines(opts, NAMES) == [f"quantization_param(conv1, precision_mode={mode})"]


def test_a_16_bit_output_and_16_bit_weights_are_one_a16_w16_line() -> None:
    opts = CompileOptions(
        precisions=(Precision("relu_0", 16, "t"),), weight_bits=weights(("Conv_0", 16), ("Conv_1", 4))
    )
    assert precision_lines(opts, NAMES) == [
        "quantization_param(conv1, precision_mode=a16_w16)",
        "quantization_param(conv2, precision_mode=a8_w4)",
    ]


def test_a_later_weight_setting_on_one_dfc_layer_wins() -> None:
    opts = CompileOptions(weight_bits=weights(("Conv_0", 4), ("Conv_1", 4), ("Conv_0", 8)))
    assert precision_lines(opts, NAMES) == [
        "quantization_param(conv1, precision_mode=a8_w8)",
        "quantization_param(conv2, precision_mode=a8_w4)",
    ]


@pytest.mark.parametrize("wide", ["Conv_0", "relu_0"])
@pytest.mark.parametrize("bits", [4, 8])
def test_16_bit_outputs_with_narrower_weights_are_refused_in_one_line(wide: str, bits: int) -> None:
    """a16_w4 and a16_w8 are in no public script for Hailo-10H (a16_w8 only under cfg/alls/hailo15l/):
    refused on the node itself (before any DFC call) and on a node fused into the same DFC layer."""
    opts = CompileOptions(precisions=(Precision(wide, 16, "t"),), weight_bits=weights(("Conv_0", bits)))
    with pytest.raises(HailoCompileError) as err:
        precision_lines(opts, NAMES)
    text = str(err.value)
    assert "\n" not in text and text.startswith("precision on 'Conv_0' (")
    assert f"(a16_w{bits})" in text and "hailo10h" in text and "a8_w4, a8_w8, a16_w16" in text
    if wide == "relu_0":
        assert "DFC layer conv1, 16-bit output asked on 'relu_0'" in text


def test_the_4bit_share_is_the_dfcs_auto_ratio_after_the_flavor() -> None:
    opts = CompileOptions(weights_4bit_share=0.25, backend_options=(("compression_level", 1),))
    script = model_script(opts, 8, NAMES).splitlines()
    assert script[:2] == [
        "model_optimization_flavor(compression_level=1)",
        "model_optimization_config(compression_params, auto_4bit_weights_ratio=0.25)",
    ]
    assert not any("auto_4bit" in line for line in model_script(CompileOptions(), 8, NAMES).splitlines())
