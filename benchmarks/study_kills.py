"""A 3-generation study killed with SIGKILL at random moments (issues 34, 42), then finished;
checked against the same study run without a kill.

    python benchmarks/study_kills.py [--kills 20] [--seed 0] [--per-generation 4] [--min-wait 0.2] [--max-wait 8]

A driver process evaluates three generations of ``graphs/two_conv.yaml`` candidates from the
start every time, as a seeded search rerun after a crash would: the generations it finished come
back reused. The parent kills it ``--kills`` times, each after a random wait, then lets it finish.
After every kill each generation must be ``done``, ``claimed`` by the dead process (the next
``evaluate`` of its candidates takes it over) or ``abandoned``. At the end: every generation done,
three numbers in all (a rerun claims none for what it only reuses), no run left ``running`` by a
process that is gone (a study's ``evaluate`` marks them ``interrupted``, as ``loop runs`` shows),
and every candidate's verdict and SNR equal the unkilled study's (rates differ by noise).
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
runs, base, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
gens = [[[{"op": "scale_weights", "layer": "conv1", "factor": 1 + 0.01 * (g * count + i + 1)}] for i in range(count)]
        for g in range(3)]
measure = {"warmup": 2, "frames": 20, "repeats": 1, "ttfo_repeats": 1, "latency_frames": 2,
           "min_duration_s": 0, "budget_s": 3}
study = Study("k", base=base, runs=runs, inputs={"count": 2}, measure=measure)
for candidates in gens:
    study.evaluate(candidates)
"""


def drive(runs: Path, per_generation: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(runs), str(BASE), str(per_generation)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its device and compile children die with it
    )


def outcome(runs: Path) -> list[tuple[int, str, float]]:
    from loop import Study

    return [(r.index, str(r.verdict), round(r.scores.get("snr_db") or 0.0, 6)) for r in Study("k", runs=runs).results()]


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-generation", type=int, default=4, help="candidates in each of the 3 generations")
    parser.add_argument("--min-wait", type=float, default=0.2)
    parser.add_argument("--max-wait", type=float, default=8.0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    from loop import Study

    with tempfile.TemporaryDirectory() as tmp:
        control, killed = Path(tmp) / "control", Path(tmp) / "killed"
        t0 = time.perf_counter()
        drive(control, args.per_generation).wait()
        print(f"unkilled study: {time.perf_counter() - t0:.1f} s, generations {Study('k', runs=control).generations()}")
        states: list[dict[int, str]] = []
        landed, left = 0, []  # kills that found the driver running; dead running rows after each
        for _ in range(args.kills):
            proc = drive(killed, args.per_generation)
            time.sleep(rng.uniform(args.min_wait, args.max_wait))
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                landed += 1
            proc.wait()
            found = Study("k", runs=killed).generations() if (killed / "ledger.sqlite").exists() else {}
            assert set(found.values()) <= {"done", "claimed", "abandoned"}, found
            states.append(found)
            left.append(ledger_rows(killed)[1] if found else 0)
        drive(killed, args.per_generation).wait()
        final = Study("k", runs=killed).generations()
        done = [n for n, s in final.items() if s == "done"]
        seen = sorted({s for st in states for s in st.values()})
        print(f"after {args.kills} kills ({landed} while it ran): states seen {seen}")
        print(f"numbers claimed after each kill: {[len(st) for st in states]}")
        print(f"rows left running by the dead driver after each kill (its rerun marks them): {left}")
        print(f"final generations {final}")
        rows, dead = ledger_rows(killed)
        print(f"runs by status {rows}; running with their process gone: {dead}")
        same = outcome(killed) == outcome(control)
        print(f"done generations {len(done)} of {len(final)} numbers; results equal to the unkilled study's: {same}")
        assert same and len(done) == len(final) == 3 and dead == 0


def ledger_rows(runs: Path) -> tuple[dict[str, int], int]:
    """Runs by status, as ``loop runs`` lists them, and how many are ``running`` with their process gone."""
    from collections import Counter

    from loop.store.ledger import Ledger, is_live

    with Ledger(runs / "ledger.sqlite", readonly=True) as ledger:
        entries = ledger.entries()
    dead = sum(1 for e in entries if str(e.status) == "running" and not is_live(e))
    return dict(Counter(str(e.status) for e in entries)), dead


if __name__ == "__main__":
    main()
