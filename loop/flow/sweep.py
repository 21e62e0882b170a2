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
import os
import socket
import warnings
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from loop.author.author import Authored, author, references, with_reference
from loop.author.sweepfile import MeasureSpec, SweepSpec
from loop.core.arrays import ref_of
from loop.core.errors import LoopError
from loop.core.kinds import Flag, Stage, Status
from loop.core.leftovers import remove_stale_scratch
from loop.core.record import RunRecord, Scores
from loop.core.registry import make_device
from loop.core.vocab import Artifact, CompileOptions, CompileResult, Frames, Rescale
from loop.flow.budget import budget
from loop.flow.compile_pool import Job, check_cluster, compile_hosts, iter_compiled
from loop.flow.evaluate import Against, Reference, RunOutcome
from loop.flow.follow import Decision, decision, following, leads
from loop.flow.local_runner import LocalRunner
from loop.flow.measuring import Compiled, ahead, evaluated
from loop.flow.resume import Claim, Content, ContentChanged, Heartbeat, Named, claim, moved_since
from loop.flow.runner import Runner, RunResult, RunTask, StageTimeouts
from loop.judge import fingerprint as fp
from loop.measure import hostlock
from loop.store.arrays import keep_arrays
from loop.store.artifacts import load_artifact, recorded_sha, spill
from loop.store.cache import Cache
from loop.store.files import StoreWarning, check_runs, remove_stale_temps, runs_artifact
from loop.store.ledger import Ledger, LedgerFault

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
    device_cluster: str | None = None  # a Dask scheduler whose workers hold the devices as resources
    timeouts: StageTimeouts = field(default_factory=StageTimeouts)
    # False: the devices answer the inputs only, no rate measured (a study's generation is
    # measured once, together, in interleaved rounds: loop.flow.generation)
    measure: bool = True
    runner: Runner | None = None  # one already open, kept open after (a generation races on it)
    # no protocol and no race: each run is scored and audited on the controlled inputs only, and
    # recorded so (Flag.SCORE_ONLY), its rate left to a later measured run of the same candidate
    score_only: bool = False
    # Earlier finished reference runs, by group of compile options ("": the sweep's own), that stand
    # for this sweep's references where they stand on the same content (base, calibration and
    # scoring frames): a study's score-only generations share one reference row.
    references: Mapping[str, RunRecord] = field(default_factory=dict)

    @property
    def measures(self) -> bool:
        """Whether the devices run the protocol on each variant."""
        return self.measure and not self.score_only


@dataclass
class SweepResult:
    spec: SweepSpec
    outcomes: list[RunOutcome] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[RunOutcome]:
        return [o for o in self.outcomes if o.status != Status.OK]


def job_of(a: Authored, keep_quantized: bool = False) -> Job:
    """The compile of one authored variant, its frames made only when it is dispatched (the model
    goes as its file); ``keep_quantized``: a reference whose quantized model its ``scale_grid``
    variants start from."""
    load = lambda: (a.model_path, a.calibration())  # noqa: E731
    return Job(a.onnx_sha, a.calib_sha, a.options, load, keep_quantized, a.model_path)


def _compile_stream(
    spec: SweepSpec,
    todo: list[Authored],
    jobs: int,
    runs: Path,
    options: SweepOptions,
    decided: dict[str, Decision | None],
) -> Iterator[tuple[Authored, CompileResult, bool]]:
    """(variant, result, compiles still running), references first, each as soon as every
    earlier one is in. A reference whose guard decides its group's bias correction compiles
    before its variants, which then follow its decision (``decided``, filled as it comes).
    Each artifact goes to disk as it arrives, so finished compiles do not pile up in memory."""
    first = [a for a in todo if leads(a, spec.backend) and a.group not in decided]
    bar = tqdm(total=len(todo), desc="optimize+compile", unit="variant", disable=not options.progress)
    edited = {a.group for a in todo if a.options.rescales}  # groups whose reference keeps its quantized model
    held = list(_in_order(spec, first, jobs, runs, options, bar, len(first), edited))
    decided.update((a.group, decision(result.info) if result.ok else None) for a, result, _ in held)
    rest = [following(a, decided) for a in todo if not any(a is f for f in first)]
    # the references wait for the first variant, so they are flagged by whether compiles still
    # ran then (a variant compiled from the cache is not contention)
    for item in _in_order(spec, rest, jobs, runs, options, bar, len(rest), edited):
        yield from ((a, result, item[2]) for a, result, _ in held)
        held = []
        yield item
    yield from ((a, result, False) for a, result, _ in held)
    bar.close()


