"""The variant ``loop noise`` prints, compiled and scored before it is printed (issue 42).

Each step is the analysed variant with more grids at 16 bits, compiled as a sweep compiles it
(the compile pool: a child process, the runs folder's compile cache), its answers to the sweep's
scoring frames taken on the sweep's first device by the sweep's runner and scored as a sweep
scores them (:func:`loop.flow.evaluate.scored`), and audited against the base as a sweep audits
it. A step short of the target is analysed again and widened (:func:`loop.judge.falls.widened`)
until one meets it or every activation is at 16 bits. Then every step's rate is measured with the
base's in interleaved rounds (:mod:`loop.measure.rounds`), briefly: a cost to read, not a race.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import onnx

from loop.author import frames as frames_mod
from loop.author import schema
from loop.author.author import Authored, author, group_of, references, with_reference
from loop.author.perturb import op_from
from loop.author.sweepfile import SweepSpec, VariantSpec, parse
from loop.core.kinds import Flag, Verdict
from loop.core.leftovers import scratch
from loop.core.record import RunRecord
from loop.core.vocab import Artifact, CompileResult
from loop.flow.compile_pool import compile_all
from loop.flow.evaluate import Against, Prepared, RunOutcome, prepare, reference_of, scored, verdict_for
from loop.flow.follow import Decision, decision, following
from loop.flow.noise import of_authored, of_variant, variant_named
from loop.flow.runner import RaceSpec, Runner, StageTimeouts
from loop.flow.sweep import SweepOptions, job_of, open_runner
from loop.judge.falls import RUNGS, first_guess, float_inputs, widened
from loop.judge.noise import NoiseReport
from loop.judge.widen import EVERY, RateCost, Step, Target, Widening, target_of
from loop.store.cache import Cache
from loop.store.files import StoreWarning
from loop.store.ledger import Ledger

RATE_BUDGET_S = 20.0  # the rounds' most: the rate is said beside the SNR, not raced on
RATE_TARGET_PCT = 5.0  # a cost read to +-5% is enough to weigh 16 bits against 8


@dataclass(frozen=True)
class _Tried:
    step: Step
    artifact: Artifact | None  # None: its compile or run failed


def measured(
    path: Path, variant: str, runs: Path | None = None, target_db: float | None = None, progress: bool = False
) -> NoiseReport:
    """``loop noise``: the analysis of ``variant`` of sweep file ``path`` (:func:`loop.flow.noise.of_variant`),
    then its grids widened to 16 bits step by step, each step measured, until one reaches the target
    (``target_db``, else :func:`loop.judge.widen.target_of`'s). With ``runs``, its compile cache is used.
    ``progress``: each step on stderr as it is scored (a widening compiles and scores several)."""
    spec = parse(Path(path))
    chosen = variant_named(spec, variant)
    say = _stderr_line if progress else None
    report = of_variant(spec, chosen, runs)
    report.widening = widen_until(spec, chosen, report, target_for(chosen, target_db), runs, say=say)
    return report


def _stderr_line(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _told(say: Callable[[str], None] | None, tried: _Tried, target: Target) -> _Tried:
    """``tried``, said (where ``say``) as one line: its step, why, and its SNR against the target."""
    if say is not None:
        step = tried.step
        got = f"{step.snr_db:.2f} dB" if step.snr_db is not None else f"failed ({step.error})"
        say(f"loop noise: step {step.index} ({step.why}): {got}, target {target.db:.1f} dB")
    return tried


def target_for(chosen: VariantSpec, target_db: float | None) -> Target:
    """``target_db``, else what the sweep file's ``measure.ruined_snr_db`` makes of it where the file
    sets one (the sweep's own or the variant's), else the default (:func:`loop.judge.widen.target_of`)."""
    measure = chosen.measure
    return target_of(target_db, measure.ruined_snr_db if "ruined_snr_db" in measure.model_fields_set else None)


def widen_until(
    spec: SweepSpec,
    chosen: VariantSpec,
    report: NoiseReport,
    target: Target,
    runs: Path | None,
    rates: bool = True,
    say: Callable[[str], None] | None = None,
) -> Widening:
    """The steps from ``chosen`` as quantized (``report`` is its analysis) to the first that meets
    ``target``, each measured; ``runs``: whose compile cache to use (None: none); ``rates``: race
    the steps' rates against the base's too."""
    base = chosen if chosen.own_base else references(spec, with_reference(spec))[group_of(spec, chosen)]
    with scratch("widen") as staging, open_runner(spec, SweepOptions(progress=False)) as runner:
        bench = _Bench(spec, Path(staging), runner, Cache.for_runs(runs) if runs is not None else None)
        reference = bench.tried(0, "as quantized", base, (), reference=True)
        steps = [_told(say, reference if chosen is base else bench.tried(0, "as quantized", chosen, ()), target)]
        reads = float_inputs(onnx.load(str(bench.authored(chosen).model_path)))
        why, layers = first_guess(report)
        rung = 0
        while _short(steps[-1], target) and reference.artifact is not None:
            if steps[-1].artifact is None:  # a step that failed cannot be analysed: every activation next
                rung, why, layers = len(RUNGS), RUNGS[-1], (EVERY,)
            elif steps[-1].step.layers:  # it fell short: analysed again, widened from there
                again, _ = of_authored(spec, bench.authored(_with_layers(chosen, layers)))
                rung, why, layers = widened(layers, again, reads, rung)
            steps.append(_told(say, bench.tried(len(steps), why, _with_layers(chosen, layers), layers), target))
        if not rates:
            return Widening(target, [t.step for t in steps], "rates not measured here: loop noise measures them")
        if say is not None:
            say(f"loop noise: racing the rates of {len(steps)} steps against the base's")
        rated, note = bench.rates(reference, steps)
    return Widening(target, rated, note)


def measure_flagged(spec: SweepSpec, outcomes: Iterable[RunOutcome], runs: Path) -> None:
    """For each base a sweep just flagged quantization-ruined, the variant its flag prints measured
    before it is printed: its steps widened until one meets the target, each compiled, run and
    scored (no rate race), and the flag's record rewritten with that variant in place of the first
    guess. Paid once the sweep's own runs are recorded, by a ruined base only; a failure here
    leaves the first guess standing, and says why."""
    for outcome in outcomes:
        if Flag.QUANTIZATION_RUINED not in outcome.flags or outcome.run_id is None:
            continue
        if outcome.verdict != Verdict.REFERENCE:  # the flag's advice is a base's: a variant shares its layers
            continue
        try:
            chosen = variant_named(spec, outcome.variant)
            widening = widen_until(spec, chosen, of_variant(spec, chosen, runs), target_for(chosen, None), runs, False)
            measured_try: dict[str, Any] = {"try_measured": True, "widening": widening.to_json()}
            step = widening.chosen()
            if step is not None and step.layers:  # never the base as quantized in place of the first guess
                measured_try["try"] = step.entries()
            else:
                measured_try = {"try_measured_error": "no widened step could be compiled and scored"}
        except Exception as exc:  # the run stands with its first guess
            measured_try = {"try_measured_error": f"{type(exc).__name__}: {exc}"}
        try:
            _rewrite_flag(runs, outcome.run_id, measured_try)
        except Exception as exc:  # a finished run is never lost to its advice
            line = f"{outcome.variant}: the measured variant was not recorded: {exc}"
            warnings.warn(line, StoreWarning, stacklevel=2)


def _rewrite_flag(runs: Path, run_id: int, update: dict[str, Any]) -> None:
    """The flag's record in run ``run_id``'s judgement updated, and nothing else of the row touched."""

    def amended(run: RunRecord) -> RunRecord:
        ruined = {**(run.judged.quantization_ruined or {}), **update}
        return replace(run, judged=replace(run.judged, quantization_ruined=ruined))

    with Ledger.of_runs(runs) as ledger:
        ledger.amend(run_id, amended)


def _short(tried: _Tried, target: Target) -> bool:
    """Whether to widen past this step: it fell short, and not everything is at 16 bits yet."""
    return not tried.step.meets(target) and tried.step.layers != (EVERY,)


def _with_layers(chosen: VariantSpec, layers: tuple[str, ...]) -> VariantSpec:
    ops = tuple(op_from(schema.PrecisionOp(layer=layer, bits=16)) for layer in layers)
    return replace(chosen, name=f"{chosen.name} +16 bits", ops=(*chosen.ops, *ops))


class _Bench:
    """Where the steps are authored, compiled, run and scored, as a sweep does each: one scratch
    folder, the sweep's runner, the runs folder's compile cache; the base first, as the reference."""

    def __init__(self, spec: SweepSpec, staging: Path, runner: Runner, cache: Cache | None) -> None:
        self.spec, self.staging, self.runner, self.cache = spec, staging, runner, cache
        self.device = spec.devices[:1]  # the first device scores a sweep's runs
        self.against = Against(None)
        self.decided: dict[str, Decision | None] = {}  # the base's guard decision, as a sweep's variants follow it

    def authored(self, variant: VariantSpec, reference: bool = False) -> Authored:
        return author(self.spec, variant, reference)

    def tried(
        self, index: int, why: str, variant: VariantSpec, layers: tuple[str, ...], reference: bool = False
    ) -> _Tried:
        made = following(self.authored(variant, reference), self.decided)
        compiled = compile_all(self.spec.backend, [job_of(made)], jobs=1, cache=self.cache)[0]
        if reference:
            self.decided[made.group] = decision(compiled.info) if compiled.ok else None
        prepared = prepare(made, compiled, self.device, self.staging, StageTimeouts(), measure=False)
        frames = frames_mod.count(made.inputs())
        if not isinstance(prepared, Prepared):
            return _Tried(Step(index, why, layers, frames, error=f"{prepared.stage}: {prepared.error}"), None)
        ran = self.runner.run(prepared.task)
        if not ran.ok:
            return _Tried(Step(index, why, layers, frames, error=f"{ran.stage}: {ran.error}"), None)
        scores, first = scored(made, compiled, ran, prepared.task.inputs, self.against.reference)
        verdict = verdict_for(self.spec, made, compiled, self.against).verdict
        if reference:
            self.against = Against(reference_of(compiled, first, scores))
        top1 = scores.get("top1_agreement") or {}
        step = Step(index, why, layers, frames, scores.get("snr_db"), top1, _wide(compiled), str(verdict))
        return _Tried(step, prepared.task.artifact)

    def rates(self, reference: _Tried, tried: list[_Tried]) -> tuple[list[Step], str]:
        """Every step's rate over the base's, measured together in interleaved rounds on the
        sweep's first device; and how, or why not."""
        base = reference.artifact
        others = list({t.artifact.sha: t.artifact for t in tried if t.artifact is not None}.values())
        others = [a for a in others if base is None or a.sha != base.sha]
        if base is None or not others:
            return [t.step for t in tried], "" if base is not None else "rates not measured: the base failed"
        race = RaceSpec(tuple(others), RATE_TARGET_PCT, RATE_BUDGET_S)
        found = self.runner.race_against(base, race, self.spec.measure, self.device)
        if isinstance(found, str):
            return [t.step for t in tried], f"rates not measured: {found}"
        side = {a.sha: i + 1 for i, a in enumerate(others)}  # side 0: the base
        flags = tuple(found.get("flags") or ())

        def cost(t: _Tried) -> RateCost | None:
            i = side.get(t.artifact.sha) if t.artifact is not None else None
            ratio = found["ratios"][i] if i is not None else None
            return None if ratio is None else RateCost(ratio[0], ratio[1], ratio[2], found["rounds"], flags)

        note = (
            f"rates: each step's over the base's, measured together in {found['rounds']} interleaved rounds "
            f"({found['wall_s']:.0f} s) on {self.device[0]}{'; ' + ', '.join(flags) if flags else ''}"
        )
        return [replace(t.step, rate=cost(t)) for t in tried], note


def _wide(compiled: CompileResult) -> int:
    """The nodes whose output grid the compile made wider than 8 bits."""
    return len({g.get("node") for g in compiled.info.wide_grids.values()})
