"""Reading what the Dataflow Compiler made: its translated parameters, as fingerprints, and
the I/O layouts its HN implies (a fallback: the HEF's own layouts come first).

The keys of quantized parameters are only partly documented (docs/hailo.md): they are discovered
at run time, and the raw key list is kept for the ledger.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from loop.compilers.hailo_weights import kernel_width, split_key
from loop.core.errors import LoopError
from loop.core.hashing import array_sha, named_sha
from loop.core.vocab import LayerPrint, TensorLayout

_SCALE_WORDS = ("scale", "zero_point", "zp", "factor")
Layouts = tuple[tuple[TensorLayout, ...], tuple[TensorLayout, ...]]


class HailoCompileError(LoopError):
    """A Dataflow Compiler failure, named in one line."""


def io_layouts(hn: dict[str, Any], params: dict[str, np.ndarray]) -> Layouts:
    """Inputs and outputs as the HN reports them: uint8 NHWC frames, with scale/zero point
    when a parameter under that layer carries them (key names UNCONFIRMED). An output is named
    by the layer that feeds its output layer, as HailoRT names output vstreams (``net/conv5``).
    A guess: used only when the HEF itself cannot be read."""
    found: dict[str, list[TensorLayout]] = {"input_layer": [], "output_layer": []}
    layers = hn.get("layers", {})
    for name, body in layers.items():
        if body.get("type") in found:
            shape = (body.get("output_shapes") or body.get("input_shapes") or [[]])[0]
            feeder = str((body.get("input") or [""])[0]) if body["type"] == "output_layer" else ""
            stream = feeder if feeder in layers else name
            scale, zp = _stream_quant(stream, name, params)
            found[body["type"]].append(
                TensorLayout(
                    stream,
                    tuple(1 if d in (-1, None) else int(d) for d in shape),
                    "uint8",
                    scale,
                    zp,
                    channels_last=True,
                )
            )
    if not found["input_layer"] or not found["output_layer"]:
        types = sorted({str(b.get("type")) for b in layers.values()})
        raise HailoCompileError(f"cannot find input and output layers in the HN (layer types: {', '.join(types)})")
    return tuple(found["input_layer"]), tuple(found["output_layer"])


def _stream_quant(stream: str, layer: str, params: dict[str, np.ndarray]) -> tuple[float | None, int | None]:
    """The grid of the layer that makes a stream (its ``qp_out``), else scale entries under ``layer``."""
    leaves = {split_key(k)[1]: v for k, v in params.items() if split_key(k)[0] == stream}
    own = _own_quant(leaves, "out")
    return (own[0], own[1]) if own else _layer_quant(layer, params)


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


def load_translated_params(runner: Any, params: Mapping[str, np.ndarray]) -> str:
    """Load flat ``<net>/<layer>/<leaf>:0`` params back as the runner's translated (quantized) ones,
    spelled as public code spells it: ``runner.load_params(npz_path, params_kind=ParamsKinds.TRANSLATED)``
    (a public diagnostic script that edits ``save_params(TRANSLATED)``'s npz and loads it back so);
    returns how. Whether the DFC's ``compile()`` then honours them is UNCONFIRMED (docs/hailo.md)."""
    try:
        from hailo_sdk_client.hailo_archive.hailo_archive import ParamsKinds
    except ImportError as exc:  # no public spelling without it: refused rather than guessed
        raise HailoCompileError(
            "scale_grid: this hailo_sdk_client has no hailo_archive.ParamsKinds, the only public way "
            "loop knows to load translated params back"
        ) from exc
    with tempfile.TemporaryDirectory(prefix="loop-params-") as folder:
        path = Path(folder) / "translated.npz"
        np.savez(path, **{k: np.asarray(v) for k, v in params.items()})  # type: ignore[arg-type]  # names, not flags
        runner.load_params(str(path), params_kind=ParamsKinds.TRANSLATED)
    return "load_params(npz, ParamsKinds.TRANSLATED)"


def _integers(arrays: list[tuple[str, np.ndarray]]) -> bool:
    """Whether every array is stored as integers: a float kernel or bias has no integer-only hash."""
    return all(np.issubdtype(np.asarray(a).dtype, np.integer) for _, a in arrays)


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
        # the integers alone, so a scale-only edit (scale_grid) shows its integers are the base's
        kernel_int_sha=named_sha(kernels + w_zps) if kernels and _integers(kernels) else None,
        bias_int_sha=named_sha(biases) if biases and _integers(biases) else None,
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
        layer, leaf = split_key(key)
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


# -- the prints as the sweep names them ----------------------------------------------------------

_WEIGHTED_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")


def onnx_layers(model: bytes | Path, hn: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """What each DFC layer stands for in the ONNX, through the HN's ``original_names``: by DFC
    layer (short name), the node of its weighted op (``name``), every node it lists that the ONNX
    has (``onnx_names``), and the tensors it reads and writes; and, by ONNX output, the node that
    makes it (to name a compiled output by the ONNX output it carries)."""
    from loop.core.modelfile import load_model

    graph = load_model(model, data=False).graph
    initializers = {i.name for i in graph.initializer}
    nodes = {n.name: n for n in graph.node if n.name}
    found: dict[str, dict[str, Any]] = {}
    for layer, body in hn.get("layers", {}).items():
        names = [n for n in (body.get("original_names") or []) if n in nodes] if isinstance(body, dict) else []
        if not names:
            continue
        weighted = [n for n in names if nodes[n].op_type in _WEIGHTED_OPS or _reads_initializer(nodes[n], initializers)]
        found[layer.split("/")[-1]] = {
            "name": (weighted or names)[0],
            "onnx_names": names,
            "in_tensor": nodes[names[0]].input[0] if nodes[names[0]].input else None,
            "out_tensor": nodes[names[-1]].output[0] if nodes[names[-1]].output else None,
        }
    makers = {o: n.name for n in graph.node for o in n.output}
    return found, {o.name: makers[o.name] for o in graph.output if o.name in makers}


def _reads_initializer(node: Any, initializers: set[str]) -> bool:
    return len(node.input) > 1 and node.input[1] in initializers


def output_names(
    streams: Sequence[str], originals: Callable[[str], Sequence[str]], made_by: Mapping[str, str]
) -> dict[str, str]:
    """Compiled output stream -> the ONNX output it carries: the stream's original names (HailoRT's
    ``Hef::get_original_names_from_vstream_name``, or the HN layer's ``original_names``) hold the
    ONNX node that makes it; the last one listed (a fused layer's output is its last node's) wins."""
    by_node = {node: output for output, node in made_by.items()}
    found: dict[str, str] = {}
    for stream in streams:
        try:
            names = list(originals(stream))
        except Exception:
            continue
        hit = next((by_node[n] for n in reversed(names) if n in by_node), None)
        if hit is not None:
            found[stream] = hit
    return found


def named_prints(
    prints: Sequence[LayerPrint],
    mapped: Mapping[str, Mapping[str, Any]],
    hn: dict[str, Any],
    bits: Mapping[str, Sequence[int]],
) -> list[LayerPrint]:
    """Each print named as the sweep names layers: ``name`` the ONNX node of its weighted op,
    ``onnx_names`` all it stands for, ``compiled_name`` the DFC's; a layer listing no ONNX node
    is unmapped (its DFC name, no ONNX names). Bits by DFC layer (activation, weight), the input's
    from the layer that feeds it."""
    net = str(hn.get("name") or "")
    feeds = {
        full.split("/")[-1]: str((body.get("input") or [""])[0]).split("/")[-1]
        for full, body in hn.get("layers", {}).items()
        if isinstance(body, dict)
    }
    named = []
    for lp in prints:
        short = lp.name
        own = mapped.get(short, {})
        act, weight = (*bits[short], None, None)[:2] if short in bits else (None, None)
        feeder = bits.get(feeds.get(short, ""))
        named.append(
            replace(
                lp,
                name=str(own.get("name") or short),
                onnx_names=tuple(own.get("onnx_names") or ()),
                compiled_name=f"{net}/{short}" if net else short,
                in_tensor=own.get("in_tensor", lp.in_tensor),
                out_tensor=own.get("out_tensor", lp.out_tensor),
                out_bits=act if act is not None else lp.out_bits,
                in_bits=int(feeder[0]) if feeder else lp.in_bits,
                weight_bits=weight if weight is not None else lp.weight_bits,
            )
        )
    return named


def kernel_grid(
    params: Mapping[str, np.ndarray], native: Mapping[str, np.ndarray], prints: Sequence[LayerPrint]
) -> list[LayerPrint]:
    """``float_sha`` (the native float kernel the DFC quantized, after its own fusing) and ``off_grid``
    (kernel integers that are not that float kernel rounded on the layer's own grid), and the
    kernel's stored width where nothing else gave ``weight_bits``. Left None where the params do
    not allow it (no native kernel, a shape that differs, a scale that does not broadcast)."""
    out = []
    for lp in prints:
        layer = lp.compiled_name or lp.name
        q = _leaf(params, layer, "kernel")
        w = _leaf(native, layer, "kernel")
        width = kernel_width(q) if q is not None and np.issubdtype(q.dtype, np.integer) else None
        bits = lp.weight_bits or width
        found: dict[str, Any] = {"weight_bits": bits}
        if w is not None and np.issubdtype(w.dtype, np.floating):
            found["float_sha"] = array_sha(np.asarray(w, np.float32))
            found["off_grid"] = _off_grid(q, w, lp.weight_scale, lp.weight_zero_point, bits)
        out.append(replace(lp, **found))
    return out


def _leaf(params: Mapping[str, np.ndarray], layer: str, leaf: str) -> np.ndarray | None:
    return next((np.asarray(v) for k, v in params.items() if split_key(k) == (layer, leaf)), None)


def _off_grid(
    q: np.ndarray | None, w: np.ndarray, scales: Sequence[float], zero_points: Sequence[int], bits: int | None
) -> int | None:
    if q is None or q.shape != w.shape or not np.issubdtype(q.dtype, np.integer) or not scales:
        return None
    scale = np.asarray(scales, np.float64)
    zp = np.asarray(zero_points or (0,), np.float64)
    if scale.size not in (1, q.shape[-1]) or zp.size not in (1, q.shape[-1]) or not np.all(scale > 0):
        return None  # one scale, or one per output channel (the last axis, [kh, kw, c_in, c_out])
    lo, hi = _ends(q.dtype, bits)
    rounded = np.clip(np.round(w.astype(np.float64) / scale) + zp, lo, hi)
    return int(np.count_nonzero(rounded != q))


def _ends(dtype: np.dtype, bits: int | None) -> tuple[int, int]:
    """The integers a kernel may take: its type's ends, or a narrower signed width's (a 4-bit kernel
    kept in int8 clips at -8 and 7, not -128 and 127)."""
    info = np.iinfo(dtype)
    if bits and bits < info.bits and info.min < 0:
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return int(info.min), int(info.max)
