"""``loop check``: a self-test of the controlled-input path on any backend."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from loop.core.errors import BufferSizeError, LoopError
from loop.core.text import for_person
from loop.core.vocab import Artifact, TensorLayout
from loop.devices.base import Device, RuntimeOptions, Session


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    detail: str


def _frame(layout: TensorLayout, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dtype = np.dtype(layout.dtype)
    if dtype.kind in "ui":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, layout.shape, dtype=dtype, endpoint=True)
    return rng.random(layout.shape, dtype=np.float32).astype(dtype)


def _frames(session: Session, seed: int) -> list[np.ndarray]:
    return [_frame(t, seed + i) for i, t in enumerate(session.inputs)]


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def sensitivity(session: Session) -> CheckResult:
    a, b = session.infer(_frames(session, 1)), session.infer(_frames(session, 2))
    differ = sum(int(np.count_nonzero(x != y)) for x, y in zip(a, b, strict=True))
    total = sum(x.size for x in a)
    return CheckResult("different inputs -> different outputs", differ > 0, f"{differ:,} of {total:,} values differ")


def determinism(session: Session) -> CheckResult:
    a = [o.copy() for o in session.infer(_frames(session, 1))]
    b = session.infer(_frames(session, 1))
    return CheckResult(
        "same input twice -> bit-identical",
        _same(a, b),
        "bit-identical" if _same(a, b) else "outputs differ between identical runs",
    )


def _refused(call: Callable[[], object], what: str) -> CheckResult:
    try:
        call()
    except BufferSizeError as exc:
        return CheckResult(f"undersized {what} buffer -> refused", True, for_person(exc))
    except Exception as exc:
        detail = f"unexpected {type(exc).__name__}: {for_person(exc)}"
        return CheckResult(f"undersized {what} buffer -> refused", False, detail)
    return CheckResult(f"undersized {what} buffer -> refused", False, "accepted: the buffer was not checked")


def undersized_input(session: Session) -> CheckResult:
    frames = _frames(session, 1)
    frames[0] = frames[0].reshape(-1)[:-1].copy()
    return _refused(lambda: session.infer(frames), "input")


def undersized_output(session: Session) -> CheckResult:
    out = [np.empty(max(t.frame_bytes // np.dtype(t.dtype).itemsize - 1, 0), t.dtype) for t in session.outputs]
    return _refused(lambda: session.infer(_frames(session, 1), out=out), "output")


def check(device: Device, artifact: Artifact, source: str = "the artifact") -> list[CheckResult]:
    """The four checks on ``artifact`` (read from ``source``, which a refusal names)."""
    with _opened(device, artifact, source) as session:
        return [sensitivity(session), determinism(session), undersized_input(session), undersized_output(session)]


@contextmanager
def _opened(device: Device, artifact: Artifact, source: str) -> Iterator[Session]:
    """A session on ``artifact``; a runtime that will not make one (ONNX Runtime refusing a
    crafted file's external data, an op it lacks) is the file's fault: one line naming it."""
    try:
        session = device.open(artifact, RuntimeOptions())
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise LoopError(f"{for_person(source)}: {device.name} cannot open it: {for_person(first)}") from None
    with session:
        yield session
