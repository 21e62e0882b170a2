"""Parsing hailortcli output. The samples are written from docs/hailo.md and hailortcli's source
(the seed's figures), not captured from a device."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from loop.devices.hailortcli import (
    Stat,
    agreement,
    ignored_benchmark_flags,
    parse_benchmark,
    parse_version,
    run_benchmark,
)

BENCHMARK_5X = """\
Starting Measurements...
Measuring FPS in HW-only mode
=======
Summary
=======
efficientnet_lite0: FPS: 1168.00
usb/001:009:
  power: mean=2.41 min=2.10 max=2.77 W
  current: mean=480.1 min=420.0 max=551.3 mA
  temperature: mean=40.2 min=38.7 max=41.7 C
"""

BENCHMARK_4X = """\
Measuring FPS in HW-only mode
Network efficientnet_lite0/efficientnet_lite0: 100% | 17523 | FPS: 1168.21 | ETA: 00:00:00
=======
Summary
=======
FPS     (hw_only)                 = 1177.4
        (streaming)               = 1174.0
Latency (hw)                      = 2.27 ms
        (overall)                 = 3.95 ms
Device 0000:01:00.0:
  Power in streaming mode (average) = 2.5 W
                          (max)     = 2.9 W
"""


def test_benchmark_5x_summary_and_device_block() -> None:
    figures = parse_benchmark(BENCHMARK_5X)
    assert figures.fps == {"efficientnet_lite0": 1168.0}
    assert figures.rate == 1168.0
    assert figures.power_w == Stat(2.41, 2.10, 2.77)
    assert figures.temperature_c == Stat(40.2, 38.7, 41.7)
    assert figures.hw_latency_ms is None and figures.fps_hw_only is None  # 5.x prints no latency


def test_benchmark_4x_summary() -> None:
    figures = parse_benchmark(BENCHMARK_4X)
    assert (figures.fps_hw_only, figures.fps_streaming) == (1177.4, 1174.0)
    assert (figures.hw_latency_ms, figures.overall_latency_ms) == (2.27, 3.95)
    assert figures.rate == 1174.0
    assert figures.power_w == Stat(mean=2.5, max=2.9)
    assert figures.fps == {}  # the progress line before the summary is not a result


def test_agreement_flags_beyond_two_percent() -> None:
    assert not agreement(1168.0, 1150.0).flagged  # 1.6%
    flagged = agreement(1100.0, 1168.0)
    assert flagged.flagged and flagged.ratio == pytest.approx(1100 / 1168)
    assert agreement(1168.0 * 1.021, 1168.0).flagged


@pytest.mark.skipif(sys.platform == "win32", reason="the stand-in hailortcli is a POSIX shell script")
def test_run_benchmark_through_a_stand_in_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shell script named hailortcli (a stand-in, not Hailo's tool) checks the argv plumbing."""
    stand_in_hailortcli(tmp_path, monkeypatch, "5.2.0")
    figures = run_benchmark(Path("m.hef"), seconds=3, power_mode="ultra_performance")
    assert figures.rate == 1168.0
    assert (tmp_path / "argv").read_text().split() == [
        "benchmark",
        "m.hef",
        "-t",
        "3",
        "--power-mode",
        "ultra_performance",
    ]
    # Item 10: benchmark 5.x parses --power-mode and --batch-size, then runs run2_benchmark(hef, time) alone
    assert (figures.version, figures.ignored) == ("5.2.0", ("--power-mode",))


def stand_in_hailortcli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    """A shell script named hailortcli (a stand-in, not Hailo's tool): prints a canned benchmark."""
    (tmp_path / "out.txt").write_text(BENCHMARK_5X)
    tool = tmp_path / "hailortcli"
    tool.write_text(
        f'#!/bin/sh\nif [ "$1" = "--version" ]; then echo "HailoRT-CLI version {version}"; exit 0; fi\n'
        f'echo "$@" > {tmp_path}/argv\ncat {tmp_path}/out.txt\n'
    )
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


def test_ignored_flags_follow_the_version() -> None:
    args = ["benchmark", "m.hef", "--batch-size", "8", "--power-mode", "performance"]
    assert ignored_benchmark_flags("5.2.0", args) == ("--batch-size", "--power-mode")
    assert ignored_benchmark_flags("4.23.0", args) == ()
    assert ignored_benchmark_flags(None, args) == ("--batch-size", "--power-mode")
    assert parse_version("HailoRT-CLI version 4.23.0\n") == "4.23.0" and parse_version("?") is None


@pytest.mark.skipif(sys.platform == "win32", reason="the stand-in hailortcli is a POSIX shell script")
def test_measuring_stick_compares_only_like_with_like(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 2: loop measured with hw latency and batch 1 while hailortcli did not, so the check
    flagged its own settings; settings the tool ignores are now recorded and not compared."""
    from loop.author.sweepfile import MeasureSpec
    from loop.core.record import Measurement
    from loop.devices.hailort import HailoRTDevice
    from loop.measure.protocol import measuring_stick

    stand_in_hailortcli(tmp_path, monkeypatch, "5.2.0")
    m = Measurement.from_dict({"rate_fps": {"median": 1100.0}})
    plain = measuring_stick(HailoRTDevice(), Path("m.hef"), m, MeasureSpec())
    assert plain is not None and plain["comparable"] and not plain["agree"] and plain["fps"] == 1168.0
    assert (tmp_path / "argv").read_text().split() == ["benchmark", "m.hef", "-t", "15"]
    tuned = measuring_stick(HailoRTDevice(), Path("m.hef"), m, MeasureSpec(batch_size=8, hw_latency=True))
    assert tuned is not None and not tuned["comparable"]
    assert tuned["ignored_by_hailortcli"] == ["--batch-size"] and tuned["settings_differ"] == [
        "--batch-size",
        "hw_latency",
    ]


@pytest.mark.skipif(sys.platform == "win32", reason="the stand-in hailortcli is a POSIX shell script")
def test_only_a_device_with_a_vendor_tool_runs_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ONNX Runtime device has no vendor benchmark (the default hook), so hailortcli on
    PATH is not run for it; HailoRT without hailortcli on PATH has none either."""
    from loop.core.record import Measurement
    from loop.devices.hailort import HailoRTDevice
    from loop.devices.onnxruntime import OnnxRuntimeDevice
    from loop.measure.protocol import measuring_stick

    m, path = Measurement.from_dict({"rate_fps": {"median": 1100.0}}), os.environ["PATH"]
    monkeypatch.setenv("PATH", str(tmp_path))
    assert measuring_stick(HailoRTDevice(), Path("m.hef"), m) is None
    monkeypatch.setenv("PATH", path)
    stand_in_hailortcli(tmp_path, monkeypatch, "5.2.0")
    assert measuring_stick(OnnxRuntimeDevice(), Path("m.onnx"), m) is None
    assert not (tmp_path / "argv").exists()
    assert measuring_stick(HailoRTDevice(), Path("m.hef"), m) is not None
