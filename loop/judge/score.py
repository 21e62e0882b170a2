"""Scores on the controlled inputs: built-in ones, and a user's ``module:function``.

A user scorer receives ``outputs`` (dequantized float arrays, one list per input frame),
``reference`` (the float model's outputs on the same frames) and ``raw`` (the device's own
bytes), and returns a mapping of names to numbers; they are merged into ``scores``. A value given
as one number per frame (a list as long as the frames) is kept per frame and scored as its mean,
with an interval; a single number gets none (``interval_note`` says so).

Every score carries its spread over the frames. The SNR is a ratio of sums over frames, so its
interval is a bootstrap over frames (``BOOTSTRAP`` draws of the frames with replacement, seeded,
so the same frames give the same interval everywhere): the 2.5th and 97.5th percentiles of the
SNR of the drawn frames. Each frame's signal and noise energies are kept (``frame_energy``), so a
difference between two runs on the same frames can be bootstrapped paired (``paired_snr``): the
frames' own difficulty then cancels, and far fewer frames resolve it.
"""

from __future__ import annotations

import math
import pkgutil
from collections.abc import Callable, Mapping, Sequence
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


BOOTSTRAP = 2000
INTERVAL = (2.5, 97.5)


def energies(reference: Sequence[Sequence[np.ndarray]], actual: Sequence[Sequence[np.ndarray]]) -> np.ndarray:
    """Per frame, the float outputs' energy and the error's: shape (frames, 2)."""
    rows = []
    for ref, got in zip(reference, actual, strict=True):
        r, g = flat([ref]), flat([got])
        rows.append((float(np.sum(r * r)), float(np.sum((r - g) ** 2))))
    return np.array(rows, dtype=np.float64).reshape(-1, 2)


def recorded_energy(scores: Mapping[str, Any]) -> np.ndarray | None:
    """A run's per-frame energies as :func:`builtin` recorded them (frames, 2); None where not kept."""
    found = scores.get("frame_energy")
    if not isinstance(found, Mapping) or not found.get("signal"):
        return None
    return np.column_stack([np.asarray(found["signal"], float), np.asarray(found["noise"], float)])


