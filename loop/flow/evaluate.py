"""Stages 5-7 for one compiled variant: audit against the base, measure, score.

The first device measures and scores; every further device (say the emulator beside the
chip) scores the same inputs, and how far it disagrees with the first is recorded."""

from __future__ import annotations

import shlex
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from loop.author import frames as frames_mod
from loop.author.author import Authored, shares
from loop.author.cut import cut_model, cut_of
from loop.author.perturb import weights_footprint
from loop.author.sweepfile import SweepSpec
from loop.core.errors import LoopError
from loop.core.facts import CompileFacts, Failure, Judgement, Where
from loop.core.hashing import array_sha, bytes_sha
from loop.core.kinds import Flag, Stage, Status, Verdict
from loop.core.leftovers import scratch
from loop.core.modelfile import model_files
from loop.core.record import Change, Measurement
from loop.core.registry import compiler_class
from loop.core.text import for_person
from loop.core.vocab import CompileResult, LayerPrint, TensorLayout, WeightPrecision
from loop.devices.base import VENDOR_CHECK_FAILED, VENDOR_DISAGREES
from loop.flow import float_child, supervise
from loop.flow.runner import DeviceRun, RunResult, RunTask, Stages, StageTimeouts, device_refs
from loop.judge import audit as audit_mod
from loop.judge import score as score_mod
from loop.store.shared import store_artifact

Raw = list[list[np.ndarray]]


@dataclass
class RunOutcome:
    variant: str
    status: Status
    stage: Stage | None = None
    error: str | None = None
    verdict: Verdict | None = None
    changes: list[Change] = field(default_factory=list)
    measure: Measurement = field(default_factory=Measurement.none)
    scores: dict[str, Any] = field(default_factory=dict)
    flags: list[Flag] = field(default_factory=list)
    artifact: str | None = None
    where: Where = field(default_factory=Where)
    judged: Judgement = field(default_factory=Judgement)
    failure: Failure = field(default_factory=Failure)
    run_id: int | None = None
    stages: dict[str, float] = field(default_factory=dict)
    resumed: bool = False  # finished by an earlier run of the sweep, and read back


@dataclass(frozen=True)
class Reference:
    """What every other variant of a sweep is judged against, fixed once the reference is
    evaluated (or read back on resume): its layer prints, its raw device outputs (None when its
    artifact is gone, so no outputs are compared) and its SNR."""

    layers: tuple[LayerPrint, ...]
    raw: tuple[tuple[np.ndarray, ...], ...] | None
    snr_db: float | None
    compiled: CompileFacts = field(default_factory=CompileFacts)  # its guard's decision, its grids wider than 8


@dataclass(frozen=True)
class Against:
    """The reference a variant is evaluated against, or why there is none (for ``no-reference``)."""

    reference: Reference | None
    missing: str = ""


@dataclass
class DeviceOutputs:
    raw: Raw
    outputs: Raw
    deterministic: bool
    inputs: tuple[TensorLayout, ...]


def verdict_for(spec: SweepSpec, authored: Authored, compiled: CompileResult, against: Against) -> audit_mod.Audit:
    if authored.variant.own_base:  # another network: nothing like-for-like to audit against
        return audit_mod.Audit(Verdict.NA)
    if authored.reference:
        return audit_mod.Audit(Verdict.REFERENCE)
    v = authored.variant
    shared = shares(spec, v)
    if not v.ops and not shared:  # the base again: measured another way (a knob's A/B), or a candidate of nothing
        return audit_mod.Audit(Verdict.REFERENCE if v.measure != spec.measure else Verdict.NO_EFFECT)
    if against.reference is None:
        return audit_mod.Audit(Verdict.NO_REFERENCE)
    grids = audit_mod.grid_changes(
        against.reference.compiled.wide_grids,
        compiled.info.wide_grids,
        [n for lp in (*against.reference.layers, *compiled.layers) for n in lp.answers_to],
    )
    at4 = _shared_layers(compiled.info) if shared else []
    footprint = [*authored.footprint, *weights_footprint(authored.structure, authored.options, at4, 4)]
    found = audit_mod.audit(
        against.reference.layers, compiled.layers, footprint, v.expect, _clamps(authored, compiled), grids
    )
    asked = [*authored.options.weight_bits, *(WeightPrecision(name, 4, "") for name in at4)]
    found = _unapplied_bits(found, asked, compiled.layers)
    found = _guard_cause(found, against.reference.compiled.bias_guard, compiled.info.bias_guard)
    causes = compiled.info.kernel_causes
    moved = _float_moved(against.reference.layers, compiled.layers) if causes else set()
    return _named_causes(found, {k: c for k, c in causes.items() if k in moved})


