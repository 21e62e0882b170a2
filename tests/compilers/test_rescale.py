"""The compiler interface's scale-only edit: a backend without one refuses in one line."""

from __future__ import annotations

import pytest

from loop.compilers.base import RescaleRefused
from loop.compilers.hailo import HailoCompiler
from loop.core.vocab import Quantized, Rescale


def test_a_backend_without_rescale_refuses_in_one_line():
    with pytest.raises(RescaleRefused) as err:
        HailoCompiler().rescale(Quantized("hailo", b""), [Rescale("conv1", "weights", (1.1,))])
    assert str(err.value) == "the hailo backend cannot edit a quantized model's scales (scale_grid)"
