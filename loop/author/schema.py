"""The sweep file's schema: every key declared once, with its type, bounds and default
(``compile:``'s in the core, :class:`loop.core.vocab.CompileSettings`, beside the options they become).

pydantic v2 rather than msgspec: msgspec is fastest when it decodes the bytes itself, but a
sweep file is loaded by our own YAML loader (line numbers, alias and size limits), so both
would validate an already-built dict, and a sweep file is a few KB. What decides it is the
errors: pydantic's carry a ``loc`` path into that dict, which :func:`locate` maps back to a
YAML line, and its fields expose description, bounds and default to render the README's
table (:mod:`loop.author.schema_doc`) from these same declarations. Strict mode refuses what YAML
coerces by accident (``'5'`` for 5, ``true`` for 1); ``allow_inf_nan=False`` refuses
``.nan`` and ``.inf`` everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from copy import copy
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

import numpy as np
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    create_model,
    model_validator,
)
from pydantic.fields import FieldInfo

from loop.author.yamlio import LineDict, LineList
from loop.core.arrays import is_ref, numbers, ref_of, referenced
from loop.core.errors import LoopError
from loop.core.text import for_person
from loop.core.vocab import CompileSettings, DeviceSettings

MAX_SEED = 2**32 - 1
MAX_FRAMES = 1_000_000
MAX_NAME = 256


class Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)


Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME)]
Layer = Annotated[str, Field(min_length=1, max_length=1024, description="an ONNX node name")]
Path_ = Annotated[str, Field(min_length=1, max_length=4096)]
Depth = Annotated[int, Field(ge=1, le=4096)]
DepthList = Annotated[list[Depth], Field(min_length=1, max_length=64)]
Dim = Annotated[int, Field(ge=1, le=1 << 20)]
InputName = Annotated[str, Field(min_length=1, max_length=MAX_NAME)]
Shape = Annotated[list[Dim], Field(min_length=0, max_length=8)]
Constant = Annotated[float, Field(ge=-1e18, le=1e18)] | int | bool
Param = (
    Annotated[int, Field(ge=-(2**31), le=2**31)]
    | Annotated[float, Field(ge=-1e9, le=1e9)]
    | Annotated[str, Field(max_length=256)]
    | bool
)
Params = Annotated[dict[Annotated[str, Field(max_length=64)], Param], Field(max_length=64)]


class Data(Strict):
    """``calibration:`` and ``inputs:``: seeded frames, or frames stored in a file."""

    count: Annotated[int, Field(ge=1, le=100_000)] | None = Field(
        None, description="frames: seeded (default: calibration 64, inputs 8), or of a `path` (default: all)"
    )
    seed: Seed | None = Field(None, description="the sweep's `seed` (inputs: seed + 1)")
    path: Path_ | None = Field(None, description="an `.npy`/`.npz` of frames, relative to the sweep file")
    scale: Annotated[float, Field(gt=0, le=1e6)] | None = Field(None, description="multiplies stored frames")
    constants: Annotated[dict[InputName, Constant], Field(max_length=64)] | None = Field(
        None, description="inputs: a value per integer or boolean input, by name, in every frame (calibration too)"
    )


def _depths(value: int | list[int]) -> tuple[int, ...]:
    return tuple(value) if isinstance(value, list) else (value,)


def _listed(value: Any) -> Any:
    """A tuple of depths, as Python code passes them, validated as the list a sweep file writes."""
    return list(value) if isinstance(value, tuple) else value


if TYPE_CHECKING:
    Depths = tuple[int, ...]
else:  # a sweep file writes one depth or a list of them (its errors and README say so); all read a tuple
    Depths = Annotated[
        Depth | DepthList,
        AfterValidator(_depths),
        BeforeValidator(_listed),
        PlainSerializer(list, return_type=list[int]),
    ]


class Measure(Strict, DeviceSettings):
    """``measure:``: how each device is driven (no recompile when these change). The one
    declaration of the measure protocol's settings: the sweep file's, and what the protocol reads;
    those a device takes itself are :class:`~loop.core.vocab.DeviceSettings`'."""

    # Defaults given as ``default=``: mypy (no pydantic plugin) takes a positional one for none.
    warmup: int = Field(default=10, ge=0, le=MAX_FRAMES, description="frames run before timing")
    frames: int = Field(default=200, ge=1, le=MAX_FRAMES, description="frames per timed repeat")
    repeats: int = Field(default=5, ge=1, le=1000, description="timed repeats")
    depth: Depths = Field(default=1, validate_default=True, description="frames in flight; a list measures each")
    duration_s: float | None = Field(
        default=None, gt=0, le=86_400, description="time each repeat instead of counting frames"
    )
    ttfo_repeats: int = Field(default=3, ge=1, le=1000, description="fresh sessions timed to first output")
    latency_frames: int = Field(default=50, ge=0, le=MAX_FRAMES, description="single frames for latency percentiles")
    # a repeat also runs at least `frames` frames
    min_duration_s: float = Field(default=1.0, ge=0, le=3600, description="each repeat lasts at least this long")
    target_ci_pct: float | None = Field(
        default=None, ge=0.01, le=100, description="repeat until the median's 95% CI is within +-this %"
    )
    max_duration_s: float = Field(
        default=60.0, ge=0.01, le=86_400, description="the most steady-state time target_ci_pct takes"
    )
    host_busy_pct: float = Field(
        default=10.0, ge=0, le=10_000, description="others' CPU (% of one core) past which a run is host-busy"
    )
    target_ratio_pct: float = Field(
        default=3.0,
        ge=0.1,
        le=100,
        description="a study: a candidate's rounds end once its rate ratio's 95% interval is within +-this %",
    )
    budget_s: float = Field(default=120.0, gt=0, le=86_400, description="a study: the most a generation's rounds take")
    # a base whose top-1 collapses is quantization-ruined too, whatever its SNR
    ruined_snr_db: float = Field(
        default=10.0, ge=-100, le=200, description="a base scoring below this SNR is flagged quantization-ruined"
    )