def _in_order(
    spec: SweepSpec,
    todo: list[Authored],
    jobs: int,
    runs: Path,
    options: SweepOptions,
    bar: tqdm,
    left: int,
    edited: AbstractSet[str] = frozenset(),
) -> Iterator[tuple[Authored, CompileResult, bool]]:
    """``todo`` compiled, in order; ``left``: how many compiles remain from the first of these."""
    if not todo:
        return
    pending: dict[int, CompileResult] = {}
    following_at, settled_count = 0, 0
    batches = iter_compiled(
        spec.backend,
        [job_of(a, a.reference and a.group in edited) for a in todo],
        jobs=jobs,
        cache=Cache.for_runs(runs),
        cluster=options.cluster,
        runs=runs,
    )
    for settled in batches:
        bar.update(len(settled))
        settled_count += len(settled)
        pending.update((i, _stored(runs, r)) for i, r in settled)
        while following_at in pending:
            yield todo[following_at], pending.pop(following_at), settled_count < left
            following_at += 1


def _stored(runs: Path, result: CompileResult) -> CompileResult:
    """The result with its artifact on disk, or failed at stage ``store`` (redone on resume)
    when the disk under ``runs`` refuses it."""
    try:
        return spill(runs, result)
    except (OSError, LoopError) as exc:
        error = f"cannot store the artifact: {exc}"
        return replace(result, ok=False, stage="store", error=error, stderr_tail="", artifact=None, quantized=None)


