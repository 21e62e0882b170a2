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


def _affine_from_limvals(limvals: np.ndarray, bits: int) -> tuple[float, int]:
    """The affine scale/zero point a [min, max] range would get on a ``bits``-wide grid: a guess
    (the DFC may widen or move the range), used only when the layer carries no scale of its own."""
    lo, hi = (float(v) for v in np.asarray(limvals).reshape(-1)[:2])
    scale = (hi - lo) / (2**bits - 1) or 1.0
    return scale, int(round(-lo / scale))


def _own_quant(leaves: dict[str, np.ndarray], side: str) -> tuple[float, int, str] | None:
    """A tensor's scale and zero point as the DFC stored them: ``qp_out``/``qp_in`` hold
    (zero point, scale), as public code reads ``<net>/<layer>/qp_out:0`` from a quantized HAR's
    ``model.q.npz``; ``output_scale``/``output_zero_point`` (and ``input_``) are also taken."""
    word = {"out": "output", "in": "input"}[side]
    pair = leaves.get(f"qp_{side}")
    if pair is not None and np.size(pair) == 2:
        zp, scale = (float(v) for v in np.asarray(pair, np.float64).reshape(-1))
        return scale, int(round(zp)), f"qp_{side}"
    scale_leaf = leaves.get(f"{word}_scale")
    if scale_leaf is not None and np.size(scale_leaf) == 1:
        zp_leaf = leaves.get(f"{word}_zero_point")
        zp = 0 if zp_leaf is None or np.size(zp_leaf) != 1 else int(round(float(np.asarray(zp_leaf).reshape(-1)[0])))
        return float(np.asarray(scale_leaf).reshape(-1)[0]), zp, f"{word}_scale"
    return None


def _quant(leaves: dict[str, np.ndarray], side: str, bits: int) -> tuple[float | None, int | None, str | None]:
    """The layer's own scale entry, else its stats range on a ``bits``-wide grid (and which)."""
    own = _own_quant(leaves, side)
    if own is not None:
        return own
    word = {"out": "output", "in": "input"}[side]
    limvals = next((v for k, v in leaves.items() if k.endswith("stats_limvals") and word in k), None)
    if limvals is None:
        return None, None, None
    scale, zp = _affine_from_limvals(limvals, bits)
    return scale, zp, f"stats_limvals / {2**bits - 1} (fallback: no scale entry)"


def _layer_print(layer: str, leaves: dict[str, np.ndarray], bits: int, sources: dict[str, str]) -> LayerPrint:
    """One layer's print; ``bits`` is its activation width (for the fallback only), and
    ``sources`` gets where each scale came from, by ``layer:side``."""
    scale_like = {k: v for k, v in leaves.items() if any(w in k for w in _SCALE_WORDS)}
    kernels = sorted((k, v) for k, v in leaves.items() if "kernel" in k and k not in scale_like)
    biases = sorted((k, v) for k, v in leaves.items() if "bias" in k and k not in scale_like)
    weight_like = {k: v for k, v in scale_like.items() if "kernel" in k or "weight" in k}
    w_scales = sorted((k, v) for k, v in weight_like.items() if "scale" in k)
    w_zps = sorted((k, v) for k, v in weight_like.items() if "scale" not in k)
    b_scales = sorted((k, v) for k, v in scale_like.items() if "bias" in k)
    short = layer.split("/")[-1]
    out_scale, out_zp, out_from = _quant(leaves, "out", bits)
    in_scale, in_zp, in_from = _quant(leaves, "in", bits)
    sources.update({f"{short}:{side}": src for side, src in (("out", out_from), ("in", in_from)) if src})
    bias = step = None
    if biases and b_scales and np.issubdtype(np.asarray(biases[0][1]).dtype, np.integer):
        b, s = np.broadcast_arrays(np.asarray(biases[0][1], np.float64), np.asarray(b_scales[0][1], np.float64))
        bias, step = tuple(float(v) for v in (b * s).reshape(-1)), tuple(float(v) for v in s.reshape(-1))
    elif biases and not np.issubdtype(np.asarray(biases[0][1]).dtype, np.integer):
        bias = _flat(biases[:1])
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


def discover_prints(
    params: dict[str, np.ndarray], bits: Mapping[str, int] | None = None, sources: dict[str, str] | None = None
) -> tuple[list[LayerPrint], list[str]]:
    """Group parameter keys per layer (in the dict's order) and fingerprint layers with kernels.
    ``bits``: activation width by DFC layer name (8 when absent), for scales taken from a range;
    ``sources`` (when given) gets where each layer's scales came from."""
    keys = list(params)
    layers: dict[str, dict[str, np.ndarray]] = {}
    for key in keys:
        layer, leaf = _split_key(key)
        layers.setdefault(layer, {})[leaf] = np.asarray(params[key])
    found: dict[str, str] = {} if sources is None else sources
    prints = [
        _layer_print(layer, leaves, (bits or {}).get(layer.split("/")[-1], 8), found)
        for layer, leaves in layers.items()
        if any("kernel" in leaf and not any(w in leaf for w in _SCALE_WORDS) for leaf in leaves)
    ]
    if not prints:
        shown = ", ".join(keys[:40]) + (f", ... ({len(keys)} in all)" if len(keys) > 40 else "")
        raise HailoCompileError(f"no kernel-like parameter among the DFC's {len(keys)} keys: {shown or 'none'}")
    return prints, keys
