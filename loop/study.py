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
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from loop.api import Result, check_generation, race_runs, result_of, write_generation
from loop.core.errors import LoopError
from loop.core.leftovers import scratch
from loop.core.record import RunRecord
from loop.core.registry import compiler_class
from loop.core.text import for_person
from loop.flow.resume import Content, ContentChanged, Named, moved
from loop.flow.sweep import SweepOptions, reference_content, run_sweep
from loop.measure.stats import widened
from loop.spec.sweepfile import parse
from loop.spec.yamlio import load_yaml
from loop.store.files import atomic_write, safe_component
from loop.store.ledger import Ledger
from loop.store.races import read_race

Candidate = Sequence[Mapping[str, Any]] | Mapping[str, Any]


class LoopWarning(UserWarning):
    """Something a study's user should know that does not stop the generation."""


def content_key(perturb: Sequence[Mapping[str, Any]], options: Mapping[str, Any]) -> str:
    """What makes two candidates of one study the same: their perturbations and options."""
    text = json.dumps([list(map(dict, perturb)), dict(options)], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


_MISSING = object()


@dataclass(frozen=True)
class Evaluated:
    """A candidate this study ran: its key, the generation, the content its reference stood on."""

    key: str
    generation: int
    content: Content
    run: RunRecord
    ref: RunRecord | None


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
    plain = json.loads(json.dumps([[dict(op) for op in perturb], options], default=str))
    own = {k: v for k, v in plain[1].items() if study_compile.get(k, _MISSING) != v}
    return plain[0], own


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
        path = self.runs / "studies" / safe_component(f"{name}.json", "name")
        asked: dict[str, Any] = {
            "base": None if base is None else str(Path(base).resolve()),
            "backend": backend,
            "settings": settings,
        }
        if path.exists():
            kept = json.loads(path.read_text())
            kept.pop("race", None)  # kept apart by studies older than measure.target_ratio_pct
            if base is None and not settings:
                asked = kept  # opened by name alone: as it was started
            elif kept != json.loads(json.dumps(asked, default=str)):
                raise LoopError(
                    f"study '{name}' was started with base {kept['base']} and settings {kept['settings']}; "
                    f"this asks for base {asked['base']} and {settings}: open it by name alone, or use another name",
                    field="name",
                )
        elif base is None:
            raise LoopError(f"no study '{name}' under {self.runs}: give its base to start it", field="base")
        elif not Path(base).is_file():  # refused before the study is written down
            raise LoopError(f"study '{name}': base {base} is not a file", field="base")
        else:
            atomic_write(path, json.dumps(asked, indent=2, default=str).encode())
        self.base, self.backend, self.settings = asked["base"], asked["backend"], dict(asked["settings"])
        self._compile: dict[str, Any] = json.loads(json.dumps(self.settings.get("compile") or {}, default=str))

    # -- generations ---------------------------------------------------------------------

    def _generation_files(self) -> list[Path]:
        """In generation order (``g10`` after ``g9``), so the latest run of a candidate wins."""
        folder = self.runs / "generations"
        found = folder.glob(f"{self.name}-g*.yaml") if folder.exists() else []
        return sorted(found, key=lambda p: (_generation_of(self.name, p) or 0, p.name))

    def next_generation(self) -> int:
        numbers = [_generation_of(self.name, p) for p in self._generation_files()]
        return 1 + max((n for n in numbers if n is not None), default=-1)

    def evaluate(
        self,
        candidates: Sequence[Candidate],
        generation: int | None = None,
        remeasure: bool = False,
        names: Sequence[str] | None = None,
    ) -> list[Result]:
        """Run the generation (the next one unless given) and return a result per candidate;
        ``names`` names the candidates' runs (default ``c0``, ``c1``...)."""
        if generation is None:
            generation = self.next_generation()
        elif any(_generation_of(self.name, p) == generation for p in self._generation_files()):
            raise LoopError(f"study '{self.name}' has a generation {generation} already: leave generation out")
        split = [_split(c, self._compile) for c in candidates]
        keys = [content_key(p, o) for p, o in split]
        done = {} if remeasure else self._reusable(set(keys))
        todo: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {}
        named: dict[str, str] = {}
        for i, (key, (perturb, options)) in enumerate(zip(keys, split, strict=True)):
            if key not in done:
                todo.setdefault(key, (perturb, options))
                named.setdefault(key, names[i] if names else f"c{i}")
        fresh = self._run(generation, todo, named) if todo else {}
        raced = self._raced()
        out = []
        for i, key in enumerate(keys):
            run, ref = fresh[key] if key in fresh else done[key]
            out.append(with_race(result_of(i, run, ref, reused=key not in fresh), raced))
        return out

    def _run(
        self,
        generation: int,
        todo: Mapping[str, tuple[list[dict[str, Any]], dict[str, Any]]],
        named: Mapping[str, str],
    ) -> dict[str, tuple[RunRecord, RunRecord | None]]:
        """Each group of compile options as one sweep with its own base; runs by content key."""
        groups: dict[str, list[str]] = {}
        for key, (_, options) in todo.items():
            groups.setdefault(json.dumps(options, sort_keys=True, default=str), []).append(key)
        found: dict[str, tuple[RunRecord, RunRecord | None]] = {}
        for options_json, members in groups.items():
            options = json.loads(options_json)
            suffix = "" if not options else "-o" + hashlib.sha256(options_json.encode()).hexdigest()[:8]
            settings = {**self.settings, "compile": {**(self.settings.get("compile") or {}), **options}}
            variants = [{"name": named[k], "perturb": todo[k][0]} for k in members]
            sweep = f"{self.name}-g{generation}{suffix}"
            path = write_generation(self.runs, sweep, self.base, self.backend, variants, settings)
            options_ = SweepOptions(jobs=self.jobs, progress=self.progress, scorer=self.scorer, generation=generation)
            run_sweep(parse(path), self.runs, options_)
            runs, ref = self._latest(sweep)
            found.update((k, (runs[named[k]], ref)) for k in members)
            self._race(sweep, ref, [runs[named[k]] for k in members])
        return found

    def _race(self, sweep: str, ref: RunRecord | None, candidates: list[RunRecord]) -> None:
        """The group's reference and candidates measured together; kept beside the study."""
        ok = [r for r in candidates if r.status == "ok" and r.artifact and r.id != (ref.id if ref else None)]
        if ref is None or ref.status != "ok" or not ok:
            return
        sweep_file = self.runs / "generations" / safe_component(f"{sweep}.yaml", "name")
        try:
            found = race_runs(self.runs, sweep_file, ref, ok)
        except LoopError as exc:  # the runs are recorded; their ratios fall back to the ledger's figures
            warnings.warn(f"{sweep}: {exc}; rate ratios from the runs' own figures", LoopWarning, stacklevel=3)
            return
        path = self.runs / "studies" / safe_component(f"{sweep}.race.json", "name")
        atomic_write(path, json.dumps(found, indent=2).encode())

    def _raced(self) -> dict[int, dict[str, Any]]:
        """Each raced run's ratio to its reference, by run id, from every race file of the
        study; a file that cannot be used is warned about and its runs keep the ledger's."""
        out: dict[int, dict[str, Any]] = {}
        folder = self.runs / "studies"
        for path in sorted(folder.glob(f"{self.name}-g*.race.json")) if folder.exists() else []:
            try:
                out.update(read_race(path))
            except LoopError as exc:
                warnings.warn(str(exc), LoopWarning, stacklevel=3)
        return out

    def _latest(self, sweep: str) -> tuple[dict[str, RunRecord], RunRecord | None]:
        with Ledger(self.runs / "ledger.sqlite", readonly=True) as ledger:
            runs = {r.variant: r for r in ledger.records(sweep)}  # id order: the latest attempt wins
        return runs, runs.get("base")

    def _evaluated(self) -> list[Evaluated]:
        """Every candidate this study has run, in generation order, from its generation files."""
        found: list[Evaluated] = []
        for path in self._generation_files():
            doc = yaml.safe_load(path.read_text())
            runs, ref = self._latest(str(doc["sweep"]))
            content = Content(None, None, None) if ref is None else Content.of(ref)
            for v in doc.get("variants", []):
                run = runs.get(v["name"])
                if v["name"] != "base" and run is not None and run.status == "ok":
                    asked = {"perturb": v.get("perturb") or [], "compile": doc.get("compile") or {}}
                    key = content_key(*_split(asked, self._compile))
                    found.append(Evaluated(key, _generation_of(self.name, path) or 0, content, run, ref))
        return found

    def _reusable(self, keys: set[str]) -> dict[str, tuple[RunRecord, RunRecord | None]]:
        """The latest run of each of ``keys`` whose reference stood on what the base and frame
        files hold now, compiled by the same tools; a line for each content or set of tools it
        no longer matches, where that costs a rerun."""
        earlier = [e for e in self._evaluated() if e.key in keys]
        if not earlier:
            return {}
        (now, names), tools = self._content(), compiler_class(self.backend)().describe()
        found = {e.key: (e.run, e.ref) for e in earlier if self._same(e.content, now) and e.run.versions == tools}
        stale = {(e.content, json.dumps(e.run.versions, sort_keys=True)): e for e in earlier if e.key not in found}
        for (before, _), e in stale.items():  # the latest generation of each
            since = f"generation {e.generation}"
            line = (
                moved(before, now, names, since)
                or _tools_moved(e.run.versions, tools, since)
                or f"the content {since} stood on is not recorded: measured afresh"
            )
            warnings.warn(line, ContentChanged, stacklevel=4)
        return found

    def _content(self) -> tuple[Content, Named]:
        """The study's reference as authored now: its base and frame files read afresh."""
        with scratch("gen") as tmp:
            check_generation(Path(tmp), f"{self.name}-now", self.base, self.backend, [{"name": "base"}], self.settings)
            return reference_content(parse(Path(tmp) / "sweep.yaml"))

    def _same(self, before: Content, now: Content) -> bool:
        """Seeded scoring frames follow from the study's fixed settings and the base's shapes, so
        a run from before their hash was recorded matches on the rest."""
        if before.inputs_sha is None and (self.settings.get("inputs") or {}).get("path") is None:
            before = replace(before, inputs_sha=now.inputs_sha)
        return before == now

    # -- answers -------------------------------------------------------------------------

    def results(self) -> list[Result]:
        """Every candidate this study has evaluated, once each (its latest run)."""
        raced = self._raced()
        latest = {e.key: (e.run, e.ref) for e in self._evaluated()}
        return [with_race(result_of(i, run, ref), raced) for i, (run, ref) in enumerate(latest.values())]

    def best(self, key: str = "snr_db", usable_only: bool = True) -> Result | None:
        """The result with the highest ``key`` (a score, ``rate_fps`` or ``rate_ratio``); its
        ``tied`` holds the others whose interval on ``key`` reaches into its own: within noise,
        any of them may be the better one."""
        pool = [r for r in self.results() if (r.usable or not usable_only) and r.value(key) is not None]
        found = max(pool, key=lambda r: float(r.value(key) or 0.0), default=None)
        if found is not None:
            low = found.interval(key)[0]
            found.tied = [r for r in pool if r is not found and r.interval(key)[1] >= low]
        return found

    def pareto(self, keys: Sequence[str] = ("snr_db", "rate_ratio")) -> list[Result]:
        """The usable results no other beats on every key beyond their intervals."""
        pool = [r for r in self.results() if r.usable and all(r.value(k) is not None for k in keys)]
        return [r for r in pool if not any(_dominates(o, r, keys) for o in pool if o is not r)]

    def records(self) -> list[dict[str, Any]]:
        return [asdict(r) for r in self.results()]

    def dataframe(self) -> Any:
        try:
            import pandas as pd
        except ImportError:
            raise LoopError("study.dataframe() needs pandas (pip install pandas)", field="dataframe") from None
        return pd.DataFrame(self.records())


def _tools_moved(before: Mapping[str, Any], now: Mapping[str, Any], since: str) -> str | None:
    """One line naming the compiler's tools whose versions moved (a new one makes new artifacts)."""
    moved = [
        f"{k} {before.get(k, '-')} -> {now.get(k, '-')}" for k in sorted({*before, *now}) if before.get(k) != now.get(k)
    ]
    return f"the compiler changed since {since} ({', '.join(moved)}): measured afresh" if moved else None


def _dominates(a: Result, b: Result, keys: Sequence[str]) -> bool:
    """``a`` is better than ``b`` beyond both intervals on one key, and not worse beyond them
    on any: within noise of each other, neither dominates."""
    ia, ib = [a.interval(k) for k in keys], [b.interval(k) for k in keys]
    not_worse = all(ahi >= blo for (_, ahi), (blo, _) in zip(ia, ib, strict=True))
    return not_worse and any(alo > bhi for (alo, _), (_, bhi) in zip(ia, ib, strict=True))


def with_race(result: Result, raced: Mapping[int, Mapping[str, Any]]) -> Result:
    """The result with its ratio from the generation's rounds, where it was raced: its 95%
    interval is the rounds' widened by the race's A/A floor (two sessions of one artifact
    differed by that much, which no round-to-round interval shows)."""
    found = raced.get(result.run_id or -1)
    if found is None:
        return result
    _, lo, hi = widened((found["ratio"], found["low"], found["high"]), found.get("floor_pct"))
    result.rate_ratio, result.rate_ratio_ci95 = found["ratio"], (lo, hi)
    result.ratio_floor_pct = found.get("floor_pct")
    result.ratio_basis = f"interleaved, {found['rounds']} rounds" + (" (dropped: beaten)" if found["dropped"] else "")
    return result


SHARED = ("devices", "seed", "calibration", "inputs", "compile", "measure", "params", "input_shapes")


def from_sweep_file(path: Path, name: str, **study: Any) -> tuple[Study, list[Result]]:
    """``loop sweep FILE --study NAME``: the file's variants as the next generation of study
    ``NAME`` over the file's base and settings (a variant with neither perturbations nor
    compile options of its own is the reference every generation has already)."""
    parse(path, check_backends=True)  # a bad file is one line, before anything is written
    doc = json.loads(json.dumps(load_yaml(path)))  # plain data: a study writes it back out
    here = path.resolve().parent
    settings = {k: _absolute(doc[k], here) if k in ("calibration", "inputs") else doc[k] for k in SHARED if k in doc}
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
    found = Study(name, base=here / doc["base"], backend=doc.get("backend", "onnxruntime"), **study, **settings)
    return found, found.evaluate(candidates, names=names)


def _absolute(data: Any, here: Path) -> Any:
    """Frames named by path in a sweep file are relative to it; a study's files live elsewhere."""
    if isinstance(data, Mapping) and data.get("path") is not None:
        return {**data, "path": str((here / str(data["path"])).resolve())}
    return data


def _generation_of(name: str, path: Path) -> int | None:
    rest = path.stem[len(name) + 2 :].split("-o")[0]
    return int(rest) if rest.isdigit() else None


__all__ = ["Study", "content_key", "from_sweep_file", "with_race"]
