"""``scale_grid`` on the Dataflow Compiler's quantized (translated) params: scale entries multiplied,
every integer left as it was.

The keys are read as :mod:`loop.compilers.hailo_params` reads them for fingerprints: a layer's
entries are ``<net>/<layer>/<leaf>:0``; its weight scales are the leaves naming the kernel (or
weight) and a scale, its bias's scale the leaf naming the bias and a scale; an activation grid is
``qp_out``/``qp_in`` = (zero point, scale), or ``output_scale``/``input_scale``. Which of these the
real DFC stores is only partly confirmed (docs/hailo.md): a layer without the entry an edit needs
is refused, naming the leaves it has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from loop.compilers.hailo_params import HailoCompileError, split_key
from loop.core.vocab import Rescale

Params = dict[str, np.ndarray]


def rescale_params(
    params: Mapping[str, np.ndarray], edits: Sequence[tuple[Rescale, str]], hn: Mapping[str, Any]
) -> tuple[Params, list[dict[str, Any]]]:
    """``params`` with each edit applied, in order, to its DFC layer (``<net>/<layer>``, as the HN
    names it); and what each moved, by key. ``params`` itself is left as it was."""
    out = {k: np.asarray(v) for k, v in params.items()}
    done = []
    for edit, layer in edits:
        keys = _weight_keys(out, edit, layer) if edit.of == "weights" else _output_keys(out, edit, layer, hn)
        for key, index in keys:
            out[key] = _times(out[key], edit.factors, index)
        moved = list(dict.fromkeys(key for key, _ in keys))
        done.append({"layer": edit.layer, "compiled_layer": layer, "of": edit.of, "keys": moved})
    return out, done


Slot = tuple[str, int | None]  # a key, and the index of the scale inside it (None: the whole array)


def _leaves(params: Mapping[str, np.ndarray], layer: str) -> dict[str, str]:
    """A layer's leaf names (``kernel_scale``) and their keys (``net/conv1/kernel_scale:0``)."""
    return {leaf: key for key in params for owner, leaf in [split_key(key)] if owner == layer}


def _is_int(params: Mapping[str, np.ndarray], key: str | None) -> bool:
    return key is not None and np.issubdtype(np.asarray(params[key]).dtype, np.integer)


def _bias_scale(params: Mapping[str, np.ndarray], leaves: Mapping[str, str]) -> list[Slot]:
    """An integer bias's scale (its step is the input's scale times the weight's, so it moves with either)."""
    bias = next((key for leaf, key in leaves.items() if leaf.startswith("bias") and "scale" not in leaf), None)
    if not _is_int(params, bias):
        return []  # a bias kept in float has no grid to move
    return [(key, None) for leaf, key in leaves.items() if "bias" in leaf and "scale" in leaf]


def _weight_keys(params: Mapping[str, np.ndarray], edit: Rescale, layer: str) -> list[Slot]:
    leaves = _leaves(params, layer)
    scales = [key for leaf, key in leaves.items() if ("kernel" in leaf or "weight" in leaf) and "scale" in leaf]
    if not scales:
        raise HailoCompileError(
            f"scale_grid: DFC layer {layer} ({edit.layer}) has no kernel scale among its params: {', '.join(leaves)}"
        )
    for key in scales:
        size = np.size(params[key])
        if len(edit.factors) > 1 and size != len(edit.factors):
            raise HailoCompileError(
                f"scale_grid: {len(edit.factors)} factors for layer '{edit.layer}', whose weight grid "
                f"({key}) has {size} scale(s)"
            )
    return [(key, None) for key in scales] + _bias_scale(params, leaves)


def _grid_slot(params: Mapping[str, np.ndarray], leaves: Mapping[str, str], side: str) -> Slot | None:
    """Where a layer keeps the scale of its output (``out``) or input (``in``) grid."""
    pair = leaves.get(f"qp_{side}")
    if pair is not None and np.size(params[pair]) == 2:
        return pair, 1  # (zero point, scale), as loop reads qp_out/qp_in
    word = {"out": "output", "in": "input"}[side]
    own = leaves.get(f"{word}_scale")
    return (own, None) if own is not None and np.size(params[own]) == 1 else None


def readers(hn: Mapping[str, Any], layer: str) -> list[str]:
    """The HN layers that read ``layer``'s output (``<net>/<layer>`` names)."""
    return [
        name
        for name, body in hn.get("layers", {}).items()
        if isinstance(body, dict) and layer in (body.get("input") or [])
    ]


def _output_keys(params: Mapping[str, np.ndarray], edit: Rescale, layer: str, hn: Mapping[str, Any]) -> list[Slot]:
    """The layer's output scale, every reader's input scale (the same grid) and their integer bias scales."""
    if len(edit.factors) > 1:
        raise HailoCompileError(
            f"scale_grid: layer '{edit.layer}''s output grid has one scale on the DFC (qp_out), not one per channel"
        )
    leaves = _leaves(params, layer)
    own = _grid_slot(params, leaves, "out")
    if own is None:
        raise HailoCompileError(
            f"scale_grid: DFC layer {layer} ({edit.layer}) has no output scale among its params: {', '.join(leaves)}"
        )
    slots = [own]
    for reader in readers(hn, layer):
        theirs = _leaves(params, reader)
        grid = _grid_slot(params, theirs, "in")
        if grid is not None:
            slots += [grid, *_bias_scale(params, theirs)]
    return slots


def _times(value: np.ndarray, factors: Sequence[float], index: int | None) -> np.ndarray:
    """``value`` (or its entry ``index``) times the factor(s), in its own dtype."""
    old = np.asarray(value)
    new = old.astype(np.float64).copy()
    if index is not None:
        flat = new.reshape(-1)
        flat[index] *= factors[0]
        return flat.reshape(old.shape).astype(old.dtype)
    by = np.asarray(factors, np.float64)
    return (new * (by[0] if by.size == 1 else by.reshape(old.shape))).astype(old.dtype)