def run_sweep(spec: SweepSpec, runs: Path, options: SweepOptions = SweepOptions()) -> SweepResult:
    """Run every unfinished variant of ``spec``, recording each in ``runs/ledger.sqlite``."""
    # compiles on a cluster take its workers' memory, not this host's
    jobs = budget(spec.base, local=not options.cluster).jobs(options.jobs, os.cpu_count() or 1)
    variants = with_reference(spec)
    refs = references(spec, variants).values()
    threads = max(1, (os.cpu_count() or 1) // jobs)
    check_runs(runs)
    if options.cluster:
        check_cluster(options.cluster)
    if options.device_cluster:  # reachable, and a worker holds the device: before anything is written
        with open_runner(spec, options, warm=False):
            pass
    # user errors surface here, before anything is written under runs/
    authored = [author(spec, v, any(v is r for r in refs), threads) for v in variants]
    remove_stale_scratch()  # what killed sweeps left, now that this one is going ahead
    remove_stale_temps(runs)
    _keep_arrays(runs, authored)
    ledger = Ledger.of_runs(runs)
    try:
        return _run(spec, runs, options, jobs, authored, ledger)
    finally:
        ledger.close()


def _keep_arrays(runs: Path, authored: list[Authored]) -> None:
    """Every array the variants' ops were given as, and every per-channel ``scale_grid``'s
    factors, kept under ``runs/arrays`` before any run records it by hash: what the ledger
    names, the runs folder holds."""
    kept = {sha: a for x in authored for op in x.variant.ops for sha, a in op.arrays().items()}
    for x in authored:
        kept.update((ref["array"], a) for ref, a in map(_factors, x.options.rescales) if ref is not None)
    keep_arrays(runs, kept)


def _factors(rescale: Rescale) -> tuple[dict[str, Any] | None, np.ndarray]:
    """A per-channel edit's factors as an array, and its reference (None: a single factor)."""
    a = np.asarray(rescale.factors, np.float64)
    return (ref_of(a) if a.size > 1 else None), a


def recorded_options(options: CompileOptions) -> dict[str, Any]:
    """The options as a run records them: a per-channel ``scale_grid``'s factors by the reference
    of their array (kept by :func:`_keep_arrays`), not thousands of numbers in every record."""
    dumped = options.model_dump()
    dumped["rescales"] = [
        {**r, "factors": ref} if (ref := _factors(rescale)[0]) is not None else r
        for r, rescale in zip(dumped.get("rescales", ()), options.rescales, strict=True)
    ]
    return dumped


def identity(spec: SweepSpec, authored: list[Authored], score_only: bool = False) -> str:
    """What a resumed sweep must match: the sweep file, and the content of every model and
    frame set it authored (a recipe or .onnx edited since then makes a new sweep). A score-only
    run of the file is a sweep of its own, so a measured run after it measures every variant."""
    h = hashlib.sha256(spec.sha.encode())
    for a in authored:
        h.update(f"{a.variant.name}|{a.onnx_sha}|{a.calib_sha}|{a.inputs_sha}".encode())
    if score_only:
        h.update(b"|score-only")
    return h.hexdigest()


def content(a: Authored) -> Content:
    return Content(a.onnx_sha, a.calib_sha, a.inputs_sha)


def named(spec: SweepSpec, a: Authored) -> Named:
    return Named(str(a.variant.base or spec.base), a.calib_source.path, a.input_source.path)


def reference_content(spec: SweepSpec) -> tuple[Content, Named]:
    """The content of ``spec``'s reference as authored now (its base and frame files read
    afresh), and how to name it."""
    reference = references(spec, with_reference(spec))[""]
    authored = author(spec, reference, True)
    return content(authored), named(spec, authored)


def _tell_moved(ledger: Ledger, spec: SweepSpec, authored: list[Authored], key: str) -> None:
    """A sweep whose content is new, run before under its name: one line for what changed (a base
    rewritten in place is a new reference, not the one its earlier runs were measured against)."""
    if ledger.latest_key(key) is not None:
        return
    refs = [a for a in authored if a.reference]
    now = {a.variant.name: content(a) for a in refs}
    for line in moved_since(ledger, spec.name, now, {a.variant.name: named(spec, a) for a in refs}):
        warnings.warn(line, ContentChanged, stacklevel=3)


def _run(
    spec: SweepSpec, runs: Path, options: SweepOptions, jobs: int, authored: list[Authored], ledger: Ledger
) -> SweepResult:
    ordered = sorted(authored, key=lambda a: not a.reference)
    standing = _standing(spec, authored, options.references)
    want = Claim(
        spec.name,
        identity(spec, authored, options.score_only),
        options.fresh,
        tuple((a.variant.name, spec.variant_sha(a.variant)) for a in ordered if a.variant.name not in standing),
        spec.backend,
        options.generation,
    )
    if not options.fresh:
        _tell_moved(ledger, spec, authored, want.identity)
    _, state, ids = claim(ledger, want)
    state.finished.update(standing)
    result = SweepResult(spec, skipped=sorted(state.live))
    todo = [a for a in ordered if a.variant.name in ids]
    for name in spec.devices:
        make_device(name)  # a device that cannot be made is the user's error, before anything runs
    refs = {a.group: a for a in authored if a.reference}
    with open_runner(spec, options) as runner, Heartbeat(str(ledger.path), list(ids.values())):
        outputs_of = _inputs_of(spec, runner, options)
        against = {g: _resumed_reference(runs, a, state.finished, outputs_of) for g, a in refs.items()}
        if "" not in refs:
            against[""] = _resumed_reference(runs, None, state.finished, outputs_of)
        decided = _decided(refs, state.finished, spec.backend)
        compiled = _progress(_compiled(spec, todo, jobs, options, runs, runner, decided), len(todo), options)
        here = {g: a for g, a in refs.items() if any(a is t for t in todo)}
        found = evaluated(
            spec, runs, compiled, runner, against, here, options.scorer, options.timeouts, options.measures
        )
        for done in found:
            done.outcome.run_id = ids[done.authored.variant.name]
            if options.score_only:
                done.outcome.flags.append(Flag.SCORE_ONLY)
            _record(ledger, done.outcome.run_id, spec, done.authored, done.compiled, done.outcome)
            result.outcomes.append(done.outcome)
    result.outcomes += [_finished_outcome(row) for row in state.finished.values()]
    order = [a.variant.name for a in authored]
    result.outcomes.sort(key=lambda o: order.index(o.variant))
    return result


def _decided(refs: dict[str, Authored], finished: dict[str, RunRecord], backend: str) -> dict[str, Decision | None]:
    """The guard decisions of the references an earlier run of this sweep finished."""
    done = {g: finished.get(a.variant.name) for g, a in refs.items() if leads(a, backend)}
    return {g: decision(run.compiled) for g, run in done.items() if run is not None and run.status == Status.OK}


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
    spec: SweepSpec,
    todo: list[Authored],
    jobs: int,
    options: SweepOptions,
    runs: Path,
    runner: Runner,
    decided: dict[str, Decision | None],
) -> Iterator[Compiled]:
    """Triples of (variant, compile result, measured while compiles ran), each as soon as it is
    compiled when no compile runs on a host that measures, or when nothing is measured.
    Otherwise compiling holds this host's lock shared, so no sweep measures meanwhile, and the
    triples come once every compile is done; with ``overlap`` they come at once all the same,
    flagged when compiles still ran."""
    stream = _compile_stream(spec, todo, jobs, runs, options, decided)
    compiling_on = compile_hosts(options.cluster)
    # a sweep that times nothing (the devices answer the inputs alone) runs each variant as it is
    # compiled: its answers are not spoiled by the compiles, nor theirs by it
    if not compiling_on & runner.hosts() or not options.measures:
        yield from ahead(_as_compiled(stream, socket.gethostname() in compiling_on))
        return
    with ExitStack() as lock:
        lock.enter_context(hostlock.compiling())
        if not options.overlap:
            results = list(stream)
        else:
            for a, compiled, compiling in stream:
                if not compiling:
                    lock.close()
                yield a, compiled, compiling
            return
    yield from ((a, c, False) for a, c, _ in results)


