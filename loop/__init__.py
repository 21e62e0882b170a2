"""loop: an on-device evaluation loop for compile-and-score experiments."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["Study", "__version__", "evaluate"]


def evaluate(*args: Any, **kwargs: Any) -> Any:
    """Score a generation of candidates; see :func:`loop.api.evaluate`."""
    from loop.api import evaluate as _evaluate  # imported on use: `loop --help` stays light

    return _evaluate(*args, **kwargs)


def __getattr__(name: str) -> Any:
    """``loop.Study``, imported on first use (the study pulls in the sweep's flow)."""
    if name == "Study":
        from loop.study import Study

        return Study
    raise AttributeError(f"module 'loop' has no attribute {name!r}")
