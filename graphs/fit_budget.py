"""Which layers to put at 4 bits for the best SNR under a weight budget ("8 GB decides everything"),
each candidate compiled, audited and scored through a ``Study``.

    python graphs/fit_budget.py SWEEP --budget-frac F --runs DIR [--trials N] [--seed S]

The budget is ``F`` times the sweep's base's weight bytes at 8 bits. A candidate is a set of layers
at 4 bits (``{op: precision, layer: L, weights: 4}`` each), evaluated score-only. The search:

1. each weighted layer alone at 4 bits, one generation: what each costs in SNR;
2. greedy: layers added least SNR lost per byte saved first, until the candidate is within the
   budget; then its neighbours, each with one chosen layer swapped for the next unchosen one;
3. with Optuna installed (``pip install -e '.[search]'``) and ``--trials N``, N more candidates from
   its TPE sampler over one yes/no a layer, a candidate over the budget scored as its SNR minus
   the dB it overshoots by (so the sampler learns the edge).

The answer is ``Study.best("snr_db", within={"weight_bytes": budget})``: the best SNR of every
candidate tried that fits (clean ones only), and the study's Pareto front over SNR and weight bytes
lists it. The last stdout line is one JSON object: ``budget_bytes``, ``base_bytes``, ``tried``,
``on_pareto`` and ``best`` (``weight_bytes``, ``snr_db``, ``layers_4bit``, ``run_id``).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from loop.api import Result, script
from loop.author.graphs import load
from loop.study import Study, sweep_settings


def at4(layers: list[str]) -> list[dict[str, Any]]:
    return [{"op": "precision", "layer": name, "weights": 4} for name in sorted(layers)]


def layers_4bit(result: Result) -> list[str]:
    return [str(op["layer"]) for op in result.run.perturb if op.get("weights") == 4]


def snr(result: Result) -> float:
    value = result.value("snr_db")
    return -math.inf if value is None else float(value)


def greedy(counts: dict[str, int], alone: dict[str, float], base_snr: float, need: int) -> list[str]:
    """Layers least SNR lost per byte saved first (a byte saved is two 4-bit weights), until
    ``need`` bytes are saved."""
    order = sorted(counts, key=lambda n: (base_snr - alone[n]) / (counts[n] / 2))
    chosen, saved = [], 0
    for name in order:
        if saved >= need:
            break
        chosen.append(name)
        saved += counts[name] // 2
    return chosen


def neighbours(chosen: list[str], counts: dict[str, int], alone: dict[str, float]) -> list[list[str]]:
    """``chosen`` with one of its layers swapped for the unchosen layer that loses least alone."""
    rest = sorted((n for n in counts if n not in chosen), key=lambda n: -alone[n])
    return [[*(c for c in chosen if c != out), rest[0]] for out in chosen] if rest else []


def optuna_trials(study: Study, counts: dict[str, int], budget: int, trials: int, seed: int) -> int:
    """``trials`` candidates from Optuna's TPE sampler, one at a time; how many it ran (0 without Optuna)."""
    try:
        import optuna
    except ImportError:
        return 0
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    search = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))

    def objective(trial: Any) -> float:
        chosen = [n for n in counts if trial.suggest_categorical(n, [False, True])]
        (result,) = study.evaluate([at4(chosen)], measure=False)
        over = max(0, (result.weight_bytes or budget) - budget) / budget
        return snr(result) - 10 * math.log10(1 + 9 * over) if math.isfinite(snr(result)) else -1e9

    search.optimize(objective, n_trials=trials)
    return trials


def run(args: argparse.Namespace) -> dict[str, Any]:
    base, backend, settings = sweep_settings(args.sweep)
    shapes = {k: tuple(v) for k, v in (settings.get("input_shapes") or {}).items()}
    counts = {lp.name: lp.weight_count for lp in load(Path(base), {}, shapes).structure.layers if lp.weight_count}
    study = Study(f"fit-{args.sweep.stem}", base=base, backend=backend, runs=args.runs, **settings)
    (reference,) = study.evaluate([[]], measure=False)
    base_bytes, base_snr = reference.weight_bytes or 0, snr(reference)
    budget = int(args.budget_frac * base_bytes)
    names = list(counts)
    alone = dict(zip(names, map(snr, study.evaluate([at4([n]) for n in names], measure=False)), strict=True))
    chosen = greedy(counts, alone, base_snr, base_bytes - budget)
    study.evaluate([at4(chosen), *(at4(c) for c in neighbours(chosen, counts, alone))], measure=False)
    optuna_trials(study, counts, budget, args.trials, args.seed)
    best = study.best("snr_db", within={"weight_bytes": budget})
    front = study.pareto(("snr_db", "weight_bytes"))
    found = None
    if best is not None:
        found = {
            "weight_bytes": best.weight_bytes,
            "snr_db": best.value("snr_db"),
            "layers_4bit": layers_4bit(best),
            "run_id": best.run_id,
        }
    return {
        "budget_bytes": budget,
        "base_bytes": base_bytes,
        "tried": len(study.results()),
        "on_pareto": best is not None and any(r.run_id == best.run_id for r in front),
        "best": found,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("sweep", type=Path)
    parser.add_argument("--budget-frac", type=float, required=True, help="the budget, a fraction of the 8-bit bytes")
    parser.add_argument("--runs", type=Path, default=Path("runs"))
    parser.add_argument("--trials", type=int, default=0, help="Optuna trials after the greedy search (0: none)")
    parser.add_argument("--seed", type=int, default=0)
    print(json.dumps(run(parser.parse_args())))


if __name__ == "__main__":
    script(main)
