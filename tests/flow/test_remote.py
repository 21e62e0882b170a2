"""Devices on Dask workers: a real ``LocalCluster`` whose two workers each hold one
``link-sim`` device as a resource; one worker killed mid-generation loses nothing."""

import json
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from authored import FAST_MEASURE

from loop.author.sweepfile import parse
from loop.core.errors import LoopError
from loop.flow.sweep import SweepOptions, run_sweep

distributed = pytest.importorskip("distributed")

# long enough a measure that a worker is still busy once both have recorded a run
SLOWER = "measure: {warmup: 2, frames: 20, repeats: 2, ttfo_repeats: 1, latency_frames: 5, min_duration_s: 0.3}"
EIGHT = "\n".join(
    ["  - name: base"]
    + [
        f"  - name: v{i}\n    perturb:\n      - {{op: scale_weights, layer: conv1, factor: 1.0{i}}}"
        for i in range(1, 8)
    ]
)


@pytest.fixture
def cluster(tmp_path: Path):
    from loop.flow.remote import own_host_locks

    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, resources={"link-sim": 1}, dashboard_address=None
        ) as c,
        distributed.Client(c) as client,
    ):
        client.register_plugin(own_host_locks(str(tmp_path / "hosts")))
        yield c, client


def _rows(runs: Path) -> list[tuple[str, str, dict]]:
    path = runs / "ledger.sqlite"
    if not path.exists():
        return []
    try:
        with sqlite3.connect(path) as db:
            return [(v, s, json.loads(r)) for v, s, r in db.execute("SELECT variant, status, record FROM runs")]
    except sqlite3.OperationalError:  # the sweep is creating the ledger right now
        return []


def _kill_a_busy_worker(client, runs: Path, killed: list[str]) -> None:
    """Once both workers have a run recorded, SIGKILL one that is measuring right then."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        recorded = {str(r["info"]["runner"]["worker"]) for _, s, r in _rows(runs) if s == "ok"}
        names = {a: str(w["name"]) for a, w in client.scheduler_info()["workers"].items()}
        busy = [w for w, tasks in client.processing().items() if tasks and w in names]
        if len(recorded) == 2 and busy:
            pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
            os.kill(pid, signal.SIGKILL)
            killed.append(names[busy[0]])
            return
        time.sleep(0.05)


def test_a_generation_on_two_workers_survives_a_killed_one(write_sweep, tmp_path, cluster):
    local, client = cluster
    path = write_sweep(
        f"sweep: farm\nbase: tiny.yaml\ncalibration: {{count: 8}}\ninputs: {{count: 2}}\n"
        f"devices: ['link-sim:hailo10h-usb-1.5a']\n{SLOWER}\nvariants:\n{EIGHT}\n"
    )
    runs = tmp_path / "runs"
    killed: list[str] = []
    killer = threading.Thread(target=_kill_a_busy_worker, args=(client, runs, killed))
    killer.start()
    options = SweepOptions(jobs=1, progress=False, device_cluster=local.scheduler_address)
    result = run_sweep(parse(path), runs, options)
    killer.join()
    assert killed, "no worker was still measuring once both had recorded a run"
    rows = _rows(runs)
    assert sorted(v for v, _, _ in rows) == sorted(["base"] + [f"v{i}" for i in range(1, 8)])  # each once
    assert [s for _, s, _ in rows] == ["ok"] * 8 and not result.failed
    workers = {r["info"]["runner"]["worker"] for _, _, r in rows}
    assert len(workers) == 2, workers


def test_a_cluster_without_the_device_is_refused_in_one_line(write_sweep, tmp_path):
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) as c:
        path = write_sweep(f"sweep: s\nbase: tiny.yaml\n{FAST_MEASURE}\nvariants:\n  - name: base\n")
        with pytest.raises(LoopError, match=r"holds the resource 'onnxruntime'.*--resources onnxruntime=1"):
            run_sweep(parse(path), tmp_path / "runs", SweepOptions(progress=False, device_cluster=c.scheduler_address))
        assert not (tmp_path / "runs" / "ledger.sqlite").exists()


def test_a_cluster_that_loses_every_device_fails_what_is_out(write_sweep, tmp_path, monkeypatch):
    from loop.flow import measuring, remote

    monkeypatch.setattr(remote, "LOST_GRACE_S", 1.0)
    monkeypatch.setattr(measuring, "LOST_POLL_S", 0.5)
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, resources={"link-sim": 1}, dashboard_address=None
    ) as c:
        path = write_sweep(
            f"sweep: gone\nbase: tiny.yaml\ncalibration: {{count: 8}}\ninputs: {{count: 2}}\n"
            f"devices: ['link-sim:hailo10h-usb-1.5a']\n{SLOWER}\nvariants:\n{EIGHT}\n"
        )
        runs = tmp_path / "runs"

        def scale_down() -> None:
            while not any(s == "ok" for _, s, _ in _rows(runs)):
                time.sleep(0.05)
            c.scale(0)

        killer = threading.Thread(target=scale_down)
        killer.start()
        options = SweepOptions(jobs=1, progress=False, device_cluster=c.scheduler_address)
        result = run_sweep(parse(path), runs, options)
        killer.join()
    errors = {o.error for o in result.failed}
    assert result.failed and errors == {
        f"no worker of the Dask cluster at {c.scheduler_address} holds 'link-sim' any more"
    }
    assert len(_rows(runs)) == 8 and all(s in ("ok", "failed") for _, s, _ in _rows(runs))
