"""HailoRT device: HEF artifacts run on Hailo silicon through the C shim in ``shim/``.

The shim (``shim/hailort_shim.cpp``) wraps HailoRT's C++ InferModel API in the flat functions
declared in ``hailort_shim.sigs``; :mod:`loop.hailort.shim` finds and binds it. HailoRT's own log
lines (its ``hailort.log`` and stderr) are captured per call and handed out by
:meth:`HailoRTDevice.health`; a USB power-limit warning marks a run power-limited.

Each session owns page-aligned, page-rounded buffers for every input and output, as
``hailo/infer_model.hpp`` asks, so the shim can keep DMA mappings for the session's life.
Hardware latency is measured only when asked (``RuntimeOptions.hw_latency``): HailoRT refuses it
for some models and hailortcli measures rates without it; ``Session.notes`` says why it is off.
Nothing here has run on a Hailo device yet: it is exercised against a loopback library of the
same ABI and against the real shim built over a fake HailoRT (``tests/devices``).
"""

from __future__ import annotations

import ctypes
import json
import math
import mmap
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from loop.core.capture import captured_stderr
from loop.core.errors import BufferSizeError, LoopError
from loop.core.vocab import Artifact, TensorLayout
from loop.devices import hailortcli
from loop.devices.base import Device, Health, RuntimeOptions, Session, check_frames
from loop.hailort.shim import (
    ENV_LIBRARY,
    HailoRTError,
    ShimCaller,
    candidate_paths,
    layout_from_json,
    load_shim,
    locate,
    status_line,
)
from loop.hailort.sigs import SigsError

__all__ = [
    "ENV_LIBRARY",
    "HailoLog",
    "HailoRTDevice",
    "HailoRTError",
    "HailoRTSession",
    "candidate_paths",
    "options_text",
    "page_buffer",
    "power_limited",
    "runtime_warnings",
    "status_line",
]

LATENCY_OFF_NOTE = (
    "hardware latency not measured: off unless measure.hw_latency is true (hailortcli measures "
    "rates with it off; HailoRT refuses it for several physical inputs or on-chip NMS)"
)
_POWER_LIMIT = re.compile(r"USB-C source electrical current advertised", re.IGNORECASE)
_LOG_LEVEL = re.compile(r"\[(warning|error|critical)\]\s*(?:\[[^\]]*\]\s*)*(.*)", re.IGNORECASE)


def power_limited(warnings: Sequence[str]) -> bool:
    """True when HailoRT warned that the USB-C source limits the device's power."""
    return any(_POWER_LIMIT.search(w) for w in warnings)


def runtime_warnings(text: str) -> list[str]:
    """HailoRT warning/error lines from stderr or ``hailort.log``, in one normalized form."""
    out = []
    for line in text.splitlines():
        match = _LOG_LEVEL.search(line)
        if match and match[2].strip():
            out.append(f"[HailoRT] [{match[1].lower()}] {match[2].strip()}")
    return out


def options_text(options: RuntimeOptions, device_id: str | None) -> str:
    """The shim's option string; a batch size of 0 is left out so HailoRT picks its default."""
    parts: dict[str, object] = {"dma_map": int(options.dma_map), "hw_latency": int(options.hw_latency)}
    if options.batch_size:
        parts["batch_size"] = options.batch_size
    if options.power_mode:
        parts["power_mode"] = options.power_mode
    if device_id:
        parts["device_id"] = device_id
    if options.group_id:
        parts["group_id"] = options.group_id
    return ";".join(f"{k}={v}" for k, v in parts.items())


