"""Studies: a named, resumable series of generations over one base, for an optimizer.

``Study(name, base=..., runs=...)`` opens the study of that name under ``runs/studies/``, or
starts it; a different base or different settings under the same name are refused in one
line. ``study.evaluate(candidates)`` runs the next generation and returns one
:class:`~loop.api.Result` per candidate, in order. A candidate is a perturbation list, or
``{"perturb": [...], "compile": {...}}`` with compile options of its own.

What a search needs from it:

* **A reference per compile options.** Candidates are grouped by their compile options; each
  group is one sweep (``NAME-gN``, or ``NAME-gN-o<hash>``) with the base compiled with the same
  options as its reference, so a candidate's own options still get a real verdict.
* **Reuse by content.** A candidate already evaluated in this study (the same perturbations and
  compile options, over the study's fixed settings, and over the same content: the base's bytes
  and the calibration and scoring frames, as its reference's run recorded them) comes back from
  the ledger without running, ``reused``; identical candidates in one generation run once.
  ``remeasure=True`` runs them again. A base or frame file rewritten under its path is a new
  reference: its candidates are measured afresh, with a line (:class:`ContentChanged`) saying so.
* **Results that say everything**: ``usable`` is false for failed, confounded, unaudited or
  host-busy runs, ``why`` says which; each carries its rate's interval and its rate ratio to
  the reference of its sweep with an interval (from the two runs' recorded figures).
* ``best(key)`` and ``pareto(keys)``, where one candidate dominates another only beyond their
  intervals, so candidates within noise of each other are both on the front, and the best
  carries in ``tied`` those within noise of it.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from loop.author.sweepfile import parse
from loop.author.yamlio import load_yaml
from loop.core.arrays import numbers
from loop.core.errors import LoopError
from loop.core.kinds import Flag
from loop.core.record import RunRecord
from loop.core.registry import compiler_class
from loop.core.text import for_person
from loop.flow.compile_pool import warm_patches
from loop.flow.generation import run_generation
from loop.flow.local_runner import LocalRunner
from loop.flow.resume import Content, ContentChanged, Named, moved
from loop.flow.sweep import SweepOptions, reference_content
from loop.measure.results import (
    PARETO_KEYS,
    RATE_KEYS,
    SCORE_ONLY,
    Result,
    pareto,
    result_of,
    signed_interval,
    with_race,
)
from loop.store.generations import Prepared, prepare, write
from loop.store.ledger import Ledger
from loop.store.studies import Asked, StudyStore, ratios
from loop.store.study_files import import_files

Candidate = Sequence[Mapping[str, Any]] | Mapping[str, Any]


class LoopWarning(UserWarning):
    """Something a study's user should know that does not stop the generation."""


def content_key(perturb: Sequence[Mapping[str, Any]], options: Mapping[str, Any]) -> str:
    """What makes two candidates of one study the same: their perturbations and options. An
    array counts as the list of its numbers, which is what its op reads: the same numbers as a
    list or as an array of any dtype are one candidate (docs/studies.md)."""
    text = json.dumps([list(map(dict, perturb)), dict(options)], sort_keys=True, default=_numbers)
    return hashlib.sha256(text.encode()).hexdigest()


def _numbers(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray) else str(value)


def _plain(value: Any) -> Any:
    """``value`` as plain JSON, a numpy array kept as a one-dimensional array of numbers (its
    numbers a numpy scalar's value), anything else as its text, as JSON's ``default=str`` had it."""
    if isinstance(value, np.ndarray) and value.ndim:
        try:
            return numbers(value, "a candidate's array")
        except ValueError as exc:
            raise LoopError(str(exc), field="candidates") from None
    if isinstance(value, (np.ndarray, np.generic)):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)


_MISSING = object()


@dataclass(frozen=True)
class Evaluated:
    """A candidate this study ran: its key, the generation, the content its reference stood on."""

    key: str
    generation: int
    content: Content
    run: RunRecord
    ref: RunRecord | None


