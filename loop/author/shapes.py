"""An exported model made static and runnable as loop runs it: input shapes, output shapes,
the opset, control flow.

Exports carry symbolic dimensions (``['p2o.DynamicDimension.0', 3, 'H', 'W']``,
``[1, 84, 'anchors']``). Frames, device layouts and byte counts need numbers, so each input
dimension is fixed first (from the sweep's ``input_shapes``, as the Dataflow Compiler's
``net_input_shapes``; a dynamic batch alone becomes 1), then every output dimension is
resolved from them by ONNX's shape inference, and where that cannot, by running the model
once. Every change is returned as a note for the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from loop.core.errors import LoopError

FLOAT_TYPES = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BFLOAT16)
CONTROL_FLOW = ("If", "Loop", "Scan")
QUANTIZABLE = ("Conv", "ConvTranspose", "Gemm", "MatMul")
PER_CHANNEL_OPSET = 13  # DequantizeLinear takes `axis` (one scale per channel) from opset 13


def _dims(value: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in value.type.tensor_type.shape.dim]


def _text(dims: Sequence[int | str]) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    inits = {t.name for t in model.graph.initializer}
    return [v for v in model.graph.input if v.name not in inits]


def fix_inputs(model: onnx.ModelProto, path: Path, given: Mapping[str, Sequence[int]] | None) -> list[str]:
    """Give every input a static shape, in place: ``given`` by name, else a dynamic batch of 1.

    A dimension the model fixes must be given as it is (the rest of the graph was exported
    for it); any other dynamic dimension is refused with the key that gives it."""
    given = dict(given or {})
    inputs = graph_inputs(model)
    unknown = sorted(set(given) - {v.name for v in inputs})
    if unknown:
        names = ", ".join(v.name for v in inputs)
        raise LoopError(f"{path.name} has no input '{unknown[0]}' (its inputs: {names})", field="input_shapes")
    notes = []
    for value in inputs:
        dims = _dims(value)
        if value.name in given:
            notes += _set_given(value, dims, list(given[value.name]), path)
            continue
        for j, d in enumerate(dims):
            if isinstance(d, int) and d > 0:
                continue
            if j != 0:
                hint = [x if isinstance(x, int) and x > 0 else (1 if i == 0 else "?") for i, x in enumerate(dims)]
                raise LoopError(
                    f"{path.name}: input '{value.name}' has dynamic dimensions {_text(dims)}; give its shape in "
                    f"the sweep file, input_shapes: {{{value.name}: {_text(hint)}}}, or to loop layers, "
                    f"--input-shape {value.name}={','.join(map(str, hint))}",
                    field="input_shapes",
                )
            value.type.tensor_type.shape.dim[0].dim_value = 1
            notes.append(f"input '{value.name}': dynamic batch dimension fixed to 1")
    return notes


def _set_given(value: onnx.ValueInfoProto, dims: list[int | str], shape: list[int], path: Path) -> list[str]:
    if len(shape) != len(dims):
        raise LoopError(
            f"input_shapes gives '{value.name}' {len(shape)} dimensions, {path.name} has {len(dims)}: {_text(dims)}",
            field=f"input_shapes.{value.name}",
        )
    for j, (had, want) in enumerate(zip(dims, shape, strict=True)):
        if isinstance(had, int) and had > 0 and had != want:
            raise LoopError(
                f"input_shapes gives '{value.name}' dimension {j} as {want}; {path.name} fixes it at {had} "
                f"({_text(dims)})",
                field=f"input_shapes.{value.name}",
            )
    if all(isinstance(d, int) and d > 0 for d in dims):
        return []
    for dim, want in zip(value.type.tensor_type.shape.dim, shape, strict=True):
        dim.dim_value = want
    return [f"input '{value.name}': {_text(dims)} fixed to {_text(shape)} (input_shapes)"]


def resolve_outputs(model: onnx.ModelProto, path: Path) -> list[str]:
    """Give every graph output static dimensions, in place, from the now static inputs."""
    open_outputs = [v for v in model.graph.output if not _static(v)]
    if not open_outputs:
        return []
    shapes = _inferred(model) or {}
    missing = [v.name for v in open_outputs if v.name not in shapes]
    how = "shape inference"
    if missing:
        shapes.update(_run_once(model, path, missing))
        how = "one run of the model"
    notes = []
    for value in open_outputs:
        before, after = _dims(value), shapes[value.name]
        value.type.tensor_type.shape.Clear()
        for d in after:
            value.type.tensor_type.shape.dim.add().dim_value = d
        notes.append(f"output '{value.name}': {_text(before)} resolved to {_text(after)} by {how}")
    return notes


def _static(value: onnx.ValueInfoProto) -> bool:
    t = value.type.tensor_type
    return t.HasField("shape") and all(d.HasField("dim_value") and d.dim_value > 0 for d in t.shape.dim)


def _inferred(model: onnx.ModelProto) -> dict[str, list[int]] | None:
    """Static output shapes as ONNX's shape inference (with data propagation) finds them."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    del probe.graph.value_info[:]  # symbolic entries from the export would merge back in
    for value in probe.graph.output:
        value.type.tensor_type.ClearField("shape")
    try:
        inferred = onnx.shape_inference.infer_shapes(probe, data_prop=True)
    except Exception:
        return None
    return {
        v.name: [int(d.dim_value) for d in v.type.tensor_type.shape.dim] for v in inferred.graph.output if _static(v)
    }