def _shared_layers(info: CompileFacts) -> list[str]:
    """The layers a ``weights_4bit_share`` put at 4 bits, as either backend records them."""
    found = info.weights_4bit_share or info.weights_4bit or {}
    return [str(name) for name in found.get("layers") or []]


def _unapplied_bits(
    found: audit_mod.Audit, asked: Sequence[WeightPrecision], layers: Sequence[LayerPrint]
) -> audit_mod.Audit:
    """A kernel asked at a width the compiled layer does not hold: the precision was not applied,
    whatever else moved, so the run is kept apart (its bytes and score are not the asked ones)."""
    held = {n: lp.weight_bits or 8 for lp in layers for n in lp.answers_to}
    missed = [
        Change(w.layer, "function", f"weights asked at {w.bits} bits; the compiled layer holds {held[w.layer]}", False)
        for w in asked
        if w.layer in held and held[w.layer] != w.bits
    ]
    if not missed:
        return found
    return audit_mod.Audit(Verdict.CONFOUNDED, (*found.changes, *missed))


UNAPPLIED = (
    "the compiler did not apply the scale_grid edit: the device outputs are bit-identical to the reference's "
    "(the compiled parameters say it moved; the artifact computes as the base's)"
)


def _unapplied(
    backend: str, authored: Authored, first: DeviceOutputs, reference: Reference | None, found: audit_mod.Audit
) -> audit_mod.Audit:
    """A scale-only edit whose device outputs come back bit for bit the reference's did nothing,
    whatever the compiler's parameters say (a compiler may ignore an edited parameter when it
    compiles): ``no-effect``, with the line that says so. The audit reads what ran."""
    if not authored.options.rescales or reference is None or reference.raw is None:
        return found
    if compiler_class(backend).prints_from_artifact:  # the prints are what ran: an unmoved output is a small edit
        return found
    if found.verdict not in (Verdict.CLEAN, Verdict.CONFOUNDED) or not _same_raw(first.raw, reference.raw):
        return found
    return audit_mod.Audit(
        Verdict.NO_EFFECT, (*found.changes, Change(authored.options.rescales[0].layer, "function", UNAPPLIED))
    )


def _same_raw(mine: Raw, theirs: tuple[tuple[np.ndarray, ...], ...]) -> bool:
    if len(mine) != len(theirs):
        return False
    return all(
        len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
        for a, b in zip(mine, theirs, strict=True)
    )


def _float_moved(reference: Sequence[LayerPrint], variant: Sequence[LayerPrint]) -> set[str]:
    """Layers whose float kernel differs from the reference's (or cannot be compared): only there
    can a pass that rescales float kernels (equalization) be a kernel change's cause; a kernel
    whose float is unchanged moved on its grid, for another reason (a forced range)."""
    before = {p.name: p.float_sha for p in reference}
    return {p.name for p in variant if p.float_sha is None or before.get(p.name) != p.float_sha}


