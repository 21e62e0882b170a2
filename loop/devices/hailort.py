"""HailoRT device: HEF artifacts run on Hailo silicon through the C shim in ``shim/``.

The shim (``shim/hailort_shim.cpp``) wraps HailoRT's C++ InferModel API in the flat
functions declared in ``hailort_shim.sigs``, bound here through :mod:`loop.devices.sigs`.
Where the library is looked for, in order: the ``library`` argument, ``$LOOP_HAILORT_SHIM``,
then ``shim/build/`` of a checkout and of the current directory. The ``.sigs`` file is
looked for beside the library (CMake copies it there), then in ``shim/``.

HailoRT's own log lines (its ``hailort.log`` and stderr) are captured per call and handed
out by :meth:`HailoRTDevice.health`; a USB power-limit warning marks a run power-limited.
Nothing here has run on a Hailo device yet: it is exercised against a loopback library
that implements the same ABI (``tests/devices/loopback``). Hailo's Python bindings
(``hailo_platform``) are not used yet: the shim is the one path, on Linux and Windows.
"""
from __future__ import annotations

import ctypes
import json
import math
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from loop.compilers.base import Artifact, TensorLayout, captured_stderr
from loop.devices.base import Device, Health, RuntimeOptions, Session, check_frames
from loop.devices.sigs import Binding, SigsError, bind
from loop.errors import BufferSizeError, LoopError

ENV_LIBRARY = "LOOP_HAILORT_SHIM"
SIGS_NAME = "hailort_shim.sigs"
BAD_BUFFER = 2
TEXT_TOO_SMALL = 5
STATUS_HINTS: dict[int, str] = {
    7: "HAILO_NOT_IMPLEMENTED: this device needs the InferModel path",
    13: "HAILO_OPEN_FILE_FAILURE: a file or device node could not be opened",
    26: "HAILO_INVALID_HEF: the HEF was compiled for another architecture than this device "
        "(check hw_arch), or for another HailoRT version",
    74: "HAILO_OUT_OF_PHYSICAL_DEVICES: the device is in use by another process "
        "(one process per device unless HailoRT's multi-process service is used)",
}
_POWER_LIMIT = re.compile(r"USB-C source electrical current advertised", re.IGNORECASE)
_LOG_LEVEL = re.compile(r"\[(warning|error|critical)\]\s*(?:\[[^\]]*\]\s*)*(.*)", re.IGNORECASE)


class HailoRTError(LoopError):
    """A HailoRT call failed; the message names the status and HailoRT's own text."""


def library_names() -> tuple[str, ...]:
    if sys.platform == "win32":
        return ("libhailort_shim.dll", "hailort_shim.dll")
    return ("libhailort_shim.dylib",) if sys.platform == "darwin" else ("libhailort_shim.so",)


def candidate_paths(library: str | None = None) -> list[Path]:
    """Every path the library is looked for at, in order."""
    if library:
        return [Path(library)]
    if os.environ.get(ENV_LIBRARY):
        return [Path(os.environ[ENV_LIBRARY])]
    roots = [Path(__file__).resolve().parents[2] / "shim" / "build", Path.cwd() / "shim" / "build"]
    return [root / sub / name for root in dict.fromkeys(roots) for sub in ("", "Release")
            for name in library_names()]


def find_sigs(library: Path) -> Path | None:
    for path in (library.parent / SIGS_NAME, Path(__file__).resolve().parents[2] / "shim" / SIGS_NAME):
        if path.is_file():
            return path
    return None


def status_line(status: int, text: str) -> str:
    """One clear line for a failed shim call."""
    hint = STATUS_HINTS.get(status)
    return f"HailoRT status {status}" + (f" ({hint})" if hint else "") + (f": {text}" if text else "")


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


def options_text(options: RuntimeOptions, measure_hw_latency: bool, device_id: str | None) -> str:
    parts: dict[str, object] = {"dma_map": int(options.dma_map), "batch_size": options.batch_size,
             "hw_latency": int(measure_hw_latency)}
    if options.power_mode:
        parts["power_mode"] = options.power_mode
    if device_id:
        parts["device_id"] = device_id
    return ";".join(f"{k}={v}" for k, v in parts.items())


