"""Scale-only compiles in a child process kept from one to the next (issue 43).

A ``scale_grid`` candidate is a patch of its base's quantized model: its scales multiplied, then
fingerprinted and graph-compiled. Forked one by one, each patch paid for a fork of a large parent,
a parse of every model it read, and a file round trip, more than the patch itself; here one child
holds the base it was sent once (and what its compiler derives from it, such as the float model's
kernels), and patches it as often as asked; one that dies or outlives a compile's timeout fails
that compile alone, and the next starts another (:mod:`loop.flow.supervise`). Used for backends
whose compiler says so (``Compiler.patches_warm``); the Dataflow Compiler's compile of a patched
HAR is a whole compile, forked as any other. Frames on the socket are :mod:`loop.store.codec`'s.
Run as ``python -m loop.flow.patch_child FD PARENT`` by :func:`loop.flow.supervise.connected`.
"""

from __future__ import annotations

import atexit
import socket
import sys
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from loop.core.facts import CompileFacts
from loop.core.vocab import CompileOptions, CompileResult, Quantized, QuantizedInCache
from loop.flow import supervise
from loop.store import codec
from loop.store.artifacts import keep_here
from loop.store.cache import Cache, entry_bytes

HELD = 2  # quantized bases a child keeps: a study's, and another group's
KEPT: tuple[bytes, bytes] = (b"", b"")  # the entry of a patch whose child stored it itself


class PatchProcess(supervise.Connected):
    """One patch child, started on first use and replaced after it dies or hangs."""

    def __init__(self) -> None:
        super().__init__("loop.flow.patch_child")
        self._sent: OrderedDict[str, None] = OrderedDict()  # the bases the child holds

    def call(
        self,
        ref: str,
        key: str,
        quantized: Quantized | QuantizedInCache,
        options: CompileOptions,
        entry: str,
        keep: tuple[Path, Path | None] | None = None,
    ) -> tuple[CompileResult, tuple[bytes, bytes] | None]:
        """The patch of ``quantized`` (known as ``key``) that ``options.rescales`` asks, compiled;
        and, if it succeeded, its compile cache entry under ``entry`` as the child encoded it
        (:func:`loop.store.cache.entry_bytes`), which is also what the result was read from.
        ``keep``: the runs folder and the cache folder, where the child stores the artifact and
        its cache entry itself (:func:`loop.store.artifacts.keep_here`); the entry is then
        :data:`KEPT` and the result names its artifact's file, so the bytes never cross the pipe."""
        try:
            conn = self.ensure()
            if key not in self._sent:
                if isinstance(quantized, QuantizedInCache):  # read there by the child
                    parts: tuple[bytes, ...] = (b"cached", key.encode(), quantized.folder.encode())
                else:
                    parts = (b"base", key.encode(), *codec.encode_quantized(quantized))
                for part in parts:
                    conn.send_bytes(part)
                self._sent[key] = None
                while len(self._sent) > HELD:
                    self._sent.popitem(last=False)
            self._sent.move_to_end(key)
            runs, cache = (str(keep[0]), str(keep[1] or "")) if keep is not None else ("", "")
            for part in (b"patch", ref.encode(), key.encode(), entry.encode(), runs.encode(), cache.encode()):
                conn.send_bytes(part)
            conn.send_bytes(codec.options_to_json(options).encode())
            return self._answer(conn, options.timeout_s)
        except (OSError, EOFError) as exc:
            return self._ended("startup", f"patch process unreachable: {exc}"), None

    def warm(self, ref: str) -> None:
        """Start the child now and have it import ``ref``'s compiler, so that overlaps whatever
        comes before the first patch (the base's compile, or reading it from the cache)."""
        try:
            conn = self.ensure()
            conn.send_bytes(b"warm")
            conn.send_bytes(ref.encode())
        except OSError:
            self.stop()  # the first call starts another

    def start(self) -> tuple[supervise.Child, supervise.Connection]:
        return _STARTER.submit(supervise.connected, self._module).result()

    def _answer(
        self, conn: supervise.Connection, timeout_s: float | None
    ) -> tuple[CompileResult, tuple[bytes, bytes] | None]:
        stage, deadline = "startup", time.monotonic() + (timeout_s or float("inf"))
        while True:
            if (kind := self.receive(deadline, supervise.Connection.recv_bytes)) is None:
                why = f"compile process died ({self.died})" if self.died else f"timeout after {timeout_s:g} s"
                return self._ended(stage, why), None
            if kind == b"stage":
                stage = conn.recv_bytes().decode()
                continue
            meta, blob, kept = conn.recv_bytes(), conn.recv_bytes(), conn.recv_bytes()
            try:
                result = codec.decode(meta, blob)[0]
            except codec.Damaged as exc:
                return self._ended(stage, f"compile result unreadable: {exc}"), None
            if kept == b"kept":
                return result, KEPT
            holds = result.ok and result.artifact is not None and bool(result.artifact.data)  # else it names a file
            return result, ((meta, blob) if holds else None)

    def _ended(self, stage: str, error: str) -> CompileResult:
        tail, host = self.ended(), CompileFacts(host=socket.gethostname())
        return CompileResult(ok=False, stage=stage, error=error, stderr_tail=tail, info=host)

    def stop(self) -> None:
        super().stop()
        self._sent.clear()


