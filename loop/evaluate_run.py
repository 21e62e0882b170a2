"""Stages 5-7 for one compiled variant: audit against the base, measure, score.

The first device measures and scores; every further device (say the emulator beside the
chip) scores the same inputs, and how far it disagrees with the first is recorded."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from loop import audit as audit_mod
from loop import frames as frames_mod
from loop import score as score_mod
from loop.artifacts import materialize
from loop.author import Authored
from loop.compilers.base import Artifact, CompileResult, TensorLayout
from loop.devices.base import Device, RuntimeOptions
from loop.measure import measure, measuring_stick
from loop.spec import SweepSpec
from loop.store import store_artifact

Raw = list[list[np.ndarray]]


@dataclass
class RunOutcome:
    variant: str
    status: str
    stage: str | None = None
    error: str | None = None
    verdict: str | None = None
    changes: list[dict[str, Any]] = field(default_factory=list)
    measure: dict[str, Any] = field(default_factory=dict)
    scores: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    artifact: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    run_id: int | None = None


@dataclass
class DeviceOutputs:
    raw: Raw
    outputs: Raw
    deterministic: bool
    inputs: tuple[TensorLayout, ...]


def verdict_for(spec: SweepSpec, authored: Authored, compiled: CompileResult,
                base_state: dict[str, Any]) -> audit_mod.Audit:
    if authored.variant.own_base or spec.own_compile(authored.variant):
        return audit_mod.Audit(audit_mod.NA)
    if authored.reference or not authored.variant.ops:  # the base itself (say, measured another way)
        return audit_mod.Audit(audit_mod.REFERENCE)
    if "layers" not in base_state:
        return audit_mod.Audit(audit_mod.NO_REFERENCE)
    return audit_mod.audit(base_state["layers"], compiled.layers, authored.footprint, authored.variant.expect,
                           authored.structure.bounds)


def float_outputs(model: bytes, inputs: np.ndarray) -> Raw:
    """The unquantized model of the same variant, for SNR and cosine."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    session = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return [session.run(None, {name: x[None].astype(np.float32)}) for x in inputs]


def run_inputs(device: Device, artifact: Artifact, inputs: np.ndarray) -> DeviceOutputs:
    """Each controlled input through the device, in the layout its session reports, and
    whether a repeat of the first was bit-identical."""
    with device.open(artifact, RuntimeOptions()) as session:
        frame = lambda x: [frames_mod.quantize(x[None], session.inputs[0])]  # noqa: E731
        raw = [[o.copy() for o in session.infer(frame(x))] for x in inputs]
        again = session.infer(frame(inputs[0]))
        outputs = [[frames_mod.dequantize(o, t) for o, t in zip(outs, session.outputs)] for outs in raw]
        return DeviceOutputs(raw, outputs, all(np.array_equal(a, b) for a, b in zip(raw[0], again)),
                             tuple(session.inputs))


def _disagreement(first: DeviceOutputs, other: DeviceOutputs) -> dict[str, Any]:
    mine, theirs = score_mod.flat(first.outputs), score_mod.flat(other.outputs)
    return {"output_mean": float(theirs.mean()), "snr_db_vs_first": score_mod.snr_db(mine, theirs),
            "max_abs_diff": float(np.max(np.abs(mine - theirs))),
            "values_differ": int(np.count_nonzero(mine != theirs)), "values_total": int(mine.size)}


def _score(authored: Authored, first: DeviceOutputs, others: dict[str, DeviceOutputs], inputs: np.ndarray,
           base_state: dict[str, Any], scorer: Callable[..., dict[str, Any]] | None) -> dict[str, Any]:
    reference = float_outputs(authored.model(), inputs)
    scores = score_mod.builtin(first.outputs, first.raw, reference, first.deterministic,
                               None if authored.variant.own_base else base_state.get("raw"))
    if others:
        scores["devices"] = {name: _disagreement(first, out) for name, out in others.items()}
    if scorer is not None:
        scores.update(scorer(outputs=first.outputs, reference=reference, raw=first.raw))
    return scores


def evaluate_variant(spec: SweepSpec, authored: Authored, compiled: CompileResult, devices: Sequence[Device],
                     runs: Path, base_state: dict[str, Any],
                     scorer: Callable[..., dict[str, Any]] | None) -> RunOutcome:
    name = authored.variant.name
    if not compiled.ok or compiled.artifact is None:
        return RunOutcome(name, "failed", stage=compiled.stage, error=compiled.error)
    artifact = materialize(compiled.artifact)
    path = Path(artifact.path) if artifact.path else store_artifact(runs, artifact.sha, artifact.suffix, artifact.data)
    verdict = verdict_for(spec, authored, compiled, base_state)
    inputs = authored.inputs()
    first = run_inputs(devices[0], artifact, inputs)
    others = {d.name: run_inputs(d, artifact, inputs) for d in devices[1:]}
    scores = _score(authored, first, others, inputs, base_state, scorer)
    if authored.reference:
        base_state.update(layers=compiled.layers, raw=first.raw)
    frame = [frames_mod.quantize(inputs[0][None], first.inputs[0])]
    del inputs, others
    m = measure(devices[0], artifact, frame, authored.variant.measure).to_dict()
    stick = measuring_stick(devices[0].name, path, m, authored.variant.measure)
    flags = m["flags"] + (["hailortcli-disagrees"] if stick and stick["comparable"] and not stick["agree"] else [])
    return RunOutcome(name, "ok", verdict=verdict.verdict, changes=[c.to_dict() for c in verdict.changes],
                      measure={**m, "hailortcli": stick}, scores=scores, flags=flags, artifact=str(path))