@dataclass(frozen=True)
class _Group:
    """One set of compile options in a generation: its sweep's suffix, its settings, its variants
    as the generation file names them, and their content keys (in the variants' order)."""

    suffix: str
    settings: dict[str, Any]
    variants: list[dict[str, Any]]
    members: list[str]


@dataclass(frozen=True)
class _Answer:
    """What answers a candidate of a generation: its run, the run's sweep and reference, and the
    generation a reused run came from (None: it ran in this one)."""

    index: int
    sweep: str
    run: RunRecord
    ref: RunRecord | None
    reused_from: int | None = None


def _split(candidate: Candidate, study_compile: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The candidate's perturbations and its own compile options (those the study's do not
    already set to the same value), as plain JSON, so a candidate read back from a generation
    file has the key it was asked with."""
    if isinstance(candidate, Mapping):
        unknown = set(candidate) - {"perturb", "compile"}
        if unknown:
            raise LoopError(f"a candidate takes 'perturb' and 'compile', not {sorted(unknown)}", field="candidates")
        perturb, options = candidate.get("perturb") or (), dict(candidate.get("compile") or {})
    else:
        perturb, options = candidate, {}
    plain = json.loads(json.dumps(options, default=str))
    own = {k: v for k, v in plain.items() if study_compile.get(k, _MISSING) != v}
    return [_plain(dict(op)) for op in perturb], own


class Study:
    """A named series of generations over one base (see the module)."""

    def __init__(
        self,
        name: str,
        *,
        base: str | Path | None = None,
        runs: str | Path = "runs",
        backend: str = "onnxruntime",
        jobs: int | None = None,
        scorer: Any = None,
        progress: bool = False,
        **settings: Any,
    ) -> None:
        self.name, self.runs, self.jobs, self.scorer, self.progress = name, Path(runs), jobs, scorer, progress
        asked: dict[str, Any] = json.loads(
            json.dumps(
                {"base": None if base is None else str(Path(base).resolve()), "backend": backend, "settings": settings},
                default=str,
            )
        )
        with self._store() as store:
            kept = store.settings() or import_files(store, self.runs, self._key_of)
            if kept is not None:
                if base is None and not settings:
                    asked = kept  # opened by name alone: as it was started
                elif kept != asked:
                    raise LoopError(
                        f"study '{name}' was started with base {kept['base']} and settings {kept['settings']}; "
                        f"this asks for base {asked['base']} and {settings}: "
                        "open it by name alone, or use another name",
                        field="name",
                    )
            elif base is None:
                raise LoopError(f"no study '{name}' under {self.runs}: give its base to start it", field="base")
            elif not Path(base).is_file():  # refused before the study is written down
                raise LoopError(f"study '{name}': base {base} is not a file", field="base")
            else:
                found = store.start(asked, _content_key(Path(base)))
                if found != asked:  # another process started it first, otherwise
                    raise LoopError(f"study '{name}' was just started by another process with {found}", field="name")
        self.base, self.backend, self.settings = asked["base"], asked["backend"], dict(asked["settings"])
        self._compile: dict[str, Any] = json.loads(json.dumps(self.settings.get("compile") or {}, default=str))
        # One runner for every generation: its device children are kept from one to the next (a
        # search's step is a generation, and starting a device process costs more than scoring two
        # candidates), and end with the study (close, or when it is collected or the process exits).
        self._runner = LocalRunner()
        self._closed = weakref.finalize(self, self._runner.close)
        self._references: dict[str, RunRecord] = {}  # each group's latest reference run, this process's

    def close(self) -> None:
        """End the device processes this study's generations ran on; a later ``evaluate`` starts
        them again."""
        self._runner.close()

    def __enter__(self) -> Study:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @contextmanager
    def _store(self, readonly: bool = False) -> Iterator[StudyStore]:
        if not readonly:
            self.runs.mkdir(parents=True, exist_ok=True)
        with Ledger.of_runs(self.runs, readonly=readonly) as ledger:
            yield StudyStore(ledger, self.name)

    def _key_of(
        self, perturb: Sequence[Mapping[str, Any]], options: Mapping[str, Any], study: Mapping[str, Any]
    ) -> str:
        """A candidate's content key as a generation file of the old layout holds it (its sweep's
        compile options over the study's)."""
        return content_key(*_split({"perturb": list(perturb), "compile": dict(options)}, study))

    # -- generations ---------------------------------------------------------------------

    def generations(self) -> dict[int, str]:
        """Each generation claimed, by number: ``done``, ``claimed`` (running, or left by a process
        that died: the next ``evaluate`` of its candidates takes it over) or ``abandoned``."""
        with self._store() as store:
            return store.states()

    def next_generation(self) -> int:
        with self._store() as store:
            return 1 + max(store.numbers(), default=-1)

    def evaluate(
        self,
        candidates: Sequence[Candidate],
        generation: int | None = None,
        remeasure: bool = False,
        names: Sequence[str] | None = None,
        measure: bool = True,
    ) -> list[Result]:
        """Run the generation (the next one unless given) and return a result per candidate;
        ``names`` names the candidates' runs (default ``c0``, ``c1``...). A generation this
        process or a dead one left unfinished, of the same candidates, is resumed. Candidates
        all evaluated already claim no generation: they come back ``reused``, each with the
        generation it ran in (a rerun of a search replays its generations without new numbers).
        The study's runs left ``running`` by a process that is gone are marked ``interrupted``.

        ``measure=False`` scores and audits each candidate on the controlled inputs only: no
        protocol, no rounds, no rate (``why_no_rate == "score-only"``). It reuses any earlier run
        of a candidate; a measured evaluation reuses measured runs only, so it measures a
        candidate evaluated score-only before (its compiles come from the cache)."""
        split = [_split(c, self._compile) for c in candidates]
        keys = [content_key(p, o) for p, o in split]
        variants = [names[i] if names else f"c{i}" for i in range(len(keys))]
        with self._store() as store:
            store.interrupt_dead()
        done = {} if remeasure else self._reusable(set(keys), measure)
        todo: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {}
        named: dict[str, str] = {}
        for key, variant, (perturb, options) in zip(keys, variants, split, strict=True):
            if key not in done:
                todo.setdefault(key, (perturb, options))
                named.setdefault(key, variant)
        if any(op.get("op") == "scale_grid" for perturb, _ in todo.values() for op in perturb):
            warm_patches(self.backend, self.jobs or (os.cpu_count() or 1))  # their imports overlap what follows
        groups = self._groups(todo, named)
        if not groups and self._replays(generation, keys):
            return self._results([(done[k].run, done[k].ref, True) for k in keys])  # all answered earlier
        checked = self._check(groups)  # bad input: one line, and nothing claimed
        with self._store() as store:
            number, _ = store.claim(
                [Asked(i, k, v) for i, (k, v) in enumerate(zip(keys, variants, strict=True))], generation
            )
        fresh = self._run(number, groups, checked, measure) if groups else {}
        answers = [
            replace(fresh[k], index=i)
            if k in fresh
            else _Answer(i, done[k].run.sweep, done[k].run, done[k].ref, done[k].generation)
            for i, k in enumerate(keys)
        ]
        with self._store() as store:
            rows = [
                (a.index, a.sweep, a.run.id or 0, None if a.ref is None else a.ref.id, a.reused_from) for a in answers
            ]
            store.answer(number, rows)
            store.finish(number)
        return self._results([(a.run, a.ref, a.reused_from is not None) for a in answers])  # a.index is its place

    def _replays(self, generation: int | None, keys: Sequence[str]) -> bool:
        """Whether candidates all evaluated already need no number: asked without one, or asked
        as ``generation`` that is done with these very candidates (a rerun naming its numbers)."""
        if generation is None:
            return True
        with self._store() as store:
            answered = [a.key for a in store.answered() if a.generation == generation]
        return answered == list(keys)

    def _results(self, found: Sequence[tuple[RunRecord, RunRecord | None, bool]]) -> list[Result]:
        """Candidate i's result from the ith (run, its reference, reused), with its ratio where it was raced."""
        with self._store() as store:
            raced = ratios(store.ledger, [run.id or 0 for run, _, _ in found])
        return [with_race(result_of(i, run, ref, reused=reused), raced) for i, (run, ref, reused) in enumerate(found)]

    def _groups(
        self, todo: Mapping[str, tuple[list[dict[str, Any]], dict[str, Any]]], named: Mapping[str, str]
    ) -> list[_Group]:
        """Each group of compile options: its sweep suffix, settings, variants and content keys."""
        groups: dict[str, list[str]] = {}
        for key, (_, options) in todo.items():
            groups.setdefault(json.dumps(options, sort_keys=True, default=str), []).append(key)
        out = []
        for options_json, members in groups.items():
            options = json.loads(options_json)
            suffix = "" if not options else "-o" + hashlib.sha256(options_json.encode()).hexdigest()[:8]
            settings = {**self.settings, "compile": {**(self.settings.get("compile") or {}), **options}}
            out.append(_Group(suffix, settings, [{"name": named[k], "perturb": todo[k][0]} for k in members], members))
        return out

    def _check(self, groups: Sequence[_Group]) -> list[Prepared]:
        """Refuse a generation that would not parse, in one line, before a number is claimed."""
        return [
            prepare(
                self.runs, f"{self.name}-check{g.suffix}", self.base, self.backend, _perturbing(g.variants), g.settings
            )
            for g in groups
        ]

    def _run(
        self,
        generation: int,
        groups: Sequence[_Group],
        checked: Sequence[Prepared],
        measure: bool = True,
    ) -> dict[str, _Answer]:
        """Each group as one generation flow with its own base, its ratios recorded; the runs
        by content key (their indices set by the caller)."""
        found: dict[str, _Answer] = {}
        for group, prepared in zip(groups, checked, strict=True):
            suffix = group.suffix
            sweep = f"{self.name}-g{generation}{suffix}"
            spec = write(prepared, sweep)  # the file for people; the spec _check parsed, renamed
            # the reference's scores stand as an earlier generation recorded them; a measured
            # generation takes one measured (its rounds race it again, beside the candidates)
            earlier = self._references.get(suffix)
            if earlier is not None and measure and Flag.SCORE_ONLY in earlier.flags:
                earlier = None
            options = SweepOptions(
                runner=self._runner,
                jobs=self.jobs,
                progress=self.progress,
                scorer=self.scorer,
                generation=generation,
                score_only=not measure,
                references={"": earlier} if earlier is not None else {},
            )
            ran = run_generation(spec, self.runs, options)
            if ran.error:  # the runs are recorded, unmeasured: their results say so
                warnings.warn(f"{sweep}: {ran.error}; no rates", LoopWarning, stacklevel=3)
            with self._store() as store:
                store.put_ratios(ran.ratios)
            ref = ran.runs.get("base")
            if ref is not None and ref.status == "ok":
                self._references[suffix] = ref
            for k, v in zip(group.members, group.variants, strict=True):  # an empty candidate is the base
                found[k] = _Answer(-1, sweep, ran.runs[v["name"] if v["perturb"] else "base"], ref)
        return found

    def _evaluated(self, store: StudyStore, keys: set[str] | None = None) -> list[Evaluated]:
        """Every candidate this study has run (of ``keys``), in generation order, from the ledger:
        a record is read only for a candidate asked for, so a generation does not reread the
        whole study's (each holds its per-layer prints)."""
        found: list[Evaluated] = []
        by_id: dict[int, RunRecord] = {}

        def run(i: int) -> RunRecord:
            if i not in by_id:
                by_id[i] = store.ledger.record(i)
            return by_id[i]

        for a in store.answered():
            if a.reused_from is not None or (keys is not None and a.key not in keys):
                continue  # the run it reuses is listed where it ran
            mine, ref = run(a.run_id), None if a.ref_run_id is None else run(a.ref_run_id)
            if mine.status == "ok":
                content = Content(None, None, None) if ref is None else Content.of(ref)
                found.append(Evaluated(a.key, a.generation, content, mine, ref))
        return found

    def _reusable(self, keys: set[str], measured: bool = True) -> dict[str, Evaluated]:
        """The latest run of each of ``keys`` whose reference stood on what the base and frame
        files hold now, compiled by the same tools (``measured``: a run with a rate, not a
        score-only one); a line for each content or set of tools it no longer matches, where
        that costs a rerun."""
        with self._store() as store:
            earlier = [e for e in self._evaluated(store, keys) if not (measured and _score_only(e.run))]
        if not earlier:
            return {}
        (now, names), tools = self._content(), compiler_class(self.backend)().describe()
        found = {e.key: e for e in earlier if self._same(e.content, now) and e.run.compiled.versions == tools}
        stale = {(e.content, str(sorted(e.run.compiled.versions.items()))): e for e in earlier if e.key not in found}
        for (before, _), e in stale.items():  # the latest generation of each
            since = f"generation {e.generation}"
            line = (
                moved(before, now, names, since)
                or _tools_moved(e.run.compiled.versions, tools, since)
                or f"the content {since} stood on is not recorded: measured afresh"
            )
            warnings.warn(line, ContentChanged, stacklevel=4)
        return found

    def _content(self) -> tuple[Content, Named]:
        """The study's reference as authored now: its base and frame files read afresh."""
        now = prepare(self.runs, f"{self.name}-now", self.base, self.backend, [{"name": "base"}], self.settings)
        return reference_content(now.spec)

    def _same(self, before: Content, now: Content) -> bool:
        """Seeded scoring frames follow from the study's fixed settings and the base's shapes, so
        a run from before their hash was recorded matches on the rest."""
        if before.inputs_sha is None and (self.settings.get("inputs") or {}).get("path") is None:
            before = replace(before, inputs_sha=now.inputs_sha)
        return before == now

    # -- answers -------------------------------------------------------------------------

    def results(self) -> list[Result]:
        """Every candidate this study has evaluated, once each (its latest run), from the ledger."""
        with self._store() as store:
            latest = {e.key: (e.run, e.ref, False) for e in self._evaluated(store)}
        return self._results(list(latest.values()))

    def best(
        self, key: str = "snr_db", usable_only: bool = True, within: Mapping[str, float] | None = None
    ) -> Result | None:
        """The result best on ``key`` (a score, ``rate_fps`` or ``rate_ratio``: the highest;
        ``weight_bytes`` or ``ttfo_ms``: the lowest) among those ``within`` bounds, each a most,
        such as ``{"weight_bytes": 8 * 2**30}`` (the best that fits; a result with no such value
        is out); its ``tied`` holds the others whose interval on ``key`` reaches into its own:
        within noise, any of them may be the better one."""
        pool = [r for r in self.results() if r.usable or not usable_only]
        _refuse_unmeasured(pool, (key, *(within or {})))
        pool = [r for r in pool if r.value(key) is not None and _within(r, within or {})]
        found = max(pool, key=lambda r: float(r.better(key) or 0.0), default=None)
        if found is None:
            return None
        low = signed_interval(found, key)[0]
        return replace(found, tied=[r for r in pool if r is not found and signed_interval(r, key)[1] >= low])

    def pareto(self, keys: Sequence[str] = PARETO_KEYS) -> list[Result]:
        """The usable results no other beats on every key beyond their intervals
        (:func:`loop.measure.results.pareto`, the report's front too). A rate key with
        candidates evaluated score-only is refused: they have no rate to be beaten on."""
        results = self.results()
        _refuse_unmeasured([r for r in results if r.usable], keys)
        return pareto(results, keys)

    def records(self) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self.results()]

    def dataframe(self) -> Any:
        try:
            import pandas as pd
        except ImportError:
            raise LoopError("study.dataframe() needs pandas: pip install 'loop[search]'", field="dataframe") from None
        return pd.DataFrame(self.records())


