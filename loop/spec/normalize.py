"""A user's ONNX model in the one form the rest of loop reads: weights as initializers.

Exports hold weights in several ways that all mean "a constant": ``Constant`` nodes,
``Identity`` nodes over an initializer (shared weights), and initializers that are also
listed in ``graph.input`` (IR < 4, the old model-zoo style). A quantizer sees only
initializers as weights, so each of these is rewritten into a plain initializer; the
function of the model does not change. Every rewrite is returned as a note for the run.
"""

from __future__ import annotations

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
    moved = 0
    for node in [n for n in graph.node if n.op_type == "Constant"]:
        tensor = _constant_tensor(node)
        if tensor is None:
            continue
        graph.initializer.append(tensor)
        graph.node.remove(node)
        moved += 1
    return moved


def bypass_identities(model: onnx.ModelProto) -> int:
    """Point consumers of ``Identity(initializer)`` at the initializer itself."""
    graph = model.graph
    inits = {t.name for t in graph.initializer}
    outputs = {o.name for o in graph.output}
    rename: dict[str, str] = {}
    for node in [n for n in graph.node if n.op_type == "Identity" and n.input[0] in inits]:
        if node.output[0] in outputs:
            continue
        rename[node.output[0]] = node.input[0]
        graph.node.remove(node)
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
    listed = [v for v in graph.input if v.name in inits]
    for value in listed:
        graph.input.remove(value)
    if listed:
        model.ir_version = max(model.ir_version, 4)
    return len(listed)


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
