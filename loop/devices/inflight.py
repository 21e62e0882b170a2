"""Frames in flight from host threads: what a device without its own queue pipelines with.

ONNX Runtime releases the GIL inside ``run``, so ``depth`` threads keep ``depth`` inferences in
flight on one session (the CPU device, and an execution provider through IOBinding).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any


def threaded(call: Any, count: int, depth: int) -> float:
    """``count`` calls with ``depth`` in flight; returns the elapsed seconds."""
    shares = [count // depth + (1 if i < count % depth else 0) for i in range(depth)]
    start = threading.Barrier(depth + 1)

    def worker(n: int) -> None:
        start.wait()
        for _ in range(n):
            call()

    threads = [threading.Thread(target=worker, args=(n,)) for n in shares]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def per_thread(calls: Sequence[Callable[[], Any]]) -> Callable[[], Any]:
    """One of ``calls`` per calling thread, handed out on first use: for state a thread in
    flight must not share (staging buffers, IOBindings)."""
    slots, lock, local = iter(calls), threading.Lock(), threading.local()

    def call() -> Any:
        if not hasattr(local, "call"):
            with lock:
                local.call = next(slots)
        return local.call()

    return call