# The patch children of this process, kept across sweeps (a search runs a generation a step) and
# ended with it; each is used by one thread at a time.
_IDLE: list[PatchProcess] = []
_LOCK = threading.Lock()
# Every patch child is started from this one thread, which lives as long as the process: a child
# dies with the thread that started it (Linux's parent-death signal is the thread's), and the
# threads that compile a sweep's patches end with the sweep.
_STARTER = ThreadPoolExecutor(1, thread_name_prefix="loop-patch-start")


def warm(ref: str, count: int) -> None:
    """At least ``count`` idle patch children, each started and importing ``ref``'s compiler."""
    with _LOCK:
        while len(_IDLE) < count:
            _IDLE.append(PatchProcess())
        for process in _IDLE[:count]:
            process.warm(ref)


def borrow() -> PatchProcess:
    with _LOCK:
        return _IDLE.pop() if _IDLE else PatchProcess()


def give_back(process: PatchProcess) -> None:
    with _LOCK:
        _IDLE.append(process)


@atexit.register
def _stop_all() -> None:
    with _LOCK:
        for process in _IDLE:
            process.stop()
        _IDLE.clear()


# ---- in the child -------------------------------------------------------------------------


def _serve(conn: Any) -> None:
    from loop.compilers.base import run_compile
    from loop.flow.compile_child import resolve, told

    bases: OrderedDict[str, Quantized | None] = OrderedDict()
    compilers: dict[str, Any] = {}
    while True:
        kind = conn.recv_bytes()
        if kind in (b"base", b"cached"):
            key = conn.recv_bytes().decode()
            if kind == b"base":
                bases[key] = codec.decode_quantized(conn.recv_bytes(), conn.recv_bytes())[0]
            else:  # None where the entry went meanwhile (pruned): each patch of it says so
                bases[key] = Cache(Path(conn.recv_bytes().decode())).lookup_quantized(key)
            while len(bases) > HELD:
                bases.popitem(last=False)
            continue
        ref = conn.recv_bytes().decode()
        if ref not in compilers:
            compilers[ref] = told(
                resolve(ref)(), lambda stage: [conn.send_bytes(p) for p in (b"stage", stage.encode())]
            )
        if kind == b"warm":
            continue
        key, entry, runs, cache, options = (conn.recv_bytes().decode() for _ in range(5))
        bases.move_to_end(key)  # the parent's order of use, so both drop the same base (HELD)
        base = bases[key]
        if base is None:
            gone = CompileResult(ok=False, stage="store", error="its quantized base left the compile cache (pruned?)")
            for part in (b"done", *codec.encode(gone), b""):
                conn.send_bytes(part)
            continue
        result = run_compile(compilers[ref], b"", {}, codec.options_from_json(options), base)
        ok = result.ok and result.artifact is not None
        kept = ok and bool(runs) and keep_here(Path(runs), Path(cache) if cache else None, entry, result)
        spilled = ok and not result.artifact.data  # type: ignore[union-attr]
        # stored here: the result naming its artifact's file; else a success as the cache keeps
        # it (the parent stores these very bytes), a failure as it is
        encoded = codec.encode(result) if spilled or not ok else entry_bytes(entry, result)
        for part in (b"done", *encoded, b"kept" if kept else b""):
            conn.send_bytes(part)


def main(fd: int, parent: int) -> None:
    supervise.as_child(parent)
    try:
        _serve(supervise.Connection(fd))
    except (EOFError, OSError):
        return  # the parent closed the socket: nothing more to do


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