def _as_compiled(stream: Iterator[tuple[Authored, CompileResult, bool]], here: bool) -> Iterator[Compiled]:
    with ExitStack() as lock:
        if here:
            lock.enter_context(hostlock.compiling())
        yield from ((a, compiled, False) for a, compiled, _ in stream)


@contextmanager
def open_runner(spec: SweepSpec, options: SweepOptions, warm: bool = True) -> Iterator[Runner]:
    """The runner a sweep of ``spec`` runs on (also for a flow that runs more on it after the sweep):
    devices here, each in a child process, or on the workers of ``options.device_cluster``."""
    runner: Runner
    if options.runner is not None:
        if warm:
            options.runner.warm(tuple(spec.devices))
        yield options.runner
        return
    if options.device_cluster:
        from loop.flow.remote import DaskRunner

        runner = DaskRunner(options.device_cluster, tuple(spec.devices), overlap=options.overlap)
    else:
        runner = LocalRunner(overlap=options.overlap)
    with runner:
        if warm:
            runner.warm(tuple(spec.devices))
        yield runner


OutputsOf = Callable[[Artifact, Frames], "list[list[np.ndarray]] | None"]


def _inputs_of(spec: SweepSpec, runner: Runner, options: SweepOptions) -> OutputsOf:
    """How a resumed sweep gets its reference's outputs again: the inputs alone through the
    first device (its figures are recorded already); None, with a warning, if that fails."""

    def outputs(artifact: Artifact, inputs: Frames) -> list[list[np.ndarray]] | None:
        device = spec.devices[0]
        task = RunTask(artifact, inputs, MeasureSpec(), (device,), measure=False, timeouts=options.timeouts)
        try:
            ran = runner.run(task)
        except Exception as exc:  # the runner's own trouble (a cluster gone, say): a value like the rest
            ran = RunResult.failed(Stage.OPEN, f"{type(exc).__name__}: {exc}")
        if not ran.ok:
            warnings.warn(f"the reference's outputs: {ran.error}; they are not compared", StoreWarning, stacklevel=2)
            return None
        return ran.devices[device].raw

    return outputs


def _standing(spec: SweepSpec, authored: list[Authored], earlier: Mapping[str, RunRecord]) -> dict[str, RunRecord]:
    """This sweep's references an earlier run stands for: finished, of this backend, on the same
    base, calibration and scoring frames (by hash), by variant name."""
    found = {}
    for a in authored:
        run = earlier.get(a.group) if a.reference else None
        if (
            run is not None
            and run.status == Status.OK
            and run.backend == spec.backend
            and Content.of(run) == content(a)
        ):
            found[a.variant.name] = run
    return found


