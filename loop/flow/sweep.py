"""Orchestration: the only place that knows the whole flow, and the only ledger writer.

author -> optimize/fingerprint/compile (parallel, cached) -> audit -> measure -> score -> record.
Measurements wait for the sweep's compiles (and, through host locks, for other sweeps'),
unless ``overlap`` is set, in which case runs measured while compiles ran are flagged
``host-contended``. A sweep run again on the same runs folder continues where it stopped.

A failure of the runs folder's disk is not the variant's: an artifact that cannot be stored
(a full disk) fails its variant at stage ``store``, which a resume redoes; a ledger that
cannot record even that stops the sweep with one line (:class:`loop.store.files.StoreFault`).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from loop.core.errors import LoopError
from loop.core.leftovers import remove_stale_scratch, scratch
from loop.core.registry import make_device
from loop.core.vocab import CompileResult
from loop.devices.base import Device
from loop.flow.compile_pool import Job, check_cluster, iter_compiled
from loop.flow.evaluate import Against, Reference, RunOutcome, evaluate_variant, run_inputs
from loop.flow.resume import Claim, Heartbeat, claim
from loop.judge import fingerprint as fp
from loop.measure import hostlock
from loop.spec.author import Authored, author, reference_of, with_reference
from loop.spec.sweepfile import SweepSpec
from loop.store.artifacts import load_artifact, spill
from loop.store.cache import Cache
from loop.store.files import StoreWarning, check_runs, remove_stale_temps, runs_artifact
from loop.store.ledger import Ledger, LedgerFault, run_json

Scorer = Callable[..., dict[str, Any]]


@dataclass(frozen=True)
class SweepOptions:
    jobs: int | None = None
    progress: bool = True
    scorer: Scorer | None = None
    overlap: bool = False
    fresh: bool = False
    cluster: str | None = None
    generation: int | None = None


@dataclass
class SweepResult:
    spec: SweepSpec
    outcomes: list[RunOutcome] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[RunOutcome]:
        return [o for o in self.outcomes if o.status != "ok"]


def _job(a: Authored) -> Job:
    return Job(a.onnx_sha, a.calib_sha, a.options, lambda: (a.model(), a.calibration()))


def _compile_stream(
    spec: SweepSpec, todo: list[Authored], jobs: int, runs: Path, options: SweepOptions
) -> Iterator[tuple[int, CompileResult, bool]]:
    """(index, result, compiles still running) in submission order, each as soon as every
    earlier one is in. Each artifact goes to disk as it arrives, so finished compiles do not
    pile up in memory."""
    pending: dict[int, CompileResult] = {}
    following = 0
    batches = iter_compiled(
        spec.backend, [_job(a) for a in todo], jobs=jobs, cache=Cache.for_runs(runs), cluster=options.cluster
    )
    bar = tqdm(total=len(todo), desc="optimize+compile", unit="variant", disable=not options.progress)
    settled_count = 0
    for settled in batches:
        bar.update(len(settled))
        settled_count += len(settled)
        pending.update((i, _stored(runs, r)) for i, r in settled)
        while following in pending:
            yield following, pending.pop(following), settled_count < len(todo)
            following += 1
    bar.close()


def _stored(runs: Path, result: CompileResult) -> CompileResult:
    """The result with its artifact on disk, or failed at stage ``store`` (redone on resume)
    when the disk under ``runs`` refuses it."""
    try:
        return spill(runs, result)
    except (OSError, LoopError) as exc:
        return CompileResult(
            ok=False,
            stage="store",
            error=f"cannot store the artifact: {exc}",
            stages=result.stages,
            layers=result.layers,
            info=result.info,
            compiled_on=result.compiled_on,
            cache_hit=result.cache_hit,
        )


def run_sweep(spec: SweepSpec, runs: Path, options: SweepOptions = SweepOptions()) -> SweepResult:
    """Run every unfinished variant of ``spec``, recording each in ``runs/ledger.sqlite``."""
    jobs = options.jobs or (os.cpu_count() or 1)
    variants = with_reference(spec)
    ref = reference_of(spec, variants)
    threads = max(1, (os.cpu_count() or 1) // jobs)
    check_runs(runs)
    if options.cluster:
        check_cluster(options.cluster)
    with scratch("author") as staging:
        # user errors surface here, before anything is written under runs/
        authored = [author(spec, v, v is ref, Path(staging), threads) for v in variants]
        remove_stale_scratch()  # what killed sweeps left, now that this one is going ahead
        remove_stale_temps(runs)
        ledger = Ledger(runs / "ledger.sqlite")
        try:
            return _run(spec, runs, options, jobs, authored, ledger)
        finally:
            ledger.close()


def identity(spec: SweepSpec, authored: list[Authored]) -> str:
    """What a resumed sweep must match: the sweep file, and the content of every model and
    frame set it authored (a recipe or .onnx edited since then makes a new sweep)."""
    h = hashlib.sha256(spec.sha.encode())
    for a in authored:
        h.update(f"{a.variant.name}|{a.onnx_sha}|{a.calib_sha}|{a.inputs_sha}".encode())
    return h.hexdigest()


def _run(
    spec: SweepSpec, runs: Path, options: SweepOptions, jobs: int, authored: list[Authored], ledger: Ledger
) -> SweepResult:
    ordered = sorted(authored, key=lambda a: not a.reference)
    want = Claim(
        spec.name,
        identity(spec, authored),
        options.fresh,
        tuple((a.variant.name, spec.variant_sha(a.variant)) for a in ordered),
        spec.backend,
        options.generation,
    )
    _, state, ids = claim(ledger, want)
    result = SweepResult(spec, skipped=sorted(state.live))
    todo = [a for a in ordered if a.variant.name in ids]
    devices = [make_device(name) for name in spec.devices]
    ref = next((a for a in authored if a.reference), None)
    against = _resumed_reference(runs, ref, state.finished, devices[0])
    with Heartbeat(str(ledger.path), list(ids.values())):
        compiled = _progress(_compiled(spec, todo, jobs, options, runs), len(todo), options)
        for a, c, contended in reference_first(compiled, ref if any(a is ref for a in todo) else None):
            if a.reference:
                outcome, made = _evaluate(spec, a, c, devices, runs, Against(None), options, contended)
                against = Against(made, "" if made else f"the reference '{a.variant.name}' {_why_failed(outcome)}")
            else:
                outcome, _ = _evaluate(spec, a, c, devices, runs, against, options, contended)
            outcome.run_id = ids[a.variant.name]
            _record(ledger, outcome.run_id, spec, a, c, outcome)
            result.outcomes.append(outcome)
    result.outcomes += [_finished_outcome(row) for row in state.finished.values()]
    order = [a.variant.name for a in authored]
    result.outcomes.sort(key=lambda o: order.index(o.variant))
    return result


def _progress(items: Iterator[Any], total: int, options: SweepOptions) -> Iterator[Any]:
    """A bar for the measuring stage that appears once its first variant arrives, so it does
    not sit at zero under the compile bar."""
    bar = None
    for item in items:
        bar = bar or tqdm(total=total, desc="audit+measure+score", unit="variant", disable=not options.progress)
        yield item
        bar.update()
    if bar is not None:
        bar.close()


def _compiled(
    spec: SweepSpec, todo: list[Authored], jobs: int, options: SweepOptions, runs: Path
) -> Iterator[tuple[Authored, CompileResult, bool]]:
    """Triples of (variant, compile result, measured while compiles ran). Compiling holds the
    host lock shared, so no other sweep measures meanwhile; with ``overlap`` this sweep measures
    anyway, and flags what it measured while compiles were still running."""
    stream = _compile_stream(spec, todo, jobs, runs, options)
    with ExitStack() as lock:
        lock.enter_context(hostlock.compiling())
        if not options.overlap:
            results = {i: c for i, c, _ in stream}
        else:
            for i, compiled, compiling in stream:
                if not compiling:
                    lock.close()
                yield todo[i], compiled, compiling
            return
    yield from ((a, results[i], False) for i, a in enumerate(todo))


Compiled = tuple[Authored, CompileResult, bool]


def reference_first(stream: Iterable[Compiled], ref: Authored | None) -> Iterator[Compiled]:
    """The stream with ``ref`` (when it is to be evaluated in this sweep) moved ahead of every
    variant that arrives before it, so no variant is ever judged before its reference exists,
    whatever order the variants were written or compiled in."""
    waiting: list[Compiled] = []
    for item in stream:
        if ref is None or item[0] is ref:
            yield item
            yield from waiting
            waiting, ref = [], None
        else:
            waiting.append(item)
    yield from waiting  # the reference never came (a stream cut short): the rest still runs


def _why_failed(outcome: RunOutcome) -> str:
    if outcome.status == "ok":
        return "ran but set no reference"
    return f"failed at stage {outcome.stage}: {outcome.error}"


def _resumed_reference(runs: Path, ref: Authored | None, finished: dict[str, Any], device: Device) -> Against:
    """The reference as an earlier run of this sweep left it, or why there is none yet. Its
    artifact is read back only if it still matches its hash; otherwise the audit goes on from
    the recorded fingerprint, and no outputs are compared with files that are not its."""
    if ref is None:
        return Against(None, "the sweep has no unperturbed variant to be its reference")
    row = finished.get(ref.variant.name)
    if row is None:
        return Against(None, f"the reference '{ref.variant.name}' has not run")
    if row["status"] != "ok":
        return Against(None, f"the reference '{ref.variant.name}' failed at stage {row['stage']}: {row['error']}")
    record = json.loads(row["record"])
    layers = tuple(fp.from_record(lp) for lp in record.get("layers", []))
    snr = (record.get("scores") or {}).get("snr_db")
    name = Path(row["artifact"]).name  # in this runs folder, wherever it was when recorded
    try:
        artifact = load_artifact(runs_artifact(runs, name), record.get("artifact_sha") or Path(name).stem)
    except LoopError as exc:
        warnings.warn(f"the reference's artifact: {exc}; its outputs are not compared", StoreWarning, stacklevel=2)
        return Against(Reference(layers, None, snr))
    raw = run_inputs(device, artifact, ref.inputs()).raw
    return Against(Reference(layers, tuple(tuple(outs) for outs in raw), snr))


def _finished_outcome(row: Any) -> RunOutcome:
    data = run_json(row)
    return RunOutcome(
        data["variant"],
        data["status"],
        stage=data["stage"],
        error=data["error"],
        verdict=data["verdict"],
        run_id=data["id"],
        info={"resumed": True},
    )


def _evaluate(
    spec: SweepSpec,
    a: Authored,
    compiled: CompileResult,
    devices: list[Device],
    runs: Path,
    against: Against,
    options: SweepOptions,
    contended: bool,
) -> tuple[RunOutcome, Reference | None]:
    try:
        with hostlock.measuring(devices[0].timed_on, overlap=options.overlap):
            outcome, made = evaluate_variant(spec, a, compiled, devices, runs, against, options.scorer)
    except Exception as exc:
        return RunOutcome(
            a.variant.name,
            "failed",
            stage="measure",
            error=f"{type(exc).__name__}: {exc}",
            info={"traceback": traceback.format_exc(limit=8)},
        ), None
    if contended and outcome.status == "ok":
        outcome.flags.append("host-contended")
    return outcome, made


def _record(ledger: Ledger, run_id: int, spec: SweepSpec, a: Authored, c: CompileResult, o: RunOutcome) -> None:
    record = {
        "options": asdict(a.options),
        "versions": c.info.get("versions", {}),
        "host": socket.gethostname(),
        "compiled_on": c.compiled_on,
        "cache_hit": c.cache_hit,
        "stages": {"author_s": a.author_s, **c.stages, **o.stages},
        "layers": [fp.to_record(lp) for lp in c.layers],
        "measure": o.measure,
        "scores": o.scores,
        "changes": o.changes,
        "perturb": [{"op": op.label, **asdict(op)} for op in a.variant.ops],
        "stderr_tail": "" if c.ok else c.stderr_tail,
        "artifact_sha": c.artifact.sha if c.ok and c.artifact is not None else None,
        "info": {
            **{k: v for k, v in c.info.items() if k != "versions"},
            **o.info,
            **({"notes": list(a.notes)} if a.notes else {}),
        },
    }
    try:
        _finish(ledger, run_id, spec, a, c, o, record)
    except LedgerFault as exc:
        if not exc.full:
            raise
        # The disk filled: try a short row, so the variant is redone on resume; if even that
        # cannot be written, the sweep stops here with one line and the resume redoes the rest.
        ledger.finish(run_id, "failed", [], {}, error=f"out of space recording the run: {exc}", stage="store")


def _finish(
    ledger: Ledger, run_id: int, spec: SweepSpec, a: Authored, c: CompileResult, o: RunOutcome, record: dict[str, Any]
) -> None:
    ledger.finish(
        run_id,
        o.status,
        o.flags,
        record,
        error=o.error,
        stage=o.stage,
        onnx_sha=a.onnx_sha,
        calib_sha=a.calib_sha,
        kernel_sha=fp.kernel_sha(c.layers) if c.layers else None,
        bias_sha=fp.bias_sha(c.layers) if c.layers else None,
        device=spec.devices[0],
        artifact=o.artifact,
        verdict=o.verdict,
        compiled_on=c.compiled_on,
        cache_hit=int(c.cache_hit),
    )
