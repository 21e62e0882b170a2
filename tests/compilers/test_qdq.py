"""What a QDQ graph says of its quantizer: the range it used for a forced range, on the grid the
zero point's type gives (a forced range may sit on a 16-bit grid beside ``QUInt16``)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from loop.compilers.qdq import used_ranges
from loop.core.vocab import RangeOverride

FORCED = (RangeOverride("conv1", "out", "x", 0.0, 6.0),)


def _pair(zp_type: int, zero_point: int, scale: float) -> object:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    inits = [
        numpy_helper.from_array(np.array(scale, np.float32), "s"),
        helper.make_tensor("z", zp_type, [], [zero_point]),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"]),
    ]
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits))


@pytest.mark.parametrize(
    ("zp_type", "zero_point", "steps"),
    [(TensorProto.UINT8, 0, 255), (TensorProto.INT8, -128, 255), (TensorProto.UINT16, 0, 65535)],
)
def test_the_range_used_is_read_on_the_grid_of_its_zero_points_type(zp_type: int, zero_point: int, steps: int) -> None:
    """[0, 6] forced on an 8-bit or a 16-bit grid is read back as [0, 6], with no warning (read as
    8 bits, the 16-bit one came back as [0, 0.0234] and warned that the quantizer moved it)."""
    ranges, warnings = used_ranges(_pair(zp_type, zero_point, 6.0 / steps), FORCED)
    assert ranges["x"]["used"] == pytest.approx([0.0, 6.0], abs=1e-6)
    assert warnings == []
