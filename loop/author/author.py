"""Stage 1: author each variant as ONNX, with its compile options, frames and footprint."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from loop.author import frames as frames_mod
from loop.author.graphs import load
from loop.author.perturb import Allow, Calibration, with_tensors
from loop.author.sweepfile import DataSpec, SweepSpec, VariantSpec
from loop.core.modelfile import write_model
from loop.core.vocab import CompileOptions
from loop.judge.structure import Structure


@dataclass
class Authored:
    """One variant, ready to compile. The model waits on disk and frames are made on demand
    from their (seeded) source, so a sweep of many variants, or of 4K frames, never holds
    them all in memory at once."""

    variant: VariantSpec
    model_path: Path
    onnx_sha: str
    structure: Structure
    options: CompileOptions
    calib_source: DataSpec
    calib_sha: str
    input_source: DataSpec
    inputs_sha: str
    input_shape: tuple[int, ...]  # the first input's
    input_shapes: dict[str, tuple[int, ...]]
    footprint: list[Allow]
    reference: bool
    folder: Path
    notes: tuple[str, ...] = ()
    author_s: float = 0.0
    input_dtypes: dict[str, str] = field(default_factory=dict)  # inputs that are not floating point
    group: str = ""  # the compile options it is judged under ("": the sweep's; see group_of)

    def calibration(self) -> frames_mod.Frames:
        return make_frames(self.calib_source, self.input_shapes, self.folder, dtypes=self.input_dtypes)

    def inputs(self) -> frames_mod.Frames:
        return make_frames(self.input_source, self.input_shapes, self.folder, "inputs.path", self.input_dtypes)


Shapes = tuple[int, ...] | dict[str, tuple[int, ...]]  # one input's shape, or each input's by name


def _shapes(shape: Shapes) -> dict[str, tuple[int, ...]]:
    return dict(shape) if isinstance(shape, dict) else {"input": shape}


def make_frames(
    data: DataSpec,
    shape: Shapes,
    folder: Path,
    field: str = "calibration.path",
    dtypes: dict[str, str] | None = None,
) -> frames_mod.Frames:
    """The frames ``data`` describes; integer and boolean inputs (``dtypes``) hold their
    constant in every frame."""
    shapes, dtypes = _shapes(shape), dtypes or {}
    if data.path is not None:
        stored = frames_mod.load_file(folder / data.path, shapes, field, data.scale, dtypes, data.pairs)
        total = frames_mod.count(stored)
        order = np.random.default_rng(data.seed).permutation(total) if data.seed else np.arange(total)
        return frames_mod.select(stored, order[: data.count])
    return frames_mod.seeded_set(shapes, data.count or 1, data.seed or 0, data.pairs, dtypes)


def used_note(data: DataSpec, shape: Shapes, folder: Path, field: str, dtypes: dict[str, str]) -> str | None:
    """A line when a frame file is not used whole: how many of its frames and why."""
    if data.path is None or data.count is None:
        return None
    stored = frames_mod.load_file(folder / data.path, _shapes(shape), field, data.scale, dtypes, data.pairs)
    total = frames_mod.count(stored)
    key = field.rsplit(".", 1)[0]
    return f"{key}: {min(data.count, total)} of the {total} frames in {data.path} used ({key}.count: {data.count})"


def _frames_sha(data: DataSpec, shape: Shapes, folder: Path, field: str, dtypes: dict[str, str]) -> str:
    """The hash of a frame set. Seeded ones are hashed once per distinct source (most variants
    of a sweep share them, and a 4K ladder's are large); a file is read every time, since it
    may change between sweeps of one process."""
    if data.path is not None:
        return frames_mod.frames_sha(make_frames(data, shape, folder, field, dtypes))
    return _seeded_sha(data, tuple(_shapes(shape).items()), tuple(sorted(dtypes.items())))


@lru_cache(maxsize=32)
def _seeded_sha(
    data: DataSpec, shapes: tuple[tuple[str, tuple[int, ...]], ...], dtypes: tuple[tuple[str, str], ...]
) -> str:
    return frames_mod.frames_sha(make_frames(data, dict(shapes), Path(), dtypes=dict(dtypes)))


def _calibration_source(spec: SweepSpec, variant: VariantSpec) -> DataSpec:
    data: DataSpec = spec.calibration
    for op in variant.ops:
        if isinstance(op, Calibration):
            data = data.model_copy(
                update={"count": op.count or data.count, "seed": data.seed if op.seed is None else op.seed}
            )
    return data


def author(spec: SweepSpec, variant: VariantSpec, reference: bool, threads: int = 0) -> Authored:
    """Stage 1 for one variant. A variant that only forces a range or changes calibration is its
    base's file; one that rewrites weights is written beside its base, once per distinct content,
    and where the base keeps its tensors in external data it writes only those it changes."""
    t0 = time.perf_counter()
    base = load(
        Path(variant.base or spec.base),
        variant.params if variant.params is not None else spec.params,
        spec.input_shapes,
    )
    structure = base.structure
    path, sha = base.path, base.sha
    rewriting = [op for op in variant.ops if op.rewrites_model]
    if rewriting:
        model = base.graph()
        for op in rewriting:
            op.apply(model, structure, base.path.parent)
        path, sha = write_model(model, base.path.parent, base.external, "variant")
    overrides = tuple(o for op in variant.ops for o in op.overrides(structure))
    precisions = tuple(dict.fromkeys(p for op in variant.ops for p in op.precisions(structure)))
    precisions = with_tensors(precisions, path, structure)
    base_options = variant.compile or spec.compile
    rescales = tuple(r for op in variant.ops for r in op.rescales(structure))
    # a later op on the same layer wins, as a later line of a model script does
    weight_bits = tuple({w.layer: w for op in variant.ops for w in op.weight_bits(structure)}.values())
    derived = {
        "overrides": overrides,
        "precisions": precisions,
        "weight_bits": weight_bits,
        "rescales": rescales,
        "threads": threads or base_options.threads,
    }
    options = base_options.model_copy(update=derived)
    source = _calibration_source(spec, variant)
    folder = spec.path.parent
    return Authored(
        variant=variant,
        model_path=path,
        onnx_sha=sha,
        structure=structure,
        options=options,
        calib_source=source,
        calib_sha=_frames_sha(source, base.shapes, folder, "calibration.path", base.dtypes),
        input_source=spec.inputs,
        inputs_sha=_frames_sha(spec.inputs, base.shapes, folder, "inputs.path", base.dtypes),
        input_shape=base.shape,
        input_shapes=base.shapes,
        footprint=[rule for op in variant.ops for rule in op.footprint(structure, options)],
        reference=reference,
        folder=folder,
        notes=base.notes + _used_notes(spec, source, base.shapes, base.dtypes),
        author_s=time.perf_counter() - t0,
        input_dtypes=base.dtypes,
        group=group_of(spec, variant),
    )


def _used_notes(
    spec: SweepSpec, calibration: DataSpec, shapes: dict[str, tuple[int, ...]], dtypes: dict[str, str]
) -> tuple[str, ...]:
    pairs = ((calibration, "calibration.path"), (spec.inputs, "inputs.path"))
    notes = (used_note(data, shapes, spec.path.parent, key, dtypes) for data, key in pairs)
    return tuple(n for n in notes if n)


def _judged(options: CompileOptions) -> CompileOptions:
    """What of the options changes what a compile makes (not its timeout or threads), less what a
    variant perturbs: a ``weights_4bit_share`` is judged against the base at the sweep's widths,
    as ``precision`` with ``weights: 4`` is."""
    edits = {"overrides": (), "precisions": (), "rescales": (), "weight_bits": (), "weights_4bit_share": None}
    return options.model_copy(update={"threads": 0, "timeout_s": None, **edits})


def shares(spec: SweepSpec, v: VariantSpec) -> bool:
    """Whether ``v`` asks for another ``weights_4bit_share`` than the sweep's: a perturbation, audited."""
    return v.compile is not None and v.compile.weights_4bit_share != spec.compile.weights_4bit_share


def group_of(spec: SweepSpec, v: VariantSpec) -> str:
    """The compile options a variant is judged under: "" for the sweep's own, else a short
    hash of its own; each group is audited against the base compiled with the same options."""
    mine = _judged(v.compile or spec.compile)
    if mine == _judged(spec.compile):
        return ""
    return hashlib.sha256(repr(mine).encode()).hexdigest()[:8]


def _plain(spec: SweepSpec, v: VariantSpec) -> bool:
    """The base itself (no ops, no base or params of its own, no share of its own), under some compile options."""
    return not v.ops and not v.own_base and not shares(spec, v)


def _reference_name(spec: SweepSpec, v: VariantSpec, taken: set[str]) -> str:
    ours, theirs = _judged(spec.compile).model_dump(), _judged(v.compile or spec.compile).model_dump()
    moved = ", ".join(f"{k}={theirs[k]}" for k in theirs if theirs[k] != ours[k])
    name = "base" if not moved else f"base ({moved[:60]})"
    return name if name not in taken else f"{name} (reference)"


def with_reference(spec: SweepSpec) -> tuple[VariantSpec, ...]:
    """The sweep's variants, with an unperturbed reference first for each group of compile
    options whose perturbed variants the file gives none. A pure ladder (every variant its own
    base) needs none."""
    have = {group_of(spec, v) for v in spec.variants if _plain(spec, v)}
    taken, extra = {v.name for v in spec.variants}, list[VariantSpec]()
    for v in spec.variants:
        group = group_of(spec, v)
        if v.own_base or group in have:
            continue
        have.add(group)
        name = _reference_name(spec, v, taken)
        taken.add(name)
        extra.append(VariantSpec(name=name, measure=spec.measure, compile=v.compile if group else None))
    return (*extra, *spec.variants)


def references(spec: SweepSpec, variants: tuple[VariantSpec, ...]) -> dict[str, VariantSpec]:
    """Each group's reference: its first unperturbed variant."""
    found: dict[str, VariantSpec] = {}
    for v in variants:
        if _plain(spec, v):
            found.setdefault(group_of(spec, v), v)
    return found
