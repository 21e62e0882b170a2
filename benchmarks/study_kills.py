"""A 3-generation study killed with SIGKILL at random moments (issue 34), then finished; checked
against the same study run without a kill.

    python benchmarks/study_kills.py [--kills 20] [--seed 0] [--max-wait 8]

A driver process evaluates three generations of ``graphs/two_conv.yaml`` candidates, skipping
those the study holds done, as an optimizer that restarts would. The parent kills it ``--kills``
times, each after a random wait, then lets it finish. After every kill each generation must be
``done``, ``claimed`` by the dead process (the next ``evaluate`` of its candidates takes it over)
or ``abandoned``; at the end every generation is done, each number once, and every candidate's
verdict and SNR equal the unkilled study's (rates are measurements and differ by noise).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE = Path(__file__).resolve().parents[1] / "graphs" / "two_conv.yaml"
DRIVER = """
import sys
from loop import Study
runs, base = sys.argv[1], sys.argv[2]
gens = [[[{"op": "scale_weights", "layer": "conv1", "factor": 1 + 0.01 * (g * 4 + i + 1)}] for i in range(4)]
        for g in range(3)]
measure = {"warmup": 2, "frames": 20, "repeats": 1, "ttfo_repeats": 1, "latency_frames": 2,
           "min_duration_s": 0, "budget_s": 3}
study = Study("k", base=base, runs=runs, inputs={"count": 2}, measure=measure)
for g, candidates in enumerate(gens):
    if study.generations().get(g) != "done":
        study.evaluate(candidates)
"""


def drive(runs: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(runs), str(BASE)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its device and compile children die with it
    )


def outcome(runs: Path) -> list[tuple[int, str, float]]:
    from loop import Study

    return [(r.index, str(r.verdict), round(r.scores.get("snr_db") or 0.0, 6)) for r in Study("k", runs=runs).results()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-wait", type=float, default=8.0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    from loop import Study

    with tempfile.TemporaryDirectory() as tmp:
        control, killed = Path(tmp) / "control", Path(tmp) / "killed"
        t0 = time.perf_counter()
        drive(control).wait()
        print(f"unkilled study: {time.perf_counter() - t0:.1f} s, generations {Study('k', runs=control).generations()}")
        states: list[dict[int, str]] = []
        for _ in range(args.kills):
            proc = drive(killed)
            time.sleep(rng.uniform(0.2, args.max_wait))
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            found = Study("k", runs=killed).generations() if (killed / "ledger.sqlite").exists() else {}
            assert set(found.values()) <= {"done", "claimed", "abandoned"}, found
            states.append(found)
        drive(killed).wait()
        final = Study("k", runs=killed).generations()
        done = [n for n, s in final.items() if s == "done"]
        print(f"after {args.kills} kills: states seen {sorted({s for st in states for s in st.values()})}")
        print(f"final generations {final}")
        same = outcome(killed) == outcome(control)
        print(f"done generations {len(done)}; results equal to the unkilled study's: {same}")
        assert same and len(done) >= 3


if __name__ == "__main__":
    main()
