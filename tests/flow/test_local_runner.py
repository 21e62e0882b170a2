"""The local runner against a device that crashes, hangs and lies: a failed run each time,
the device process replaced, the sweep going on, and nothing left running.

The misbehaving device is ``test-double`` (loop/devices/test_double.py): a test double, since
a driver that segfaults on demand cannot be had here; its segfault is a real SIGSEGV."""

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from authored import FAST_MEASURE
from click.testing import CliRunner

from loop.author import frames
from loop.author.sweepfile import MeasureSpec
from loop.cli import main
from loop.flow.local_runner import LocalRunner
from loop.flow.runner import RunTask, StageTimeouts

TEN = "\n".join(
    ["  - name: base"]
    + [
        f"  - name: v{i}\n    perturb:\n      - {{op: scale_weights, layer: conv1, factor: 1.0{i}}}"
        for i in range(1, 10)
    ]
)


def _device_children_of(pid: int) -> list[int]:
    """Every live device process ``pid`` started (the compile pool's reusable workers are
    not device processes, and leave with the CLI's process)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"loop.flow.device_child" in argv and str(pid).encode() in argv and state != "Z":
                out.append(int(entry.name))
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc for leftover processes")
def test_a_segfault_and_a_hang_cost_one_run_each(write_sweep, tmp_path, monkeypatch):
    monkeypatch.setenv("LOOP_TEST_DOUBLE_STATE", str(tmp_path / "seen.txt"))
    path = write_sweep(
        f"sweep: faults\nbase: tiny.yaml\ncalibration: {{count: 8}}\ninputs: {{count: 2}}\n"
        f"devices: ['test-double:segv@3,hang@7']\n{FAST_MEASURE}\nvariants:\n{TEN}\n"
    )
    runs = tmp_path / "runs"
    args = ["sweep", str(path), "--runs", str(runs), "--quiet", "--jobs", "1", "--stage-timeout", "measure=4"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    listed = json.loads(CliRunner().invoke(main, ["runs", "--runs", str(runs), "--json"]).output)
    by_status = {s: [r for r in listed if r["status"] == s] for s in ("ok", "failed")}
    assert len(listed) == 10 and len(by_status["ok"]) == 8
    failed = {r["variant"]: (r["stage"], r["error"]) for r in by_status["failed"]}
    assert failed == {
        "v2": ("measure", "device process died (signal 11, SIGSEGV) in stage measure"),
        "v6": ("measure", "device process timed out after 4 s in stage measure"),
    }
    assert _device_children_of(os.getpid()) == []


FAST = MeasureSpec(warmup=1, frames=5, repeats=1, ttfo_repeats=1, latency_frames=2, min_duration_s=0)


def _inputs(artifact):
    return frames.seeded_set({t.name: t.shape for t in artifact.inputs}, 2, 0)


def test_a_short_output_is_caught_before_it_is_scored(artifact, tmp_path, monkeypatch):
    monkeypatch.setenv("LOOP_TEST_DOUBLE_STATE", str(tmp_path / "seen.txt"))
    inputs = _inputs(artifact)
    with LocalRunner() as runner:
        task = RunTask(artifact, inputs, FAST, ("test-double:short@1",))
        ran = runner.run(task)
        assert not ran.ok and ran.stage == "inputs"
        assert "the device returned" in ran.error and "bytes, its layout says" in ran.error
        again = runner.run(RunTask(artifact, inputs, task.protocol, ("onnxruntime",)))
        assert again.ok and isinstance(again.devices["onnxruntime"].raw[0][0], np.ndarray)
        assert again.measure is not None and (again.measure.median_fps or 0) > 0


def test_the_device_process_is_reused_and_replaced(artifact, tmp_path, monkeypatch):
    monkeypatch.setenv("LOOP_TEST_DOUBLE_STATE", str(tmp_path / "seen.txt"))
    inputs = _inputs(artifact)
    with LocalRunner() as runner:
        task = RunTask(artifact, inputs, FAST, ("test-double:hang@1",), measure=False)
        ok = runner.run(task)  # inputs alone: the hang is in measuring, never reached
        first = runner.pids()
        assert ok.ok and runner.run(task).ok and runner.pids() == first  # one child, kept
        hung = runner.run(replace(task, measure=True, timeouts=StageTimeouts(measure=1)))
        assert (hung.stage, hung.error) == ("measure", "device process timed out after 1 s in stage measure")
        assert "in pipelined" in hung.detail  # the hung child's stacks, as faulthandler printed them
        assert runner.pids() == [] and runner.run(task).ok and runner.pids() != first


def test_a_vendor_tool_that_hangs_leaves_the_measured_run_standing(write_sweep, tmp_path, monkeypatch):
    monkeypatch.setenv("LOOP_TEST_DOUBLE_STATE", str(tmp_path / "seen.txt"))
    path = write_sweep(
        f"sweep: vendor\nbase: tiny.yaml\ncalibration: {{count: 8}}\ninputs: {{count: 2}}\n"
        f"devices: ['test-double:vendorhang@2']\n{FAST_MEASURE}\nvariants:\n"
        "  - name: base\n  - name: v1\n    perturb: [{op: scale_weights, layer: conv1, factor: 1.1}]\n"
    )
    runs = tmp_path / "runs"
    args = ["sweep", str(path), "--runs", str(runs), "--quiet", "--stage-timeout", "vendor-benchmark=2"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    listed = {
        r["variant"]: r for r in json.loads(CliRunner().invoke(main, ["runs", "--runs", str(runs), "--json"]).output)
    }
    hung = listed["v1"]
    assert hung["status"] == "ok" and hung["measure"]["rate_fps"]["median"] > 0
    assert "vendor-check-failed: device process timed out after 2 s in stage vendor-benchmark" in hung["flags"]
    assert not any(f.startswith("vendor-check-failed") for f in listed["base"]["flags"])


def _helpers(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc for leftover processes")
def test_a_sweep_killed_9_takes_what_its_device_started_with_it(write_sweep, tmp_path):
    """The device child dies with the sweep at once; what it started (a vendor tool, say) is
    killed by the keeper beside it, since a kill -9 runs no cleanup in the sweep."""
    import signal
    import subprocess
    import sys
    import time

    state = tmp_path / "seen.txt"
    path = write_sweep(
        f"sweep: orphan\nbase: tiny.yaml\ncalibration: {{count: 8}}\ninputs: {{count: 2}}\n"
        f"devices: ['test-double:spawn@1']\n{FAST_MEASURE}\nvariants:\n  - name: base\n"
    )
    env = {**os.environ, "LOOP_TEST_DOUBLE_STATE": str(state)}
    sweep = subprocess.Popen(
        [sys.executable, "-m", "loop.cli", "sweep", str(path), "--runs", str(tmp_path / "runs"), "--quiet"], env=env
    )
    deadline = time.monotonic() + 120
    while not _helpers(str(state)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _helpers(str(state)), "the device never started its helper"
    sweep.send_signal(signal.SIGKILL)
    sweep.wait()
    deadline = time.monotonic() + 10
    while _helpers(str(state)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _helpers(str(state)) == []


def test_a_child_that_closes_its_socket_before_it_exits_dies_of_its_own_exit_code():
    """The socket can close before the process has gone (a driver calling exit(), Python's own
    shutdown): the failure names the child's exit code, never the kill that reaps it."""
    from types import SimpleNamespace

    from loop.flow.local_runner import DeviceProcess

    child = DeviceProcess(module="supervised")
    try:
        job = SimpleNamespace(protocol=FAST, race=None)
        ran = child.call(job, StageTimeouts())  # type: ignore[arg-type]
    finally:
        child.stop()
    assert not ran.ok and ran.error == "device process died (exit code 3) in stage open"
