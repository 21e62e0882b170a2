"""Reading what the Dataflow Compiler made: its translated parameters, as fingerprints, and
the I/O layouts its HN implies (a fallback: the HEF's own layouts come first).

The keys of quantized parameters are only partly documented (HAILO.md): they are discovered
at run time, and the raw key list is kept for the ledger.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from loop.core.errors import LoopError
from loop.core.hashing import named_sha
from loop.core.vocab import LayerPrint, TensorLayout

_SCALE_WORDS = ("scale", "zero_point", "zp", "factor")
Layouts = tuple[tuple[TensorLayout, ...], tuple[TensorLayout, ...]]


class HailoCompileError(LoopError):
    """A Dataflow Compiler failure, named in one line."""


def io_layouts(hn: dict[str, Any], params: dict[str, np.ndarray]) -> Layouts:
    """Inputs and outputs as the HN reports them: uint8 NHWC frames, with scale/zero point
    when a parameter under that layer carries them (key names UNCONFIRMED). A guess: used only
    when the HEF itself cannot be read."""
    found: dict[str, list[TensorLayout]] = {"input_layer": [], "output_layer": []}
    for name, body in hn.get("layers", {}).items():
        if body.get("type") in found:
            shape = (body.get("output_shapes") or body.get("input_shapes") or [[]])[0]
            scale, zp = _layer_quant(name, params)
            found[body["type"]].append(
                TensorLayout(
                    name, tuple(1 if d in (-1, None) else int(d) for d in shape), "uint8", scale, zp, channels_last=True
                )
            )
    if not found["input_layer"] or not found["output_layer"]:
        types = sorted({str(b.get("type")) for b in hn.get("layers", {}).values()})
        raise HailoCompileError(f"cannot find input and output layers in the HN (layer types: {', '.join(types)})")
    return tuple(found["input_layer"]), tuple(found["output_layer"])


def _layer_quant(layer: str, params: dict[str, np.ndarray]) -> tuple[float | None, int | None]:
    scale = zp = None
    for key, value in params.items():
        leaf = key.split(":")[0][len(layer) + 1 :] if key.startswith(layer + "/") else None
        if leaf and "scale" in leaf and np.size(value) == 1:
            scale = float(np.asarray(value).reshape(-1)[0])
        if leaf and ("zero_point" in leaf or leaf.endswith("zp")) and np.size(value) == 1:
            zp = int(round(float(np.asarray(value).reshape(-1)[0])))
    return scale, zp


def flat_params(params: Any) -> dict[str, np.ndarray]:
    """``{key: array}`` whatever the view: ``get_params_translated()`` is indexed per layer
    (Hailo-Application-Code-Examples, tools/basic_diagnostic_tool/inspectors/clipping_inspector.py)."""
    out: dict[str, np.ndarray] = {}
    for key, value in dict(params).items():
        if isinstance(value, Mapping):
            out.update({f"{key}/{leaf}": np.asarray(v) for leaf, v in value.items()})
        else:
            out[key] = np.asarray(value)
    return out


def saved_translated_params(runner: Any) -> tuple[str, dict[str, np.ndarray]]:
    """``runner.save_params(path, ParamsKinds.TRANSLATED)`` read back with ``np.load``: flat keys
    ``<net>/<layer>/kernel:0``; the per-layer view flattened when the DFC lacks ParamsKinds."""
    try:
        from hailo_sdk_client.hailo_archive.hailo_archive import ParamsKinds
    except ImportError:
        return "get_params_translated", flat_params(runner.get_params_translated())
    with tempfile.TemporaryDirectory(prefix="loop-params-") as folder:
        path = Path(folder) / "translated.npz"
        runner.save_params(str(path), ParamsKinds.TRANSLATED)
        # allow_pickle: the archive is the DFC's own output, written into loop's folder just now.
        with np.load(path, allow_pickle=True) as saved:
            return "save_params(TRANSLATED)", {k: np.asarray(saved[k]) for k in saved.files}


def _split_key(key: str) -> tuple[str, str]:
    """``net/conv1/kernel:0`` -> (``net/conv1``, ``kernel``); stats entries stay with their layer."""
    parts = key.split(":")[0].split("/")
    cut = parts.index("stats") if "stats" in parts[1:] else len(parts) - 1
    return "/".join(parts[:cut]), "/".join(parts[cut:])


def _flat(arrays: list[tuple[str, np.ndarray]]) -> tuple[float, ...]:
    return tuple(float(v) for _, a in arrays for v in np.asarray(a).reshape(-1))


def _affine_from_limvals(limvals: np.ndarray) -> tuple[float, int]:
    """uint8 affine scale/zero point for a [min, max] range (an assumption, not read back)."""
    lo, hi = (float(v) for v in np.asarray(limvals).reshape(-1)[:2])
    scale = (hi - lo) / 255.0 or 1.0
    return scale, int(round(-lo / scale))


def _layer_print(layer: str, leaves: dict[str, np.ndarray]) -> LayerPrint:
    scale_like = {k: v for k, v in leaves.items() if any(w in k for w in _SCALE_WORDS)}
    kernels = sorted((k, v) for k, v in leaves.items() if "kernel" in k and k not in scale_like)
    biases = sorted((k, v) for k, v in leaves.items() if "bias" in k and k not in scale_like)
    weight_like = {k: v for k, v in scale_like.items() if "kernel" in k or "weight" in k}
    w_scales = sorted((k, v) for k, v in weight_like.items() if "scale" in k)
    w_zps = sorted((k, v) for k, v in weight_like.items() if "scale" not in k)
    b_scales = sorted((k, v) for k, v in scale_like.items() if "bias" in k)
    out_scale = out_zp = in_scale = in_zp = None
    for leaf, value in leaves.items():
        if leaf.endswith("stats_limvals") and "output" in leaf and out_scale is None:
            out_scale, out_zp = _affine_from_limvals(value)
        if leaf.endswith("stats_limvals") and "input" in leaf and in_scale is None:
            in_scale, in_zp = _affine_from_limvals(value)
    bias = step = None
    if biases and b_scales and np.issubdtype(np.asarray(biases[0][1]).dtype, np.integer):
        b, s = np.broadcast_arrays(np.asarray(biases[0][1], np.float64), np.asarray(b_scales[0][1], np.float64))
        bias, step = tuple(float(v) for v in (b * s).reshape(-1)), tuple(float(v) for v in s.reshape(-1))
    elif biases and not np.issubdtype(np.asarray(biases[0][1]).dtype, np.integer):
        bias = _flat(biases[:1])
    short = layer.split("/")[-1]
    return LayerPrint(
        name=short,
        op=re.sub(r"\d+$", "", short) or short,
        kernel_sha=named_sha(kernels + w_scales + w_zps),
        bias_sha=named_sha(biases + b_scales) if biases else None,
        weight_scale=_flat(w_scales),
        weight_zero_point=tuple(int(round(v)) for v in _flat(w_zps)),
        in_tensor=None,
        in_scale=in_scale,
        in_zero_point=in_zp,
        out_tensor=short,
        out_scale=out_scale,
        out_zero_point=out_zp,
        bias=bias,
        bias_step=step,
    )


def discover_prints(params: dict[str, np.ndarray]) -> tuple[list[LayerPrint], list[str]]:
    """Group parameter keys per layer (in the dict's order) and fingerprint layers with kernels."""
    keys = list(params)
    layers: dict[str, dict[str, np.ndarray]] = {}
    for key in keys:
        layer, leaf = _split_key(key)
        layers.setdefault(layer, {})[leaf] = np.asarray(params[key])
    prints = [
        _layer_print(layer, leaves)
        for layer, leaves in layers.items()
        if any("kernel" in leaf and not any(w in leaf for w in _SCALE_WORDS) for leaf in leaves)
    ]
    if not prints:
        shown = ", ".join(keys[:40]) + (f", ... ({len(keys)} in all)" if len(keys) > 40 else "")
        raise HailoCompileError(f"no kernel-like parameter among the DFC's {len(keys)} keys: {shown or 'none'}")
    return prints, keys
