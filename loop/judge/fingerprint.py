"""Backend-neutral fingerprints: hashes that cover integers together with their scales.

A layer's hashes are made by the compiler with :func:`loop.core.hashing.array_sha` (dtype, shape
and bytes of the integers and their scales, so a moved scale is a new hash); here they are
combined into the model's."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from loop.core.vocab import LayerPrint


def model_sha(shas: Iterable[str | None]) -> str:
    """The model-level hash: one hash over the layers' hashes, in graph order."""
    h = hashlib.sha256()
    for sha in shas:
        h.update((sha or "-").encode())
    return h.hexdigest()


def kernel_sha(layers: list[LayerPrint]) -> str:
    return model_sha(lp.kernel_sha for lp in layers)


def bias_sha(layers: list[LayerPrint]) -> str:
    return model_sha(lp.bias_sha for lp in layers)