def _guard_cause(found: audit_mod.Audit, reference: str | None, here: str | None) -> audit_mod.Audit:
    """Bias changes the output guard made by going one way on the reference and the other on
    this variant say so, and how to pin it: the changes are real, and a confound. A variant
    follows its reference's decision (:mod:`loop.flow.follow`); this is left for one compiled
    while its reference's decision was not to be had (its reference run by another process)."""
    if reference == here or {reference, here} != {"kept", "dropped"}:
        return found
    why = (
        f"the bias-correction guard {here} the pass here and {reference} it on the reference "
        "(its decision was not known when this variant compiled; compile.bias_correction_guard: false "
        "keeps it on both)"
    )
    changes = tuple(
        Change(c.layer, c.what, f"{c.detail}; {why}", c.allowed) if c.what == "bias" else c for c in found.changes
    )
    return audit_mod.Audit(found.verdict, changes)


def _named_causes(found: audit_mod.Audit, causes: dict[str, str]) -> audit_mod.Audit:
    """A kernel change the compiler says one of its own passes makes (the DFC's equalization, say)
    names that pass in its detail."""
    changes = tuple(
        Change(c.layer, c.what, f"{c.detail}; {causes[c.layer]}", c.allowed)
        if c.layer in causes and c.what.startswith("kernel")
        else c
        for c in found.changes
    )
    return audit_mod.Audit(found.verdict, changes)


def _clamps(authored: Authored, compiled: CompileResult) -> dict[str, tuple[float, float]]:
    """The clamps the compiler reports it removed; else those the structure predicts (a
    backend that does not say, a compile cached before it was recorded)."""
    removed = compiled.info.removed_clamps
    if removed is None:
        return authored.structure.bounds
    edge = lambda b, inf: inf if b is None else float(b)  # noqa: E731
    return {t: (edge(lo, -np.inf), edge(hi, np.inf)) for t, (lo, hi) in removed.items()}


@dataclass(frozen=True)
class FloatOutputs:
    """The unquantized model's outputs on the controlled inputs, with their ONNX names."""

    names: tuple[str, ...]
    raw: Raw


# The float model's outputs by (model, frames) hash: a generation of patches of one base (a
# scale-only search) scores every candidate against the same float model on the same frames,
# and running it again for each cost a session and every frame (issue 43). A few entries: the
# sweeps of one process share a base or two.
_FLOAT_CACHE: OrderedDict[tuple[str, str], FloatOutputs] = OrderedDict()
_FLOAT_CACHE_SIZE = 4
_FLOAT_LOCK = threading.Lock()


def float_outputs(load: Callable[[], bytes | Path], inputs: frames_mod.Frames, sha: str) -> FloatOutputs:
    """The unquantized model of the same variant, for SNR and cosine (its arrays read-only: one
    answer serves every variant of that model on those frames). ``load`` reads the model, which
    ``sha`` names: a hit neither reads nor hashes it."""
    key = (sha, _frames_sha(inputs))
    with _FLOAT_LOCK:
        if key in _FLOAT_CACHE:
            _FLOAT_CACHE.move_to_end(key)
            return _FLOAT_CACHE[key]
    found = _float_outputs(load(), inputs)
    with _FLOAT_LOCK:
        _FLOAT_CACHE[key] = found
        while len(_FLOAT_CACHE) > _FLOAT_CACHE_SIZE:
            _FLOAT_CACHE.popitem(last=False)
    return found


APART_FROM = 256 << 20  # a model's files past this run their float reference in a child (loop.flow.float_child)


def _float_outputs(model: bytes | Path, inputs: frames_mod.Frames) -> FloatOutputs:
    apart = isinstance(model, Path) and sum(f.stat().st_size for f in model_files(model)) > APART_FROM
    names, raw = _float_apart(model, inputs) if apart else float_child.outputs(model, inputs)  # type: ignore[arg-type]
    for outs in raw:
        for o in outs:
            if isinstance(o, np.ndarray):
                o.flags.writeable = False
    return FloatOutputs(names, raw)


