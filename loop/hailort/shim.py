"""loop's HailoRT shim (``shim/``): finding it, loading it, and reading what it answers.

Shared by the hailort device (:mod:`loop.devices.hailort`) and the hailo compiler, which reads
a HEF's own inputs and outputs through :func:`hef_layouts` with no device attached. Where the
library is looked for, in order: the ``library`` argument, ``$LOOP_HAILORT_SHIM``, then
``shim/build/`` of a checkout and of the current directory. The ``.sigs`` file is looked for
beside the library (CMake copies it there), then in ``shim/``.

On Windows, Python 3.8+ no longer searches ``PATH`` for the dependencies of a library loaded
through ctypes, so ``hailort.dll``'s folder is added with :func:`os.add_dll_directory` before
loading (see :func:`dll_directories`).
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from loop.core.errors import BufferSizeError, LoopError
from loop.core.vocab import TensorLayout
from loop.hailort.sigs import Binding, bind

ENV_LIBRARY = "LOOP_HAILORT_SHIM"
ENV_DLL_DIR = "LOOP_HAILORT_DLL_DIR"
SIGS_NAME = "hailort_shim.sigs"
ABI_VERSION = 4
BAD_BUFFER, TEXT_TOO_SMALL, BAD_ARGUMENT, CAUGHT_EXCEPTION, LEAKED = 1000, 1001, 1002, 1003, 1004
STATUS_HINTS: dict[int, str] = {
    2: "HAILO_INVALID_ARGUMENT: HailoRT refused an argument (an unknown device_id, say)",
    4: "HAILO_TIMEOUT: the device did not answer in time (a hung or overloaded device, or a USB link that "
    "dropped); the session is reopened once and the call retried, a second timeout ends the call",
    6: "HAILO_INVALID_OPERATION: HailoRT refused the operation",
    7: "HAILO_NOT_IMPLEMENTED: this device needs the InferModel path",
    13: "HAILO_OPEN_FILE_FAILURE: a file or device node could not be opened",
    14: "HAILO_FILE_OPERATION_FAILURE: a file could not be read (a HEF cut short?)",
    26: "HAILO_INVALID_HEF: the file is not a HEF this HailoRT can read",
    64: "HAILO_DRIVER_NOT_INSTALLED: the Hailo driver is not installed or not running",
    73: "HAILO_DEVICE_IN_USE: the device is held by another process (on Hailo-10H what 74 is when a "
    "device_id was given; see 74)",
    74: "HAILO_OUT_OF_PHYSICAL_DEVICES: no free Hailo device (none connected, or held by another process; "
    "on Hailo-10H processes share a device only when every one opens it with the same "
    'measure.group_id, and with the default "UNIQUE" a second open waits about 5 s, then fails)',
    76: "HAILO_INVALID_DRIVER_VERSION: the driver and libhailort versions must match exactly",
    91: "HAILO_HEF_FILE_CORRUPTED: the HEF file is corrupted",
    92: "HAILO_HEF_NOT_SUPPORTED: the HEF comes from a Dataflow Compiler this HailoRT does not support",
    93: "HAILO_HEF_NOT_COMPATIBLE_WITH_DEVICE: the HEF was compiled for another architecture than this "
    "device (check compile.hw_arch)",
    BAD_BUFFER: "loop shim: a buffer does not match the layout",
    TEXT_TOO_SMALL: "loop shim: text buffer too small",
    BAD_ARGUMENT: "loop shim: null argument or bad option",
    CAUGHT_EXCEPTION: "loop shim: a C++ exception was stopped at the C boundary",
    LEAKED: "loop shim: close could not make sure the device is done with the session's buffers (a failed "
    "shutdown, or jobs still in flight), so it leaked them instead of freeing them; the buffers passed to it "
    "must stay allocated too",
}
_DLL_HANDLES: list[Any] = []  # kept for the process's life: closing one drops its folder from the search


class HailoRTError(LoopError):
    """A HailoRT or shim call failed; the message names the status and HailoRT's own text."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


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
    return [root / sub / name for root in dict.fromkeys(roots) for sub in ("", "Release") for name in library_names()]


def find_sigs(library: Path) -> Path | None:
    for path in (library.parent / SIGS_NAME, Path(__file__).resolve().parents[2] / "shim" / SIGS_NAME):
        if path.is_file():
            return path
    return None


def dll_directories(library: Path, environ: Mapping[str, str]) -> list[Path]:
    """Folders to add to Windows' DLL search before loading the shim: its own, ``$LOOP_HAILORT_DLL_DIR``,
    and every ``PATH`` entry holding ``hailort.dll`` (HailoRT's installer puts its folder on ``PATH``)."""
    folders = [library.parent]
    if environ.get(ENV_DLL_DIR):
        folders.append(Path(environ[ENV_DLL_DIR]))
    for entry in environ.get("PATH", "").split(os.pathsep):
        if entry and (Path(entry) / "hailort.dll").is_file():
            folders.append(Path(entry))
    return list(dict.fromkeys(f for f in folders if f.is_dir()))


def load_shim(library: Path, sigs: Path) -> Binding:
    """Bind the shim, after making its dependencies findable on Windows; refuse another ABI."""
    if sys.platform == "win32":
        _DLL_HANDLES.extend(os.add_dll_directory(str(folder)) for folder in dll_directories(library, os.environ))
    binding = bind(library, sigs)
    version = binding.loop_hrt_abi_version()
    if version != ABI_VERSION:
        raise HailoRTError(f"{library} speaks shim ABI {version}, loop needs {ABI_VERSION}: rebuild shim/")
    return binding


