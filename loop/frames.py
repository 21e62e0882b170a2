"""Controlled inputs: seeded frames, or frames read from a .npy file, and host-side
quantization to the device's own dtype."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from loop.compilers.base import TensorLayout
from loop.errors import LoopError


def seeded(shape: tuple[int, ...], count: int, seed: int) -> np.ndarray:
    """``count`` frames uniform in [0, 1), shape ``(count, *shape[1:])``, float32."""
    rng = np.random.default_rng(seed)
    return rng.random((count, *shape[1:]), dtype=np.float32)


def from_file(path: Path, shape: tuple[int, ...], field: str = "calibration.path",
              scale: float | None = None) -> np.ndarray:
    """Frames stored as one .npy array of shape (N, *shape[1:]), times ``scale`` if given.

    Integer frames (uint8 pixels, say) need an explicit scale: taking them as 0-255 floats
    for a model trained on [0, 1) would be wrong without a word."""
    try:
        frames = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise LoopError(f"cannot read frames from {path}: {exc}", field=field) from None
    if not isinstance(frames, np.ndarray):
        raise LoopError(f"{path} is not one .npy array (an .npz archive?)", field=field)
    if frames.ndim != len(shape) or tuple(frames.shape[1:]) != tuple(shape[1:]) or not len(frames):
        raise LoopError(f"{path} holds frames of shape {frames.shape}, the model takes (N, "
                        f"{', '.join(map(str, shape[1:]))})", field=field)
    if not np.issubdtype(frames.dtype, np.number) or not np.isfinite(frames).all():
        raise LoopError(f"{path} holds non-numeric or non-finite values", field=field)
    if np.issubdtype(frames.dtype, np.integer) and scale is None:
        key = field.rsplit(".", 1)[0]
        raise LoopError(f"{path} holds {frames.dtype} frames; say how they map to the model's floats with "
                        f"'{key}.scale' (e.g. 0.00392156862745098 for 1/255)", field=field)
    frames = frames.astype(np.float32)
    return frames * np.float32(scale) if scale is not None else frames


def frames_sha(frames: np.ndarray) -> str:
    """Covers the bytes, the shape and the dtype."""
    h = hashlib.sha256(np.ascontiguousarray(frames).tobytes())
    h.update(f"{frames.shape}|{frames.dtype.str}".encode())
    return h.hexdigest()


def to_device_order(x: np.ndarray, layout: TensorLayout) -> np.ndarray:
    """An NCHW model frame in the device's order (NHWC for a HEF)."""
    return x.transpose(0, 2, 3, 1) if layout.channels_last and x.ndim == 4 else x


def to_model_order(y: np.ndarray, layout: TensorLayout) -> np.ndarray:
    return y.transpose(0, 3, 1, 2) if layout.channels_last and y.ndim == 4 else y


def onto_grid(x: np.ndarray, layout: TensorLayout) -> np.ndarray:
    """Float values (already in the device's order) onto the layout's grid:
    ``q = x / scale + zero_point``, rounded and saturated to the dtype."""
    if not layout.quantized:
        return np.ascontiguousarray(x.reshape(layout.shape), dtype=layout.dtype)
    info = np.iinfo(np.dtype(layout.dtype))
    q = np.round(x / layout.scale + (layout.zero_point or 0))
    return np.clip(q, info.min, info.max).astype(layout.dtype).reshape(layout.shape)


def off_grid(q: np.ndarray, layout: TensorLayout) -> np.ndarray:
    """Device values as float, in the device's order: ``x = (q - zero_point) * scale``."""
    if not layout.quantized:
        return q.astype(np.float32)
    return ((q.astype(np.float32) - (layout.zero_point or 0)) * np.float32(layout.scale)).astype(np.float32)


def quantize(x: np.ndarray, layout: TensorLayout) -> np.ndarray:
    """A model-order float frame as the device takes it."""
    return onto_grid(to_device_order(x, layout), layout)


def dequantize(q: np.ndarray, layout: TensorLayout) -> np.ndarray:
    """What the device returned, as float in the model's own order."""
    return off_grid(to_model_order(q.reshape(layout.shape), layout), layout)