def _float_apart(model: Path, inputs: frames_mod.Frames) -> tuple[tuple[str, ...], list[list[np.ndarray]]]:
    """:func:`loop.flow.float_child.outputs` in a child process: this process never holds the
    float weights; a failure there is this one's, with the child's log."""
    with scratch("float") as tmp:
        folder = Path(tmp)
        float_child.write_inputs(folder, model, inputs)
        with supervise.spawn("loop.flow.float_child", tmp, folder=folder) as child:
            code = child.finish(None)
            if code != 0:
                how = supervise.how_it_died(code) if code is not None else "no end"
                raise RuntimeError(f"the float reference failed ({how}): {child.tail()[-400:]}")
        return float_child.read_outputs(folder)


def _frames_sha(inputs: frames_mod.Frames) -> str:
    """The frames' names, and each one's dtype, shape and bytes, hashed."""
    arrays = inputs if isinstance(inputs, Mapping) else {"": inputs}
    names = sorted(arrays)
    return bytes_sha(f"{names}|{array_sha(*(np.asarray(arrays[n]) for n in names))}".encode())


def model_order(layouts: tuple[TensorLayout, ...], names: tuple[str, ...], renamed: dict[str, str]) -> list[int]:
    """For each model output, in the model's order, the device output that carries it: by name
    (a compiled stream's own, or the model output the compiler says it carries); by position only
    when no device output bears a model output's name (a compiled order may differ from the model's)."""
    carried = {renamed.get(t.name, t.name): i for i, t in enumerate(layouts)}
    if all(n in carried for n in names):
        return [carried[n] for n in names]
    if len(layouts) == len(names) and not any(n in carried for n in names):
        return list(range(len(names)))
    raise LoopError(
        f"the device's outputs ({', '.join(for_person(t.name) for t in layouts)}) do not all carry a model output "
        f"({', '.join(for_person(n) for n in names)})"
    )


def outputs_of(
    run: DeviceRun, reference: FloatOutputs | None = None, renamed: dict[str, str] | None = None
) -> DeviceOutputs:
    """A device's raw answers, and their values as its layouts dequantize them: matched to the
    model's outputs by name and put in the model's order and shape when ``reference`` is given."""
    if reference is None or not reference.raw:
        outputs = [[frames_mod.dequantize(o, t) for o, t in zip(outs, run.outputs, strict=True)] for outs in run.raw]
        return DeviceOutputs(run.raw, outputs, run.deterministic, run.inputs)
    order = model_order(run.outputs, reference.names, renamed or {})
    shapes = [np.shape(o) for o in reference.raw[0]]
    outputs = [
        [frames_mod.dequantize(outs[i], run.outputs[i], shape) for i, shape in zip(order, shapes, strict=True)]
        for outs in run.raw
    ]
    return DeviceOutputs(run.raw, outputs, run.deterministic, run.inputs)


def _disagreement(first: DeviceOutputs, other: DeviceOutputs) -> dict[str, Any]:
    mine, theirs = score_mod.flat(first.outputs), score_mod.flat(other.outputs)
    return {
        "output_mean": float(theirs.mean()),
        "snr_db_vs_first": score_mod.snr_db(mine, theirs),
        "max_abs_diff": float(np.max(np.abs(mine - theirs))),
        "values_differ": int(np.count_nonzero(mine != theirs)),
        "values_total": int(mine.size),
    }


def _score(
    authored: Authored,
    first: DeviceOutputs,
    others: dict[str, DeviceOutputs],
    floats: FloatOutputs,
    against: Reference | None,
    scorer: Callable[..., dict[str, Any]] | None,
) -> dict[str, Any]:
    reference = floats.raw
    scores = score_mod.builtin(
        first.outputs,
        first.raw,
        reference,
        first.deterministic,
        None if authored.variant.own_base or against is None or against.raw is None else _lists(against.raw),
        floats.names,
    )
    if others:
        scores["devices"] = {name: _disagreement(first, out) for name, out in others.items()}
    if scorer is not None:
        given = scorer(outputs=first.outputs, reference=reference, raw=first.raw)
        scores.update(score_mod.user_scores(given, len(first.outputs)))
    return scores