def layout_from_json(entry: dict[str, Any]) -> TensorLayout:
    """HailoRT frames are NHWC per frame; streams whose size is not H*W*C (NMS) stay flat."""
    dtype = entry["dtype"]
    if dtype == "auto":
        raise HailoRTError(f"stream '{entry['name']}' reports no concrete format type")
    itemsize = np.dtype(dtype).itemsize
    shape = (1, *entry["shape"])
    nhwc = math.prod(entry["shape"]) * itemsize == entry["frame_bytes"] and len(entry["shape"]) == 3
    if math.prod(entry["shape"]) * itemsize != entry["frame_bytes"]:
        shape = (1, entry["frame_bytes"] // itemsize)
    zero_point = entry.get("zero_point")
    return TensorLayout(entry["name"], tuple(int(s) for s in shape), dtype, entry.get("scale"),
                        None if zero_point is None else int(round(zero_point)), channels_last=nhwc)


def _pointers(arrays: Sequence[np.ndarray]) -> tuple[Any, Any]:
    ptrs = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
    sizes = (ctypes.c_size_t * len(arrays))(*[a.nbytes for a in arrays])
    return ptrs, sizes


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


class ShimCaller:
    """A bound shim plus the error text that goes with each status."""

    def __init__(self, binding: Binding, log: HailoLog) -> None:
        self.binding = binding
        self.log = log

    def last_error(self) -> str:
        buf = ctypes.create_string_buffer(512)
        self.binding.loop_hrt_last_error(buf, len(buf))
        return buf.value.decode("utf-8", "replace")

    def check(self, status: int) -> None:
        if status == BAD_BUFFER:
            raise BufferSizeError(f"refused by the device: {self.last_error()}")
        if status:
            raise HailoRTError(status_line(status, self.last_error()))

    def text(self, func: str, handle: Any) -> str:
        """Call a ``(handle, char*, capacity, needed*)`` function, growing the buffer once."""
        needed = ctypes.c_size_t(0)
        buf = ctypes.create_string_buffer(4096)
        status = getattr(self.binding, func)(handle, buf, len(buf), ctypes.byref(needed))
        if status == TEXT_TOO_SMALL:
            buf = ctypes.create_string_buffer(needed.value)
            status = getattr(self.binding, func)(handle, buf, len(buf), ctypes.byref(needed))
        self.check(status)
        return buf.value.decode("utf-8")

    def noisy(self, func: str, *args: Any) -> None:
        """A call during which HailoRT may print to fd 2: capture it for health()."""
        with captured_stderr() as err:
            status = getattr(self.binding, func)(*args)
        self.log.add_stderr(err.getvalue())
        self.check(status)


class HailoRTSession(Session):
    def __init__(self, shim: ShimCaller, handle: ctypes.c_void_p, hef_dir: tempfile.TemporaryDirectory[str]) -> None:
        self.shim = shim
        self.handle = handle
        self.hef_dir = hef_dir
        layout = json.loads(shim.text("loop_hrt_layout", handle))
        self.inputs = tuple(layout_from_json(e) for e in layout["inputs"])
        self.outputs = tuple(layout_from_json(e) for e in layout["outputs"])
        self.async_queue_size = int(layout["async_queue_size"])
        self.max_depth = self.async_queue_size
        self.timeout_ms = 10000

    def infer(self, frames: Sequence[np.ndarray], out: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
        check_frames(self.inputs, frames, "input")
        frames = [np.ascontiguousarray(f) for f in frames]
        if out is None:
            out = [np.empty(t.shape, t.dtype) for t in self.outputs]
        check_frames(self.outputs, out, "output", exact=False)
        if not all(o.flags.c_contiguous and o.flags.writeable for o in out):
            raise BufferSizeError("output buffers must be writeable and C-contiguous")
        (ins, in_sizes), (outs, out_sizes) = _pointers(frames), _pointers(out)
        self.shim.check(self.shim.binding.loop_hrt_infer(self.handle, ins, in_sizes, len(frames),
                                                         outs, out_sizes, len(out), self.timeout_ms))
        return list(out)

    def pipelined(self, frames: Sequence[np.ndarray], count: int, depth: int) -> float:
        """Run ``count`` frames keeping ``depth`` in flight (capped at the async queue size)."""
        check_frames(self.inputs, frames, "input")
        frames = [np.ascontiguousarray(f) for f in frames]
        ins, sizes = _pointers(frames)
        elapsed, hw = ctypes.c_double(), ctypes.c_double()
        depth = max(1, min(depth, self.async_queue_size))
        self.shim.noisy("loop_hrt_pipelined", self.handle, ins, sizes, len(frames), count, depth,
                        ctypes.byref(elapsed), ctypes.byref(hw))
        return elapsed.value

    def hw_latency_ms(self) -> float | None:
        hw = ctypes.c_double()
        self.shim.check(self.shim.binding.loop_hrt_hw_latency(self.handle, ctypes.byref(hw)))
        return None if math.isnan(hw.value) else hw.value

    def close(self) -> None:
        if self.handle:
            self.shim.check(self.shim.binding.loop_hrt_close(self.handle))
            self.handle = ctypes.c_void_p()
            self.hef_dir.cleanup()


class HailoRTDevice(Device):
    """Hailo silicon through HailoRT (via ``shim/``). ``measure_hw_latency`` asks HailoRT
    for its hardware latency (its effect on throughput is UNCONFIRMED)."""

    name = "hailort"

    def __init__(self, library: str | None = None, measure_hw_latency: bool = True,
                 device_id: str | None = None) -> None:
        self.library = library
        self.measure_hw_latency = measure_hw_latency
        self.device_id = device_id
        self.log = HailoLog()
        self._shim: ShimCaller | None = None
        self._session: HailoRTSession | None = None

    @classmethod
    def available(cls) -> tuple[bool, str]:
        paths = candidate_paths()
        found = [p for p in paths if p.is_file()]
        if not found:
            return False, (f"no HailoRT shim library found at {', '.join(map(str, paths))} "
                           f"(build shim/ with CMake, or set ${ENV_LIBRARY})")
        sigs = find_sigs(found[0])
        if sigs is None:
            return False, f"{SIGS_NAME} not found beside {found[0]} nor in shim/"
        try:
            bind(found[0], sigs)
        except SigsError as exc:
            return False, str(exc)
        return True, f"shim {found[0]}"

    def shim(self) -> ShimCaller:
        if self._shim is None:
            paths = candidate_paths(self.library)
            found = next((p for p in paths if p.is_file()), None)
            if found is None:
                raise HailoRTError(f"no HailoRT shim library found at {', '.join(map(str, paths))}")
            sigs = find_sigs(found)
            if sigs is None:
                raise HailoRTError(f"{SIGS_NAME} not found beside {found} nor in shim/")
            self._shim = ShimCaller(bind(found, sigs), self.log)
        return self._shim

    def open(self, artifact: Artifact, options: RuntimeOptions) -> HailoRTSession:
        if artifact.backend != "hailo":
            raise HailoRTError(f"hailort runs HEF artifacts, not '{artifact.backend}' ones")
        shim = self.shim()
        hef_dir = tempfile.TemporaryDirectory(prefix="loop-hef-")
        hef = Path(hef_dir.name) / f"model{artifact.suffix}"
        hef.write_bytes(artifact.data)
        handle = ctypes.c_void_p()
        opts = options_text(options, self.measure_hw_latency, self.device_id).encode()
        try:
            shim.noisy("loop_hrt_open", str(hef).encode(), opts, ctypes.byref(handle))
        except Exception:
            hef_dir.cleanup()
            raise
        self._session = HailoRTSession(shim, handle, hef_dir)
        return self._session

    def health(self) -> Health:
        warnings = self.log.take()
        try:
            shim = self.shim()
            handle = self._session.handle if self._session and self._session.handle else None
            facts = json.loads(shim.text("loop_hrt_health", handle))
        except (LoopError, OSError):
            return Health(warnings=warnings)
        return Health(temperature_c=facts.get("temperature_c"),
                      device_id=facts.get("serial") or facts.get("device_path"),
                      device_path=facts.get("device_path"), warnings=warnings)

    def describe(self) -> dict[str, str]:
        return {"device": self.name, "shim": str(self._shim.binding.path) if self._shim else "not loaded"}

