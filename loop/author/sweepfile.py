"""The sweep file: parsed and validated into frozen values before anything is written.

Every error is a :class:`LoopError` naming the file, the line and the field.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from loop.author import schema
from loop.author.graphs import load
from loop.author.perturb import Calibration, Expect, Op, op_from, parse_expect
from loop.author.schema import MeasureSpec
from loop.author.yamlio import LineDict, LineList, line_of, lineless, load_yaml, regular_file
from loop.core.errors import LoopError
from loop.core.vocab import CompileOptions, CompileSettings
from loop.judge.structure import Structure

MAX_FRAME_BYTES = 2 << 30  # generated frames held at once: past this, refuse before allocating
# A backend's own compile keys are typed by its compiler's options_model (loop.author.schema adds
# them); a backend registered at run time without one (a plugin, a test's fake) names its keys
# here, and they pass to it as they are.
BACKEND_COMPILE_KEYS: dict[str, set[str]] = {}


class SweepFileWarning(UserWarning):
    """A key the sweep file sets that does not do what it seems to; the sweep still runs."""


class DataSpec(schema.Data):
    """A sweep's ``calibration:`` or ``inputs:`` resolved (its keys are :class:`schema.Data`'s,
    declared there once): ``count`` seeded frames (default 64), or the frames stored at ``path``
    (all of them when ``count`` is None), ``seed`` filled in from the sweep's, and a fixed value
    for each integer or boolean input (``inputs.constants``, which feed calibration too)."""

    def __init__(self, **data: Any) -> None:
        # seeded frames default to 64, and to the sweep's seed; what a sweep file sets is checked
        super().__init__(**{"count": 64, "seed": 0, **data})

    def __hash__(self) -> int:  # the frames it stands for key a cache; constants are a mapping
        return hash((self.count, self.seed, self.path, self.scale, tuple(sorted(self.pairs.items()))))

    @property
    def pairs(self) -> dict[str, float | int | bool]:
        """The constants, by input (none: empty)."""
        return dict(self.constants or {})


@dataclass(frozen=True)
class VariantSpec:
    name: str
    ops: tuple[Op, ...] = ()
    expect: Expect = field(default_factory=Expect)
    base: Path | None = None
    params: dict[str, Any] | None = None
    measure: MeasureSpec = field(default_factory=MeasureSpec)
    compile: CompileOptions | None = None  # the variant's own compile options, over the sweep's
    line: int | None = None

    @property
    def own_base(self) -> bool:
        return self.base is not None or self.params is not None


@dataclass(frozen=True)
class SweepSpec:
    name: str
    path: Path
    base: Path
    backend: str
    devices: tuple[str, ...]
    seed: int
    calibration: DataSpec
    inputs: DataSpec
    compile: CompileOptions
    params: dict[str, Any]
    measure: MeasureSpec
    variants: tuple[VariantSpec, ...]
    sha: str
    input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def variant_sha(self, variant: VariantSpec) -> str:
        """Hash of everything that defines one variant's run (for resume and provenance)."""
        blob = json.dumps([self.sha, variant.name], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()


def parse(path: Path, *, check_backends: bool = False, cluster: bool = False, generated: bool = False) -> SweepSpec:
    """Parse and validate ``path`` (layers included); raise :class:`LoopError` on anything bad.

    ``check_backends`` refuses a backend or device that cannot run on this machine (the CLI
    asks, so a sweep fails up front rather than in every variant); with ``cluster`` the
    compiler runs elsewhere, so only the devices, which always run here, are checked.
    ``generated``: a file loop wrote itself (a generation's), read with the fast loader, which
    knows no lines; one it finds bad is parsed again line by line, so the error still names its line."""
    if generated:
        try:
            return _parse(path, check_backends, cluster, fast=True)
        except LoopError:
            pass  # said again below, with its line
    try:
        return _parse(path, check_backends, cluster)
    except LoopError as exc:
        # Names and values from the file end up in the message: keep it one line whatever they hold.
        exc.message, exc.field = schema.printable(exc.message), exc.field and schema.printable(exc.field)
        exc.file = exc.file and schema.printable(exc.file)
        raise exc.where(file=schema.printable(path)) from None


def parse_document(raw: dict[str, Any], path: Path, held: Mapping[str, np.ndarray]) -> SweepSpec:
    """``raw`` as :func:`parse` reads the file at ``path`` holding it, before that file is written:
    a generation's document, its array references resolved from ``held`` (arrays by hash, hashed by
    the caller) rather than files. It knows no lines: a caller whose document is refused writes it
    and parses the file, so the error names its line (:mod:`loop.store.generations`)."""
    return _parse(path, False, False, raw=lineless(raw), held=held)


def _parse(
    path: Path,
    check_backends: bool,
    cluster: bool,
    fast: bool = False,
    raw: Any = None,
    held: Mapping[str, np.ndarray] | None = None,
) -> SweepSpec:
    raw = load_yaml(path, fast=fast) if raw is None else raw
    foreign = _foreign_keys(raw)
    model = schema.validate(_without(raw, foreign) if foreign else raw, path.parent, held)
    devices = _check_names(model, raw)
    if check_backends:
        _available(model.backend, devices, cluster, raw)
    _backend_keys(model, raw)
    measure = _measure(model.measure, MeasureSpec())
    compile_options = _hailo(model, raw, _compile(model.compile, extra=_extra(raw, foreign)))
    variants = tuple(
        _variant(i, v, raw["variants"][i], path.parent, measure, compile_options, foreign)
        for i, v in enumerate(model.variants)
    )
    _unique(variants, raw["variants"])
    spec = SweepSpec(
        name=str(model.sweep),
        path=path,
        base=path.parent / model.base,
        backend=model.backend,
        devices=devices,
        seed=model.seed,
        calibration=_data(model.calibration, model.seed, 64, _constants(model.inputs)),
        inputs=_data(model.inputs, model.seed + 1, 8, _constants(model.inputs)),
        compile=compile_options,
        params=dict(model.params or {}),
        measure=measure,
        variants=variants,
        sha=document_sha(raw),
        input_shapes={k: tuple(v) for k, v in (model.input_shapes or {}).items()},
    )
    _check_layers(spec, raw)
    _check_cut(spec, raw)
    return spec


def _hailo(model: schema.Sweep, raw: LineDict, options: CompileOptions) -> CompileOptions:
    """The ``hailo:`` section's keys, as the hailo backend's compile keys (so they key the compile)."""
    if model.hailo is None:
        return options
    # the backend that declares these keys as its own reads them; no other does
    from loop.core.registry import COMPILERS, compiler_class

    own = compiler_class(model.backend).options_model if model.backend in COMPILERS else None
    if own is None or not model.hailo.model_fields_set <= set(schema.section_keys(own)):
        raise LoopError(
            f"'hailo:' is read by the hailo backend only (this sweep's backend is {model.backend}); remove it",
            line=line_of(raw, "hailo"),
            field="hailo",
        )
    return _over(options, {k: getattr(model.hailo, k) for k in model.hailo.model_fields_set})


def _check_cut(spec: SweepSpec, raw: LineDict) -> None:
    """Each of ``hailo.start_nodes``/``end_nodes`` must name an ONNX node of the base, at its line."""
    from loop.author.cut import check_cut, cut_of

    section = raw.get("hailo")
    if not isinstance(section, LineDict):
        return
    base = load(spec.base, spec.params, spec.input_shapes).path
    try:
        check_cut(base, cut_of(spec.compile))
    except LoopError as exc:
        key, _, index = (exc.field or "").partition("[")
        items = section.get(key)
        at = int(index.rstrip("]")) if index else -1
        line = items.item_lines[at] if isinstance(items, LineList) and 0 <= at < len(items.item_lines) else None
        exc.field = f"hailo.{exc.field}"
        raise exc.where(line=line or line_of(section, key)) from None
    _ops_inside_cut(spec, base)


def _ops_inside_cut(spec: SweepSpec, base: Path) -> None:
    """A perturbation of a layer the cut leaves on the host is refused: loop does not run the host's
    pre- or post-processing, so its effect would never be measured, and would read ``no-effect``."""
    from loop.author.cut import cut_model, cut_of
    from loop.core.modelfile import load_model

    cut = cut_of(spec.compile)
    inside = {n.name for n in load_model(cut_model(base, cut), data=False).graph.node}
    for i, variant in enumerate(spec.variants):
        if variant.own_base:
            continue
        for j, op in enumerate(variant.ops):
            if op.layer is not None and op.layer not in inside:
                raise LoopError(
                    f"{op.label} on '{op.layer}' is outside the compiled network (hailo: start_nodes "
                    f"{list(cut[0])}, end_nodes {list(cut[1])}); loop does not run what the cut leaves on the "
                    "host, so its effect would never be measured",
                    field=f"variants[{i}].perturb[{j}].layer",
                ).where(line=variant.line)


def _foreign_keys(raw: Any) -> set[str]:
    """Compile keys of a registered backend that the schema does not declare."""
    backend = raw.get("backend") if isinstance(raw, dict) else None
    return (
        BACKEND_COMPILE_KEYS.get(backend, set()) - set(schema.compile_model().model_fields)
        if isinstance(backend, str)
        else set()
    )


def _without(raw: LineDict, keys: set[str]) -> LineDict:
    """A copy of ``raw`` whose ``compile:`` mappings lack ``keys`` (lines kept)."""
    out = _without_compile(raw, keys)
    variants = raw.get("variants")
    if isinstance(variants, LineList):
        items = LineList(_without_compile(v, keys) for v in variants)
        items.line, items.item_lines = variants.line, variants.item_lines
        out["variants"] = items
    return out


def _without_compile(node: Any, keys: set[str]) -> Any:
    if not (isinstance(node, LineDict) and isinstance(node.get("compile"), LineDict)):
        return _copy(node) if isinstance(node, LineDict) else node
    out = _copy(node)
    out["compile"] = _copy(node["compile"], keys)
    return out


def _copy(node: LineDict, drop: set[str] | None = None) -> LineDict:
    copy = LineDict((k, v) for k, v in node.items() if k not in (drop or ()))
    copy.line, copy.key_lines = node.line, node.key_lines
    return copy


def _extra(node: Any, foreign: set[str]) -> dict[str, Any]:
    options = node.get("compile") if isinstance(node, LineDict) else None
    return {k: v for k, v in options.items() if k in foreign} if isinstance(options, LineDict) else {}


def _check_names(model: schema.Sweep, raw: LineDict) -> tuple[str, ...]:
    """The backend and devices must be registered (the registry can grow at run time)."""
    from loop.core.registry import COMPILERS, DEFAULT_DEVICES, DEVICES, make_device, split_device

    if model.backend not in COMPILERS:
        raise LoopError(
            f"unknown backend '{model.backend}' (known: {', '.join(COMPILERS)})",
            line=line_of(raw, "backend"),
            field="backend",
        )
    listed = model.devices if model.devices is not None else DEFAULT_DEVICES.get(model.backend, ("onnxruntime",))
    devices = (listed,) if isinstance(listed, str) else tuple(listed)
    for d in devices:
        if split_device(d)[0] not in DEVICES:
            raise LoopError(
                f"unknown device '{d}' (known: {', '.join(DEVICES)})", line=line_of(raw, "devices"), field="devices"
            )
        if split_device(d)[1] is not None:
            try:
                make_device(d)  # the argument (a provider, a link) is checked before anything runs
            except LoopError as exc:
                raise LoopError(exc.message, line=line_of(raw, "devices"), field="devices") from exc
    return devices


def _available(backend: str, devices: tuple[str, ...], cluster: bool, raw: LineDict) -> None:
    from loop.core.registry import compiler_class, device_class

    if not cluster:
        ok, why = compiler_class(backend).available()
        if not ok:
            raise LoopError(
                f"backend '{backend}' cannot compile here ({why}); or compile on a cluster with --cluster",
                line=line_of(raw, "backend"),
                field="backend",
            )
    for name in devices:
        ok, why = device_class(name).available()
        if not ok:
            raise LoopError(
                f"device '{name}' cannot run here ({why})",
                line=line_of(raw, "devices" if "devices" in raw else "backend"),
                field="devices",
            )


def _backend_keys(model: schema.Sweep, raw: LineDict) -> None:
    """A backend's own compile keys mean nothing to another backend, and some of ours mean
    nothing to a backend (its compiler class says which): refuse rather than ignore."""
    from loop.core.registry import compiler_class

    refused = compiler_class(model.backend).refused_compile_keys
    owned = schema.backend_keys()
    own = set(owned.get(model.backend, ()))
    places = [("compile", model.compile, raw)] + [
        (f"variants[{i}].compile", v.compile, raw["variants"][i]) for i, v in enumerate(model.variants)
    ]
    for where, options, node in places:
        if options is None:
            continue
        for key, why in refused.items():
            if key in options.model_fields_set:
                raise LoopError(
                    f"'compile.{key}' would be ignored by the {model.backend} backend ({why}); remove it",
                    line=line_of(node["compile"], key),
                    field=f"{where}.{key}",
                )
        for key in [k for k in type(options).model_fields if k in options.model_fields_set - own]:
            owners = [b for b, keys in owned.items() if key in keys]
            if owners:
                raise LoopError(
                    f"'{key}' applies to backend {' or '.join(owners)} only",
                    line=line_of(node["compile"], key),
                    field=f"{where}.{key}",
                )


def _data(model: schema.Data | None, seed: int, default_count: int, constants: dict[str, Any] | None) -> DataSpec:
    model = model or schema.Data.model_validate({})
    stored = model.path is not None
    # Built from values the schema checked, unvalidated: the inputs' seed is the sweep's + 1,
    # which passes the file's bound when the sweep's is the largest (numpy takes any).
    return DataSpec.model_construct(
        count=model.count if model.count is not None else (None if stored else default_count),
        seed=seed if model.seed is None else model.seed,
        path=model.path,
        scale=None if model.scale is None else float(model.scale),
        constants=constants or None,
    )


def _constants(model: schema.Data | None) -> dict[str, Any] | None:
    """``inputs.constants``: they feed calibration too, since both run the same model."""
    return model.constants if model is not None else None


def _measure(model: schema.Measure | None, inherit: MeasureSpec) -> MeasureSpec:
    """The keys ``model`` sets, over ``inherit`` (a variant's over its sweep's)."""
    if model is None:
        return inherit
    return inherit.model_copy(update={k: getattr(model, k) for k in model.model_fields_set})


def _compile(
    model: schema.Compile | None, inherit: CompileOptions | None = None, extra: dict[str, Any] | None = None
) -> CompileOptions:
    """The keys ``model`` sets over ``inherit``; a backend's own keys go to ``backend_options``."""
    base = inherit or CompileOptions()
    if model is None:
        return base
    values = {k: getattr(model, k) for k in model.model_fields_set}
    settings = {k: v for k, v in values.items() if k in CompileSettings.model_fields}
    # a backend's own keys: it reads them itself
    return _over(base, {**(extra or {}), **{k: v for k, v in values.items() if k not in settings}}, settings)


def _over(base: CompileOptions, own: dict[str, Any], settings: dict[str, Any] | None = None) -> CompileOptions:
    """``base`` with ``settings`` set and ``own`` (a backend's keys) merged into ``backend_options``."""
    merged = dict(base.backend_options) | {k: tuple(v) if isinstance(v, list) else v for k, v in own.items()}
    return base.model_copy(update={**(settings or {}), "backend_options": tuple(sorted(merged.items()))})


def _variant(
    i: int,
    model: schema.Variant,
    node: LineDict,
    sweep_dir: Path,
    measure: MeasureSpec,
    compile_options: CompileOptions,
    foreign: set[str],
) -> VariantSpec:
    ops = []
    for j, op in enumerate(model.perturb or ()):
        try:
            ops.append(op_from(op))
        except LoopError as exc:
            item = node["perturb"][j]
            exc.field = f"variants[{i}].perturb[{j}].{exc.field}"
            raise exc.where(line=line_of(item, "range")) from None
    try:
        expect = parse_expect(model.expect.model_dump() if model.expect else None)
    except LoopError as exc:
        exc.field = f"variants[{i}].expect"
        raise exc.where(line=line_of(node, "expect")) from None
    return VariantSpec(
        name=str(model.name),
        ops=tuple(ops),
        expect=expect,
        base=(sweep_dir / model.base) if model.base is not None else None,
        params=dict(model.params) if model.params is not None else None,
        measure=_measure(model.measure, measure),
        compile=_compile(model.compile, compile_options, _extra(node, foreign)) if model.compile is not None else None,
        line=node.line,
    )


def _unique(variants: tuple[VariantSpec, ...], raw: list) -> None:
    seen: set[str] = set()
    for i, (variant, node) in enumerate(zip(variants, raw, strict=True)):
        if variant.name in seen:
            raise LoopError(
                f"duplicate variant name '{variant.name}'", line=line_of(node, "name"), field=f"variants[{i}].name"
            )
        seen.add(variant.name)


def _check_base(
    spec: SweepSpec, raw: LineDict, variant: VariantSpec, node: LineDict, stored: dict[str, int]
) -> Structure:
    """Load one base: it must read, have inputs, and fit any stored frames (their count goes
    to ``stored``, by key)."""
    base = variant.base or spec.base
    field_name = "base" if variant.base or variant.params is None else "params"
    where = node if variant.own_base else raw
    try:
        if os.path.lexists(base):
            regular_file(base, "base")
        loaded = load(base, variant.params if variant.params is not None else spec.params, spec.input_shapes)
    except LoopError as exc:
        raise _placed(exc, raw, where, field_name) from None
    if not loaded.shapes:
        raise LoopError("the base has no inputs", line=line_of(where, field_name), field=field_name)
    _check_inputs(spec, raw, loaded.shapes, loaded.dtypes)
    _check_frame_sizes(spec, raw, loaded.shapes)
    stored.update(_check_frame_files(spec, raw, loaded.shapes, loaded.dtypes))
    return loaded.structure


def _check_inputs(spec: SweepSpec, raw: LineDict, shapes: dict[str, tuple[int, ...]], dtypes: dict[str, str]) -> None:
    """Seeded frames are floats: an integer or boolean input needs its value given, and a
    given value must name such an input."""
    constants = spec.inputs.pairs
    node = raw.get("inputs")
    line = line_of(node, "constants") if isinstance(node, LineDict) and "constants" in node else None
    for name in constants:
        if name not in dtypes:
            kind = "a floating-point input, fed seeded frames" if name in shapes else "no input of the base"
            raise LoopError(
                f"'{name}' is {kind} (constants are for integer and boolean inputs)",
                line=line,
                field=f"inputs.constants.{name}",
            )
    for name, dtype in dtypes.items():
        if not shapes[name]:
            raise LoopError(
                f"input '{name}' is a scalar {dtype}; loop feeds frames with a leading batch dimension",
                line=line_of(raw, "base"),
                field="base",
            )
        seeded = [key for key in ("calibration", "inputs") if getattr(spec, key).path is None]
        if name in constants or not seeded:
            continue
        files = _frame_files_hint(seeded, list(shapes))
        if set(dtypes) == set(shapes):  # no float input: this is the data (token or byte ids), not a setting
            raise LoopError(
                f"input '{name}' is {dtype}, the model's data (it has no float input), and seeded frames are "
                f"floats: {files}",
                line=line_of(raw, seeded[0] if seeded[0] in raw else "base"),
                field=f"{seeded[0]}.path",
            )
        raise LoopError(
            f"input '{name}' is {dtype}, and seeded frames are floats: give its value as "
            f"inputs: {{constants: {{{name}: VALUE}}}} if it is a setting; if it is data (token or byte ids), {files}",
            line=line or line_of(raw, "inputs" if "inputs" in raw else "base"),
            field="inputs.constants",
        )


def _frame_files_hint(seeded: list[str], inputs: list[str]) -> str:
    """Where stored frames go, in the sweep file's own keys: an .npy for one input, else an
    .npz keyed by input name."""
    file, kind = ("FRAMES.npy", "an .npy") if len(inputs) == 1 else ("FRAMES.npz", "an .npz keyed by input name")
    keys = " and ".join(f"{key}: {{path: {file}}}" for key in seeded)
    held = "" if len(inputs) == 1 else f" ({', '.join(inputs)})"
    return f"give its frames from a file, {kind}{held}: {keys}"


def _placed(exc: LoopError, raw: LineDict, where: LineDict, field_name: str) -> LoopError:
    """A base's error at the key that can fix it: ``input_shapes`` (its entry for one input),
    ``params``, or the base itself."""
    if exc.field and exc.field.startswith("input_shapes"):
        _, _, name = exc.field.partition(".")
        shapes = raw.get("input_shapes")
        line = line_of(shapes, name) if name and isinstance(shapes, LineDict) and name in shapes else None
        return exc.where(line=line or line_of(raw, "input_shapes" if shapes is not None else "base"))
    key = "params" if exc.field == "params" and "params" in where else field_name
    return exc.where(line=line_of(where, key), field=key)


def _check_layers(spec: SweepSpec, raw: LineDict) -> None:
    """Load each distinct base once and check every op's layer against it."""
    cache: dict[tuple, Structure] = {}
    stored: dict[str, int] = {}
    for v, (variant, node) in enumerate(zip(spec.variants, raw["variants"], strict=True)):
        params = variant.params if variant.params is not None else spec.params
        key = (str(variant.base or spec.base), json.dumps(params, sort_keys=True))
        if key not in cache:
            cache[key] = _check_base(spec, raw, variant, node, stored)
        forced: dict[str, str] = {}
        for i, op in enumerate(variant.ops):
            try:
                op.check(cache[key])
                _check_forced_once(op, cache[key], forced)
            except LoopError as exc:
                item = node["perturb"][i]
                name = exc.field or "layer"
                exc.field = f"variants[{v}].perturb[{i}].{name}"
                raise exc.where(line=line_of(item, name)) from None
    _warn_seeds_over_files(spec, raw, stored)


def _warn_seeds_over_files(spec: SweepSpec, raw: LineDict, stored: dict[str, int]) -> None:
    """A seed over a frame file only reorders its frames (``author.make_frames``), and draws
    which ones are used only when ``count`` is below the file's: else it changes nothing the
    calibration sees, and a variant that is only a new seed reads ``no-effect``."""
    places = [(key, getattr(spec, key).count, raw.get(key), f"{key}.") for key in ("calibration", "inputs")]
    for v, (variant, node) in enumerate(zip(spec.variants, raw["variants"], strict=True)):
        for i, op in enumerate(variant.ops):
            if isinstance(op, Calibration) and op.seed is not None:
                count = op.count or spec.calibration.count
                places.append(("calibration", count, node["perturb"][i], f"variants[{v}].perturb[{i}]."))
    for key, count, where, prefix in places:
        data, total = getattr(spec, key), stored.get(key)
        if data.path is None or total is None or not (isinstance(where, LineDict) and "seed" in where):
            continue
        if count is None or count >= total:
            said = (
                f"the seed does not change the frames read from {data.path}: all {total} of them are used "
                "whatever the seed, which only reorders them"
                + (" (minmax calibration ignores the order)" if key == "calibration" else "")
                + f"; it draws which frames are used only when {prefix}count is below {total}"
            )
            where_ = LoopError(said, file=str(spec.path), line=line_of(where, "seed"), field=f"{prefix}seed")
            warnings.warn(schema.printable(where_.render()), SweepFileWarning, stacklevel=4)


def _check_forced_once(op: Op, structure: Structure, forced: dict[str, str]) -> None:
    """Two forced ranges on one quantized tensor: the quantizer would keep one silently."""
    for o in op.overrides(structure):
        mine = f"force_range_{o.side}({o.layer})"
        if o.tensor in forced:
            raise LoopError(
                f"{forced[o.tensor]} and {mine} both force tensor '{o.tensor}'; a tensor takes one range", field="range"
            )
        forced[o.tensor] = mine


def _check_frame_sizes(spec: SweepSpec, raw: LineDict, shapes: dict[str, tuple[int, ...]]) -> None:
    """Generated frames are float32 arrays of ``count`` frames per input: refuse a count whose
    arrays would not fit, with their size, before anything is allocated."""
    frame = sum(4 * math.prod(shape[1:]) for shape in shapes.values())
    for key, data in (("calibration", spec.calibration), ("inputs", spec.inputs)):
        if data.path is not None or data.count is None:
            continue
        size = frame * data.count
        if size > MAX_FRAME_BYTES:
            node = raw.get(key)
            raise LoopError(
                f"{data.count} frames of {frame} bytes are {size / 2**30:.1f} GiB, more than "
                f"{MAX_FRAME_BYTES / 2**30:g} GiB",
                line=line_of(node, "count") if node else None,
                field=f"{key}.count",
            )


def _check_frame_files(
    spec: SweepSpec, raw: LineDict, shapes: dict[str, tuple[int, ...]], dtypes: dict[str, str]
) -> dict[str, int]:
    """Stored calibration or scoring frames must load and fit the model, before any write;
    how many frames each file holds, by key."""
    from loop.author.frames import count, load_file

    totals = {}
    for key, data in (("calibration", spec.calibration), ("inputs", spec.inputs)):
        if data.path is not None:
            try:
                regular_file(spec.path.parent / data.path, f"{key}.path")
                frames = load_file(spec.path.parent / data.path, shapes, f"{key}.path", data.scale, dtypes, data.pairs)
            except LoopError as exc:
                raise exc.where(line=line_of(raw[key], "path")) from None
            totals[key] = count(frames)
    return totals


def document_sha(raw: Any) -> str:
    """What identifies a sweep file: its document, keys sorted."""
    return hashlib.sha256(json.dumps(raw, sort_keys=True, default=str).encode()).hexdigest()