@dataclass(frozen=True)
class Prepared:
    """A compiled variant ready to run: its task, and where its artifact lies in ``runs``."""

    task: RunTask
    path: Path


def prepare(
    authored: Authored,
    compiled: CompileResult,
    devices: tuple[str, ...],
    runs: Path,
    timeouts: StageTimeouts,
    measure: bool = True,
) -> Prepared | RunOutcome:
    """The variant's run task, or its failed outcome (a failed compile, an artifact damaged
    on disk since it was stored: never measured as this variant). ``measure=False``: the devices
    answer the inputs only (a study measures its generation together, in rounds)."""
    name = authored.variant.name
    if not compiled.ok or compiled.artifact is None:
        stage = Stage(compiled.stage) if compiled.stage else Stage.COMPILE  # ok, yet no artifact: the compile's fault
        # what the compile found before it failed is kept (a HEF's size against the device it was refused by)
        return RunOutcome(
            name,
            Status.FAILED,
            stage=stage,
            error=compiled.error or "the compile returned no artifact",
            failure=Failure(compiled.traceback),
            stages=dict(compiled.stages),
        )
    # a stored artifact goes to its device as its file: the device's process reads and checks it
    # (runner.with_bytes), so this process never holds a model's weights to measure them
    artifact = compiled.artifact
    path = Path(artifact.path) if artifact.path else store_artifact(runs, artifact.sha, artifact.suffix, artifact.data)
    task = RunTask(
        artifact,
        authored.inputs(),
        authored.variant.measure,
        devices,
        device_refs(devices),
        measure=measure,
        timeouts=timeouts,
    )
    return Prepared(task, path)


def evaluate_variant(
    spec: SweepSpec,
    authored: Authored,
    compiled: CompileResult,
    ran: RunResult,
    prepared: Prepared,
    against: Against,
    scorer: Callable[..., dict[str, Any]] | None,
) -> tuple[RunOutcome, Reference | None]:
    """Audit and score what the runner returned: the variant's outcome and, when it is the
    sweep's reference and ran, the Reference it sets for every other variant."""
    name = authored.variant.name
    if not ran.ok:
        failed = RunOutcome(name, Status.FAILED, ran.stage, ran.error, where=_where(ran), stages=dict(ran.stages))
        return replace(failed, failure=Failure(detail=ran.detail or None)), None
    clock = Stages(first="audit")
    verdict = verdict_for(spec, authored, compiled, against)
    clock("score")
    scores, first = scored(authored, compiled, ran, prepared.task.inputs, against.reference, scorer)  # made once
    verdict = _unapplied(spec.backend, authored, first, against.reference, verdict)
    made = reference_of(compiled, first, scores) if authored.reference else None
    flags = _score_flags(spec, authored, scores, against.reference)
    clock.finish()
    m, stick = ran.measure or _bytes_only(next(iter(ran.devices.values()))), ran.vendor
    flags += m.flags
    flags += _vendor_flags(stick)
    found: dict[str, Any] = {"no_reference": against.missing or None} if verdict.verdict == Verdict.NO_REFERENCE else {}
    ruined = ruined_by_quantization(spec, authored, scores)
    if ruined:  # where the signal is lost is analysed for a reference: the others share its layers
        flags.append(Flag.QUANTIZATION_RUINED)
        lost = where_lost(spec, authored, analyse=prepared.task.measure) if authored.reference else {}
        found["quantization_ruined"] = {**ruined, **lost}
    if Flag.BELOW_REFERENCE in flags and against.reference is not None:
        found["below_reference"] = {"snr_db": scores.get("snr_db"), "reference_snr_db": against.reference.snr_db}
    outcome = RunOutcome(
        name,
        Status.OK,
        verdict=verdict.verdict,
        changes=list(verdict.changes),
        measure=m.with_vendor(stick),
        scores=scores,
        flags=flags,
        artifact=str(prepared.path),
        stages={**clock.seconds, **ran.stages},
        where=_where(ran),
        judged=Judgement(**found),
    )
    return outcome, made


