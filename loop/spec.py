"""The sweep file: parsed and validated into dataclasses before anything is written.

Every error is a :class:`LoopError` naming the file, the line and the field.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from loop.compilers.base import CompileOptions
from loop.errors import LoopError
from loop.graphs import load
from loop.perturb import Expect, Op, parse_expect, parse_op
from loop.structure import Structure
from loop.yamlio import LineDict, LineList, line_of, load_yaml

TOP_KEYS = {"sweep", "base", "backend", "devices", "seed", "calibration", "inputs", "compile",
            "measure", "params", "variants"}
VARIANT_KEYS = {"name", "perturb", "expect", "base", "params", "measure", "compile"}
COMPILE_KEYS: dict[str, type | tuple[type, ...]] = {
    "bias_correction": bool, "io": str, "calibration_method": str, "per_channel": bool, "threads": int,
    "timeout_s": (int, float), "calibration_bins": int, "calibration_quantized_bins": int,
    "calibration_percentile": (int, float)}
# Bounds of the numeric compile keys: (lowest, highest), inclusive.
COMPILE_BOUNDS: dict[str, tuple[float, float]] = {
    "calibration_bins": (16, 1 << 16), "calibration_quantized_bins": (16, 1 << 16),
    "calibration_percentile": (50.0, 100.0)}
BACKEND_COMPILE_KEYS = {"hailo": {"hw_arch", "optimization_level", "compression_level", "model_script", "net_name",
                                  "calibration_batch_size"}}
IO_KINDS = ("uint8", "float32")
CALIBRATION_METHODS = ("minmax", "entropy", "percentile", "distribution")


@dataclass(frozen=True)
class DataSpec:
    """Controlled frames: ``count`` seeded ones, or the frames stored at ``path``."""

    count: int = 64
    seed: int = 0
    path: str | None = None
    scale: float | None = None  # stored frames are multiplied by it (needed for integer frames)


@dataclass(frozen=True)
class MeasureSpec:
    warmup: int = 10
    frames: int = 200
    repeats: int = 5
    depth: tuple[int, ...] = (1,)
    duration_s: float | None = None
    ttfo_repeats: int = 3
    latency_frames: int = 50
    threads: int = 0
    power_mode: str | None = None
    dma_map: bool = False
    batch_size: int = 1
    min_duration_s: float = 1.0  # each repeat lasts at least this long, and at least `frames` frames
    target_ci_pct: float | None = None  # repeat until the median's 95% CI is within +-this %
    max_duration_s: float = 60.0  # ...or until this much steady-state time has passed
    host_busy_pct: float = 10.0  # other processes' CPU, in % of one core, past which a run is host-busy


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

    def own_compile(self, variant: VariantSpec) -> bool:
        """Compiled with other options than the sweep's (its timeout or threads aside): then it
        has nothing like-for-like to be audited against, nor to be audited against it."""
        own = variant.compile
        plain = lambda o: replace(o, threads=0, timeout_s=None)  # noqa: E731
        return own is not None and plain(own) != plain(self.compile)

    def variant_sha(self, variant: VariantSpec) -> str:
        """Hash of everything that defines one variant's run (for resume and provenance)."""
        blob = json.dumps([self.sha, variant.name], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()


def _fail(message: str, node: Any, key: str | None = None, field_name: str | None = None) -> LoopError:
    return LoopError(message, line=line_of(node, key), field=field_name or key)


def _mapping(raw: Any, where: Any, key: str, allowed: set[str] | None = None) -> LineDict:
    value = raw.get(key) if isinstance(raw, Mapping) else None
    if value is None:
        return LineDict()
    if not isinstance(value, LineDict):
        raise _fail(f"'{key}' must be a mapping", where, key)
    for k in value:
        if allowed is not None and k not in allowed:
            raise _fail(f"unknown key '{k}' in '{key}' (known: {', '.join(sorted(allowed))})", value, k, f"{key}.{k}")
    return value


def _int(raw: Mapping, key: str, default: int, minimum: int = 0) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _fail(f"'{key}' must be a whole number >= {minimum}, got {value!r}", raw, key)
    return value


def _data(raw: Any, key: str, seed: int, default_count: int) -> DataSpec:
    node = _mapping(raw, raw, key, {"count", "seed", "path", "scale"})
    path = node.get("path")
    if path is not None and not isinstance(path, str):
        raise _fail("'path' must be a file path", node, "path", f"{key}.path")
    scale = node.get("scale")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))
                              or not math.isfinite(scale) or scale <= 0):
        raise _fail(f"'scale' must be a positive number, got {scale!r}", node, "scale", f"{key}.scale")
    return DataSpec(count=_int(node, "count", default_count, 1), seed=_int(node, "seed", seed), path=path,
                    scale=None if scale is None else float(scale))


