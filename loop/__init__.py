"""loop: an on-device evaluation loop for compile-and-score experiments."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "evaluate"]


def evaluate(*args: Any, **kwargs: Any) -> Any:
    """Score a generation of candidates; see :func:`loop.api.evaluate`."""
    from loop.api import evaluate as _evaluate  # imported on use: `loop --help` stays light

    return _evaluate(*args, **kwargs)
