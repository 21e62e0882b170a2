"""HailoRT device: HEF artifacts run on Hailo silicon through the C shim in ``shim/``.

The shim (``shim/hailort_shim.cpp``) wraps HailoRT's C++ InferModel API in the flat functions
declared in ``hailort_shim.sigs``; :mod:`loop.hailort.shim` finds and binds it. HailoRT's own log
lines (its ``hailort.log`` and stderr) are captured per call and handed out by
:meth:`HailoRTDevice.health`; a USB power-limit warning marks a run power-limited.

A process has one VDevice per device (the shim's, shared by every session and hold of the
process): on Hailo-10H a second "UNIQUE" VDevice of one host waits 5 s and fails, so ``loop
compare``'s two or three sessions, a depth ladder and a health read must all go through one. The
device object holds it from its first use (:meth:`HailoRTDevice.select`, ``open``, ``health``)
until :meth:`HailoRTDevice.release`, which the vendor cross-check calls first: ``hailortcli`` is
another process, refused while this one holds the device. So the time to first output's ``open``
is loading and configuring the HEF, not creating the VDevice (once per process, not per session).

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
import shutil
import subprocess
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
    LEAKED,
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
    "runtime_warnings",
    "status_line",
]

LATENCY_OFF_NOTE = (
    "hardware latency not measured: off unless measure.hw_latency is true (hailortcli measures "
    "rates with it off; HailoRT refuses it for several physical inputs or on-chip NMS)"
)
HAILO_TIMEOUT = 4
# A session the shim leaked (status 1004: HailoRT may still hold its buffers): its staging buffers, pointer
# arrays and HEF folder, kept for the process's life, since a leaked job may still read or write them.
LEAKED_SESSIONS: list[tuple[object, ...]] = []
LEAK_NOTE = "session leaked"  # in the run's notes and warnings (loop.measure.protocol flags it)
_LOG_LEVEL = re.compile(r"\[(warning|error|critical)\]\s*(?:\[[^\]]*\]\s*)*(.*)", re.IGNORECASE)


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


def noisy(log: HailoLog, call: Callable[[], int]) -> int:
    """A call during which HailoRT may print to fd 2: capture it for health(); its status."""
    with captured_stderr() as err:
        status = call()
    log.add_stderr(err.getvalue())
    return status


def hef_file(artifact: Artifact) -> tempfile.TemporaryDirectory[str]:
    """A folder holding the artifact as ``model.hef``: HailoRT may read it after create_infer_model.
    One checked on this host's disk (``artifact.path``, no bytes: a HEF of gigabytes is never read
    whole here) is linked there, or copied a chunk at a time across filesystems."""
    folder = tempfile.TemporaryDirectory(prefix="loop-hef-")
    target = Path(folder.name) / f"model{artifact.suffix}"
    if artifact.data or not artifact.path:
        target.write_bytes(artifact.data)
        return folder
    try:
        os.link(artifact.path, target, follow_symlinks=False)
    except OSError:
        shutil.copyfile(artifact.path, target, follow_symlinks=False)
    return folder


class HailoRTSession(Session):
    def __init__(
        self,
        shim: ShimCaller,
        handle: ctypes.c_void_p,
        log: HailoLog,
        hw_latency_asked: bool,
        hef_dir: tempfile.TemporaryDirectory[str],
        reopen: Callable[[], ctypes.c_void_p] | None = None,
    ) -> None:
        self.shim, self.handle, self.log, self.hef_dir = shim, handle, log, hef_dir
        self._reopen, self.on_close = reopen, lambda: None
        layout = json.loads(shim.text("loop_hrt_layout", handle))
        self.inputs = tuple(layout_from_json(e) for e in layout["inputs"])
        self.outputs = tuple(layout_from_json(e) for e in layout["outputs"])
        self.async_queue_size = int(layout["async_queue_size"])
        self.max_depth = self.async_queue_size
        self.notes = tuple(layout.get("notes", ())) + (() if hw_latency_asked else (LATENCY_OFF_NOTE,))
        self.timeout_ms = 10000
        self.leaked = 0  # sessions of this one the shim leaked rather than freed (close status 1004)
        self._stage()

    def _stage(self) -> None:
        """Fresh staging buffers, the inputs' contents carried over (a bound call loaded them once)."""
        old = getattr(self, "_ins", None)
        self._ins = [Staging(t) for t in self.inputs]
        self._outs = [Staging(t) for t in self.outputs]
        for new, was in zip(self._ins, old or (), strict=False):
            new.raw[:] = was.raw
        self._in_ptrs, self._in_sizes = _pointers(self._ins, [s.nbytes for s in self._ins])
        self._out_ptrs, self._out_sizes = _pointers(self._outs, [s.raw.nbytes for s in self._outs])

    def _closed(self, handle: ctypes.c_void_p) -> int:
        """Close ``handle``; where the shim could not free it (1004, or a close that failed), the
        buffers it was given are kept for good and the run says so. Its status."""
        status = int(self.shim.binding.loop_hrt_close(handle)) if handle else 0
        if status:
            text = status_line(status, self.shim.last_error())
            LEAKED_SESSIONS.append((self._ins, self._outs, self._in_ptrs, self._out_ptrs, self.hef_dir))
            self.leaked += 1
            line = f"[loop] hailort {LEAK_NOTE}, its buffers kept allocated for good: {text}"
            self.notes += (line,)
            self.log.lines.append(line)
        return status

    def _load(self, frames: Sequence[np.ndarray]) -> None:
        check_frames(self.inputs, frames, "input")
        for stage, frame in zip(self._ins, frames, strict=True):
            stage.load(frame)

    def _checked(self, call: Callable[[], int], what: str) -> None:
        """``call``'s status checked; a HAILO_TIMEOUT first closes and reopens the session and retries
        the call once: after a timeout HailoRT's jobs may still be in flight and the configured model
        is not to be trusted, while a fresh one lets the run go on (notes say it happened)."""
        status = call()
        if status == HAILO_TIMEOUT and self._reopen is not None:
            old, self.handle = self.handle, ctypes.c_void_p()
            if self._closed(old):  # leaked: its jobs may still use the buffers, so the new one gets its own
                self._stage()
            self.handle = self._reopen()
            self.notes += (f"HAILO_TIMEOUT (4) in {what}: the session was reopened and the call retried once",)
            status = call()
        self.shim.check(status)

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
        self._checked(self._run, "infer")
        if out is None:
            return [stage.view.copy() for stage in self._outs]
        for target, stage in zip(out, self._outs, strict=True):
            target.reshape(-1).view(np.uint8)[: stage.nbytes] = stage.raw[: stage.nbytes]
        return list(out)

    def bound(self, frames: Sequence[np.ndarray]) -> Callable[[], object]:
        """The frames are copied in once; each call is then the shim's run alone."""
        self._load(frames)
        return lambda: self._checked(self._run, "infer")

    def pipelined(self, frames: Sequence[np.ndarray], count: int, depth: int) -> float:
        """Run ``count`` frames keeping ``depth`` in flight (capped at the async queue size)."""
        self._load(frames)
        elapsed, hw = ctypes.c_double(), ctypes.c_double()
        depth = max(1, min(depth, self.async_queue_size))
        run = self.shim.binding.loop_hrt_pipelined

        def call() -> int:  # the buffers read at each call: a reopen after a leak stages fresh ones
            ins = (self._in_ptrs, self._in_sizes, len(self._ins))
            return int(run(self.handle, *ins, count, depth, ctypes.byref(elapsed), ctypes.byref(hw)))

        self._checked(lambda: noisy(self.log, call), "pipelined")
        return elapsed.value

    def hw_latency_ms(self) -> float | None:
        hw = ctypes.c_double()
        self.shim.check(self.shim.binding.loop_hrt_hw_latency(self.handle, ctypes.byref(hw)))
        return None if math.isnan(hw.value) else hw.value

    def close(self) -> None:
        """The handle first: removing the HEF can raise (Windows refuses to delete a file HailoRT
        still has open), and a handle left open holds the device for good. A session the shim leaked
        (1004) is no error here: it is recorded, and its buffers and HEF are kept (:meth:`_closed`)."""
        handle, self.handle = self.handle, ctypes.c_void_p()
        status = 0
        try:
            status = self._closed(handle)
            if status not in (0, LEAKED):
                self.shim.check(status)
        finally:
            on_close, self.on_close = self.on_close, lambda: None  # once, even after a reopen that failed
            on_close()
            if not status:
                self.hef_dir.cleanup()


