"""Precision per DFC layer from the model script and the parameters, and residency in memory."""

from __future__ import annotations

import numpy as np

from loop.compilers.hailo_weights import layer_bits, residency, script_precisions

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