# The name the measure protocol and the device side read it by: from here, not from the sweep file's
# module, so a device process never imports the authoring (and onnx with it: 0.6 s of its start).
MeasureSpec = Measure


# ``compile:``: the options every backend reads, declared once in the core beside what they
# become (CompileOptions); each backend's own keys are its compiler's ``options_model``, added
# by :func:`compile_model`.
Compile = CompileSettings


class ArrayValues(list):
    """A list of numbers an array gave (a numpy array from Python, or a sweep file's reference to
    a stored one): the numbers, as a list field holds them, with the array kept beside them for
    the record (:meth:`loop.author.perturb.Op.record` records ``ref``, never the numbers)."""

    def __init__(self, values: list[Any], source: Any, ref: dict[str, Any]) -> None:
        super().__init__(values)
        self.source, self.ref = source, ref


def _array_values(value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
    """A list field's value given as an array: validated as the list of its numbers (bounds
    and all), the array kept beside them. Anything else is validated as it is."""
    if isinstance(value, ArrayValues):  # an op rebuilt from its validated model keeps its array
        return ArrayValues(handler(list(value)), value.source, value.ref)
    if isinstance(value, np.ndarray):
        source = numbers(value)
        return ArrayValues(handler(source.tolist()), source, ref_of(source))
    if is_ref(value):
        context = info.context or {}
        source = numbers(referenced(value, context.get("folder"), context.get("held")))
        # its hash is the reference's, checked where the array was read or held
        ref = {"array": value["array"], "dtype": str(source.dtype), "shape": list(source.shape)}
        return ArrayValues(handler(source.tolist()), source, ref)
    return handler(value)


# How an op declares a field that takes an array: ``Annotated[list[X], ARRAY]``. From Python it
# takes a one-dimensional numpy array of numbers; in a sweep file, a list, or a reference to a
# stored array, ``{array: SHA, path: FILE}`` (FILE relative to the sweep file; ``dtype`` and
# ``shape`` checked where given). Either way the op reads the list of its numbers.
ARRAY = WrapValidator(_array_values)


# The ops' parameters, declared once: a perturbation op (loop.author.perturb) is its model with
# its behaviour added, so the sweep file, the API and the record read one declaration.
class ScaleWeightsOp(Strict):
    op: Literal["scale_weights"] = "scale_weights"
    layer: Layer
    factor: float = Field(ge=-1e6, le=1e6, description="multiplies the layer's float kernel")


class AddWeightNoiseOp(Strict):
    op: Literal["add_weight_noise"] = "add_weight_noise"
    layer: Layer
    std: float = Field(ge=0, le=1e6, description="noise standard deviation, in kernel units")
    seed: Seed = 0


class ForceRangeOp(Strict):
    op: Literal["force_range_out", "force_range_in"]
    layer: Layer
    range: Annotated[list[Annotated[float, Field(ge=-1e9, le=1e9)]], Field(min_length=2, max_length=2), ARRAY] = Field(
        description="[lo, hi] with lo < hi"
    )


Factor = Annotated[float, Field(gt=0, le=1e6)]


class ScaleGridOp(Strict):
    op: Literal["scale_grid"] = "scale_grid"
    layer: Annotated[
        str, Field(min_length=1, max_length=1024, description="an ONNX node name, or a glob as in `expect:`")
    ]
    of: Literal["weights", "output"] = Field(
        description="weights: the layer's weight scales (and its int32 bias's); output: the scale of the grid its "
        "output is quantized on, wherever it appears (and its readers' bias scales)"
    )
    factor: Factor | None = Field(default=None, description="multiplies the scale(s), after quantization (F > 0)")
    factors: Annotated[list[Factor], ARRAY] | None = Field(
        default=None,
        max_length=1 << 20,
        description="instead of factor: one per output channel (of: weights; a numpy array from Python)",
    )

    @model_validator(mode="after")
    def _one_factor(self) -> ScaleGridOp:
        if (self.factor is None) == (self.factors is None):
            raise ValueError("give exactly one of factor and factors")
        if self.factors is not None and self.of != "weights":
            raise ValueError("factors are per output channel: of: weights only")
        return self


class CalibrationOp(Strict):
    op: Literal["calibration"] = "calibration"
    count: Annotated[int, Field(ge=1, le=100_000)] | None = None
    seed: Seed | None = None


class PrecisionOp(Strict):
    op: Literal["precision"] = "precision"
    layer: Annotated[
        str, Field(min_length=1, max_length=1024, description="an ONNX node name, or a glob as in `expect:`")
    ]
    bits: Literal[16, 32] | None = Field(
        default=None,
        description="16: the layer's output activations at 16 bits; 32: the layer kept in float (onnxruntime)",
    )
    weights: Literal[4, 8, 16] | None = Field(
        default=None,
        description="the layer's kernel at 4, 8 or 16 bits (a glob: every weighted layer it matches); "
        "give bits or weights",
    )

    @model_validator(mode="after")
    def _one(self) -> PrecisionOp:
        if (self.bits is None) == (self.weights is None):
            raise ValueError("give exactly one of bits (its output activations) and weights (its kernel)")
        return self


OpModel = Annotated[
    ScaleWeightsOp | AddWeightNoiseOp | ForceRangeOp | ScaleGridOp | CalibrationOp | PrecisionOp,
    Field(discriminator="op"),
]


# Each op's model, by the name a sweep file gives it (``op:``), read off the union.
OPS: dict[str, type[Strict]] = {
    name: model for model in get_args(get_args(OpModel)[0]) for name in get_args(model.model_fields["op"].annotation)
}


@lru_cache(maxsize=1)
def op_adapter() -> TypeAdapter:
    """A validator of one op on its own (built once: building it costs milliseconds)."""
    return TypeAdapter(OpModel)


Rules = Annotated[list[Annotated[str, Field(max_length=1024)]], Field(max_length=1000)]


class ExpectModel(Strict):
    allow: Rules = Field([], description="LAYER:WHAT changes inside the footprint too")
    deny: Rules = Field([], description="LAYER:WHAT changes outside it after all")


class Variant(Strict):
    """One item of ``variants:``."""

    name: Name | Annotated[int, Field(ge=0)] = Field(description="unique in the sweep")
    perturb: Annotated[list[OpModel], Field(max_length=1000)] | None = Field(None, description="ops, in order")
    expect: ExpectModel | None = Field(None, description="widen (`allow`) or narrow (`deny`) the footprint")
    base: Path_ | None = Field(None, description="a base of its own (verdict `n/a`)")
    params: Params | None = Field(None, description="recipe params of its own (verdict `n/a`)")
    measure: Measure | None = Field(None, description="over the sweep's `measure`")
    compile: Compile | None = Field(None, description="over the sweep's `compile`")


class Section(Strict):
    """A backend's own top-level section (``hailo:``): some of that backend's ``compile:`` keys,
    set where a reader looks for them. Its fields are not declared here: :func:`sweep_model`
    takes them from the compiler's ``options_model`` (its ``section_keys``), where they are."""


class Sweep(Strict):
    """The sweep file's top level."""

    sweep: Name | Annotated[int, Field(ge=0)] = Field(description="the sweep's name")
    base: Path_ = Field(description="a recipe (.yaml) or an .onnx model, relative to the sweep file")
    backend: Name = Field("onnxruntime", description="the compiler: a registered backend (`loop backends`)")
    devices: Name | Annotated[list[Name], Field(min_length=1, max_length=8)] | None = Field(
        None,
        description=(
            "where to run: registered devices (`loop backends`), `KIND` or `KIND:ARGUMENT` such as "
            "`onnxruntime:PROVIDER` or `link-sim:LINK` (default: the backend's own); the first is measured "
            "and scored, the rest score the same inputs against it"
        ),
    )
    seed: Seed = Field(0, description="seeds generated frames")
    calibration: Data | None = Field(None, description="calibration frames")
    inputs: Data | None = Field(None, description="scoring frames")
    compile: Compile | None = Field(None, description="compile options")
    measure: Measure | None = Field(None, description="measurement protocol")
    hailo: Section | None = Field(None, description="backend hailo: the network cut and equalization")
    params: Params | None = Field(None, description="recipe parameter overrides")
    input_shapes: Annotated[dict[InputName, Shape], Field(max_length=64)] | None = Field(
        None, description="a static shape per input of an .onnx base, by name (`{x: [1, 3, 320, 320]}`)"
    )
    variants: Annotated[list[Variant], Field(min_length=1, max_length=10_000)] = Field(description="the variants")


def backend_options() -> dict[str, type[BaseModel]]:
    """Each registered compiler's own options model, by backend name. Loaded when called, not
    when this module is imported: the registry names compilers by string, so ``loop --help``
    loads none, and a backend registered at run time is seen at the next sweep file."""
    from loop.core import registry

    out: dict[str, type[BaseModel]] = {}
    for name in registry.COMPILERS:
        try:
            model = registry.compiler_class(name).options_model
        except (ImportError, AttributeError, ValueError):  # one that cannot load declares nothing
            continue
        if model is not None:
            out[name] = model
    return out


def backend_keys() -> dict[str, tuple[str, ...]]:
    """Each backend's own ``compile:`` keys, by backend name."""
    return {name: tuple(model.model_fields) for name, model in backend_options().items()}


def compile_model() -> type[Compile]:
    """``compile:`` as a sweep file may write it: the common keys, then each backend's own."""
    return _built(tuple(backend_options().items()))[0]


def sweep_model() -> type[Sweep]:
    """:class:`Sweep` whose ``compile:`` mappings (its own and each variant's) are :func:`compile_model`."""
    return _built(tuple(backend_options().items()))[1]


@lru_cache(maxsize=8)
def _built(owned: tuple[tuple[str, type[BaseModel]], ...]) -> tuple[type[Compile], type[Sweep]]:
    """The models of one set of registered backends (built once: building costs milliseconds)."""
    fields: dict[str, tuple[Any, FieldInfo]] = {}
    owners: dict[str, list[str]] = {}
    for backend, model in owned:
        for key, info in model.model_fields.items():
            # two backends may share a key (a value means the same to both), never a common key
            if key in Compile.model_fields or (key in fields and fields[key][0] != info.annotation):
                raise TypeError(f"backend '{backend}' declares compile key '{key}' unlike another declaration")
            owners.setdefault(key, []).append(backend)
            fields.setdefault(key, (info.annotation, copy(info)))
    for key, (_, info) in fields.items():  # "BACKEND: what it does", as the README shows whose key it is
        who = " or ".join(owners[key])
        info.description = f"{who}: {info.description}" if info.description else who
    full = create_model("Compile", __base__=Compile, __doc__=Compile.__doc__, **fields)  # type: ignore[call-overload]
    own: dict[str, Any] = {
        name: (_section(name, model), copy(Sweep.model_fields[name])) for name, model in _sectioned(owned)
    }
    section = (full | None, copy(Variant.model_fields["compile"]))
    variant = create_model("Variant", __base__=Variant, __doc__=Variant.__doc__, compile=section)
    variants = (list[variant], copy(Sweep.model_fields["variants"]))  # type: ignore[valid-type]
    sweep = create_model(
        "Sweep",
        __base__=Sweep,
        __doc__=Sweep.__doc__,
        compile=(full | None, copy(Sweep.model_fields["compile"])),
        variants=variants,
        **own,
    )
    return full, sweep


def _sectioned(owned: tuple[tuple[str, type[BaseModel]], ...]) -> list[tuple[str, type[BaseModel]]]:
    """The backends with a top-level section of their own (a field of :class:`Sweep`)."""
    return [(name, model) for name, model in owned if name in Sweep.model_fields and section_keys(model)]


def section_keys(model: type[BaseModel]) -> tuple[str, ...]:
    """The keys of a backend's options ``model`` its own top-level section sets (``section_keys``)."""
    keys: tuple[str, ...] = getattr(model, "section_keys", ())
    return keys


def _section(name: str, model: type[BaseModel]) -> Any:
    """Backend ``name``'s section: the keys of its options model it names, each unset by default
    (a key left out leaves the backend's own default, as in ``compile:``)."""
    fields: dict[str, Any] = {}
    for key in section_keys(model):
        info = copy(model.model_fields[key])
        info.default = None
        annotation: Any = info.annotation
        fields[key] = (annotation | None, info)
    section = create_model(name.capitalize(), __base__=Section, __doc__=Section.__doc__, **fields)
    return section | None


def backend_sections() -> tuple[str, ...]:
    """The top-level keys that are a backend's own section (``hailo``)."""
    return tuple(name for name, f in Sweep.model_fields.items() if _model_in(f.annotation) is Section)


def section_model(name: str) -> type[BaseModel] | None:
    """The model of the top-level section ``name`` as the registered backends declare it."""
    found = _model_in(sweep_model().model_fields[name].annotation)
    return None if found is Section else found


def validate(raw: Any, folder: Path | None = None, held: Mapping[str, np.ndarray] | None = None) -> Sweep:
    """``raw`` (from :func:`loop.author.yamlio.load_yaml`) as a :class:`Sweep`, or a LoopError at its
    line; ``folder``: the sweep file's, which the paths of its array references are relative to;
    ``held``: arrays by hash that references name before their files are written."""
    if not isinstance(raw, dict):
        raise LoopError("a sweep file is a mapping with 'sweep', 'base' and 'variants'", line=line_of_doc(raw))
    root = sweep_model()
    try:
        return root.model_validate(raw, context={"folder": folder, "held": held})
    except ValidationError as exc:
        raise locate(exc, raw, root) from None


def line_of_doc(raw: Any) -> int:
    return getattr(raw, "line", 0) or 1


def _walk(raw: Any, loc: tuple[Any, ...]) -> tuple[list[str], int | None]:
    """The path of ``loc`` that exists in ``raw`` (union labels skipped), and its line."""
    parts: list[str] = []
    line = getattr(raw, "line", None)
    node = raw
    for part in loc:
        if isinstance(node, LineDict) and part in node:
            line, node = node.line_of(str(part)), node[part]
            parts.append(f".{printable(part)}" if parts else printable(part))
        elif isinstance(node, LineList) and isinstance(part, int) and 0 <= part < len(node):
            line, node = node.item_lines[part], node[part]
            parts.append(f"[{part}]")
        elif isinstance(node, dict) and isinstance(part, str) and not _is_label(part):
            parts.append(f".{printable(part)}" if parts else printable(part))  # a missing key: the mapping's line
            break
        elif isinstance(part, int) and is_ref(node):  # an element of a stored array: its reference's line
            parts.append(f"[{part}]")
            break
    return parts, line


def _is_label(part: str) -> bool:
    """pydantic names union members in ``loc`` (``int``, ``list[int]``, ``scale_weights``, ``function-after``)."""
    return "[" in part or "-" in part or part in ("int", "str", "float", "bool", "none") or part in OPS


def _loc(error: Any) -> tuple[Any, ...]:
    """Where the error is; a bad tag of a tagged union is at the tag's own key."""
    loc = tuple(error["loc"])
    return (*loc, "op") if error["type"] == "union_tag_invalid" else loc


def _message(error: Any) -> str:
    kind = error["type"]
    if kind == "union_tag_invalid":
        return f"unknown op {_short(error['ctx']['tag'])} (known: {', '.join(OPS)})"
    if kind == "union_tag_not_found":
        return "a perturbation is a mapping with an 'op'"
    if kind == "extra_forbidden":
        return f"unknown key '{printable(error['loc'][-1])}'"
    if kind == "missing":
        return f"missing required key '{printable(error['loc'][-1])}'"
    message = str(error["msg"]).replace("Input should be", "should be").replace(" after validation", "")
    message = re.sub(r"a valid dictionary or (instance of \w+|object to extract fields from)", "a mapping", message)
    return message[:1].lower() + message[1:]


def _got(error: Any) -> str:
    value = error.get("input")
    plain = not isinstance(value, (dict, list)) and error["type"] not in ("union_tag_invalid", "missing")
    return f", got {_short(value)}" if plain else ""


def printable(value: Any) -> str:
    """``value`` as text that cannot break the one-line error (a key may hold a newline)."""
    return for_person(value, None)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def locate(exc: ValidationError, raw: Any, root: Any = None) -> LoopError:
    """One LoopError for ``exc``: the deepest error (the most precise), and its siblings at
    that same place joined, since a union reports one error per member."""
    placed = [(_walk(raw, _loc(e)), e) for e in exc.errors(include_url=False)]
    depth = max(len(parts) for (parts, _), _ in placed)
    best = [(parts, line, e) for (parts, line), e in placed if len(parts) == depth]
    parts, line, first = best[0]
    same = [e for p, _, e in best if p == parts]
    # A union reports each member; a bound broken by the member of the right type says more.
    same = [e for e in same if not e["type"].endswith("_type")] or same
    messages = list(dict.fromkeys(_message(e) for e in same))
    message = messages[0] + "".join(f"; or {m}" for m in messages[1:3]) + _got(first)
    if first["type"] == "extra_forbidden":
        message += _known(first["loc"], root or Sweep)
    return LoopError(message, line=line or line_of_doc(raw), field="".join(parts) or None)


def _known(loc: tuple[Any, ...], root: Any) -> str:
    """`` (known: ...)`` for an unknown key, from the model that refused it."""
    model: Any = root
    for part in loc[:-1]:
        fields = getattr(model, "model_fields", {})
        if isinstance(part, str) and part in fields:
            model = _model_in(fields[part].annotation)
        elif isinstance(part, str) and part in OPS:
            model = OPS[part]
        elif not (isinstance(part, int) or _is_label(str(part))):
            return ""
    keys = sorted(getattr(model, "model_fields", {}))
    return f" (known: {', '.join(keys)})" if keys else ""


def _model_in(annotation: Any) -> Any:
    """The first pydantic model inside an annotation (``Measure | None``, ``list[Variant]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) + getattr(annotation, "__metadata__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return getattr(annotation, "__origin__", None) and _model_in(annotation.__origin__)


class RecipeInput(Strict):
    name: Name = "input"
    shape: Annotated[list[Dim | Annotated[str, Field(pattern=r"^\$\w+$")]], Field(min_length=2, max_length=8)]


class RecipeLayer(Strict):
    """One layer of a graph recipe, after ``$param`` substitution."""

    name: Name
    op: Literal["conv"] = "conv"
    out: int = Field(ge=1, le=1 << 16, description="output channels")
    kernel: int = Field(3, ge=1, le=31)
    stride: int = Field(1, ge=1, le=16)
    act: Literal["none", "relu", "relu6"] = "none"
    weight_std: float | None = Field(None, ge=0, le=1e3, description="default: He, sqrt(2 / fan_in)")
    weight_mean: float = Field(0.0, ge=-1e3, le=1e3)
    bias_std: float = Field(0.05, ge=0, le=1e3)
    bias_mean: float = Field(0.0, ge=-1e3, le=1e3)


class Recipe(Strict):
    """A graph recipe: conv layers, deterministic from its seed."""

    name: Name | None = None
    seed: Seed = 0
    params: Params | None = None
    input: RecipeInput
    layers: Annotated[list[dict[str, Any]], Field(min_length=1, max_length=1024)]


def validate_as(model: type[Strict], raw: Any) -> Any:
    """``raw`` as ``model``, or a LoopError at its line."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise locate(exc, raw, model) from None