def _measure(node: LineDict, inherit: MeasureSpec) -> MeasureSpec:
    allowed = set(MeasureSpec.__dataclass_fields__)
    for k in node:
        if k not in allowed:
            raise _fail(f"unknown key '{k}' in 'measure' (known: {', '.join(sorted(allowed))})", node, k, f"measure.{k}")
    values: dict[str, Any] = {}
    for k in ("warmup", "frames", "repeats", "ttfo_repeats", "latency_frames", "threads", "batch_size"):
        if k in node:
            values[k] = _int(node, k, 0, 1 if k in ("frames", "repeats", "batch_size", "ttfo_repeats") else 0)
    if "depth" in node:
        depth = node["depth"] if isinstance(node["depth"], list) else [node["depth"]]
        if not depth or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in depth):
            raise _fail(f"'depth' must be a whole number >= 1 or a list of them, got {node['depth']!r}", node, "depth", "measure.depth")
        values["depth"] = tuple(depth)
    if "duration_s" in node:
        d = node["duration_s"]
        if isinstance(d, bool) or not isinstance(d, (int, float)) or d <= 0:
            raise _fail(f"'duration_s' must be a positive number, got {d!r}", node, "duration_s", "measure.duration_s")
        values["duration_s"] = float(d)
    for k, lo, hi in (("min_duration_s", 0.0, 3600.0), ("target_ci_pct", 0.01, 100.0),
                      ("max_duration_s", 0.01, 86400.0), ("host_busy_pct", 0.0, 10000.0)):
        v = node.get(k)
        if k in node and (isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi):
            raise _fail(f"'{k}' must be a number from {lo:g} to {hi:g}, got {v!r}", node, k, f"measure.{k}")
        if k in node:
            values[k] = float(v)
    if "power_mode" in node:
        values["power_mode"] = str(node["power_mode"])
    if "dma_map" in node:
        values["dma_map"] = bool(node["dma_map"])
    return replace(inherit, **values)


def _compile(raw: Any, backend: str, inherit: CompileOptions | None = None) -> CompileOptions:
    """The ``compile:`` mapping of ``raw`` over ``inherit`` (a variant's over its sweep's)."""
    extra = BACKEND_COMPILE_KEYS.get(backend, set())
    node = _mapping(raw, raw, "compile", set(COMPILE_KEYS) | extra)
    values: dict[str, Any] = {}
    for k, kind in COMPILE_KEYS.items():
        if k in node:
            v = node[k]
            if isinstance(v, bool) != (kind is bool) or not isinstance(v, kind):
                raise _fail(f"'{k}' has the wrong type: {v!r}", node, k, f"compile.{k}")
            lo, hi = COMPILE_BOUNDS.get(k, (-math.inf, math.inf))
            if not isinstance(v, (bool, str)) and not lo <= v <= hi:
                raise _fail(f"'{k}' must be between {lo:g} and {hi:g}, got {v!r}", node, k, f"compile.{k}")
            values[k] = float(v) if k in ("timeout_s", "calibration_percentile") else v  # type: ignore[arg-type]
    if values.get("io", "uint8") not in IO_KINDS:
        raise _fail(f"'io' must be one of {', '.join(IO_KINDS)}", node, "io", "compile.io")
    if values.get("calibration_method", "minmax") not in CALIBRATION_METHODS:
        raise _fail(f"'calibration_method' must be one of {', '.join(CALIBRATION_METHODS)}",
                    node, "calibration_method", "compile.calibration_method")
    merged = dict(inherit.backend_options if inherit else ())
    merged.update((k, tuple(v) if isinstance(v, list) else v) for k, v in node.items() if k in extra)
    return replace(inherit or CompileOptions(), **values, backend_options=tuple(sorted(merged.items())))


