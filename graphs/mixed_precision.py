"""Which layers to put at 16 bits: Optuna's multi-objective sampler over mixed precision, on a study.

Each trial picks, per quantized layer, 8 or 16 bits for its output activations; a generation of
trials is one ``study.evaluate`` (compiled in parallel, measured together with the reference), and
each is told its SNR and its rate ratio to the reference, so the front is the accuracy a user buys
with each step of rate. A candidate that is not usable (confounded, failed, host-busy) is told as
failed, with why. The question Hailo users ask after ``hailo analyze-noise`` (issue 36): which
``quantization_param(<layer>, precision_mode=a16_w16)`` lines pay for themselves.
Needs ``pip install -e '.[search]'``.

Run: ``python graphs/mixed_precision.py [--generations 3] [--per-generation 6] [--runs runs]``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import optuna

from loop.api import Result, script
from loop.study import Study

BASE = Path(__file__).resolve().parent / "two_conv.yaml"
LAYERS = ("conv1", "conv2")  # the quantized layers of the base (`loop layers graphs/two_conv.yaml`)


def candidate(trial: optuna.Trial, layers: tuple[str, ...] = LAYERS) -> list[dict[str, Any]]:
    """One precision op per layer the trial puts at 16 bits (none: the base again)."""
    bits = {layer: trial.suggest_categorical(f"bits:{layer}", [8, 16]) for layer in layers}
    return [{"op": "precision", "layer": layer, "bits": 16} for layer, b in bits.items() if b == 16]


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
    study = Study("mixed-precision", base=BASE, runs=runs, **settings)
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
        sixteen = [k.removeprefix("bits:") for k, v in trial.params.items() if v == 16]
        print(f"trial {trial.number}: SNR {snr:.1f} dB, rate ratio {ratio:.3f}, 16 bits: {sixteen or 'none'}")
    print(f"the study's front, beyond noise: {[r.run_id for r in study.pareto()]}")


if __name__ == "__main__":
    script(main)