def _resumed_reference(
    runs: Path, ref: Authored | None, finished: dict[str, RunRecord], outputs_of: OutputsOf
) -> Against:
    """The reference as an earlier run of this sweep left it, or why there is none yet. Its
    artifact is read back only if it still matches its hash; otherwise the audit goes on from
    the recorded fingerprint, and no outputs are compared with files that are not its."""
    if ref is None:
        return Against(None, "the sweep has no unperturbed variant to be its reference")
    run = finished.get(ref.variant.name)
    if run is None:
        return Against(None, f"the reference '{ref.variant.name}' has not run")
    if run.status != Status.OK:
        return Against(None, f"the reference '{ref.variant.name}' failed at stage {run.stage}: {run.error}")
    layers, snr = run.layers, run.scores.snr_db
    name = Path(run.artifact or "").name  # in this runs folder, wherever it was when recorded
    try:
        artifact = load_artifact(runs_artifact(runs, name), recorded_sha(run))
    except LoopError as exc:
        warnings.warn(f"the reference's artifact: {exc}; its outputs are not compared", StoreWarning, stacklevel=2)
        return Against(Reference(layers, None, snr, run.compiled))
    raw = outputs_of(artifact, ref.inputs())
    return Against(Reference(layers, None if raw is None else tuple(tuple(outs) for outs in raw), snr, run.compiled))


def _finished_outcome(run: RunRecord) -> RunOutcome:
    return RunOutcome(
        run.variant,
        run.status,
        stage=run.stage,
        error=run.error,
        verdict=run.verdict,
        run_id=run.id,
        resumed=True,
    )


def _record(ledger: Ledger, run_id: int, spec: SweepSpec, a: Authored, c: CompileResult, o: RunOutcome) -> None:
    """Write the finished run into the ledger (which reads it back with ``from_row``)."""
    try:
        run = _finished_run(run_id, spec, a, c, o)
    except (KeyError, TypeError, ValueError) as exc:  # a figure the record cannot type (a scorer's, say)
        error = f"cannot record the run: {type(exc).__name__}: {exc}"
        run = RunRecord(run_id, spec.name, a.variant.name, Status.FAILED, error, Stage.LEDGER)
    try:
        ledger.finish(run_id, run)
    except LedgerFault as exc:
        if not exc.full:
            raise
        # The disk filled: try a short row, so the variant is redone on resume; if even that
        # cannot be written, the sweep stops here with one line and the resume redoes the rest.
        error = f"out of space recording the run: {exc}"
        ledger.finish(run_id, RunRecord(run_id, spec.name, a.variant.name, Status.FAILED, error, Stage.STORE))


def _finished_run(run_id: int, spec: SweepSpec, a: Authored, c: CompileResult, o: RunOutcome) -> RunRecord:
    """The run as the ledger keeps it: the outcome, and what reproduces it."""
    return RunRecord(
        id=run_id,
        sweep=spec.name,
        variant=a.variant.name,
        status=o.status,
        error=o.error,
        stage=o.stage,
        onnx_sha=a.onnx_sha,
        kernel_sha=fp.kernel_sha(c.layers) if c.layers else None,
        bias_sha=fp.bias_sha(c.layers) if c.layers else None,
        artifact=o.artifact,
        backend=spec.backend,
        device=spec.devices[0],
        stages={"author_s": a.author_s, **c.stages, **o.stages},
        layers=tuple(c.layers),
        measure=o.measure,
        scores=Scores.from_json(o.scores),
        verdict=o.verdict,
        flags=tuple(Flag(f) for f in o.flags),  # a device's own flags come as strings
        changes=tuple(o.changes),
        compiled_on=c.compiled_on,
        cache_hit=c.cache_hit,
        perturb=tuple(op.record() for op in a.variant.ops),
        calib_sha=a.calib_sha,
        inputs_sha=a.inputs_sha,
        options=recorded_options(a.options),
        host=o.where.runner.get("host") or socket.gethostname(),  # where it was measured
        stderr_tail="" if c.ok else c.stderr_tail,
        artifact_sha=c.artifact.sha if c.ok and c.artifact is not None else None,
        notes=a.notes,
        compiled=c.info,
        where=o.where,
        judged=o.judged,
        failure=o.failure,
    )