def _variant(raw: Any, sweep_dir: Path, measure: MeasureSpec, compile_options: CompileOptions,
             backend: str) -> VariantSpec:
    if not isinstance(raw, LineDict) or "name" not in raw:
        raise _fail("each variant is a mapping with a 'name'", raw, None, "name")
    if isinstance(raw["name"], bool) or not isinstance(raw["name"], (str, int)) or not str(raw["name"]).strip():
        raise _fail(f"a variant name is a non-empty string, got {raw['name']!r}", raw, "name")
    for k in raw:
        if k not in VARIANT_KEYS:
            raise _fail(f"unknown key '{k}' in variant (known: {', '.join(sorted(VARIANT_KEYS))})", raw, k)
    perturb = raw.get("perturb") or LineList()
    if not isinstance(perturb, list):
        raise _fail("'perturb' must be a list of ops", raw, "perturb")
    ops = []
    for i, item in enumerate(perturb):
        try:
            ops.append(parse_op(item))
        except LoopError as exc:
            line = line_of(item, exc.field) if isinstance(item, LineDict) else getattr(perturb, "item_lines", [None] * (i + 1))[i]
            raise exc.where(line=line, field=exc.field) from None
    try:
        expect = parse_expect(raw.get("expect"))
    except LoopError as exc:
        raise exc.where(line=line_of(raw, "expect")) from None
    base = raw.get("base")
    params = raw.get("params")
    if params is not None and not isinstance(params, Mapping):
        raise _fail("'params' must be a mapping", raw, "params")
    return VariantSpec(name=str(raw["name"]), ops=tuple(ops), expect=expect,
                       base=(sweep_dir / str(base)) if base is not None else None,
                       params=dict(params) if params is not None else None,
                       measure=_measure(_mapping(raw, raw, "measure"), measure),
                       compile=_compile(raw, backend, compile_options) if "compile" in raw else None, line=raw.line)


def parse(path: Path) -> SweepSpec:
    """Parse and validate ``path`` (layers included); raise :class:`LoopError` on anything bad."""
    try:
        return _parse(path)
    except LoopError as exc:
        raise exc.where(file=str(path)) from None


def _parse(path: Path) -> SweepSpec:
    raw = load_yaml(path)
    if not isinstance(raw, LineDict):
        raise LoopError("a sweep file is a mapping with 'sweep', 'base' and 'variants'", line=1)
    for k in raw:
        if k not in TOP_KEYS:
            raise _fail(f"unknown key '{k}' (known: {', '.join(sorted(TOP_KEYS))})", raw, k)
    for k in ("sweep", "base", "variants"):
        if k not in raw or raw[k] in (None, ""):
            raise _fail(f"missing required key '{k}'", raw, None, k)
    backend = str(raw.get("backend", "onnxruntime"))
    from loop.backends import COMPILERS, DEFAULT_DEVICES, DEVICES
    if backend not in COMPILERS:
        raise _fail(f"unknown backend '{backend}' (known: {', '.join(COMPILERS)})", raw, "backend")
    listed = raw.get("devices") or DEFAULT_DEVICES[backend]
    devices = (listed,) if isinstance(listed, str) else tuple(listed)
    for d in devices:
        if d not in DEVICES:
            raise _fail(f"unknown device '{d}' (known: {', '.join(DEVICES)})", raw, "devices")
    seed = _int(raw, "seed", 0)
    measure = _measure(_mapping(raw, raw, "measure"), MeasureSpec())
    if not isinstance(raw["variants"], list) or not raw["variants"]:
        raise _fail("'variants' must be a non-empty list", raw, "variants")
    compile_options = _compile(raw, backend)
    variants = tuple(_variant(v, path.parent, measure, compile_options, backend) for v in raw["variants"])
    _unique(variants, raw["variants"])
    params = raw.get("params") or {}
    if not isinstance(params, Mapping):
        raise _fail("'params' must be a mapping", raw, "params")
    spec = SweepSpec(
        name=str(raw["sweep"]), path=path, base=path.parent / str(raw["base"]), backend=backend,
        devices=devices, seed=seed, calibration=_data(raw, "calibration", seed, 64),
        inputs=_data(raw, "inputs", seed + 1, 8), compile=compile_options, params=dict(params),
        measure=measure, variants=variants, sha=_sha(raw))
    _check_layers(spec, raw)
    return spec


