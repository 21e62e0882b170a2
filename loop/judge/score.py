"""Scores on the controlled inputs: built-in ones, and a user's ``module:function``.

A user scorer receives ``outputs`` (dequantized float arrays, one list per input frame),
``reference`` (the float model's outputs on the same frames) and ``raw`` (the device's own
bytes), and returns a mapping of names to numbers; they are merged into ``scores``.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from loop.core.errors import LoopError
from loop.core.hashing import array_sha

Scorer = Callable[..., dict[str, Any]]


def output_sha(raw: Sequence[Sequence[np.ndarray]]) -> str:
    """The device's own outputs, frame after frame, each with its dtype and shape."""
    return array_sha(*(o for outs in raw for o in outs))


def snr_db(reference: np.ndarray, actual: np.ndarray) -> float:
    noise = float(np.sum((reference.astype(np.float64) - actual) ** 2))
    signal = float(np.sum(reference.astype(np.float64) ** 2))
    if noise == 0.0:
        return float("inf")
    return 10.0 * np.log10(signal / noise) if signal > 0 else float("-inf")


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b / denom) if denom else 0.0


def flat(arrays: Sequence[Sequence[np.ndarray]]) -> np.ndarray:
    return np.concatenate([np.asarray(o, np.float64).ravel() for outs in arrays for o in outs])


def builtin(
    outputs: Sequence[Sequence[np.ndarray]],
    raw: Sequence[Sequence[np.ndarray]],
    reference: Sequence[Sequence[np.ndarray]],
    repeat_equal: bool,
    base_raw: Sequence[Sequence[np.ndarray]] | None,
) -> dict[str, Any]:
    mine, ref = flat(outputs), flat(reference)
    scores: dict[str, Any] = {
        "output_mean": float(mine.mean()),
        "output_std": float(mine.std()),
        "output_sha": output_sha(raw),
        "deterministic": bool(repeat_equal),
        "sensitive": len(raw) > 1 and output_sha(raw[:1]) != output_sha(raw[1:2]),
        "snr_db": snr_db(ref, mine),
        "cosine": cosine(ref, mine),
    }
    if base_raw is not None:
        mine, base = _bytes(raw), _bytes(base_raw)
        scores["bytes_differ"] = int(np.count_nonzero(mine != base)) if mine.size == base.size else None
        scores["bytes_total"] = int(mine.size)
    return scores


def _bytes(raw: Sequence[Sequence[np.ndarray]]) -> np.ndarray:
    return np.frombuffer(b"".join(np.ascontiguousarray(o).tobytes() for outs in raw for o in outs), np.uint8)


def load_scorer(ref: str) -> Scorer:
    """``module:function`` -> the function; a bad reference is a one-line error."""
    if ":" not in ref:
        raise LoopError(f"scorer '{ref}' is not module:function", field="--scorer")
    try:
        fn = pkgutil.resolve_name(ref)
    except (ImportError, AttributeError, ValueError) as exc:
        raise LoopError(f"cannot load scorer '{ref}': {exc}", field="--scorer") from None
    if not callable(fn):
        raise LoopError(f"scorer '{ref}' is not callable", field="--scorer")
    return fn
