"""The Python API for an optimizer: score a generation of candidates, in order.

Each generation is written as an ordinary sweep file under ``<runs>/generations/`` (the
record of what was asked), then run like any sweep, so the ledger, the cache, resume and
the audit all apply. A candidate is a perturbation list against ``base`` (audited: a
scale-only search can drop ``confounded`` ones), or an ONNX model (its own base: ``n/a``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx

from loop.author.sweepfile import parse
from loop.core.errors import LoopError
from loop.core.leftovers import scratch
from loop.core.registry import DEFAULT_CHIP, DEFAULT_LINK
from loop.flow import fit as fitting
from loop.flow.sweep import SweepOptions, run_sweep
from loop.hailort.hef import HefInfo, inspect_hef
from loop.judge.noise import NoiseReport
from loop.measure.fit import FitReport
from loop.measure.results import Result, result_of
from loop.store.files import store_verified
from loop.store.generations import prepare, write
from loop.store.ledger import Ledger

Candidate = Sequence[Mapping[str, Any]] | onnx.ModelProto | bytes | str | Path


def _model_path(runs: Path, candidate: onnx.ModelProto | bytes | str | Path) -> str:
    if isinstance(candidate, (str, Path)):
        return str(Path(candidate).resolve())
    data = candidate.SerializeToString() if isinstance(candidate, onnx.ModelProto) else candidate
    sha = hashlib.sha256(data).hexdigest()
    return str(store_verified(Path(runs).resolve() / "candidates" / f"{sha[:32]}.onnx", sha, data))


def _variant(runs: Path, i: int, candidate: Candidate) -> dict[str, Any]:
    if isinstance(candidate, (onnx.ModelProto, bytes, str, Path)):
        return {"name": f"c{i}", "base": _model_path(runs, candidate)}
    return {"name": f"c{i}", "perturb": [dict(op) for op in candidate]}


def evaluate(
    candidates: Sequence[Candidate],
    *,
    generation: int,
    runs: str | Path = "runs",
    backend: str = "onnxruntime",
    base: str | Path | None = None,
    name: str = "evaluate",
    jobs: int | None = None,
    scorer: Callable[..., dict[str, Any]] | None = None,
    progress: bool = False,
    **settings: Any,
) -> list[Result]:
    """Compile, audit, measure and score ``candidates``; results come back in their order.

    ``settings`` are sweep-file keys (``compile``, ``measure``, ``calibration``, ``inputs``,
    ``seed``). Bad input raises :class:`loop.core.errors.LoopError` before anything is written.
    """
    runs = Path(runs)
    if isinstance(generation, bool) or not isinstance(generation, int) or generation < 0:
        raise LoopError(f"generation must be a whole number >= 0, not {generation!r}", field="generation")
    sweep = f"{name}-g{generation}"
    with scratch("gen") as tmp:  # validated before anything lands under runs/ (a model candidate's file too)
        staged = [_variant(Path(tmp), i, c) for i, c in enumerate(candidates)]
        prepare(Path(tmp), sweep, base, backend, staged, settings)
    prepared = prepare(runs, sweep, base, backend, [_variant(runs, i, c) for i, c in enumerate(candidates)], settings)
    result = run_sweep(
        write(prepared, sweep),
        runs,
        SweepOptions(jobs=jobs, progress=progress, scorer=scorer, generation=generation),
    )
    return _results(runs, result.outcomes, len(candidates))


def _results(runs: Path, outcomes: Sequence[Any], count: int) -> list[Result]:
    with Ledger.of_runs(runs, readonly=True) as ledger:
        by_name = {o.variant: ledger.record(o.run_id) for o in outcomes if o.run_id is not None}
    return [result_of(i, by_name[f"c{i}"], by_name.get("base")) for i in range(count)]


def inspect(hef: str | Path, device: str | None = None, sweep: str | Path | None = None) -> HefInfo:
    """What a HEF holds and, on ``device`` (else ``sweep``'s chip), whether it fits: ``loop inspect``."""
    return inspect_hef(hef, device or (sweep_device(Path(sweep)) if sweep is not None else None))


def fit(
    model: str | Path,
    device: str = DEFAULT_CHIP,
    link: str = DEFAULT_LINK,
    run: int | None = None,
    runs: str | Path = "runs",
) -> FitReport:
    """What a model's weights weigh against ``device``'s memory, read from the file alone
    (``loop fit``): an ONNX model's weights (every floating-point initializer and Constant, and
    each integer tensor a DequantizeLinear reads: :mod:`loop.judge.weights`) as stored and at bf16,
    int8 and int4, each fitting or not, with its one load over ``link`` (a lower bound: a HEF holds
    at least its weights); a HEF's own size as compiled. ``run``: that run's recorded weights beside
    them (``runs``'s ledger). ``.to_json()`` is ``loop fit --json``. Bad input raises LoopError."""
    return fitting.fit(Path(model), device, link, Path(runs), run)


def sweep_device(path: Path) -> str | None:
    """The chip a sweep file's backend compiles for (hailo: its ``hw_arch``, else hailo10h); None
    for a backend that compiles for no chip."""
    from loop.core.registry import compiler_class

    spec = parse(path)
    return compiler_class(spec.backend).target_chip(spec.compile)


def noise(
    sweep_file: str | Path,
    variant: str,
    runs: str | Path | None = None,
    target_db: float | None = None,
    progress: bool = False,
) -> NoiseReport:
    """Where quantization loses, layer by layer, and the 16-bit variants tried: ``loop noise``."""
    from loop.flow.widen import measured

    return measured(Path(sweep_file), variant, None if runs is None else Path(runs), target_db, progress)


def script(main: Callable[[], Any]) -> None:
    """Run a script's ``main`` (the examples in ``graphs/``) as ``loop`` runs a command: bad input
    (:class:`LoopError`: a malformed sweep file, frames of the wrong shape) is one line on stderr
    naming the file and field, with exit 2, or 1 where the runs folder failed; anything else is a
    bug and keeps its traceback."""
    import sys

    from loop.store.files import StoreFault

    try:
        main()
    except LoopError as exc:
        name = Path(sys.argv[0]).name
        sys.stderr.write(f"{name}: {exc.render()}\n")
        raise SystemExit(1 if isinstance(exc, StoreFault) else 2) from None
