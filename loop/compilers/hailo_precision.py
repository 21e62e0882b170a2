"""Precision in the Dataflow Compiler's model script: which DFC layer an ONNX node became, and the
``precision_mode`` and 4-bit share lines a compile's options write (docs/hailo.md, "Weight precision").

The modes are the ones public scripts show for Hailo-10H (hailo_model_zoo's ``cfg/alls/generic/``
and ``hailo15h/`` folders, which Hailo-10H resolves to): ``a8_w8``, ``a8_w4`` (``generic/yolov5m.alls``)
and ``a16_w16`` (``generic/centerpose_regnetx_800mf.alls``). ``a16_w8`` and ``a16_w8_a16`` appear only
under ``cfg/alls/hailo15l/``, so a layer asked for 16-bit activations with 4- or 8-bit weights is
refused rather than written in a mode no public source shows the chip taking.
"""

from __future__ import annotations

from difflib import SequenceMatcher

import numpy as np

from loop.compilers.hailo_options import target_arch
from loop.compilers.hailo_params import HailoCompileError
from loop.core.text import for_person
from loop.core.vocab import CompileOptions, WeightPrecision

MODES = ("a8_w4", "a8_w8", "a16_w16")  # what public scripts show Hailo-10H taking


def num(x: float) -> str:
    """Fixed-point, as public model scripts write them: ``repr`` gives ``1e-05``, which the
    DFC's script parser is not known to accept."""
    return np.format_float_positional(float(x), trim="0")


def dfc_layer(onnx_node: str, layer_names: dict[str, str]) -> str:
    """The DFC layer an ONNX node became, or a refusal naming the node and the nearest DFC layers:
    a name the DFC does not know would be refused by it, or matched to another layer."""
    if onnx_node in layer_names:
        return layer_names[onnx_node]
    best: dict[str, tuple[float, str]] = {}  # each DFC layer once, by its closest name
    for onnx, dfc in layer_names.items():
        score = max(SequenceMatcher(None, onnx_node, name).ratio() for name in (onnx, dfc))
        if score > best.get(dfc, (-1.0, ""))[0]:
            best[dfc] = (score, onnx)
    ranked = sorted(best.items(), key=lambda item: -item[1][0])[:3]
    near = ", ".join(f"{for_person(dfc)} (from {for_person(onnx)})" for dfc, (_, onnx) in ranked)
    raise HailoCompileError(
        f"ONNX node '{for_person(onnx_node)}' has no Dataflow Compiler layer (no layer of the parsed "
        f"network lists it among its original names); nearest DFC layers: {near or 'none'}"
    )


def precision_lines(options: CompileOptions, layer_names: dict[str, str]) -> list[str]:
    """``quantization_param(LAYER, precision_mode=...)`` once per DFC layer (the ONNX nodes of a fused
    layer share it), as hailo_model_zoo's scripts write it: ``a16_w16`` for a 16-bit output
    (centerpose_regnetx_800mf.alls), ``a8_w4``/``a8_w8`` for ``weights: 4``/``8`` (yolov5m.alls), and
    ``a16_w16`` for ``weights: 16``, the only public mode with 16-bit weights. Of several weight
    settings reaching one DFC layer the later wins, as a later script line does."""
    refuse_float_layers(options)
    refuse_mixed_modes(options)
    wide = {dfc_layer(p.layer, layer_names): p.layer for p in options.precisions if p.bits == 16}
    modes = dict.fromkeys(wide, "a16_w16")
    for layer, w in {dfc_layer(w.layer, layer_names): w for w in options.weight_bits}.items():
        if layer in wide and w.bits != 16:
            raise _mixed(w, f"DFC layer {layer}, 16-bit output asked on '{for_person(wide[layer])}'", options)
        modes[layer] = "a16_w16" if w.bits == 16 else f"a8_w{w.bits}"
    return [f"quantization_param({layer}, precision_mode={mode})" for layer, mode in modes.items()]


def share_lines(options: CompileOptions) -> list[str]:
    """The DFC's own choice of 4-bit layers for ``weights_4bit_share``: Hailo's compression inspector
    reads ``model_optimization_config(compression_params, auto_4bit_weights_ratio=R)`` from a model script
    (Hailo-Application-Code-Examples, ``inspectors/compression_inspector.py``)."""
    share = options.weights_4bit_share
    return (
        []
        if share is None
        else [f"model_optimization_config(compression_params, auto_4bit_weights_ratio={num(share)})"]
    )


def refuse_float_layers(options: CompileOptions) -> None:
    """The DFC quantizes every layer it compiles (its precision modes are a8/a16 with w4/w8/w16;
    none keeps a layer in float), so ``bits: 32`` is refused rather than compiled at 8 or 16."""
    kept = [p.layer for p in options.precisions if p.bits == 32]
    if kept:
        raise HailoCompileError(
            f"precision bits 32 on '{kept[0]}': the Dataflow Compiler has no float layer (its precision "
            "modes are 8- and 16-bit, e.g. a16_w16); use bits: 16"
        )


def refuse_mixed_modes(options: CompileOptions) -> None:
    """A node asked for a 16-bit output and 4- or 8-bit weights (``a16_w4``/``a16_w8``) is refused before
    any DFC call; the same on nodes fused into one DFC layer is refused once the HN names them
    (:func:`precision_lines`)."""
    wide = {p.layer for p in options.precisions if p.bits == 16}
    mixed = [w for w in options.weight_bits if w.layer in wide and w.bits != 16]
    if mixed:
        raise _mixed(mixed[0], "with bits: 16 on the same node", options)


def _mixed(w: WeightPrecision, where: str, options: CompileOptions) -> HailoCompileError:
    arch = target_arch(options)
    return HailoCompileError(
        f"precision on '{for_person(w.layer)}' ({where}): 16-bit activations with {w.bits}-bit weights "
        f"(a16_w{w.bits}) is a mode no public script shows {arch} taking; its modes are {', '.join(MODES)} "
        "(weights: 16 alone is a16_w16)"
    )