def _bytes_only(seen: DeviceRun) -> Measurement:
    """An unmeasured run's bytes per inference, known from its session's layout without timing a
    frame: a study's rounds time its rate but record no bytes, and the roofline needs both."""
    frame = lambda layouts: sum(t.frame_bytes for t in layouts)  # noqa: E731
    return Measurement.from_dict({"bytes_in": frame(seen.inputs), "bytes_out": frame(seen.outputs)})


def scored(
    authored: Authored,
    compiled: CompileResult,
    ran: RunResult,
    inputs: frames_mod.Frames,
    against: Reference | None,
    scorer: Callable[..., dict[str, Any]] | None = None,
) -> tuple[dict[str, Any], DeviceOutputs]:
    """The scores a sweep records of what the runner returned on ``inputs`` (SNR, cosine, top-1
    against the float model), and the first device's outputs they were made from."""
    # the float model cut as the compiled network is (hailo.start_nodes/end_nodes), or the whole model
    cut = cut_of(authored.options)
    # the authored model's hash and the cut name what is read, so a hit reads nothing
    # uncut, the session reads the authored file itself: no copy of the model's bytes in this process
    load = lambda: cut_model(authored.model_path, cut)  # noqa: E731
    reference = float_outputs(load, inputs, f"{authored.onnx_sha}|{cut}")
    renamed = dict(compiled.info.output_names)  # compiled output -> the model output it carries
    runs = [outputs_of(r, reference, renamed) for r in ran.devices.values()]
    others = dict(zip(list(ran.devices)[1:], runs[1:], strict=True))
    return _score(authored, runs[0], others, reference, against, scorer), runs[0]


def reference_of(compiled: CompileResult, first: DeviceOutputs, scores: dict[str, Any]) -> Reference:
    """The Reference a compiled and scored reference sets for the variants judged against it."""
    return Reference(tuple(compiled.layers), _tuples(first.raw), scores.get("snr_db"), compiled.info)


TOP1_COLLAPSED = 0.5  # a classifier agreeing with its float model on under half the frames


def ruined_by_quantization(spec: SweepSpec, authored: Authored, scores: dict[str, Any]) -> dict[str, Any] | None:
    """Whether a run, as its compile options quantize it, lost the model against the float one: its
    SNR below ``measure.ruined_snr_db``, or a classifier's top-1 agreeing on under half the frames;
    with the figures, so the flag says which. Every run is judged so, not the reference alone: a
    fast wrong answer must not look good."""
    snr, threshold = scores.get("snr_db"), authored.variant.measure.ruined_snr_db
    top1 = scores.get("top1_agreement") or {}
    collapsed = {k: v for k, v in top1.items() if v < TOP1_COLLAPSED}
    if not (isinstance(snr, float) and snr < threshold) and not collapsed:
        return None
    return {"snr_db": snr, "threshold_db": threshold, "top1_agreement": top1, "collapsed": sorted(collapsed)}


_ANALYSED: OrderedDict[str, dict[str, Any]] = OrderedDict()  # where_lost by content, this process's
_ANALYSED_SIZE = 16


