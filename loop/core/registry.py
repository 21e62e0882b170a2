"""Registry of compilers and devices, imported lazily so optional SDKs stay optional."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any

from loop.core.errors import LoopError

# The registry names backends by string, so importing it loads none of them; and it names no
# role's types either (the vocabulary sits below the roles): a class it loads is a
# ``loop.compilers.base.Compiler`` or a ``loop.devices.base.Device``, typed where it is used.

COMPILERS: dict[str, str] = {
    "onnxruntime": "loop.compilers.onnxruntime:OnnxRuntimeCompiler",
    "hailo": "loop.compilers.hailo:HailoCompiler",
}
DEVICES: dict[str, str] = {
    "onnxruntime": "loop.devices.onnxruntime:OnnxRuntimeDevice",
    "hailort": "loop.devices.hailort:HailoRTDevice",
    "hailo-emulator": "loop.devices.hailo_emulator:HailoEmulatorDevice",
    "link-sim": "loop.devices.link_sim:LinkSimDevice",
    "test-double": "loop.devices.test_double:MisbehavingTestDouble",  # faults on purpose, for runners' tests
}
DEFAULT_DEVICES: dict[str, tuple[str, ...]] = {
    "onnxruntime": ("onnxruntime",),
    "hailo": ("hailort",),
}
# An artifact file's suffix: the backend that makes such files, and the device that runs them
BACKEND_BY_SUFFIX: dict[str, str] = {".onnx": "onnxruntime", ".hef": "hailo"}
DEVICE_BY_SUFFIX: dict[str, str] = {".onnx": "onnxruntime", ".hef": "hailort"}
# The shipped link (loop.devices.links) a roofline is drawn against unless another is named
DEFAULT_LINK = "hailo10h-usb-1.5a"
# The chip ``loop fit`` weighs a model against unless another is named: the seed's (8 GB)
DEFAULT_CHIP = "hailo10h"


@dataclass(frozen=True)
class BackendStatus:
    name: str
    kind: str
    available: bool
    reason: str


def importable(module: str) -> tuple[bool, str]:
    """Whether ``module`` imports here, and if not, why (for ``available()``)."""
    try:
        importlib.import_module(module)
    except Exception as exc:  # an SDK may fail on import with more than an ImportError
        return False, f"{module} is not importable ({type(exc).__name__}: {exc})"
    return True, ""


def _load(ref: str) -> Any:
    return pkgutil.resolve_name(ref)


def compiler_class(name: str) -> Any:
    if name not in COMPILERS:
        raise LoopError(f"unknown backend '{name}' (known: {', '.join(COMPILERS)})")
    return _load(COMPILERS[name])


def split_device(name: str) -> tuple[str, str | None]:
    """``kind:argument`` as a device is named in a sweep file: ``onnxruntime:CUDAExecutionProvider``,
    ``link-sim:300MB/s+0.9ms``; a bare kind has no argument."""
    kind, sep, arg = name.partition(":")
    return kind, arg if sep else None


def device_class(name: str) -> Any:
    kind, _ = split_device(name)
    if kind not in DEVICES:
        raise LoopError(f"unknown device '{name}' (known: {', '.join(DEVICES)})")
    return _load(DEVICES[kind])


def make_device(name: str) -> Any:
    """The device a name stands for, its argument (if any) checked now, before anything runs."""
    cls, (kind, arg) = device_class(name), split_device(name)
    if arg is None:
        return cls()
    if not cls.takes_arg:
        raise LoopError(f"device '{kind}' takes no ':' argument (got '{name}')")
    return cls(arg)


def statuses() -> list[BackendStatus]:
    """Every compiler and device, with whether it can run here and why not."""
    out = []
    for kind, table in (("compiler", COMPILERS), ("device", DEVICES)):
        for name, ref in table.items():
            try:
                ok, reason = _load(ref).available()
            except Exception as exc:
                ok, reason = False, f"{type(exc).__name__}: {exc}"
            out.append(BackendStatus(name, kind, ok, reason))
            if kind == "device" and ok:
                out += [BackendStatus(n, kind, a, r) for n, a, r in _load(ref).variants()]
    return out
