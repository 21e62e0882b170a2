"""Base networks: build them from ``graphs/*.yaml`` recipes, or load any ``.onnx`` model.

A recipe is deterministic from its seed::

    name: two_conv
    seed: 0
    params: {height: 32, width: 32}        # defaults; a sweep or variant may override
    input: {name: input, shape: [1, 3, $height, $width]}
    layers:
      - {name: conv1, op: conv, out: 16, kernel: 3, act: relu, weight_std: 0.25}
      - {name: conv2, op: conv, out: 8, kernel: 3}
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from loop.errors import LoopError
from loop.normalize import normalize
from loop.structure import Structure, analyse
from loop.yamlio import LineDict, line_of, load_yaml

OPSET = 17
ACTIVATIONS = ("none", "relu", "relu6")
LAYER_KEYS = {"name", "op", "out", "kernel", "stride", "act", "weight_std", "weight_mean",
              "bias_std", "bias_mean"}


def _substitute(value: Any, params: Mapping[str, Any], where: tuple[str, int | None]) -> Any:
    if isinstance(value, str) and value.startswith("$"):
        if value[1:] not in params:
            raise LoopError(f"unknown recipe parameter '{value}'", file=where[0], line=where[1])
        return params[value[1:]]
    if isinstance(value, list):
        return [_substitute(v, params, where) for v in value]
    return value


def build_recipe(path: Path, overrides: Mapping[str, Any] | None = None) -> onnx.ModelProto:
    """Author the recipe at ``path`` as a float ONNX model, with ``overrides`` on its params."""
    recipe = load_yaml(path)
    if not isinstance(recipe, LineDict) or "layers" not in recipe or "input" not in recipe:
        raise LoopError("a recipe needs 'input' and 'layers'", file=str(path), line=line_of(recipe))
    params = dict(recipe.get("params") or {})
    unknown = set(overrides or {}) - set(params)
    if unknown:
        raise LoopError(f"recipe {path.name} has no parameter '{sorted(unknown)[0]}' "
                        f"(it has: {', '.join(sorted(params)) or 'none'})", field="params")
    params.update(overrides or {})
    rng = np.random.default_rng(int(recipe.get("seed", 0)))
    spec = recipe["input"]
    shape = _substitute(list(spec["shape"]), params, (str(path), line_of(spec)))
    if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):
        raise LoopError(f"input shape must be positive whole numbers, got {shape}", file=str(path),
                        line=line_of(spec), field="input.shape")
    x = helper.make_tensor_value_info(spec.get("name", "input"), TensorProto.FLOAT, shape)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    tensor, channels = x.name, shape[1]
    for layer in recipe["layers"]:
        where = (str(path), line_of(layer))
        layer = {k: _substitute(v, params, where) for k, v in layer.items()}
        tensor, channels = _conv(layer, tensor, channels, rng, nodes, inits, where)
    out_shape = _infer_out_shape(nodes, inits, x, tensor)
    y = helper.make_tensor_value_info(tensor, TensorProto.FLOAT, out_shape)
    graph = helper.make_graph(nodes, str(recipe.get("name", path.stem)), [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _conv(layer: dict, x: str, c_in: int, rng: np.random.Generator, nodes: list, inits: list,
          where: tuple[str, int | None]) -> tuple[str, int]:
    unknown = set(layer) - LAYER_KEYS
    if unknown or layer.get("op", "conv") != "conv" or "name" not in layer or "out" not in layer:
        bad = sorted(unknown)[0] if unknown else ("op" if "name" in layer and "out" in layer else "name/out")
        raise LoopError("a recipe layer is {name, op: conv, out, kernel, stride, act, ...}",
                        file=where[0], line=where[1], field=bad)
    name, c_out, k = str(layer["name"]), int(layer["out"]), int(layer.get("kernel", 3))
    std = float(layer["weight_std"]) if "weight_std" in layer else float(np.sqrt(2.0 / (c_in * k * k)))
    w = rng.normal(float(layer.get("weight_mean", 0.0)), std, (c_out, c_in, k, k)).astype(np.float32)
    b = rng.normal(float(layer.get("bias_mean", 0.0)), float(layer.get("bias_std", 0.05)), c_out)
    inits += [numpy_helper.from_array(w, f"{name}.weight"),
              numpy_helper.from_array(b.astype(np.float32), f"{name}.bias")]
    act = str(layer.get("act", "none"))
    if act not in ACTIVATIONS:
        raise LoopError(f"unknown activation '{act}' (known: {', '.join(ACTIVATIONS)})",
                        file=where[0], line=where[1], field="act")
    out = f"{name}_out" if act == "none" else f"{name}_pre"
    pad = k // 2
    stride = int(layer.get("stride", 1))
    nodes.append(helper.make_node("Conv", [x, f"{name}.weight", f"{name}.bias"], [out], name=name,
                                  kernel_shape=[k, k], pads=[pad] * 4, strides=[stride] * 2))
    if act == "relu":
        nodes.append(helper.make_node("Relu", [out], [f"{name}_out"], name=f"{name}_relu"))
    elif act == "relu6":
        inits += [numpy_helper.from_array(np.array(0.0, np.float32), f"{name}_min"),
                  numpy_helper.from_array(np.array(6.0, np.float32), f"{name}_max")]
        nodes.append(helper.make_node("Clip", [out, f"{name}_min", f"{name}_max"], [f"{name}_out"],
                                      name=f"{name}_relu6"))
    return f"{name}_out", c_out


def _infer_out_shape(nodes: list, inits: list, x: onnx.ValueInfoProto, y: str) -> list[int]:
    probe = helper.make_graph(nodes, "probe", [x], [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)], inits)
    model = onnx.shape_inference.infer_shapes(helper.make_model(probe, opset_imports=[helper.make_opsetid("", OPSET)]))
    dims = model.graph.output[0].type.tensor_type.shape.dim
    return [d.dim_value for d in dims]


def load_onnx(path: Path, notes: list[str] | None = None) -> onnx.ModelProto:
    """Load a user's model, give every node a name, hold every weight as an initializer
    (see :mod:`loop.normalize`) and pin a dynamic batch dimension to 1. What was changed
    is appended to ``notes``."""
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except Exception as exc:  # noqa: BLE001 - any failure here means an unreadable model
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LoopError(f"unreadable ONNX model {path}: {first}") from None
    _name_nodes(model, path)
    changed = normalize(model)
    changed += _pin_batch(model, path)
    if notes is not None:
        notes.extend(changed)
    return model


def _name_nodes(model: onnx.ModelProto, path: Path) -> None:
    names = [n.name for n in model.graph.node if n.name]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise LoopError(f"{path}: node name '{twice[0]}' is used by more than one node; layers are named by node")
    taken = set(names)
    for i, node in enumerate(model.graph.node):
        if not node.name:
            node.name = next(n for n in (f"{node.op_type}_{i}{s}" for s in ("", *map(str, range(1, 99)))) if n not in taken)
            taken.add(node.name)


def _pin_batch(model: onnx.ModelProto, path: Path) -> list[str]:
    inits = {t.name for t in model.graph.initializer}
    notes = []
    for value in model.graph.input:
        if value.name in inits:
            continue
        for j, dim in enumerate(value.type.tensor_type.shape.dim):
            if not dim.HasField("dim_value"):
                if j != 0:
                    raise LoopError(f"{path}: input '{value.name}' has a dynamic dimension {j}; "
                                    "export it with a static shape")
                dim.dim_value = 1
                notes.append(f"input '{value.name}': dynamic batch dimension fixed to 1")
    return notes


def load_base(path: Path, params: Mapping[str, Any] | None = None,
              notes: list[str] | None = None) -> onnx.ModelProto:
    if not path.exists():
        raise LoopError(f"base model {path} not found")
    if path.suffix in (".yaml", ".yml"):
        return build_recipe(path, params)
    if params:
        raise LoopError(f"'params' applies to recipes (.yaml) only, not {path.name}", field="params")
    return load_onnx(path, notes)


def input_shapes(model: onnx.ModelProto, structure: Structure) -> dict[str, tuple[int, ...]]:
    """Each input's shape, by name, in the model's order."""
    values = {v.name: v for v in model.graph.input}
    return {name: tuple(int(d.dim_value) for d in values[name].type.tensor_type.shape.dim)
            for name in structure.inputs}


@dataclass(frozen=True)
class Base:
    """A base network loaded once: its ONNX bytes as authored, and what loading changed."""

    data: bytes
    sha: str
    structure: Structure
    shapes: dict[str, tuple[int, ...]]
    notes: tuple[str, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        """The first input's shape."""
        return next(iter(self.shapes.values()), ())


def load(path: Path, params: dict[str, Any] | None) -> Base:
    """The base at ``path`` with ``params``; loaded once per content, so a sweep of many
    variants (and the sweep file's own check) reads and serializes a large model once."""
    stat = path.stat() if path.exists() else None
    stamp = (stat.st_mtime_ns, stat.st_size) if stat else None
    return _load(str(path), json.dumps(params, sort_keys=True, default=str), stamp)


@lru_cache(maxsize=4)
def _load(path: str, params: str, stamp: tuple[int, int] | None) -> Base:
    notes: list[str] = []
    model = load_base(Path(path), json.loads(params), notes)
    structure = analyse(model)
    data = model.SerializeToString(deterministic=True)
    return Base(data, hashlib.sha256(data).hexdigest(), structure, input_shapes(model, structure), tuple(notes))
