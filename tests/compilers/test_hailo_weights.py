"""Precision per DFC layer from the model script and the parameters, and residency in memory."""

from __future__ import annotations

import numpy as np

from loop.compilers.hailo_weights import four_bit, kernel_width, layer_bits, residency, script_precisions

LAYERS = ["conv1", "conv2", "conv10", "fc1"]


def test_script_precisions_take_names_lists_and_globs_later_lines_winning() -> None:
    script = "\n".join(
        [
            "quantization_param({conv*}, precision_mode=a8_w4)",
            "quantization_param([conv2, net/fc1], precision_mode=a16_w16)",
            "quantization_param(conv1, force_range_out=[0.0, 8.0])",  # no precision: leaves conv1 as it was
            "model_optimization_flavor(optimization_level=2)",
        ]
    )
    assert script_precisions(script, LAYERS) == {
        "conv1": (8, 4),
        "conv2": (16, 16),
        "conv10": (8, 4),
        "fc1": (16, 16),
    }


def test_without_the_hn_model_kernels_are_counted_at_the_scripts_width() -> None:
    params = {
        "net/conv1/kernel:0": np.zeros((3, 3, 4, 8), np.int8),
        "net/conv1/kernel_scale:0": np.ones(8, np.float32),
        "net/fc1/kernel:0": np.zeros((16, 10), np.int16),
    }
    layers, source = layer_bits(None, "quantization_param(conv1, precision_mode=a8_w4)", params)
    assert layers == {"conv1": (288, (8, 4)), "fc1": (160, (8, 16))}
    assert source.startswith("kernel parameters")
    record = residency(layers, source, "hailo10h")
    assert record["bytes"] == (288 * 4 + 160 * 16) // 8 and record["weights_by_bits"] == {"16": 160, "4": 288}
    assert record["resident"] == "unknown"  # the HEF's size decides, once compiled (hef_residency)


def test_a_chip_without_a_memory_figure_leaves_residency_unknown() -> None:
    record = residency({"conv1": (10, (8, 8))}, "runner.get_hn_model()", "hailo8")
    assert (record["device_memory_bytes"], record["resident"]) == (None, "unknown")


def test_a_kernel_held_in_int8_within_minus_8_to_7_counts_at_4_bits() -> None:
    """Issue 44: a layer the DFC put at 4 bits itself (auto_4bit_weights_ratio) has no script line; its
    integers say so. An 8-bit kernel on its own range's grid reaches +-127; zeros stay at the stored width."""
    assert kernel_width(np.int8([[-8, 7], [3, 0]])) == 4
    assert kernel_width(np.int8([[-8, 8]])) == 8 and kernel_width(np.zeros(4, np.int8)) == 8
    assert kernel_width(np.uint8([1, 2])) == 8 and kernel_width(np.float32([0.5])) == 8
    params = {"net/conv1/kernel:0": np.int8([-8, 7, 1, 2]), "net/conv2/kernel:0": np.int8([-127, 5])}
    layers, _ = layer_bits(None, "quantization_param(conv2, precision_mode=a8_w8)", params)
    assert layers == {"conv1": (4, (8, 4)), "conv2": (2, (8, 8))}
    assert residency(layers, "", "hailo10h")["bytes"] == (4 * 4 + 2 * 8) // 8  # 4-bit weights two per byte


def test_the_4bit_record_names_the_layers_and_their_share_by_count() -> None:
    """As Hailo's compression inspector counts it: layer.weights of the layers whose mode ends in w4."""
    layers = {"input_layer1": (0, (8, 8)), "conv1": (30, (8, 4)), "conv2": (10, (8, 8))}
    record = four_bit(layers, "runner.get_hn_model()", 0.5, {"conv1": "Conv_0"})
    assert record == {
        "asked": 0.5,
        "layers": ["Conv_0"],
        "dfc_layers": ["conv1"],
        "weights": 30,
        "share": 0.75,
        "from": "runner.get_hn_model()",
    }
    assert four_bit({"conv1": (30, (8, 8))}, "", None, {}) is None  # nothing asked, nothing at 4 bits
    assert four_bit({"conv1": (30, (8, 8))}, "", 0.2, {})["share"] == 0.0  # asked, and the DFC put none
