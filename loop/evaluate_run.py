"""Stages 5-7 for one compiled variant: audit against the base, measure, score."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from loop import audit as audit_mod
from loop import frames as frames_mod
from loop import score as score_mod
from loop.author import Authored
from loop.compilers.base import Artifact, CompileResult
from loop.devices.base import Device, RuntimeOptions
from loop.measure import measure
from loop.spec import SweepSpec
from loop.store import store_artifact


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


def verdict_for(authored: Authored, compiled: CompileResult, base_state: dict[str, Any]) -> audit_mod.Audit:
    if authored.reference:
        return audit_mod.Audit(audit_mod.REFERENCE)
    if authored.variant.own_base or "layers" not in base_state:
        return audit_mod.Audit(audit_mod.NA)
    return audit_mod.audit(base_state["layers"], compiled.layers, authored.footprint, authored.variant.expect,
                           authored.structure.bounds)


def float_outputs(model: bytes, inputs: np.ndarray) -> list[list[np.ndarray]]:
    """The unquantized model of the same variant, for SNR and cosine."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    session = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return [session.run(None, {name: x[None].astype(np.float32)}) for x in inputs]


def run_inputs(device: Device, artifact: Artifact, inputs: np.ndarray) -> tuple[list[list[np.ndarray]], bool]:
    """Raw device outputs for each controlled input, and whether a repeat was bit-identical."""
    layout = artifact.inputs[0]
    with device.open(artifact, RuntimeOptions()) as session:
        raw = [[o.copy() for o in session.infer([frames_mod.quantize(x[None], layout)])] for x in inputs]
        again = session.infer([frames_mod.quantize(inputs[0][None], layout)])
    return raw, all(np.array_equal(a, b) for a, b in zip(raw[0], again))


def evaluate_variant(spec: SweepSpec, authored: Authored, compiled: CompileResult, device: Device, runs: Path,
                     base_state: dict[str, Any], scorer: Callable[..., dict[str, Any]] | None) -> RunOutcome:
    name = authored.variant.name
    if not compiled.ok or compiled.artifact is None:
        return RunOutcome(name, "failed", stage=compiled.stage, error=compiled.error)
    artifact = compiled.artifact
    path = store_artifact(runs, artifact.sha, artifact.suffix, artifact.data)
    for key, data in artifact.extras.items():
        store_artifact(runs, artifact.sha, f".{key}", data)
    verdict = verdict_for(authored, compiled, base_state)
    inputs = authored.inputs()
    raw, deterministic = run_inputs(device, artifact, inputs)
    outputs = [[frames_mod.dequantize(o, t) for o, t in zip(outs, artifact.outputs)] for outs in raw]
    reference = float_outputs(authored.model, inputs)
    scores = score_mod.builtin(outputs, raw, reference, deterministic,
                               None if authored.variant.own_base else base_state.get("raw"))
    if scorer is not None:
        scores.update(scorer(outputs=outputs, reference=reference, raw=raw))
    if authored.reference:
        base_state.update(layers=compiled.layers, raw=raw)
    frame = [frames_mod.quantize(inputs[0][None], t) for t in artifact.inputs[:1]]
    del inputs, raw, outputs, reference
    m = measure(device, artifact, frame, authored.variant.measure)
    return RunOutcome(name, "ok", verdict=verdict.verdict, changes=[c.to_dict() for c in verdict.changes],
                      measure=m.to_dict(), scores=scores, flags=m.flags, artifact=str(path))