def _db(signal: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """SNR in dB of each (signal, noise) pair: inf without noise, -inf without signal."""
    safe = np.where(noise > 0, noise, 1.0)
    with np.errstate(divide="ignore"):
        ratio = 10 * np.log10(signal / safe)
    return np.where(noise > 0, ratio, np.inf)


def _draws(frames: int) -> np.ndarray:
    """The bootstrap's frame draws, seeded by the frame count alone: the same everywhere."""
    return np.random.default_rng(frames).integers(0, frames, (BOOTSTRAP, frames))


def _ci(draws: np.ndarray) -> tuple[float, float]:
    """The middle 95% of ``draws``: drawn values only (no interpolation, which an inf would spoil)."""
    low, high = np.percentile(draws, INTERVAL, method="inverted_cdf")
    return float(low), float(high)


def _drawn_db(energy: np.ndarray, draws: np.ndarray) -> np.ndarray:
    picked = energy[draws]
    return _db(picked[..., 0].sum(axis=1), picked[..., 1].sum(axis=1))


def snr_interval(energy: np.ndarray) -> tuple[float, float] | None:
    """The SNR's 95% bootstrap interval over frames (None: fewer than two frames)."""
    if len(energy) < 2:
        return None
    return _ci(_drawn_db(energy, _draws(len(energy))))


def paired_snr(mine: np.ndarray, theirs: np.ndarray) -> tuple[float, tuple[float, float]] | None:
    """The SNR of ``mine`` less that of ``theirs`` over the same frames, with its 95% interval,
    both drawn from the same frames each time (None: not the same frame count, or fewer than two)."""
    if len(mine) != len(theirs) or len(mine) < 2:
        return None
    whole = float(_db(mine[:, 0].sum(), mine[:, 1].sum()) - _db(theirs[:, 0].sum(), theirs[:, 1].sum()))
    draws = _draws(len(mine))
    diffs = _drawn_db(mine, draws) - _drawn_db(theirs, draws)
    finite = diffs[np.isfinite(diffs)]
    return whole, _ci(finite) if finite.size else (whole, whole)


def mean_interval(values: np.ndarray) -> tuple[float, float] | None:
    """A per-frame score's mean, its 95% bootstrap interval over frames (None: under two frames)."""
    if len(values) < 2:
        return None
    return _ci(values[_draws(len(values))].mean(axis=1))


def user_scores(given: Mapping[str, Any], frames: int) -> dict[str, Any]:
    """A user scorer's values as recorded: one number per frame becomes its mean, kept per frame
    (``KEY_frames``) with an interval (``KEY_ci95``); a single number is kept as given, and
    ``interval_note`` names the keys that have no interval, and why."""
    out: dict[str, Any] = {}
    bare = []
    for key, value in given.items():
        if isinstance(value, (list, tuple, np.ndarray)) and len(value) == frames and frames > 0:
            values = np.asarray(value, dtype=np.float64)
            out[key], out[f"{key}_frames"] = float(values.mean()), values.tolist()
            interval = mean_interval(values)
            if interval is not None:
                out[f"{key}_ci95"] = list(interval)
        else:
            out[key] = value
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                bare.append(key)
    if bare:
        out["interval_note"] = f"no interval for {', '.join(bare)}: the scorer gave one number, not one per frame"
    return out


def frames_to_resolve(difference: float, interval: tuple[float, float], frames: int) -> int | None:
    """About how many frames would put ``difference`` outside an interval measured as
    ``interval`` on ``frames`` (its half width shrinks as one over the root of the frames);
    None where it already lies outside, or there is no difference to resolve."""
    low, high = interval
    if low > 0 or high < 0 or difference == 0 or not math.isfinite(high - low):
        return None
    half = (high - low) / 2
    return math.ceil(frames * (half / abs(difference)) ** 2)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    # vdot, not ``@`` and norm: those go through the threaded BLAS, whose threads' wake-up took
    # 20 ms a call for 32K values on a busy 2-core host (a score-only candidate's whole score)
    a, b = a.astype(np.float64, copy=False).ravel(), b.astype(np.float64, copy=False).ravel()
    denom = float(np.sqrt(np.vdot(a, a) * np.vdot(b, b)))
    return float(np.vdot(a, b) / denom) if denom else 0.0


def flat(arrays: Sequence[Sequence[np.ndarray]]) -> np.ndarray:
    return np.concatenate([np.asarray(o, np.float64).ravel() for outs in arrays for o in outs])


def builtin(
    outputs: Sequence[Sequence[np.ndarray]],
    raw: Sequence[Sequence[np.ndarray]],
    reference: Sequence[Sequence[np.ndarray]],
    repeat_equal: bool,
    base_raw: Sequence[Sequence[np.ndarray]] | None,
    names: Sequence[str] = (),
) -> dict[str, Any]:
    """``names``: the model's outputs, in ``reference``'s order (a warning names its output)."""
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
    energy = energies(reference, outputs)
    scores["frame_energy"] = {"signal": energy[:, 0].tolist(), "noise": energy[:, 1].tolist()}
    interval = snr_interval(energy)
    if interval is not None:
        scores["snr_db_ci95"] = list(interval)
    said = snr_warnings(reference, scores["snr_db"], names)
    if said:
        scores["warnings"] = said
    top1 = top1_agreement(outputs, reference, names)
    if top1:
        scores["top1_agreement"] = top1
    if base_raw is not None:
        mine, base = _bytes(raw), _bytes(base_raw)
        scores["bytes_differ"] = int(np.count_nonzero(mine != base)) if mine.size == base.size else None
        scores["bytes_total"] = int(mine.size)
    return scores


def top1_agreement(
    outputs: Sequence[Sequence[np.ndarray]], reference: Sequence[Sequence[np.ndarray]], names: Sequence[str] = ()
) -> dict[str, float]:
    """Per classifier-like output (one vector of scores per frame: ``[C]`` or ``[1, C]``, C >= 2), the
    share of frames whose highest score is the float model's: what a classifier's user loses, which
    an SNR can hide (a near tie flips at 30 dB; a ruined model may keep the winner at 5)."""
    found: dict[str, float] = {}
    for n in range(len(reference[0]) if reference else 0):
        ref = [np.asarray(outs[n]) for outs in reference]
        if not all(r.size >= 2 and r.size == max(r.shape, default=0) for r in ref):
            continue
        got = [np.asarray(outs[n]).ravel() for outs in outputs]
        same = [int(np.argmax(r.ravel())) == int(np.argmax(g)) for r, g in zip(ref, got, strict=True)]
        found[names[n] if n < len(names) else str(n)] = sum(same) / len(same)
    return found


def constant_outputs(reference: Sequence[Sequence[np.ndarray]]) -> dict[int, float]:
    """The float outputs that take one value in every element of every scoring frame, by
    position, with that value: their quantized twin matches them exactly or not at all, so
    they say nothing of how well the network was quantized."""
    found: dict[int, float] = {}
    for n in range(len(reference[0]) if reference else 0):
        values = [np.asarray(outs[n]) for outs in reference]
        first = values[0].ravel()[:1]
        if first.size and all(v.size and bool(np.all(v == first[0])) for v in values):
            found[n] = float(first[0]) + 0.0  # -0.0 (a negated zero) shown as 0
    return found


def snr_warnings(reference: Sequence[Sequence[np.ndarray]], snr: float, names: Sequence[str] = ()) -> list[str]:
    """What makes the SNR meaningless, a line each: an output constant over the scoring frames
    (a dead branch, a Constant, a shape), or outputs equal to the float model's bit for bit."""
    constant = constant_outputs(reference)
    total = len(reference[0]) if reference else 0
    named = lambda n: f" ('{names[n]}')" if n < len(names) else ""  # noqa: E731
    said = [
        f"output {n}{named(n)} of {total} is constant over the scoring frames (every value {value:g} in all "
        f"{len(reference)}): SNR measures nothing{'' if len(constant) == total else ' on it'}"
        for n, value in constant.items()
    ]
    if math.isinf(snr) and snr > 0 and not said:
        said.append("the outputs equal the float model's exactly over the scoring frames: SNR is inf, not a measure")
    return said


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