def locate(library: str | None = None) -> tuple[Path, Path]:
    """The shim library and its ``.sigs``, or one line naming every path tried."""
    paths = candidate_paths(library)
    found = next((p for p in paths if p.is_file()), None)
    if found is None:
        raise HailoRTError(
            f"no HailoRT shim library found at {', '.join(map(str, paths))} "
            f"(build shim/ with CMake, or set ${ENV_LIBRARY})"
        )
    sigs = find_sigs(found)
    if sigs is None:
        raise HailoRTError(f"{SIGS_NAME} not found beside {found} nor in shim/")
    return found, sigs


def status_line(status: int, text: str) -> str:
    """One clear line for a failed shim call."""
    hint = STATUS_HINTS.get(status)
    return f"HailoRT status {status}" + (f" ({hint})" if hint else "") + (f": {text}" if text else "")


class ShimCaller:
    """A bound shim plus the error text that goes with each status."""

    def __init__(self, binding: Binding) -> None:
        self.binding = binding

    def last_error(self) -> str:
        buf = ctypes.create_string_buffer(1024)
        self.binding.loop_hrt_last_error(buf, len(buf))
        return buf.value.decode("utf-8", "replace")

    def check(self, status: int) -> None:
        if status == BAD_BUFFER:
            raise BufferSizeError(f"refused by the device: {self.last_error()}")
        if status:
            raise HailoRTError(status_line(status, self.last_error()), status)

    def text(self, func: str, first: Any) -> str:
        """Call a ``(first, char*, capacity, needed*)`` function, growing the buffer once."""
        call: Callable[..., int] = getattr(self.binding, func)
        needed = ctypes.c_size_t(0)
        buf = ctypes.create_string_buffer(4096)
        status = call(first, buf, len(buf), ctypes.byref(needed))
        if status == TEXT_TOO_SMALL:
            buf = ctypes.create_string_buffer(needed.value)
            status = call(first, buf, len(buf), ctypes.byref(needed))
        self.check(status)
        return buf.value.decode("utf-8")


def _quant_usable(entry: dict[str, Any]) -> bool:
    scale = entry.get("scale")
    return entry.get("quant_valid", True) and scale is not None and math.isfinite(scale) and scale > 0


def layout_from_json(entry: dict[str, Any]) -> TensorLayout:
    """HailoRT frames are NHWC per frame; streams whose size is not H*W*C (NMS) stay flat.

    An integer stream without one usable scale is refused: dequantizing it with scale 0 would
    silently give zeros (HailoRT's INVALID_QUANT_INFO; the shim reads such outputs as float32)."""
    name, dtype = entry["name"], entry["dtype"]
    if dtype == "auto":
        raise HailoRTError(f"stream '{name}' reports no concrete format type")
    integer = np.issubdtype(np.dtype(dtype), np.integer)
    if integer and not _quant_usable(entry):
        raise HailoRTError(
            f"stream '{name}' is {dtype} without one usable quantization scale "
            f"(quant_count {entry.get('quant_count')}, scale {entry.get('scale')}): refusing to "
            "dequantize it to zeros; ask HailoRT for float32 output"
        )
    itemsize = np.dtype(dtype).itemsize
    dims = [int(d) for d in entry["shape"]]
    nhwc = len(dims) == 3 and math.prod(dims) * itemsize == entry["frame_bytes"]
    shape = (1, *dims) if nhwc else (1, entry["frame_bytes"] // itemsize)
    zero_point = entry.get("zero_point") if integer else None
    return TensorLayout(
        name,
        shape,
        dtype,
        entry.get("scale") if integer else None,
        None if zero_point is None else int(round(zero_point)),
        channels_last=nhwc,
    )


def as_float_when_unquantizable(entry: dict[str, Any]) -> dict[str, Any]:
    """What a session will report for an output read from the HEF alone: the shim asks HailoRT for
    float32 wherever the quantization is not one usable scale."""
    if entry["dtype"] in ("uint8", "uint16") and not _quant_usable(entry):
        count = math.prod(int(d) for d in entry["shape"])
        return {**entry, "dtype": "float32", "frame_bytes": count * 4, "scale": None, "zero_point": None}
    return entry


def hef_info(hef: Path | str, library: str | None = None) -> dict[str, Any]:
    """A HEF's network groups and physical streams as HailoRT's C API reports them (``hailo_create_hef_file``,
    ``hailo_hef_get_all_stream_infos``), without a device: ``loop_hrt_hef_info``'s JSON."""
    shim = ShimCaller(load_shim(*locate(library)))
    return dict(json.loads(shim.text("loop_hrt_hef_info", str(hef).encode())))


def hef_layouts(hef: Path, library: str | None = None) -> tuple[tuple[TensorLayout, ...], tuple[TensorLayout, ...]]:
    """A HEF's inputs and outputs as HailoRT reads them (``Hef::create``), without a device."""
    shim = ShimCaller(load_shim(*locate(library)))
    layout = json.loads(shim.text("loop_hrt_hef_layout", str(hef).encode()))
    inputs = tuple(layout_from_json(e) for e in layout["inputs"])
    return inputs, tuple(layout_from_json(as_float_when_unquantizable(e)) for e in layout["outputs"])
