"""The compiler interface's scale-only edit: a backend without one refuses in one line."""

from __future__ import annotations

from typing import Any

import pytest

from loop.compilers.base import Compiler, RescaleRefused
from loop.core.vocab import Quantized, Rescale


class Unscalable(Compiler):
    """A backend that does not override ``rescale`` (both real ones now do)."""

    name = "unscalable"

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return True, ""

    def describe(self) -> dict[str, str]:
        return {}

    def optimize(self, *args: Any) -> Any: ...

    def compile(self, *args: Any) -> Any: ...

    def fingerprint(self, *args: Any) -> Any: ...


def test_a_backend_without_rescale_refuses_in_one_line():
    with pytest.raises(RescaleRefused) as err:
        Unscalable().rescale(Quantized("unscalable", b""), [Rescale("conv1", "weights", (1.1,))])
    assert str(err.value) == "the unscalable backend cannot edit a quantized model's scales (scale_grid)"