def page_buffer(nbytes: int) -> np.ndarray:
    """uint8 bytes that start on a page and end on one (``hailo/infer_model.hpp``, set_buffer: an
    output whose allocation ends mid-page may be written past by the device)."""
    page = mmap.PAGESIZE
    size = -(-max(nbytes, 1) // page) * page
    raw = np.empty(size + page, np.uint8)
    start = (-raw.ctypes.data) % page
    return raw[start : start + size]


class Staging:
    """A session's own buffer for one stream: ``view`` is the frame, ``capacity`` the rounded size."""

    def __init__(self, layout: TensorLayout) -> None:
        self.raw = page_buffer(layout.frame_bytes)
        self.nbytes = layout.frame_bytes
        self.view = self.raw[: self.nbytes].view(layout.dtype).reshape(layout.shape)

    def load(self, frame: np.ndarray) -> None:
        self.raw[: self.nbytes] = np.ascontiguousarray(frame).reshape(-1).view(np.uint8)


def _pointers(stages: Sequence[Staging], sizes: Sequence[int]) -> tuple[Any, Any]:
    ptrs = (ctypes.c_void_p * len(stages))(*[s.raw.ctypes.data for s in stages])
    return ptrs, (ctypes.c_size_t * len(sizes))(*sizes)


class HailoLog:
    """Collects HailoRT's log lines written since the last :meth:`take`."""

    def __init__(self) -> None:
        folder = os.environ.get("HAILORT_LOGGER_PATH") or "."
        self.path = None if folder == "NONE" else Path(folder) / "hailort.log"
        self.offset = self._size()
        self.lines: list[str] = []

    def _size(self) -> int:
        return self.path.stat().st_size if self.path and self.path.is_file() else 0

    def add_stderr(self, text: str) -> None:
        self.lines.extend(runtime_warnings(text))

    def take(self) -> tuple[str, ...]:
        size = self._size()
        if self.path and size > self.offset:
            with open(self.path, "rb") as log:
                log.seek(self.offset)
                self.lines.extend(runtime_warnings(log.read().decode("utf-8", "replace")))
        self.offset = size
        lines, self.lines = tuple(dict.fromkeys(self.lines)), []
        return lines


def noisy(shim: ShimCaller, log: HailoLog, func: str, *args: Any) -> None:
    """A call during which HailoRT may print to fd 2: capture it for health()."""
    with captured_stderr() as err:
        status = getattr(shim.binding, func)(*args)
    log.add_stderr(err.getvalue())
    shim.check(status)


class HailoRTSession(Session):
    def __init__(
        self,
        shim: ShimCaller,
        handle: ctypes.c_void_p,
        log: HailoLog,
        hw_latency_asked: bool,
        hef_dir: tempfile.TemporaryDirectory[str],
    ) -> None:
        self.shim, self.handle, self.log, self.hef_dir = shim, handle, log, hef_dir
        layout = json.loads(shim.text("loop_hrt_layout", handle))
        self.inputs = tuple(layout_from_json(e) for e in layout["inputs"])
        self.outputs = tuple(layout_from_json(e) for e in layout["outputs"])
        self.async_queue_size = int(layout["async_queue_size"])
        self.max_depth = self.async_queue_size
        self.notes = tuple(layout.get("notes", ())) + (() if hw_latency_asked else (LATENCY_OFF_NOTE,))
        self.timeout_ms = 10000
        self._ins = [Staging(t) for t in self.inputs]
        self._outs = [Staging(t) for t in self.outputs]
        self._in_ptrs, self._in_sizes = _pointers(self._ins, [s.nbytes for s in self._ins])
        self._out_ptrs, self._out_sizes = _pointers(self._outs, [s.raw.nbytes for s in self._outs])

    def _load(self, frames: Sequence[np.ndarray]) -> None:
        check_frames(self.inputs, frames, "input")
        for stage, frame in zip(self._ins, frames, strict=True):
            stage.load(frame)

    def _run(self) -> int:
        return self.shim.binding.loop_hrt_infer(
            self.handle,
            self._in_ptrs,
            self._in_sizes,
            len(self._ins),
            self._out_ptrs,
            self._out_sizes,
            len(self._outs),
            self.timeout_ms,
        )

    def infer(self, frames: Sequence[np.ndarray], out: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
        self._load(frames)
        if out is not None:
            check_frames(self.outputs, out, "output", exact=False)
            if not all(o.flags.c_contiguous and o.flags.writeable for o in out):
                raise BufferSizeError("output buffers must be writeable and C-contiguous")
        self.shim.check(self._run())
        if out is None:
            return [stage.view.copy() for stage in self._outs]
        for target, stage in zip(out, self._outs, strict=True):
            target.reshape(-1).view(np.uint8)[: stage.nbytes] = stage.raw[: stage.nbytes]
        return list(out)

    def bound(self, frames: Sequence[np.ndarray]) -> Callable[[], object]:
        """The frames are copied in once; each call is then the shim's run alone."""
        self._load(frames)
        return lambda: self.shim.check(self._run())

    def pipelined(self, frames: Sequence[np.ndarray], count: int, depth: int) -> float:
        """Run ``count`` frames keeping ``depth`` in flight (capped at the async queue size)."""
        self._load(frames)
        elapsed, hw = ctypes.c_double(), ctypes.c_double()
        depth = max(1, min(depth, self.async_queue_size))
        noisy(
            self.shim,
            self.log,
            "loop_hrt_pipelined",
            self.handle,
            self._in_ptrs,
            self._in_sizes,
            len(self._ins),
            count,
            depth,
            ctypes.byref(elapsed),
            ctypes.byref(hw),
        )
        return elapsed.value

    def hw_latency_ms(self) -> float | None:
        hw = ctypes.c_double()
        self.shim.check(self.shim.binding.loop_hrt_hw_latency(self.handle, ctypes.byref(hw)))
        return None if math.isnan(hw.value) else hw.value

    def close(self) -> None:
        if self.handle:
            handle, self.handle = self.handle, ctypes.c_void_p()
            self.hef_dir.cleanup()
            self.shim.check(self.shim.binding.loop_hrt_close(handle))


class HailoRTDevice(Device):
    """Hailo silicon through HailoRT (via ``shim/``); ``device_id`` picks one of several devices."""

    name = "hailort"

    def __init__(self, library: str | None = None, device_id: str | None = None) -> None:
        self.library = library
        self.device_id = device_id
        self.log = HailoLog()
        self._shim: ShimCaller | None = None
        self._session: HailoRTSession | None = None

    @classmethod
    def available(cls) -> tuple[bool, str]:
        try:
            library, sigs = locate()
            load_shim(library, sigs)
        except (HailoRTError, SigsError) as exc:
            return False, str(exc)
        return True, f"shim {library}"

    def shim(self) -> ShimCaller:
        if self._shim is None:
            self._shim = ShimCaller(load_shim(*locate(self.library)))
        return self._shim

    def open(self, artifact: Artifact, options: RuntimeOptions) -> HailoRTSession:
        if artifact.backend != "hailo":
            raise HailoRTError(f"hailort runs HEF artifacts, not '{artifact.backend}' ones")
        shim = self.shim()
        # Kept until close: HailoRT may read the HEF file after create_infer_model.
        hef_dir = tempfile.TemporaryDirectory(prefix="loop-hef-")
        hef = Path(hef_dir.name) / f"model{artifact.suffix}"
        hef.write_bytes(artifact.data)
        handle = ctypes.c_void_p()
        try:
            noisy(
                shim,
                self.log,
                "loop_hrt_open",
                str(hef).encode(),
                options_text(options, self.device_id).encode(),
                ctypes.byref(handle),
            )
            self._session = HailoRTSession(shim, handle, self.log, options.hw_latency, hef_dir)
        except BaseException:
            if handle:  # a handle left open makes every later open fail with 74
                shim.binding.loop_hrt_close(handle)
            hef_dir.cleanup()
            raise
        return self._session

    def health(self) -> Health:
        warnings = self.log.take()
        try:
            handle = self._session.handle if self._session and self._session.handle else None
            facts = json.loads(self.shim().text("loop_hrt_health", handle))
        except (LoopError, OSError, ValueError) as exc:
            return Health(warnings=(*warnings, f"[loop] health unreadable: {exc}"))
        return Health(
            temperature_c=facts.get("temperature_c"),
            device_id=facts.get("serial") or facts.get("device_path"),
            device_path=facts.get("device_path"),
            warnings=warnings,
        )

    def describe(self) -> dict[str, str]:
        return {"device": self.name, "shim": str(self._shim.binding.path) if self._shim else "not loaded"}

    def vendor_benchmark(self, artifact_path: Path, loop_fps: float, options: RuntimeOptions) -> dict[str, Any] | None:
        """``hailortcli benchmark`` on the same HEF, where hailortcli is on PATH."""
        return hailortcli.measuring_stick(artifact_path, loop_fps, options)