def _within(result: Result, bounds: Mapping[str, float]) -> bool:
    return all((v := result.value(k)) is not None and v <= bound for k, bound in bounds.items())


def _score_only(run: RunRecord) -> bool:
    return Flag.SCORE_ONLY in run.flags


def _refuse_unmeasured(results: Sequence[Result], keys: Sequence[str]) -> None:
    """One line naming the candidates a rate key cannot rank: evaluated score-only, they have no
    rate, and leaving them out in silence would crown a worse candidate."""
    rated = [k for k in keys if k in RATE_KEYS]
    unrated = [r for r in results if r.why_no_rate == SCORE_ONLY]
    if rated and unrated:
        named = ", ".join(f"{for_person(r.variant)} (generation {r.generation})" for r in unrated[:5])
        more = f" and {len(unrated) - 5} more" if len(unrated) > 5 else ""
        raise LoopError(
            f"{', '.join(rated)}: {len(unrated)} candidate(s) were evaluated score-only and have no rate: "
            f"{named}{more}; evaluate them with measure=True",
            field="key",
        )


def _tools_moved(before: Mapping[str, Any], now: Mapping[str, Any], since: str) -> str | None:
    """One line naming the compiler's tools whose versions moved (a new one makes new artifacts)."""
    moved = [
        f"{k} {before.get(k, '-')} -> {now.get(k, '-')}" for k in sorted({*before, *now}) if before.get(k) != now.get(k)
    ]
    return f"the compiler changed since {since} ({', '.join(moved)}): measured afresh" if moved else None


