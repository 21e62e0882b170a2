"""``precision`` in the Dataflow Compiler's model script (no DFC needed: the script is text)."""

from __future__ import annotations

import pytest

from loop.compilers.hailo import model_script, precision_lines
from loop.compilers.hailo_params import HailoCompileError
from loop.core.vocab import CompileOptions, Precision

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