def where_lost(spec: SweepSpec, authored: Authored, analyse: bool = True) -> dict[str, Any]:
    """For a ruined base: the layers where its signal is lost and the sweep entries that would put
    them at 16 bits (:mod:`loop.judge.falls`), by its compiler's noise analysis; nothing when the
    backend has none, and why when the analysis failed (the flag stands either way). The entries
    are a first guess, unmeasured: measuring them, and widening where they fall short, is
    ``loop noise``'s (the command is recorded), which costs several compiles and a rate race that
    a sweep's parent would pay while its devices measure (docs/noise.md).

    The analysis is a second optimize and a run of three models per frame, so it is made once per
    content (model, calibration and scoring frames, compile options, backend) in a process, and
    every later generation or study on the same base reads it back. ``analyse=False`` (a
    score-only run, which prints nothing of it) gives only the command that makes it: a search's
    step never waits for an analysis it does not show."""
    if not compiler_class(spec.backend).analyses_noise():
        return {}
    command = f"loop noise {shlex.quote(str(spec.path))} --variant {shlex.quote(authored.variant.name)}"
    key = "|".join((spec.backend, authored.onnx_sha, authored.calib_sha, authored.inputs_sha, repr(authored.options)))
    if key in _ANALYSED:
        _ANALYSED.move_to_end(key)
        return {**_ANALYSED[key], "measure_with": command}
    if not analyse:
        return {"measure_with": command, "analysed": "not in a score-only run: the command makes it"}
    from loop.flow.noise import of_authored  # a second optimize: paid only by a ruined base

    try:
        report, _ = of_authored(spec, authored)
    except Exception as exc:  # the run is recorded whatever the analysis does
        return {"worst_layers_error": f"{type(exc).__name__}: {exc}"}
    found = {
        "worst_layers": [f.to_json() for f in report.falls],
        "try": report.to_try(),
        "try_measured": False,
        "series": report.series(),
    }
    _ANALYSED[key] = found
    while len(_ANALYSED) > _ANALYSED_SIZE:
        _ANALYSED.popitem(last=False)
    return {**found, "measure_with": command}


def _vendor_flags(stick: dict[str, Any] | None) -> list[Flag]:
    """The vendor cross-check's word on a measured run: it disagreed, or it failed (with why, cut
    short); either way the run stands."""
    if not stick:
        return []
    if stick.get("error"):
        reason = (str(stick["error"]).strip().splitlines() or ["no reason given"])[0]
        return [Flag(f"{VENDOR_CHECK_FAILED}: {for_person(reason, 160)}")]  # the tool's text, shown as flags are
    return [Flag(VENDOR_DISAGREES)] if stick.get("comparable") and not stick.get("agree") else []


def _where(ran: RunResult) -> Where:
    identity = {k: ran.health.get(k) for k in ("device_id", "device_path")} if ran.health else {}
    return Where({"host": ran.host, "worker": ran.worker}, identity)


def _tuples(raw: Raw) -> tuple[tuple[np.ndarray, ...], ...]:
    return tuple(tuple(outs) for outs in raw)


def _lists(raw: tuple[tuple[np.ndarray, ...], ...]) -> Raw:
    return [list(outs) for outs in raw]


CALIBRATION_WORSE_DB = 3.0  # below the reference's SNR by more than this: the method hurt


BELOW_REFERENCE_DB = 6.0  # a quarter of the reference's signal-to-noise: never a rounding's worth


def _score_flags(
    spec: SweepSpec, authored: Authored, scores: dict[str, Any], reference: Reference | None
) -> list[Flag]:
    """A calibration method other than the sweep's that scores far below it is flagged:
    ONNX Runtime's ``distribution`` gave -15.5 dB on mobilenet_v3_small without a word. Any
    variant whose SNR interval lies wholly ``BELOW_REFERENCE_DB`` under its reference's SNR is
    flagged too: a ``scale_grid`` of 8 at -4.6 dB is ``clean`` (its footprint held), and wrong."""
    ref = None if reference is None else reference.snr_db
    snr = scores.get("snr_db")
    if authored.reference or authored.variant.own_base or ref is None or not isinstance(snr, float):
        return []
    found = []
    if authored.options.calibration_method != spec.compile.calibration_method and snr < ref - CALIBRATION_WORSE_DB:
        found.append(Flag.CALIBRATION_WORSE)
    high = (scores.get("snr_db_ci95") or [snr, snr])[1]
    if high < ref - BELOW_REFERENCE_DB:
        found.append(Flag.BELOW_REFERENCE)
    return found
