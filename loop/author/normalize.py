"""A user's ONNX model in the one form the rest of loop reads: weights as initializers.

Exports hold weights in several ways that all mean "a constant": ``Constant`` nodes,
``Identity`` nodes over an initializer (shared weights), and initializers that are also
listed in ``graph.input`` (IR < 4, the old model-zoo style). A quantizer sees only
initializers as weights, so each of these is rewritten into a plain initializer; the
function of the model does not change. Every rewrite is returned as a note for the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

# Attributes of a Constant node, and how to read each one as a tensor.
_CONSTANT_ATTRS = ("value", "value_float", "value_floats", "value_int", "value_ints")


def _constant_tensor(node: onnx.NodeProto) -> onnx.TensorProto | None:
    attr = next((a for a in node.attribute if a.name in _CONSTANT_ATTRS), None)
    if attr is None:
        return None  # sparse or string constants are not weights
    if attr.name == "value":
        tensor = onnx.TensorProto()
        tensor.CopyFrom(attr.t)
    else:
        tensor = numpy_helper.from_array(np.asarray(helper.get_attribute_value(attr)))
    tensor.name = node.output[0]
    return tensor


def constants_to_initializers(model: onnx.ModelProto) -> int:
    """Replace every ``Constant`` node that holds a tensor by an initializer of its output's name."""
    graph = model.graph
    tensors = [_constant_tensor(n) if n.op_type == "Constant" else None for n in graph.node]
    graph.initializer.extend(t for t in tensors if t is not None)
    _keep_only(graph.node, [t is None for t in tensors])
    return sum(t is not None for t in tensors)


def _keep_only(items: Any, keep: Sequence[bool]) -> None:
    """Keep the messages of a repeated field whose flag is set, in order, in one pass: removing
    them one at a time searches the field each time (minutes for 100,000 nodes)."""
    if all(keep):
        return
    kept = []
    for item, wanted in zip(items, keep, strict=True):
        if wanted:
            kept.append(type(item)())
            kept[-1].CopyFrom(item)  # a copy: the field's own elements go with the field's contents
    del items[:]
    items.extend(kept)


def bypass_identities(model: onnx.ModelProto) -> int:
    """Point consumers of ``Identity(initializer)`` at the initializer itself."""
    graph = model.graph
    inits = {t.name for t in graph.initializer}
    outputs = {o.name for o in graph.output}
    bypass = [n.op_type == "Identity" and n.input[0] in inits and n.output[0] not in outputs for n in graph.node]
    rename = {n.output[0]: n.input[0] for n, gone in zip(graph.node, bypass, strict=True) if gone}
    _keep_only(graph.node, [not gone for gone in bypass])
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in rename:
                node.input[i] = rename[name]
    return len(rename)


def drop_initializer_inputs(model: onnx.ModelProto) -> int:
    """Initializers listed as graph inputs are weights, not inputs: unlist them (IR >= 4
    allows an initializer that is not an input)."""
    graph = model.graph
    inits = {t.name for t in graph.initializer}
    listed = [v.name in inits for v in graph.input]
    _keep_only(graph.input, [not x for x in listed])
    if any(listed):
        model.ir_version = max(model.ir_version, 4)
    return sum(listed)


def normalize(model: onnx.ModelProto) -> list[str]:
    """Rewrite ``model`` in place; return one note per kind of rewrite made."""
    notes = []
    for count, what in (
        (constants_to_initializers(model), "Constant nodes made initializers"),
        (bypass_identities(model), "Identity nodes over initializers bypassed"),
        (drop_initializer_inputs(model), "initializers unlisted from the graph inputs"),
    ):
        if count:
            notes.append(f"{count} {what}")
    return notes