SHARED = ("devices", "seed", "calibration", "inputs", "compile", "measure", "params", "input_shapes")


def from_sweep_file(path: Path, name: str, measure: bool = True, **study: Any) -> tuple[Study, list[Result]]:
    """``loop sweep FILE --study NAME``: the file's variants as the next generation of study
    ``NAME`` over the file's base and settings (a variant with neither perturbations nor
    compile options of its own is the reference every generation has already); ``measure=False``:
    score-only (``--score-only``)."""
    base, backend, settings = sweep_settings(path)
    doc = json.loads(json.dumps(load_yaml(path)))
    names, candidates = [], []
    for v in doc["variants"]:
        own = set(v) - {"name", "perturb", "compile"}
        if own:
            raise LoopError(
                f"{path}: variant '{for_person(v['name'])}' sets {sorted(own)}: a study's candidate is its "
                "perturbations and compile options over the sweep's base, params and measure (run it without --study)",
                field="variants",
            )
        if v.get("perturb") or v.get("compile"):
            names.append(str(v["name"]))
            candidates.append({"perturb": v.get("perturb") or [], "compile": v.get("compile") or {}})
    found = Study(name, base=base, backend=backend, **study, **settings)
    return found, found.evaluate(candidates, names=names, measure=measure)


def sweep_settings(path: Path) -> tuple[Path, str, dict[str, Any]]:
    """A sweep file's base, backend and the settings a study over it shares (frames named by
    absolute path); a bad file is one line, before anything is written."""
    parse(path, check_backends=True)
    doc = json.loads(json.dumps(load_yaml(path)))  # plain data: a study writes it back out
    here = path.resolve().parent
    settings = {k: _absolute(doc[k], here) if k in ("calibration", "inputs") else doc[k] for k in SHARED if k in doc}
    return here / doc["base"], str(doc.get("backend", "onnxruntime")), settings


def _absolute(data: Any, here: Path) -> Any:
    """Frames named by path in a sweep file are relative to it; a study's files live elsewhere."""
    if isinstance(data, Mapping) and data.get("path") is not None:
        return {**data, "path": str((here / str(data["path"])).resolve())}
    return data


__all__ = ["Study", "content_key", "from_sweep_file", "sweep_settings", "with_race"]


def _perturbing(variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A generation's variants less the empty candidates, which its reference answers; the
    reference alone where every candidate is empty."""
    return [v for v in variants if v["perturb"]] or [{"name": "base"}]


def _content_key(base: Path) -> str:
    """A base's content: an ONNX model with the data files it names, streamed; a recipe or sweep file by its bytes."""
    from loop.core.modelfile import file_sha, model_key

    if base.suffix.lower() == ".onnx":
        try:
            return model_key(base)
        except Exception:  # not a model this can read: the first generation says why, in its own line
            pass
    return file_sha(base)
