"""``hailortcli``, Hailo's own measuring stick, run on the same HEF and parsed.

Parsers are pure functions over the tool's text: ``benchmark`` in HailoRT 5.x (a
``Summary`` block of ``<net>: FPS: N`` and per-device ``power``/``temperature`` lines) and
4.x (``FPS (hw_only) = N``, ``(streaming) = N``, ``Latency (hw) = N ms``,
``(overall) = N ms``). :func:`agreement` compares loop's rate with the tool's and flags a
disagreement beyond 2%. The formats follow hailortcli's source and docs/hailo.md; they have
not yet been checked against output captured from a device.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from loop.devices.base import RuntimeOptions

TOOL = "hailortcli"  # the name a run's vendor benchmark records as its tool
TOLERANCE = 0.02
_NUMBER = r"([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"


@dataclass(frozen=True)
class Stat:
    mean: float | None = None
    min: float | None = None
    max: float | None = None


@dataclass(frozen=True)
class CliFigures:
    """What one hailortcli run reported; None where it reported nothing."""

    tool: str
    fps: dict[str, float] = field(default_factory=dict)  # per network group
    fps_hw_only: float | None = None
    fps_streaming: float | None = None
    hw_latency_ms: float | None = None
    overall_latency_ms: float | None = None
    power_w: Stat | None = None
    temperature_c: Stat | None = None
    version: str | None = None  # hailortcli's own, from --version
    ignored: tuple[str, ...] = ()  # flags passed that this version parses and then ignores

    @property
    def rate(self) -> float | None:
        """The steady-state rate to compare with loop's: streaming, else the summary FPS."""
        if self.fps_streaming is not None:
            return self.fps_streaming
        return next(iter(self.fps.values()), None)


@dataclass(frozen=True)
class Agreement:
    loop_fps: float
    cli_fps: float
    ratio: float
    flagged: bool


def _first(pattern: str, text: str) -> float | None:
    match = re.search(pattern, text, re.MULTILINE)
    return float(match[1]) if match else None


def _stat_line(name: str, text: str) -> Stat | None:
    """``<name>: mean=1.2 min=1.0 max=1.5`` (units after the numbers are ignored)."""
    match = re.search(rf"^\s*{name}\s*:\s*(.*)$", text, re.MULTILINE | re.IGNORECASE)
    if not match:
        return None
    parts = dict(re.findall(rf"(mean|min|max)\s*=\s*{_NUMBER}", match[1]))
    if not parts:
        return None
    return Stat(*(float(parts[k]) if k in parts else None for k in ("mean", "min", "max")))


def parse_benchmark(text: str) -> CliFigures:
    """Parse ``hailortcli benchmark`` output from HailoRT 4.x or 5.x."""
    summary = text.split("Summary", 1)[1] if "Summary" in text else text
    fps = {m[1]: float(m[2]) for m in re.finditer(rf"^\s*(\S+?):\s*FPS:\s*{_NUMBER}", summary, re.MULTILINE)}
    return CliFigures(
        tool="benchmark",
        fps=fps,
        fps_hw_only=_first(rf"FPS\s*\(hw_only\)\s*=\s*{_NUMBER}", summary),
        fps_streaming=_first(rf"^\s*(?:FPS\s*)?\(streaming\)\s*=\s*{_NUMBER}", summary),
        hw_latency_ms=_first(rf"Latency\s*\(hw\)\s*=\s*{_NUMBER}\s*ms", summary),
        overall_latency_ms=_first(rf"^\s*(?:Latency\s*)?\(overall\)\s*=\s*{_NUMBER}\s*ms", summary),
        power_w=_stat_line("power", summary) or _power_4x(summary),
        temperature_c=_stat_line("temperature", summary),
    )


def _power_4x(text: str) -> Stat | None:
    mean = _first(rf"Power in streaming mode \(average\)\s*=\s*{_NUMBER}", text)
    peak = _first(rf"^\s*\(max\)\s*=\s*{_NUMBER}", text)
    return Stat(mean=mean, max=peak) if mean is not None else None


def agreement(loop_fps: float, cli_fps: float, tolerance: float = TOLERANCE) -> Agreement:
    """loop's rate against hailortcli's; flagged when they differ by more than ``tolerance``."""
    ratio = loop_fps / cli_fps
    return Agreement(loop_fps, cli_fps, ratio, abs(ratio - 1.0) > tolerance)


def available() -> tuple[bool, str]:
    path = shutil.which(TOOL)
    return (True, path) if path else (False, "hailortcli is not on PATH")


def _run(args: list[str], timeout_s: float) -> str:
    done = subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=timeout_s)
    if done.returncode:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
        raise RuntimeError(f"hailortcli {args[0]} failed ({done.returncode}): {tail[0]}")
    return done.stdout + done.stderr


def parse_version(text: str) -> str | None:
    """``HailoRT-CLI version 5.2.0`` -> ``5.2.0``."""
    match = re.search(r"version\s+(\d+\.\d+\.\d+)", text)
    return match[1] if match else None


def cli_version() -> str | None:
    try:
        return parse_version(_run(["--version"], timeout_s=30))
    except (RuntimeError, OSError, subprocess.SubprocessError):
        return None


def ignored_benchmark_flags(version: str | None, args: list[str]) -> tuple[str, ...]:
    """Flags ``benchmark`` parses and then ignores: from 5.x on it runs ``run2_benchmark(hef, time)``
    alone (hailortcli/benchmark_command.cpp, v5.2.0). An unknown version is assumed to be 5.x."""
    major = int(version.split(".")[0]) if version else 5
    return tuple(a for a in args if a in ("--batch-size", "--power-mode")) if major >= 5 else ()


def run_benchmark(
    hef: Path, seconds: int = 15, batch_size: int | None = None, power_mode: str | None = None
) -> CliFigures:
    args = ["benchmark", str(hef), "-t", str(seconds)]
    args += ["--batch-size", str(batch_size)] if batch_size else []
    args += ["--power-mode", power_mode] if power_mode else []
    figures = parse_benchmark(_run(args, timeout_s=seconds * 4 + 60))
    version = cli_version()
    return replace(figures, version=version, ignored=ignored_benchmark_flags(version, args))


def measuring_stick(hef: Path, loop_fps: float, options: RuntimeOptions) -> dict[str, Any] | None:
    """``benchmark`` on the same HEF beside loop's rate, or None where hailortcli is not installed.

    ``comparable`` is false when loop ran with settings the tool did not (a hardware latency
    measurement, or a batch size or power mode that ``benchmark`` 5.x parses and ignores)."""
    if not available()[0]:
        return None
    figures = run_benchmark(hef, batch_size=options.batch_size or None, power_mode=options.power_mode)
    differ: list[str] = [f for f in ("--batch-size", "--power-mode") if f in figures.ignored]
    differ += ["hw_latency"] if options.hw_latency else []
    out = {
        "fps": figures.rate,
        "version": figures.version,
        "ignored_by_hailortcli": list(figures.ignored),
        "settings_differ": differ,
        "comparable": not differ,
    }
    if figures.rate is None:
        return {**out, "agree": False, "detail": "hailortcli printed no rate"}
    agreed = agreement(loop_fps, figures.rate)
    return {**out, "ratio": agreed.ratio, "agree": not agreed.flagged}
