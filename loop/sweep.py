"""Orchestration: the only place that knows the whole flow, and the only ledger writer.

author -> optimize/fingerprint/compile (parallel) -> audit -> measure -> score -> record.
Compiles finish before any measurement starts, so a timed measurement never overlaps a
compile of the same sweep (host contention).
"""
from __future__ import annotations

import os
import socket
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
from joblib import Parallel, delayed
from tqdm import tqdm

from loop import audit as audit_mod
from loop import fingerprint as fp
from loop.author import Authored, author, reference_of, with_reference
from loop.backends import compiler_class, device_class
from loop.compilers.base import CompileOptions, CompileResult, run_compile
from loop.evaluate_run import RunOutcome, evaluate_variant
from loop.ledger import Ledger
from loop.spec import SweepSpec


def compile_job(backend: str, model: bytes, calibration: np.ndarray, options: CompileOptions) -> CompileResult:
    """One compile, in whatever process joblib gives it; returns a value, never raises."""
    compiler = compiler_class(backend)()
    result = run_compile(compiler, model, calibration, options)
    result.info["versions"] = compiler.describe()
    result.info["host"] = socket.gethostname()
    return result


@dataclass
class SweepResult:
    spec: SweepSpec
    outcomes: list[RunOutcome] = field(default_factory=list)

    @property
    def failed(self) -> list[RunOutcome]:
        return [o for o in self.outcomes if o.status != "ok"]


def _threads_per_job(jobs: int) -> int:
    return max(1, (os.cpu_count() or 1) // max(jobs, 1))


def _compile_all(spec: SweepSpec, authored: list[Authored], jobs: int, progress: bool) -> list[CompileResult]:
    tasks = (delayed(compile_job)(spec.backend, a.model, a.calibration, a.options) for a in authored)
    runner = Parallel(n_jobs=jobs, return_as="generator")
    bar = tqdm(total=len(authored), desc="optimize+compile", unit="variant", disable=not progress)
    results = []
    for result in runner(tasks):
        results.append(result)
        bar.update()
    bar.close()
    return results


def run_sweep(spec: SweepSpec, runs: Path, jobs: int | None = None, progress: bool = True,
              scorer: Callable[..., dict[str, Any]] | None = None) -> SweepResult:
    """Run every variant of ``spec`` and record each in ``runs/ledger.sqlite``."""
    jobs = jobs or (os.cpu_count() or 1)
    variants = with_reference(spec)
    ref = reference_of(variants)
    threads = _threads_per_job(jobs)
    authored = [author(spec, v, v is ref, threads) for v in variants]  # user errors surface before any write
    ledger = Ledger(runs / "ledger.sqlite")
    try:
        ids = [ledger.begin(spec.name, spec.sha, a.variant.name, spec.variant_sha(a.variant), spec.backend)
               for a in authored]
        compiled = _compile_all(spec, authored, jobs, progress)
        result = SweepResult(spec)
        device = device_class(spec.devices[0])()
        base_state: dict[str, Any] = {}
        order = sorted(range(len(authored)), key=lambda i: not authored[i].reference)
        for i in tqdm(order, desc="measure+score", unit="variant", disable=not progress):
            outcome = _evaluate(spec, authored[i], compiled[i], device, runs, base_state, scorer)
            _record(ledger, ids[i], spec, authored[i], compiled[i], outcome)
            outcome.run_id = ids[i]
            result.outcomes.append(outcome)
        result.outcomes.sort(key=lambda o: [a.variant.name for a in authored].index(o.variant))
        return result
    finally:
        ledger.close()


def _evaluate(spec: SweepSpec, authored: Authored, compiled: CompileResult, device: Any, runs: Path,
              base_state: dict[str, Any], scorer: Callable[..., dict[str, Any]] | None) -> RunOutcome:
    try:
        return evaluate_variant(spec, authored, compiled, device, runs, base_state, scorer)
    except Exception as exc:  # noqa: BLE001 - one variant's failure is recorded, the sweep goes on
        return RunOutcome(authored.variant.name, "failed", stage="measure",
                          error=f"{type(exc).__name__}: {exc}", info={"traceback": traceback.format_exc(limit=8)})


def _record(ledger: Ledger, run_id: int, spec: SweepSpec, a: Authored, c: CompileResult, o: RunOutcome) -> None:
    record = {
        "options": _options_record(a.options), "versions": c.info.get("versions", {}), "host": socket.gethostname(),
        "compiled_on": c.compiled_on, "cache_hit": c.cache_hit, "stages": c.stages,
        "layers": [fp.to_record(l) for l in c.layers], "measure": o.measure, "scores": o.scores,
        "changes": o.changes, "perturb": [_op_record(op) for op in a.variant.ops],
        "stderr_tail": c.stderr_tail if not c.ok else "", "info": {**_info(c), **o.info},
    }
    ledger.finish(run_id, o.status, o.flags, record, error=o.error, stage=o.stage, onnx_sha=a.onnx_sha,
                  calib_sha=a.calib_sha, kernel_sha=fp.kernel_sha(c.layers) if c.layers else None,
                  bias_sha=fp.bias_sha(c.layers) if c.layers else None, device=spec.devices[0],
                  artifact=o.artifact, verdict=o.verdict)


def _info(c: CompileResult) -> dict[str, Any]:
    return {k: v for k, v in c.info.items() if k not in ("versions",)}


def _options_record(options: CompileOptions) -> dict[str, Any]:
    from dataclasses import asdict
    return asdict(options)


def _op_record(op: Any) -> dict[str, Any]:
    from dataclasses import asdict
    return {"op": op.label if hasattr(op, "label") else op.name, **asdict(op)}


def summarize_changes(changes: Iterable[dict[str, Any]]) -> list[str]:
    return [f"{c['layer']} {c['what']}: {c['detail']}" for c in changes if not c.get("allowed", True)]
