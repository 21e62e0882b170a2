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
import itertools
import json
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from loop.author import runnable, schema, shapes
from loop.author.normalize import normalize
from loop.author.yamlio import LineDict, line_of, load_yaml
from loop.core import modelfile
from loop.core.errors import LoopError
from loop.core.leftovers import scratch
from loop.judge.structure import Structure, analyse

OPSET = 17
INLINE_BELOW = 1 << 16  # an external tensor smaller than this is read in when a model is loaded


def _substitute(value: Any, params: Mapping[str, Any], where: tuple[str, int | None]) -> Any:
    if isinstance(value, str) and value.startswith("$"):
        if value[1:] not in params:
            raise LoopError(f"unknown recipe parameter '{value}'", file=where[0], line=where[1])
        return params[value[1:]]
    if isinstance(value, list):
        return [_substitute(v, params, where) for v in value]
    return value


MAX_RECIPE_BYTES = 2 << 30  # float32 weights plus activations of one frame; past this, refuse


def build_recipe(path: Path, overrides: Mapping[str, Any] | None = None) -> onnx.ModelProto:
    """Author the recipe at ``path`` as a float ONNX model, with ``overrides`` on its params.

    Every layer is validated and the model's memory estimated before any tensor exists."""
    raw = load_yaml(path)
    if not isinstance(raw, LineDict):
        raise LoopError("a recipe needs 'input' and 'layers'", file=str(path), line=line_of(raw))
    try:
        recipe = schema.validate_as(schema.Recipe, raw)
    except LoopError as exc:
        raise exc.where(file=str(path)) from None
    params = dict(recipe.params or {})
    unknown = set(overrides or {}) - set(params)
    if unknown:
        raise LoopError(
            f"recipe {path.name} has no parameter '{sorted(unknown)[0]}' "
            f"(it has: {', '.join(sorted(params)) or 'none'})",
            field="params",
        )
    params.update(overrides or {})
    shape, layers = _resolve(path, raw, params)
    _check_size(shape, layers)
    rng = np.random.default_rng(recipe.seed)
    x = helper.make_tensor_value_info(recipe.input.name, TensorProto.FLOAT, shape)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    tensor, channels = x.name, shape[1]
    for layer in layers:
        tensor, channels = _conv(layer, tensor, channels, rng, nodes, inits)
    out_shape = _infer_out_shape(nodes, inits, x, tensor)
    y = helper.make_tensor_value_info(tensor, TensorProto.FLOAT, out_shape)
    graph = helper.make_graph(nodes, str(recipe.name or path.stem), [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _resolve(path: Path, raw: LineDict, params: Mapping[str, Any]) -> tuple[list[int], list[schema.RecipeLayer]]:
    """The input shape and the layers with ``$param``s substituted, each validated at its line."""
    spec = raw["input"]
    shape = _substitute(list(spec["shape"]), params, (str(path), line_of(spec)))
    if len(shape) != 4 or not all(isinstance(d, int) and not isinstance(d, bool) and 0 < d <= 1 << 20 for d in shape):
        raise LoopError(
            f"input shape must be 4 positive whole numbers (NCHW), got {shape}",
            file=str(path),
            line=line_of(spec, "shape"),
            field="input.shape",
        )
    layers = []
    for i, node in enumerate(raw["layers"]):
        if not isinstance(node, LineDict):
            raise LoopError(
                "a recipe layer is a mapping", file=str(path), line=raw["layers"].item_lines[i], field=f"layers[{i}]"
            )
        done = LineDict((k, _substitute(v, params, (str(path), node.line_of(k)))) for k, v in node.items())
        done.line, done.key_lines = node.line, node.key_lines
        try:
            layers.append(schema.validate_as(schema.RecipeLayer, done))
        except LoopError as exc:
            exc.field = f"layers[{i}].{exc.field}" if exc.field else f"layers[{i}]"
            raise exc.where(file=str(path)) from None
    return shape, layers


def _check_size(shape: list[int], layers: list[schema.RecipeLayer]) -> None:
    """Refuse a recipe whose float32 weights and activations (one frame) would not fit, before
    allocating any of them: 100000 x 100000 params once asked numpy for 1.75 TiB."""
    channels, height, width = shape[1], shape[2], shape[3]
    weights, activations = 0, channels * height * width
    for layer in layers:
        weights += layer.out * channels * layer.kernel**2 + layer.out
        height = (height + 2 * (layer.kernel // 2) - layer.kernel) // layer.stride + 1
        width = (width + 2 * (layer.kernel // 2) - layer.kernel) // layer.stride + 1
        if height < 1 or width < 1:
            raise LoopError(f"layer '{layer.name}' leaves no pixels ({height} x {width})", field="params")
        channels = layer.out
        activations += channels * height * width
    size = 4 * (weights + activations)
    if size > MAX_RECIPE_BYTES:
        raise LoopError(
            f"the recipe's tensors would take {size / 2**30:.1f} GiB (weights {4 * weights / 2**30:.1f}, "
            f"activations {4 * activations / 2**30:.1f}), more than {MAX_RECIPE_BYTES / 2**30:g} GiB",
            field="params",
        )


def _conv(
    layer: schema.RecipeLayer, x: str, c_in: int, rng: np.random.Generator, nodes: list, inits: list
) -> tuple[str, int]:
    name, c_out, k = layer.name, layer.out, layer.kernel
    std = layer.weight_std if layer.weight_std is not None else float(np.sqrt(2.0 / (c_in * k * k)))
    w = rng.normal(layer.weight_mean, std, (c_out, c_in, k, k)).astype(np.float32)
    b = rng.normal(layer.bias_mean, layer.bias_std, c_out)
    inits += [
        numpy_helper.from_array(w, f"{name}.weight"),
        numpy_helper.from_array(b.astype(np.float32), f"{name}.bias"),
    ]
    out = f"{name}_out" if layer.act == "none" else f"{name}_pre"
    pad = k // 2
    nodes.append(
        helper.make_node(
            "Conv",
            [x, f"{name}.weight", f"{name}.bias"],
            [out],
            name=name,
            kernel_shape=[k, k],
            pads=[pad] * 4,
            strides=[layer.stride] * 2,
        )
    )
    if layer.act == "relu":
        nodes.append(helper.make_node("Relu", [out], [f"{name}_out"], name=f"{name}_relu"))
    elif layer.act == "relu6":
        inits += [
            numpy_helper.from_array(np.array(0.0, np.float32), f"{name}_min"),
            numpy_helper.from_array(np.array(6.0, np.float32), f"{name}_max"),
        ]
        nodes.append(
            helper.make_node("Clip", [out, f"{name}_min", f"{name}_max"], [f"{name}_out"], name=f"{name}_relu6")
        )
    return f"{name}_out", c_out


def _infer_out_shape(nodes: list, inits: list, x: onnx.ValueInfoProto, y: str) -> list[int]:
    probe = helper.make_graph(nodes, "probe", [x], [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)], inits)
    model = onnx.shape_inference.infer_shapes(helper.make_model(probe, opset_imports=[helper.make_opsetid("", OPSET)]))
    dims = model.graph.output[0].type.tensor_type.shape.dim
    return [d.dim_value for d in dims]


def load_onnx(
    path: Path, notes: list[str] | None = None, given_shapes: Mapping[str, Sequence[int]] | None = None
) -> onnx.ModelProto:
    """Load a user's model as loop runs it: local functions inlined and what ONNX Runtime cannot
    run refused (:mod:`loop.author.runnable`), every node named, every weight an initializer
    (:mod:`loop.author.normalize`), opset 13 or later where ONNX can convert it, static input
    shapes (``given_shapes``, else a dynamic batch of 1) and output shapes resolved from them
    (:mod:`loop.author.shapes`). What was changed is appended to ``notes``."""
    try:
        modelfile.model_files(path, modelfile.read_graph(path))
        # checked from the file: the proto's check serializes a copy of the whole model
        onnx.checker.check_model(str(path))
        # its large tensors left in their files, mapped where read (loop.core.modelfile): this
        # process never holds the weights; small ones (shapes, constants) read in for the analyses
        model = modelfile.load_model(path, data=False, inline_below=INLINE_BELOW)
    except LoopError:
        raise
    except Exception as exc:
        raise modelfile.unreadable(path, exc) from None
    model, changed = runnable.inline_functions(model, path)
    shapes.refuse_control_flow(model, path)
    _name_nodes(model, path)
    runnable.refuse_unrunnable(model, path)
    changed += normalize(model)
    model, upgraded = shapes.upgrade_opset(model)
    changed += upgraded
    changed += shapes.fix_inputs(model, path, given_shapes)
    changed += shapes.resolve_outputs(model, path)
    if notes is not None:
        notes.extend(changed)
    return model


def _name_nodes(model: onnx.ModelProto, path: Path) -> None:
    names = [n.name for n in model.graph.node if n.name]
    twice = sorted(name for name, n in Counter(names).items() if n > 1)
    if twice:
        raise LoopError(f"{path}: node name '{twice[0]}' is used by more than one node; layers are named by node")
    taken = set(names)
    for i, node in enumerate(model.graph.node):
        if not node.name:
            node.name = _free(f"{node.op_type}_{i}", taken)
            taken.add(node.name)


def _free(name: str, taken: set[str]) -> str:
    """``name``, or the first of ``name1``, ``name2``... not taken. Candidates are made only when
    needed: a tuple of them per node made 100,000 unnamed nodes take seconds (collector passes)."""
    if name not in taken:
        return name
    return next(f"{name}{k}" for k in itertools.count(1) if f"{name}{k}" not in taken)


def parse_input_shapes(items: Sequence[str]) -> dict[str, list[int]]:
    """``NAME=1,3,320,320`` items (``loop layers --input-shape``) as the sweep file's input_shapes."""
    out: dict[str, list[int]] = {}
    for item in items:
        name, sep, dims = item.rpartition("=")
        try:
            shape = [int(d) for d in dims.split(",")]
        except ValueError:
            shape = []
        if not sep or not name or not shape or min(shape) < 1:
            raise LoopError(f"--input-shape {item!r} is not NAME=D,D,... with whole dimensions >= 1")
        out[name] = shape
    return out


def load_base(
    path: Path,
    params: Mapping[str, Any] | None = None,
    notes: list[str] | None = None,
    given_shapes: Mapping[str, Sequence[int]] | None = None,
) -> onnx.ModelProto:
    if not path.exists():
        raise LoopError(f"base model {path} not found")
    if path.suffix in (".yaml", ".yml"):
        if given_shapes:
            raise LoopError(
                f"'input_shapes' applies to .onnx bases; recipe {path.name} sets its shape with params",
                field="input_shapes",
            )
        return build_recipe(path, params)
    if params:
        raise LoopError(f"'params' applies to recipes (.yaml) only, not {path.name}", field="params")
    return load_onnx(path, notes, given_shapes)


def input_shapes(model: onnx.ModelProto, structure: Structure) -> dict[str, tuple[int, ...]]:
    """Each input's shape, by name, in the model's order."""
    values = {v.name: v for v in model.graph.input}
    return {name: tuple(int(d.dim_value) for d in values[name].type.tensor_type.shape.dim) for name in structure.inputs}


@dataclass(frozen=True)
class Base:
    """A base network loaded once, as a file: the model as authored (what loading changed done),
    written where this process keeps its models (:func:`models_folder`), with its tensors beside it
    where it is large or came so; every variant of it is written in the same folder."""

    path: Path
    sha: str
    structure: Structure
    shapes: dict[str, tuple[int, ...]]
    notes: tuple[str, ...]
    dtypes: dict[str, str] = field(default_factory=dict)  # inputs that are not floating point
    external: bool = False  # its large tensors in a data file beside it

    @property
    def shape(self) -> tuple[int, ...]:
        """The first input's shape."""
        return next(iter(self.shapes.values()), ())

    def graph(self) -> onnx.ModelProto:
        """The model without its external tensors' data (references to the files beside it)."""
        return modelfile.read_graph(self.path)


def load(path: Path, params: dict[str, Any] | None, given_shapes: Mapping[str, Sequence[int]] | None = None) -> Base:
    """The base at ``path`` with ``params`` and input shapes; loaded once per content, so a
    sweep of many variants (and the sweep file's own check) reads and writes a large model once."""
    stat = path.stat() if path.exists() else None
    stamp = (stat.st_mtime_ns, stat.st_size) if stat else None
    given = json.dumps({k: list(v) for k, v in (given_shapes or {}).items()}, sort_keys=True)
    return _load(str(path), json.dumps(params, sort_keys=True, default=str), given, stamp)


@lru_cache(maxsize=4)
def _load(path: str, params: str, given: str, stamp: tuple[int, int] | None) -> Base:
    notes: list[str] = []
    model = load_base(Path(path), json.loads(params), notes, json.loads(given) or None)
    structure = analyse(model)
    shapes_, dtypes = input_shapes(model, structure), shapes.non_float_inputs(model)
    external = _left_in_files(model) or modelfile.tensor_bytes(model) > modelfile.EXTERNAL_FROM
    folder = models_folder() / hashlib.sha256(f"{path}\0{params}\0{given}\0{stamp}".encode()).hexdigest()[:16]
    written, sha = modelfile.write_model(model, folder, external, "base")
    return Base(written, sha, structure, shapes_, tuple(notes), dtypes, external)


def _left_in_files(model: onnx.ModelProto) -> bool:
    """Whether loading left tensors in the user's files (large ones of a model with external data)."""
    from onnx.external_data_helper import _get_all_tensors

    return any(modelfile.knows_folder(t) for t in _get_all_tensors(model))


_MODELS: list[tempfile.TemporaryDirectory[str]] = []


def models_folder() -> Path:
    """This process's folder of models as loop wrote them (bases and their variants), removed
    when it exits; a killed process's is removed by the next sweep (:mod:`loop.core.leftovers`)."""
    if not _MODELS:
        _MODELS.append(scratch("models"))
    return Path(_MODELS[0].name)
