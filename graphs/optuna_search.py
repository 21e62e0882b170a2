"""An optimizer on top of a study: Optuna's ask/tell with its multi-objective sampler.

Each trial asks for a forced output range on conv1 and a weight scale; a generation of trials
is evaluated by one ``study.evaluate`` (compiled in parallel, measured together with the
reference), and each is told its SNR and its rate ratio to the reference. A candidate that is
not usable (confounded, failed, host-busy) is told as failed, with why, so the sampler learns
to avoid it rather than taking its figures. Needs ``pip install -e '.[search]'``.

Run: ``python graphs/optuna_search.py [--generations 3] [--per-generation 6] [--runs runs]``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import optuna

from loop.api import Result, script
from loop.study import Study

BASE = Path(__file__).resolve().parent / "two_conv.yaml"


def candidate(trial: optuna.Trial) -> list[dict[str, Any]]:
    high = trial.suggest_float("range_high", 1.0, 16.0, log=True)
    factor = trial.suggest_float("scale", 0.9, 1.1)
    return [
        {"op": "force_range_out", "layer": "conv1", "range": [0.0, high]},
        {"op": "scale_weights", "layer": "conv2", "factor": factor},
    ]


def tell(search: optuna.Study, trial: optuna.Trial, result: Result) -> None:
    snr, ratio = result.value("snr_db"), result.rate_ratio
    if not result.usable or snr is None or ratio is None:
        trial.set_user_attr("why", result.why or "no SNR or rate ratio")
        search.tell(trial, state=optuna.trial.TrialState.FAIL)
        return
    trial.set_user_attr("run_id", result.run_id)
    search.tell(trial, [snr, ratio])


def run(
    runs: Path, generations: int, per_generation: int, seed: int = 0, **settings: Any
) -> tuple[optuna.Study, Study]:
    """``generations`` of ``per_generation`` trials; the Optuna study and the loop study."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.NSGAIISampler(population_size=per_generation, seed=seed)
    search = optuna.create_study(directions=["maximize", "maximize"], sampler=sampler)
    study = Study("optuna", base=BASE, runs=runs, compile={"bias_correction": False}, **settings)
    for _ in range(generations):
        trials = [search.ask() for _ in range(per_generation)]
        for trial, result in zip(trials, study.evaluate([candidate(t) for t in trials]), strict=True):
            tell(search, trial, result)
    return search, study


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--per-generation", type=int, default=6)
    parser.add_argument("--runs", type=Path, default=Path("runs"))
    args = parser.parse_args()
    search, study = run(args.runs, args.generations, args.per_generation)
    for trial in search.best_trials:
        snr, ratio = trial.values
        print(f"trial {trial.number}: SNR {snr:.1f} dB, rate ratio {ratio:.3f}, {trial.params}")
    print(f"the study's front, beyond noise: {[r.run_id for r in study.pareto()]}")


if __name__ == "__main__":
    script(main)