def _unique(variants: tuple[VariantSpec, ...], raw: list) -> None:
    seen: set[str] = set()
    for variant, node in zip(variants, raw):
        if variant.name in seen:
            raise _fail(f"duplicate variant name '{variant.name}'", node, "name")
        seen.add(variant.name)


def _check_base(spec: SweepSpec, raw: LineDict, variant: VariantSpec, node: LineDict) -> Structure:
    """Load one base: it must read, have inputs, and fit any stored frames."""
    base = variant.base or spec.base
    field_name = "base" if variant.base or variant.params is None else "params"
    where = node if variant.own_base else raw
    try:
        loaded = load(base, variant.params if variant.params is not None else spec.params)
    except LoopError as exc:
        raise exc.where(line=line_of(where, field_name), field=field_name) from None
    if not loaded.shapes:
        raise LoopError("the base has no inputs", line=line_of(where, field_name), field=field_name)
    _check_frame_files(spec, raw, loaded.shapes)
    return loaded.structure


def _check_layers(spec: SweepSpec, raw: LineDict) -> None:
    """Load each distinct base once and check every op's layer against it."""
    cache: dict[tuple, Structure] = {}
    for variant, node in zip(spec.variants, raw["variants"]):
        params = variant.params if variant.params is not None else spec.params
        key = (str(variant.base or spec.base), json.dumps(params, sort_keys=True))
        if key not in cache:
            cache[key] = _check_base(spec, raw, variant, node)
        forced: dict[str, str] = {}
        for i, op in enumerate(variant.ops):
            try:
                op.check(cache[key])
                _check_forced_once(op, cache[key], forced)
            except LoopError as exc:
                item = node["perturb"][i]
                raise exc.where(line=line_of(item, "layer"), field=exc.field or "layer") from None


def _check_forced_once(op: Op, structure: Structure, forced: dict[str, str]) -> None:
    """Two forced ranges on one quantized tensor: the quantizer would keep one silently."""
    for o in op.overrides(structure):
        mine = f"force_range_{o.side}({o.layer})"
        if o.tensor in forced:
            raise LoopError(f"{forced[o.tensor]} and {mine} both force tensor '{o.tensor}'; "
                            "a tensor takes one range", field="range")
        forced[o.tensor] = mine


def _check_frame_files(spec: SweepSpec, raw: LineDict, shapes: dict[str, tuple[int, ...]]) -> None:
    """Stored calibration or scoring frames must load and fit the model, before any write."""
    from loop.frames import load_file
    for key, data in (("calibration", spec.calibration), ("inputs", spec.inputs)):
        if data.path is not None:
            try:
                load_file(spec.path.parent / data.path, shapes, f"{key}.path", data.scale)
            except LoopError as exc:
                raise exc.where(line=line_of(raw[key], "path")) from None


def _sha(raw: Any) -> str:
    return hashlib.sha256(json.dumps(raw, sort_keys=True, default=str).encode()).hexdigest()