class HailoRTDevice(Device):
    """Hailo silicon through HailoRT (via ``shim/``); ``device_id`` picks one of several devices.

    Holds this process's VDevice from its first use until :meth:`release` (see the module)."""

    name = "hailort"

    def __init__(self, library: str | None = None, device_id: str | None = None) -> None:
        self.library = library
        self.device_id = device_id
        self.log = HailoLog()
        self._shim: ShimCaller | None = None
        self._sessions: list[HailoRTSession] = []
        self._hold: ctypes.c_void_p | None = None
        self._held_group: str | None = None
        self._group: str | None = None  # the group_id of the last options seen (select, open)

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

    def select(self, options: RuntimeOptions) -> None:
        self._group = options.group_id

    def _held(self) -> ctypes.c_void_p:
        """The hold on this process's VDevice, taken with the device_id and the group_id selected;
        retaken when the group changed and no session keeps the old one alive."""
        if self._hold is not None and self._held_group != self._group and not self._sessions:
            self.release()
        if self._hold is None:
            shim, hold = self.shim(), ctypes.c_void_p()
            text = options_text(RuntimeOptions(group_id=self._group), self.device_id).encode()
            shim.check(noisy(self.log, lambda: shim.binding.loop_hrt_device_acquire(text, ctypes.byref(hold))))
            self._hold, self._held_group = hold, self._group
        return self._hold

    def release(self) -> bool:
        """Let go of this object's hold on the process's VDevice; True when none of its sessions is
        open either (one still open keeps the VDevice, and the device, until it closes)."""
        if self._hold is not None:
            hold, self._hold = self._hold, None
            self.shim().binding.loop_hrt_device_release(hold)
        return not self._sessions

    def _open_handle(self, hef: Path, text: bytes) -> ctypes.c_void_p:
        shim, handle = self.shim(), ctypes.c_void_p()
        shim.check(noisy(self.log, lambda: shim.binding.loop_hrt_open(str(hef).encode(), text, ctypes.byref(handle))))
        return handle

    def open(self, artifact: Artifact, options: RuntimeOptions) -> HailoRTSession:
        if artifact.backend != "hailo":
            raise HailoRTError(f"hailort runs HEF artifacts, not '{artifact.backend}' ones")
        self.select(options)
        self._held()
        hef_dir = hef_file(artifact)
        hef, text = Path(hef_dir.name) / f"model{artifact.suffix}", options_text(options, self.device_id).encode()
        handle = ctypes.c_void_p()
        try:
            handle = self._open_handle(hef, text)
            session = HailoRTSession(
                self.shim(), handle, self.log, options.hw_latency, hef_dir, lambda: self._open_handle(hef, text)
            )
        except BaseException:
            if handle:  # a handle left open holds the device
                self.shim().binding.loop_hrt_close(handle)
            hef_dir.cleanup()
            raise
        self._sessions.append(session)
        session.on_close = lambda: self._sessions.remove(session)
        return session

    def health(self) -> Health:
        """Read through this process's VDevice, as the sessions see it (same device_id and group_id)."""
        warnings = self.log.take()
        try:
            facts = json.loads(self.shim().text("loop_hrt_health", self._held()))
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
        """``hailortcli benchmark`` on the same HEF, where hailortcli is on PATH, run with this
        process's VDevice released: 5.x opens its own VDevice and is refused while another process
        holds the device. A failure is recorded beside the run (``error``), never raised: the
        run was measured already. The record names the tool (``tool``), as the key it sits
        under names only the vendor's benchmark."""
        if not hailortcli.available()[0]:
            return None
        released = self.release()
        try:
            found = hailortcli.measuring_stick(artifact_path, loop_fps, options)
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            found = {"error": str(exc), "agree": None, "comparable": False}
        if found is None:
            return None
        return {"tool": hailortcli.TOOL, **found, "device_released": released}
