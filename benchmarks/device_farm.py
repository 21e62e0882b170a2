"""A generation measured on a device farm: two Dask workers against one, side by side.

Two ``LocalCluster``s run at once: one with a single worker, one with two, each worker
holding one ``link-sim:hailo10h-usb-1.5a`` device as a resource (``--resources link-sim=1``)
and a lock folder of its own (:func:`loop.flow.remote.own_host_locks`), so that the workers
stand for hosts of their own. A generation of 8 candidates (the base and 7 weight-scaled
variants of ``two_conv``) is swept on each in turn, alternating, ``--rounds`` times; every
sweep is ``fresh`` over one runs folder whose compile cache a first sweep filled, so what is
timed is the generation's measuring (and its scoring and recording). The figure is the ratio
of the medians, two workers over one (the issue's target: at most 0.65).

Run: ``python benchmarks/device_farm.py [--rounds 3]`` (needs loop[dask]).
"""

from __future__ import annotations

import argparse
import json
import logging
import sqlite3
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

from distributed import Client, LocalCluster

from loop.author.sweepfile import parse
from loop.flow.remote import own_host_locks
from loop.flow.sweep import SweepOptions, run_sweep

GRAPHS = Path(__file__).resolve().parent.parent / "graphs"
MEASURE = "measure: {warmup: 5, frames: 50, repeats: 3, min_duration_s: 0.3, ttfo_repeats: 2, latency_frames: 10}"


def sweep_file(folder: Path) -> Path:
    scaled = "  - name: v{i}\n    perturb:\n      - {{op: scale_weights, layer: conv1, factor: 1.0{i}}}"
    variants = ["  - name: base"] + [scaled.format(i=i) for i in range(1, 8)]
    text = (
        f"sweep: farm\nbase: {GRAPHS / 'two_conv.yaml'}\ncalibration: {{count: 16}}\ninputs: {{count: 4}}\n"
        f"devices: ['link-sim:hailo10h-usb-1.5a']\n{MEASURE}\nvariants:\n" + "\n".join(variants) + "\n"
    )
    path = folder / "farm.yaml"
    path.write_text(text)
    return path


def cluster(workers: int, folder: Path) -> tuple[LocalCluster, Client]:
    c = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        resources={"link-sim": 1},
        dashboard_address=None,
        silence_logs=logging.ERROR,
    )
    client = Client(c)
    client.register_plugin(own_host_locks(str(folder / f"hosts-{workers}")))
    return c, client


def timed_sweep(path: Path, runs: Path, address: str | None) -> tuple[float, Counter[str]]:
    t0 = time.perf_counter()
    result = run_sweep(parse(path), runs, SweepOptions(jobs=1, progress=False, fresh=True, device_cluster=address))
    elapsed = time.perf_counter() - t0
    assert not result.failed, [(o.variant, o.error) for o in result.failed]
    ids = [o.run_id for o in result.outcomes]
    with sqlite3.connect(runs / "ledger.sqlite") as db:
        records = [json.loads(r) for (i, r) in db.execute("SELECT id, record FROM runs") if i in ids]
    return elapsed, Counter(str(r["info"]["runner"]["worker"]) for r in records)


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path, runs = sweep_file(folder), folder / "runs"
        run_sweep(parse(path), runs, SweepOptions(jobs=2, progress=False))  # fills the compile cache
        (one, c1), (two, c2) = cluster(1, folder), cluster(2, folder)
        times: dict[int, list[float]] = {1: [], 2: []}
        try:
            for r in range(args.rounds):
                for n, c in ((1, one), (2, two)) if r % 2 == 0 else ((2, two), (1, one)):
                    elapsed, workers = timed_sweep(path, runs, c.scheduler_address)
                    times[n].append(elapsed)
                    print(f"round {r + 1}, {n} worker(s): {elapsed:.2f} s; candidates per worker {dict(workers)}")
        finally:
            for client, c in ((c1, one), (c2, two)):
                client.close()
                c.close()
    ratio = statistics.median(times[2]) / statistics.median(times[1])
    print(f"median: 1 worker {statistics.median(times[1]):.2f} s, 2 workers {statistics.median(times[2]):.2f} s")
    print(f"ratio two workers / one: {ratio:.3f} (target <= 0.65)")


if __name__ == "__main__":
    main()
