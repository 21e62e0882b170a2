"""Controlled inputs: seeded frames, or frames read from a .npy file, and host-side
quantization to the device's own dtype."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from loop.core.errors import LoopError
from loop.core.hashing import array_sha, named_sha
from loop.core.vocab import Frames, TensorLayout


def seeded(shape: tuple[int, ...], count: int, seed: int, stream: int = 0) -> np.ndarray:
    """``count`` frames uniform in [0, 1), shape ``(count, *shape[1:])``, float32. Input
    ``stream`` of a model gets its own sequence (the first keeps the plain seed's)."""
    rng = np.random.default_rng(seed if stream == 0 else (seed, stream))
    return rng.random((count, *shape[1:]), dtype=np.float32)


def seeded_set(
    shapes: dict[str, tuple[int, ...]],
    count: int,
    seed: int,
    constants: Mapping[str, float | int | bool] | None = None,
    dtypes: Mapping[str, str] | None = None,
) -> Frames:
    """Seeded frames for every input: an array for one input, a mapping for several. An
    integer or boolean input (``dtypes``) holds its value from ``constants`` in every frame."""
    dtypes, constants = dtypes or {}, constants or {}
    made = {
        name: constant(shape, count, dtypes[name], constants[name]) if name in dtypes else seeded(shape, count, seed, i)
        for i, (name, shape) in enumerate(shapes.items())
    }
    return next(iter(made.values())) if len(made) == 1 else made


def constant(shape: tuple[int, ...], count: int, dtype: str, value: float | int | bool) -> np.ndarray:
    return np.full((count, *shape[1:]), value, dtype=np.dtype(dtype))


def count(frames: Frames) -> int:
    return len(frames) if isinstance(frames, np.ndarray) else len(next(iter(frames.values())))


def feed(frames: Frames, index: int, names: Sequence[str]) -> dict[str, np.ndarray]:
    """Frame ``index`` of every input, as a batch of one, by input name."""
    if isinstance(frames, np.ndarray):
        return {names[0]: frames[index][None]}
    return {name: frames[name][index][None] for name in names}


def save(frames: Frames, folder: Path, name: str) -> None:
    """``frames`` in a child's folder: ``NAME.npz`` keyed by input name, else ``NAME.npy``; never pickles."""
    if isinstance(frames, dict):
        np.savez(folder / f"{name}.npz", **frames)  # type: ignore[arg-type]  # names, not flags
    else:
        np.save(folder / f"{name}.npy", frames, allow_pickle=False)


def saved(folder: Path, name: str) -> Frames:
    """The frames :func:`save` left in ``folder``."""
    if (folder / f"{name}.npz").exists():
        with np.load(folder / f"{name}.npz", allow_pickle=False) as stored:
            return {n: stored[n] for n in stored.files}
    return np.load(folder / f"{name}.npy", allow_pickle=False)


def select(frames: Frames, order: np.ndarray) -> Frames:
    if isinstance(frames, np.ndarray):
        return frames[order]
    return {name: value[order] for name, value in frames.items()}


def load_file(
    path: Path,
    shapes: dict[str, tuple[int, ...]],
    field: str,
    scale: float | None,
    dtypes: Mapping[str, str] | None = None,
    constants: Mapping[str, float | int | bool] | None = None,
) -> Frames:
    """Frames stored in ``path``: an .npy for a one-input model, or an .npz keyed by input name.
    An integer or boolean input (``dtypes``) takes its stored values as they are, or its
    value from ``constants`` where the file has none for it."""
    dtypes, constants = dtypes or {}, constants or {}
    fed = [name for name in shapes if not (name in dtypes and name in constants)]
    if path.suffix != ".npz":
        if len(fed) != 1:
            raise LoopError(
                f"the model has {len(shapes)} inputs ({', '.join(shapes)}); give an .npz keyed by input name",
                field=field,
            )
        name = fed[0]
        if name in dtypes:
            frames = _as_stored(np.load(path, allow_pickle=False), path, shapes[name], field, dtypes[name])
        else:
            frames = from_file(path, shapes[name], field, scale)
        return _with_constants(frames, name, shapes, dtypes, constants)
    try:
        with np.load(path, allow_pickle=False) as archive:
            stored = {name: archive[name] for name in archive.files}
    except (OSError, ValueError) as exc:
        raise LoopError(f"cannot read frames from {path}: {exc}", field=field) from None
    missing = [name for name in shapes if name not in stored and name not in constants]
    if missing:
        raise LoopError(
            f"{path} has no frames for input '{missing[0]}' (it holds: {', '.join(stored) or 'nothing'})", field=field
        )
    checked = {
        name: _as_stored(stored[name], path, shape, field, dtypes[name])
        if name in dtypes
        else _checked(stored[name], path, shape, field, scale)
        for name, shape in shapes.items()
        if name in stored
    }
    if len({len(v) for v in checked.values()}) != 1:
        raise LoopError(f"{path} holds a different number of frames per input", field=field)
    first = next(iter(checked))
    return (
        _with_constants(checked[first], first, shapes, dtypes, constants)
        if len(checked) == 1
        else {
            name: checked[name]
            if name in checked
            else constant(shape, len(checked[first]), dtypes[name], constants[name])
            for name, shape in shapes.items()
        }
    )


def _with_constants(
    frames: np.ndarray,
    name: str,
    shapes: Mapping[str, tuple[int, ...]],
    dtypes: Mapping[str, str],
    constants: Mapping[str, float | int | bool],
) -> Frames:
    """One stored input's frames, with every other input held at its constant."""
    if len(shapes) == 1:
        return frames
    return {
        n: frames if n == name else constant(shape, len(frames), dtypes[n], constants[n]) for n, shape in shapes.items()
    }


def from_file(
    path: Path, shape: tuple[int, ...], field: str = "calibration.path", scale: float | None = None
) -> np.ndarray:
    """Frames stored as one .npy array of shape (N, *shape[1:]), times ``scale`` if given.

    Integer frames (uint8 pixels, say) need an explicit scale: taking them as 0-255 floats
    for a model trained on [0, 1) would be wrong without a word."""
    try:
        frames = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise LoopError(f"cannot read frames from {path}: {exc}", field=field) from None
    if not isinstance(frames, np.ndarray):
        raise LoopError(f"{path} is not one .npy array (an .npz archive?)", field=field)
    return _checked(frames, path, shape, field, scale)


def _as_stored(frames: np.ndarray, path: Path, shape: tuple[int, ...], field: str, dtype: str) -> np.ndarray:
    """An integer or boolean input's stored frames, cast to its type (token ids, flags)."""
    if frames.ndim != len(shape) or tuple(frames.shape[1:]) != tuple(shape[1:]) or not len(frames):
        raise LoopError(f"{path} holds frames of shape {frames.shape}, the model takes (N, {shape[1:]})", field=field)
    if not np.can_cast(frames.dtype, np.dtype(dtype), "same_kind"):
        raise LoopError(f"{path} holds {frames.dtype} frames for a {dtype} input", field=field)
    return frames.astype(np.dtype(dtype))


def _checked(frames: np.ndarray, path: Path, shape: tuple[int, ...], field: str, scale: float | None) -> np.ndarray:
    if frames.ndim != len(shape) or tuple(frames.shape[1:]) != tuple(shape[1:]) or not len(frames):
        raise LoopError(
            f"{path} holds frames of shape {frames.shape}, the model takes (N, {', '.join(map(str, shape[1:]))})",
            field=field,
        )
    if not np.issubdtype(frames.dtype, np.number) or not np.isfinite(frames).all():
        raise LoopError(f"{path} holds non-numeric or non-finite values", field=field)
    if np.issubdtype(frames.dtype, np.integer) and scale is None:
        key = field.rsplit(".", 1)[0]
        raise LoopError(
            f"{path} holds {frames.dtype} frames; say how they map to the model's floats with "
            f"'{key}.scale' (e.g. 0.00392156862745098 for 1/255)",
            field=field,
        )
    frames = frames.astype(np.float32)
    return frames * np.float32(scale) if scale is not None else frames


def frames_sha(frames: Frames) -> str:
    """Covers the bytes, the shape and the dtype (and the input names, for several)."""
    if isinstance(frames, np.ndarray):
        return array_sha(frames)
    return named_sha(sorted(frames.items()))


def to_device_order(x: np.ndarray, layout: TensorLayout) -> np.ndarray:
    """An NCHW model frame in the device's order (NHWC for a HEF)."""
    return x.transpose(0, 2, 3, 1) if layout.channels_last and x.ndim == 4 else x


def to_model_order(y: np.ndarray, layout: TensorLayout, shape: Sequence[int] | None = None) -> np.ndarray:
    """A device output (batch first) in the model's own order, by rank. ``shape`` is the model's
    output shape, when known; only a channels-last layout is ever reordered:

    - rank 4, or a model shape not given: NHWC -> NCHW (a HEF's image outputs);
    - rank 3 (N, A, B): HailoRT shapes every stream as an image (H, W, features), so such an
      output comes as (N, 1, W, F). It is (N, W, F) when the model's is (N, W, F) (a sequence,
      features last) and transposed to (N, F, W) when the model's is (N, F, W) (a Conv1d's,
      channels first). Which one the DFC makes of a rank-3 tensor is UNCONFIRMED;
    - rank 2 (N, F), and any other: the device's values in their own order (features last is the
      model's last axis), reshaped to the model's shape when the sizes agree.

    A layout that is not channels-last is already in the model's order: only reshaped so."""
    if layout.channels_last and y.ndim == 4 and (shape is None or len(shape) == 4):
        return y.transpose(0, 3, 1, 2)
    if layout.channels_last and shape is not None and len(shape) == 3 and y.ndim == 4 and y.shape[1] == 1:
        n, w, f = y.shape[0], y.shape[2], y.shape[3]
        if tuple(shape[1:]) == (f, w) and f != w:
            return y[:, 0].transpose(0, 2, 1)
        if tuple(shape[1:]) == (w, f):
            return y.reshape(n, w, f)
    if shape is not None and y.size == y.shape[0] * int(np.prod(shape[1:])):
        return y.reshape(y.shape[0], *shape[1:])
    return y


def onto_grid(x: np.ndarray, layout: TensorLayout) -> np.ndarray:
    """Float values (already in the device's order) onto the layout's grid:
    ``q = round(x / scale) + zero_point``, saturated to the dtype.

    In float32, as ONNX Runtime's QuantizeLinear and HailoRT's ``quantize_input``
    (``include/hailo/quantization.hpp``) divide: a normalised frame such as ``(p/255 - 0.5)/0.5``
    puts most values exactly half a step apart, and in float64 the division lands them just
    short of the tie instead, all rounded toward the zero point. That bias cost a text
    classifier 7 dB (benchmarks/RETIRED.md). Ties go to even, as both runtimes break them;
    HailoRT adds the zero point before rounding, which differs only on a tie at an odd zero
    point."""
    if not layout.quantized:
        return np.ascontiguousarray(x.reshape(layout.shape), dtype=layout.dtype)
    info = np.iinfo(np.dtype(layout.dtype))
    x32 = np.asarray(x, dtype=np.float32)
    q = np.round(x32 / np.float32(layout.scale)).astype(np.float64) + (layout.zero_point or 0)
    return np.clip(q, info.min, info.max).astype(layout.dtype).reshape(layout.shape)


def off_grid(q: np.ndarray, layout: TensorLayout) -> np.ndarray:
    """Device values as float, in the device's order: ``x = (q - zero_point) * scale``."""
    if not layout.quantized:
        return q.astype(np.float32)
    return ((q.astype(np.float32) - (layout.zero_point or 0)) * np.float32(layout.scale)).astype(np.float32)


def quantize(x: np.ndarray, layout: TensorLayout) -> np.ndarray:
    """A model-order float frame as the device takes it."""
    return onto_grid(to_device_order(x, layout), layout)


def dequantize(q: np.ndarray, layout: TensorLayout, shape: Sequence[int] | None = None) -> np.ndarray:
    """What the device returned, as float in the model's own order (``shape``: the model's, when known)."""
    return off_grid(to_model_order(q.reshape(layout.shape), layout, shape), layout)