def _run_once(model: onnx.ModelProto, path: Path, names: list[str]) -> dict[str, list[int]]:
    """Output shapes from one inference on zeros: what shape inference could not follow
    (shapes computed from Shape ops through Concat and Reshape)."""
    from loop.core.sessions import session

    feeds = {
        v.name: np.zeros(
            [d.dim_value for d in v.type.tensor_type.shape.dim],
            helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type),
        )
        for v in graph_inputs(model)
    }
    try:
        values = session(model, 1, "all").run(names, feeds)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise LoopError(
            f"{path.name}: output '{names[0]}' has a dynamic shape that shape inference cannot resolve, "
            f"and the model does not run on zeros to find it: {first[:200]}"
        ) from None
    return {name: [int(d) for d in np.shape(v)] for name, v in zip(names, values, strict=True)}


def refuse_control_flow(model: onnx.ModelProto, path: Path) -> None:
    """A layer inside an If, Loop or Scan body is out of the quantizer's and the audit's
    reach (they read the top graph); control flow over plain arithmetic is fine."""
    for node in model.graph.node:
        if node.op_type not in CONTROL_FLOW:
            continue
        inner = sorted({n.op_type for g in _bodies(node) for n in walk(g) if n.op_type in QUANTIZABLE})
        if inner:
            article = "an" if node.op_type == "If" else "a"
            raise LoopError(
                f"{path.name}: node '{node.name}' is {article} {node.op_type} whose body holds "
                f"{', '.join(inner)} layers; loop quantizes and audits the top graph only "
                "(export the model without control flow)"
            )


def _bodies(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    return [a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH] + [
        g for a in node.attribute if a.type == onnx.AttributeProto.GRAPHS for g in a.graphs
    ]


def walk(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    out = []
    stack = [graph]
    while stack:
        g = stack.pop()
        for node in g.node:
            out.append(node)
            stack.extend(_bodies(node))
    return out


def opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


def upgrade_opset(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    """A model below opset 13 converted to 13 by ONNX's version converter, so per-channel
    weights (a DequantizeLinear with ``axis``) can be written; the model as it was where the
    converter cannot, with why (per-channel is then refused up front)."""
    had = opset(model)
    if had >= PER_CHANNEL_OPSET:
        return model, []
    from onnx import version_converter

    try:
        converted = version_converter.convert_version(model, PER_CHANNEL_OPSET)
        onnx.checker.check_model(converted)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return model, [f"opset {had} kept: ONNX's version converter failed ({first[:160]})"]
    return converted, [f"opset {had} converted to {PER_CHANNEL_OPSET} by ONNX's version converter"]


def non_float_inputs(model: onnx.ModelProto) -> dict[str, str]:
    """Inputs whose type is not floating point, with their numpy dtype name."""
    return {
        v.name: np.dtype(helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type)).name
        for v in graph_inputs(model)
        if v.type.tensor_type.elem_type not in FLOAT_TYPES
    }
