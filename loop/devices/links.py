"""The shipped links: figures measured on a real device's link, fitted as a user's ladder is.

Device knowledge, so it lives with the devices: ``link-sim`` puts one in front of the host,
and :mod:`loop.measure.link` predicts with one. The default's name is the registry's
(:data:`loop.core.registry.DEFAULT_LINK`), so the face names no device to offer it.
"""

from __future__ import annotations

from collections.abc import Callable

from loop.core.errors import LoopError
from loop.core.links import LinkModel, Rung, fit, parse_inline
from loop.core.registry import DEFAULT_LINK

# The seed's frame ladder (Hailo-10H over USB at 1.5 A, raw uint8 through a 1x1 convolution,
# pipeline depth 4): in MB + out MB per frame, ms per frame. Its depth ladder (16 KB block:
# 724 fps alone, 2094 fps at depth 32) gives the round trip.
_SEED_LADDER = (("512p", 1.05 + 0.26, 4.83), ("720p", 3.69 + 0.92, 15.75), ("1080p", 8.29 + 2.07, 33.59))
_SEED_4K = ("4K", 33.18 + 8.29, 144.80)
_SEED_BLOCK = (16_384, 1 / 724, 1 / 2094)
SEED_SOURCE = (
    "the seed's frame ladder, Hailo-10H over USB at 1.5 A (512p-4K at depth 4, plateau 285-300 MB/s); "
    "round trip from its 16 KB depth ladder (724 fps alone, 2094 fps at depth 32)"
)


def seed_link() -> LinkModel:
    """``hailo10h-usb-1.5a``: the seed's figures, fitted by :func:`fit` as a user's ladder is."""
    rows = (*_SEED_LADDER, _SEED_4K)
    rungs = [Rung(n, round(mb * 1e6), ms / 1e3, 4) for n, mb, ms in rows]
    block, lone, best = _SEED_BLOCK
    rungs.append(Rung("16KB", block, best, 32, lone))
    return fit(DEFAULT_LINK, rungs, SEED_SOURCE)


SHIPPED: dict[str, Callable[[], LinkModel]] = {DEFAULT_LINK: seed_link}


def shipped_or_inline(name: str) -> LinkModel | None:
    """A link given inline (``300MB/s+0.9ms``) or a shipped one by name; None for any other name."""
    if "MB/s" in name:
        return parse_inline(name)
    return SHIPPED[name]() if name in SHIPPED else None


def link(name: str) -> LinkModel:
    """What a device name may hold after ``link-sim:``: a shipped link or one given inline."""
    model = shipped_or_inline(name)
    if model is None:
        raise LoopError(f"unknown link '{name}' (known: {', '.join(sorted(SHIPPED))})")
    return model
