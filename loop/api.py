"""The Python API for an optimizer: score a generation of candidates, in order.

Each generation is written as an ordinary sweep file under ``<runs>/generations/`` (the
record of what was asked), then run like any sweep, so the ledger, the cache, resume and
the audit all apply. A candidate is a perturbation list against ``base`` (audited: a
scale-only search can drop ``confounded`` ones), or an ONNX model (its own base: ``n/a``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx
import yaml

from loop.core.errors import LoopError
from loop.core.kinds import NOT_COMPARABLE, Status, Verdict
from loop.core.leftovers import scratch
from loop.core.record import RunRecord
from loop.flow.sweep import SweepOptions, run_sweep
from loop.spec.sweepfile import parse
from loop.store.files import atomic_write, safe_component, store_verified
from loop.store.ledger import Ledger

Candidate = Sequence[Mapping[str, Any]] | onnx.ModelProto | bytes | str | Path


@dataclass
class Result:
    """One candidate's outcome: its score, verdict and the three quantities."""

    index: int
    variant: str
    run_id: int | None
    status: Status
    verdict: Verdict | None
    scores: dict[str, Any] = field(default_factory=dict)
    ttfo_ms: float | None = None
    rate_fps: float | None = None
    bytes_in: int | None = None
    bytes_out: int | None = None
    error: str | None = None

    @property
    def usable(self) -> bool:
        """Finished, and neither confounded nor unaudited: fit to compare with the others."""
        return self.status == Status.OK and self.verdict not in NOT_COMPARABLE


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


def _sweep_text(
    name: str, generation: int, base: str | Path | None, backend: str, variants: list[dict], settings: Mapping[str, Any]
) -> str:
    needs_base = any("perturb" in v for v in variants)
    if needs_base and base is None:
        raise ValueError("perturbation candidates need a base (base=...)")
    reference = [{"name": "base"}] if needs_base else []
    doc = {
        "sweep": f"{name}-g{generation}",
        "base": str(Path(base).resolve()) if base else variants[0]["base"],
        "backend": backend,
        **settings,
        "variants": reference + variants,
    }
    return yaml.safe_dump(doc, sort_keys=False)


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
    file_name = safe_component(f"{name}-g{generation}.yaml", "name")  # never a path of the caller's
    with scratch("gen") as tmp:
        staging = Path(tmp)
        variants = [_variant(staging, i, c) for i, c in enumerate(candidates)]
        text = _sweep_text(name, generation, base, backend, variants, settings)
        (staging / "sweep.yaml").write_text(text)
        parse(staging / "sweep.yaml")  # validate before anything lands under runs/
    variants = [_variant(runs, i, c) for i, c in enumerate(candidates)]
    path = atomic_write(
        runs / "generations" / file_name, _sweep_text(name, generation, base, backend, variants, settings).encode()
    )
    result = run_sweep(
        parse(path), runs, SweepOptions(jobs=jobs, progress=progress, scorer=scorer, generation=generation)
    )
    return _results(runs, result.outcomes, len(candidates))


def _results(runs: Path, outcomes: Sequence[Any], count: int) -> list[Result]:
    ledger = Ledger(runs / "ledger.sqlite", readonly=True)
    try:
        by_name = {o.variant: ledger.record(o.run_id) for o in outcomes if o.run_id is not None}
    finally:
        ledger.close()
    return [_result(i, by_name[f"c{i}"]) for i in range(count)]


def _result(index: int, run: RunRecord) -> Result:
    m = run.measure
    return Result(
        index=index,
        variant=run.variant,
        run_id=run.id,
        status=run.status,
        verdict=run.verdict,
        scores=run.scores.to_json(),
        ttfo_ms=m.ttfo_ms,
        rate_fps=m.median_fps,
        bytes_in=m.bytes_in,
        bytes_out=m.bytes_out,
        error=run.error,
    )
