"""Compile many variants at once: cached, deduplicated, in parallel, locally or on Dask.

Cache hits and repeats of an item are never compiled. A compile with scale-only edits
(``scale_grid``) starts from its base's quantized model: a cached one, or the one a compile of
this batch with the same model, frames and options optimizes first (the base, or one of the
edited compiles), so each base is optimized once. Misses go to workers (joblib's loky
processes here, or the workers of a Dask cluster), each compile in a child process of its own
(:mod:`loop.flow.compile_child`). Results come back in input order. A local worker
of a sweep stores its artifact under ``runs/artifacts`` and writes its cache entry itself (each
file written whole and renamed, as the parent writes them), so a result comes back without its
bytes; a Dask worker's result comes back by value, and the parent writes its entry.
"""

from __future__ import annotations

import copy
import itertools
import os
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, BrokenExecutor, Executor, Future, ThreadPoolExecutor, as_completed, wait
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from loop.author.frames import frames_sha
from loop.compilers.base import run_compile
from loop.core import memory
from loop.core.errors import LoopError
from loop.core.hashing import bytes_sha
from loop.core.modelfile import model_key, portable
from loop.core.registry import COMPILERS, compiler_class
from loop.core.vocab import CompileOptions, CompileResult, Frames, Quantized, QuantizedInCache
from loop.flow import patch_child, supervise
from loop.flow.compile_child import OUT_OF_MEMORY, out_of_memory, resolve, run_isolated
from loop.flow.follow import decision
from loop.store.artifacts import keep_here
from loop.store.cache import Cache, key_of, quantized_key

Item = tuple[bytes | Path, Frames, CompileOptions]
CONNECT_TIMEOUT_S = 20.0  # a scheduler that has not answered by then is taken as unreachable
Progress = Callable[[int], None]


# a compile's key and result, as a pool hands them back, and whether its worker wrote its cache entry
Done = Future[tuple[str, CompileResult, bool]]


@dataclass(frozen=True)
class Job:
    """One compile to do: its hashes up front, its model (a file, or small bytes) and frames
    loaded only when it is dispatched, so a generation never sits in the parent all at once."""

    model_sha: str
    calib_sha: str
    options: CompileOptions
    load: Callable[[], tuple[bytes | Path, Frames]]
    # keep the quantized model it optimizes, for scale-only edits of it compiled later (a base
    # whose variants follow its guard's decision compile in a batch after it)
    keep_quantized: bool = False
    path: Path | None = None  # the model's file, where it is one: a cached quantized model's float source


def as_job(item: Item | Job) -> Job:
    if isinstance(item, Job):
        return item
    model, calibration, options = item
    sha = bytes_sha(model) if isinstance(model, bytes) else model_key(model)
    return Job(sha, frames_sha(calibration), options, lambda: (model, calibration))


def compile_job(backend: str, model: bytes | Path, calibration: Frames, options: CompileOptions) -> CompileResult:
    """One compile in this very process (no isolation, no cache); returns a value, never raises."""
    return run_compile(compiler_class(backend)(), model, calibration, options)


def compile_all(
    backend: str,
    items: Sequence[Item | Job],
    *,
    jobs: int,
    cache: Cache | None,
    cluster: str | None = None,
    progress: Progress | None = None,
) -> list[CompileResult]:
    """Compile every ``(model, calibration, options)`` item; results in input order.

    ``jobs`` is joblib's ``n_jobs`` for local compiles (a cluster uses all its workers);
    ``progress`` is called with how many items each finished compile (or the hits) settled.
    """
    out: list[CompileResult | None] = [None] * len(items)
    for settled in iter_compiled(backend, items, jobs=jobs, cache=cache, cluster=cluster):
        for index, result in settled:
            out[index] = result
        _advance(progress, len(settled))
    return [r for r in out if r is not None]


def iter_compiled(
    backend: str,
    items: Sequence[Item | Job],
    *,
    jobs: int,
    cache: Cache | None,
    cluster: str | None = None,
    runs: Path | None = None,
) -> Iterator[list[tuple[int, CompileResult]]]:
    """The items' ``(index, result)`` pairs in batches as they settle: all cache hits first,
    then each finished compile with its repeats, so a caller can measure while compiles run.

    ``runs``: a local worker stores each artifact there (``runs/artifacts``, :func:`spill`) and
    writes its cache entry itself, so a result comes back without its bytes and this process
    never holds a model's artifact whole; a quantized model comes back only where a later
    compile of the batch starts from it."""
    ref = _compiler_ref(backend)
    with _cluster(cluster) as client:
        versions = _versions(ref, client)
        work = [as_job(item) for item in items]
        keys = [key_of(j.model_sha, j.calib_sha, j.options, backend, versions) for j in work]
        done, todo = _split(keys, work, cache)
        hits = _settle(keys, done)
        if hits:
            yield hits
        base = _Quantized(backend, versions, cache, todo)
        if base.wanted and client is None and resolve(ref).patches_warm:
            patch_child.warm(ref, _patchers(jobs, len(todo)))
        here = client is None or (runs is not None and _sees_runs(client, runs))
        for phase in base.phases():
            spool = Spool(runs, cache.root if cache is not None else None, base.carried) if runs and here else None
            for key, result, entry in _compile(ref, phase, jobs, client, base.held, spool):
                base.keep(key, result)
                result.info = replace(result.info, versions=result.info.versions or versions)
                if entry is None and cache is not None and result.ok and result.artifact and result.artifact.data:
                    entry = cache.encoded(key, result)  # now: the sweep may spill the artifact's bytes
                yield _settle(keys, {key: result})
                # written after the result is on its way: the cache only saves time, and the sweep
                # should not wait for it (a caller that stops here loses that one entry)
                if cache is not None and entry is not None and entry is not STORED:
                    cache.store_encoded(key, *entry)


def warm_patches(backend: str, jobs: int) -> None:
    """Start the patch children a batch of ``scale_grid`` compiles will use, now, so their imports
    overlap whatever comes first (a study preparing its generation); a no-op for a backend whose
    patches are forked (``Compiler.patches_warm``)."""
    ref = _compiler_ref(backend)
    if resolve(ref).patches_warm:
        patch_child.warm(ref, max(1, jobs))


class _Quantized:
    """The quantized models a batch's scale-only edits start from: found in the cache, or kept
    from the compile that optimizes them first; each compile's by its compile key."""

    def __init__(self, backend: str, versions: dict[str, str], cache: Cache | None, todo: dict[str, Job]) -> None:
        self.backend, self.versions, self.cache, self.todo = backend, versions, cache, todo
        self.of = {key: self._key(job, job.options) for key, job in todo.items()}
        self.wanted = {self.of[k] for k, j in todo.items() if j.options.rescales}
        self.models: dict[str, Quantized | QuantizedInCache] = {}
        files = {self.of[k]: j.path for k, j in todo.items() if j.path is not None}
        for qkey in self.wanted:
            found = self._found(qkey, files.get(qkey))
            if found is not None:
                self.models[qkey] = found

    def _found(self, qkey: str, file: Path | None) -> Quantized | QuantizedInCache | None:
        """A cached quantized base: named, where its float model's file is still there (the patch
        children read it from the cache, this process never); else read, and pointed at this
        job's file, which has the same content, where its own belonged to a process since gone."""
        if self.cache is None:
            return None
        source = self.cache.quantized_source(qkey)
        if source is not None and Path(source).exists():
            return QuantizedInCache(str(self.cache.root), (qkey,))
        found = self.cache.lookup_quantized(qkey)
        if found is not None and isinstance(found.source, str) and not Path(found.source).exists():
            found = replace(found, source=str(file)) if file is not None else None
        return found

    def _key(self, job: Job, options: CompileOptions) -> str:
        return quantized_key(job.model_sha, job.calib_sha, options, self.backend, self.versions)

    @property
    def held(self) -> dict[str, tuple[str, Quantized | QuantizedInCache] | None]:
        """Each compile key's quantized model to start from, with its own key (None: optimize)."""
        out: dict[str, tuple[str, Quantized | QuantizedInCache] | None] = {}
        for k, j in self.todo.items():
            found = self.models.get(self.of[k]) if j.options.rescales else None
            out[k] = None if found is None else (self.of[k], found)
        return out

    def phases(self) -> list[dict[str, Job]]:
        """Compiles that need no one else's quantized model first (plain ones, and one edited
        compile per base nothing else optimizes), then the edited compiles that wait for it."""
        first: dict[str, Job] = {}
        made = {self.of[k] for k, j in self.todo.items() if not j.options.rescales} | set(self.models)
        for key, job in self.todo.items():
            if not job.options.rescales or self.of[key] not in made:
                made.add(self.of[key])
                first[key] = job
        return [first, {k: j for k, j in self.todo.items() if k not in first}]

    @property
    def carried(self) -> dict[str, Stash]:
        """The compiles whose quantized models are kept (one an edit starts from, or kept), each
        with the keys to keep it under by the guard's decision (:meth:`stash`)."""
        return {k: self.stash(k) for k, j in self.todo.items() if self.of[k] in self.wanted or j.keep_quantized}

    def stash(self, key: str) -> Stash:
        """The keys compile ``key``'s quantized model is kept under, by the guard decision it
        makes (:func:`decision`): its own, and the decision's, which its variants follow."""
        job = self.todo[key]
        out: Stash = {}
        for decided in (None, "kept", "dropped"):
            keys = {self.of[key]}
            if job.options.bias_guard_given is None and decided is not None:
                keys.add(self._key(job, job.options.model_copy(update={"bias_guard_given": decided})))
            out[decided] = tuple(sorted(q for q in keys if q in self.wanted or job.keep_quantized))
        return out

    def keep(self, key: str, result: CompileResult) -> None:
        """Hold (and cache) the quantized model a compile optimized, where edits want it; one
        its worker left in the cache is held as that (:class:`QuantizedInCache`)."""
        quantized, result.quantized = _with_prints(result), None
        if isinstance(quantized, QuantizedInCache):
            for qkey in quantized.keys:
                self.models.setdefault(qkey, quantized)
            return
        if quantized is None:
            return
        for qkey in self.stash(key)[decision(result.info)]:
            self.models.setdefault(qkey, quantized)
            if self.cache is not None:
                self.cache.store_quantized(qkey, quantized)


def _compiler_ref(backend: str) -> str:
    # The parent's registry travels by value, so workers see compilers registered at run time.
    compiler_class(backend)  # an unknown backend is a user error, before anything starts
    return COMPILERS[backend]


def _split(keys: list[str], items: list[Job], cache: Cache | None) -> tuple[dict[str, CompileResult], dict[str, Job]]:
    """Cache hits, and the unique misses left to compile."""
    done: dict[str, CompileResult] = {}
    todo: dict[str, Job] = {}
    for key, item in zip(keys, items, strict=True):
        if key in done or key in todo:
            continue
        hit = cache.lookup(key) if cache is not None else None
        if hit is not None:
            done[key] = hit
        else:
            todo[key] = item
    return done, todo


def _compile(
    ref: str,
    todo: dict[str, Job],
    jobs: int,
    client: Any,
    held: dict[str, tuple[str, Quantized | QuantizedInCache] | None] | None = None,
    spool: Spool | None = None,
) -> Iterator[tuple[str, CompileResult, tuple[bytes, bytes] | None]]:
    """Each compile as it finishes (with its cache entry's bytes, where a patch child made
    them), with at most two per worker in flight, so each job loads
    its bytes just in time. One loop for both pools: each is a ``concurrent.futures.Executor``.
    Patches of a held quantized model go to patch children where the compiler keeps them warm
    (:mod:`loop.flow.patch_child`); a cluster's workers compile everything."""
    held = held or {}
    warm = client is None and resolve(ref).patches_warm
    patches = {k: held[k] for k in todo if warm and held.get(k) is not None}
    if patches:
        yield from _patched(
            ref, {k: (todo[k].options, p) for k, p in patches.items() if p}, _patchers(jobs, len(patches)), spool
        )
    todo = {k: j for k, j in todo.items() if k not in patches}
    if not todo:
        return
    executor, workers = _executor(client, max(1, min(jobs, len(todo))))
    queue, running = iter(todo.items()), set[Done]()
    submitted: dict[Done, str] = {}
    killed_before = memory.oom_kills()
    try:
        while True:
            for key, job in itertools.islice(queue, 2 * workers - len(running)):
                start = held.get(key)
                quantized = _read(start[1]) if start is not None else None
                model, calibration = job.load()
                # a path to a worker that sees our runs folder (this host's: the spool says so)
                model = portable(model) if client is not None and spool is None else model
                mine = spool.of(key) if spool is not None else None
                future = executor.submit(_task, key, ref, model, calibration, job.options, quantized, mine)
                submitted[future] = key
                running.add(future)
            if not running:
                return
            done, running = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                key, result, stored = _result(future, submitted[future], killed_before)
                yield key, result, STORED if stored else None
    finally:  # a caller that stops early leaves nothing queued behind it
        for future in running:
            future.cancel()


def _read(quantized: Quantized | QuantizedInCache) -> Quantized | None:
    """A quantized model to send a worker (a cluster's, or a backend's without patch children);
    None, so the compile optimizes, where the one left in the cache has gone meanwhile."""
    if isinstance(quantized, Quantized):
        return quantized
    return Cache(Path(quantized.folder)).lookup_quantized(quantized.keys[0])


def _result(future: Done, key: str, killed_before: int | None = None) -> tuple[str, CompileResult, bool]:
    """The compile's result; a worker that died under it is that compile's failure (out of
    memory, where the out-of-memory killer struck meanwhile), never the sweep's."""
    try:
        return future.result()
    except BrokenExecutor as exc:
        error = OUT_OF_MEMORY if out_of_memory(killed_before) else f"the compile worker died: {exc}"
        return key, CompileResult(ok=False, stage="compile", error=error), False


def _patchers(jobs: int, count: int) -> int:
    """Patch children for ``count`` patches: as many as the compile jobs (one fewer was measured
    8% slower on two cores, though this process and the device share them), one at least."""
    return max(1, min(jobs, count))


def _patched(
    ref: str,
    todo: dict[str, tuple[CompileOptions, tuple[str, Quantized | QuantizedInCache]]],
    jobs: int,
    spool: Spool | None = None,
) -> Iterator[tuple[str, CompileResult, tuple[bytes, bytes] | None]]:
    """Each patch compiled by one of ``jobs`` patch children, as it finishes, with its cache
    entry's bytes (None for a failure, which is never cached; :data:`STORED` where the child
    kept the entry and the artifact under ``spool``'s folders itself)."""

    def one(key: str) -> tuple[str, CompileResult, tuple[bytes, bytes] | None]:
        options, (qkey, quantized) = todo[key]
        process = patch_child.borrow()
        try:
            result, entry = process.call(ref, qkey, quantized, options, key, spool.of(key)[:2] if spool else None)
        finally:
            patch_child.give_back(process)
        return key, result, STORED if entry == patch_child.KEPT else entry

    with ThreadPoolExecutor(max(1, min(jobs, len(todo))), thread_name_prefix="loop-patch") as pool:
        running = {pool.submit(one, key) for key in todo}
        try:
            for future in as_completed(running):
                yield future.result()
        finally:  # a caller that stops early leaves nothing queued behind it
            for future in running:
                future.cancel()


def _executor(client: Any, jobs: int) -> tuple[Executor, int]:
    """The cluster's executor and its thread count, or ``jobs`` of joblib's loky workers here
    (even one: joblib would run ``n_jobs=1`` in this threaded parent, from which a compile
    cannot be forked)."""
    if client is not None:
        return client.get_executor(pure=False), max(1, sum(client.nthreads().values()))
    return supervise.pool(jobs), jobs  # each worker kills its compile and exits once the sweep is gone


def _task(
    key: str,
    ref: str,
    model: bytes | Path,
    calibration: Frames,
    options: CompileOptions,
    quantized: Quantized | None = None,
    spool: tuple[Path, Path | None, Stash | None] | None = None,
) -> tuple[str, CompileResult, bool]:
    result = run_isolated(ref, model, calibration, options, quantized)
    result.compiled_on = _worker_address()
    stored = False
    if spool is not None and result.ok and result.artifact is not None:
        runs, cache, stash = spool
        result.quantized = _stashed(result, cache, stash) if stash is not None else None
        stored = keep_here(runs, cache, key, result)
    return key, result, stored


def _stashed(result: CompileResult, cache: Path | None, stash: Stash) -> Quantized | QuantizedInCache | None:
    """The quantized model a compile made, left in the cache here under the keys its guard's
    decision names, where there is a cache: a patch child reads it there, and the sweep's
    process never holds it (268 MB at 1.1 GB of weights). Else the model itself, to carry back."""
    quantized = _with_prints(result)
    keys = stash.get(decision(result.info), ())
    if cache is None or not isinstance(quantized, Quantized) or not keys:
        return quantized
    at = Cache(cache)
    if all(at.store_quantized(q, quantized) for q in keys):
        return QuantizedInCache(str(cache), keys)
    return quantized


def _with_prints(result: CompileResult) -> Quantized | QuantizedInCache | None:
    """The quantized model a compile made, with that compile's layer prints: its patches'
    fingerprints start from what they say of the float kernels (:meth:`FloatSource.learn`)."""
    quantized = result.quantized
    if isinstance(quantized, Quantized) and not quantized.prints and result.layers:
        return replace(quantized, prints=tuple(result.layers))
    return quantized


STORED: tuple[bytes, bytes] = (b"", b"")  # a cache entry its worker wrote already
Stash = dict[str | None, tuple[str, ...]]  # a guard's decision (None: no guard ran) -> the keys to keep under


@dataclass(frozen=True)
class Spool:
    """Where local workers leave what a compile made (:func:`iter_compiled`'s ``runs``), and which
    compiles' quantized models come back (by compile key)."""

    runs: Path
    cache: Path | None
    carried: dict[str, Stash]

    def of(self, key: str) -> tuple[Path, Path | None, Stash | None]:
        return self.runs, self.cache, self.carried.get(key)


def _worker_address() -> str:
    if "distributed" not in sys.modules:  # not on a Dask worker; skip importing it
        return "local"
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return "local"


def compile_hosts(cluster: str | None) -> set[str]:
    """The hosts compiles run on: this one, or those of the cluster's workers."""
    if cluster is None:
        return {socket.gethostname()}
    with _cluster(cluster) as client:
        return set(client.run(socket.gethostname).values())


def check_cluster(address: str) -> None:
    """Reach the scheduler once, so a wrong address is a usage error before anything is written."""
    with _cluster(address):
        pass


@contextmanager
def _cluster(address: str | None) -> Iterator[Any]:
    """A Dask client, or None for local compiles."""
    if address is None:
        yield None
        return
    try:
        from distributed import Client
    except ImportError:
        raise LoopError("compiling on a cluster needs Dask: install loop[dask]", field="cluster") from None
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:
        raise LoopError(f"cannot reach the Dask scheduler at {address}: {exc}", field="cluster") from None
    with client:
        yield client


def _sees_runs(client: Any, runs: Path) -> bool:
    """Whether every worker of the cluster runs on this host and sees ``runs`` as this process
    does (a ``LocalCluster``'s): they then store what they compile there, as local workers do, and
    an artifact of gigabytes never travels back as one pickled ``bytes``. Elsewhere it does."""
    mine = _folder_mark(str(runs))
    try:
        seen = client.run(_folder_mark, str(runs))
    except Exception:  # a worker that cannot answer is not one to store through
        return False
    return mine is not None and bool(seen) and all(mark == mine for mark in seen.values())


def _folder_mark(folder: str) -> tuple[str, int, int] | None:
    """This host's name and the folder's device and inode: equal only for the same folder here."""
    try:
        stat = os.stat(folder)
    except OSError:
        return None
    return socket.gethostname(), stat.st_dev, stat.st_ino


def _versions(ref: str, client: Any) -> dict[str, str]:
    """The versions of the tools that will compile: the cluster's when there is one."""
    if client is not None:
        return client.submit(_describe, ref, pure=False).result()
    return _describe(ref)


def _describe(ref: str) -> dict[str, str]:
    return resolve(ref)().describe()


def _settle(keys: list[str], done: dict[str, CompileResult]) -> list[tuple[int, CompileResult]]:
    """Every item whose key is in ``done``; a repeat gets its own copy, marked as not compiled."""
    out, seen = [], set()
    for index, key in enumerate(keys):
        if key not in done:
            continue
        result = done[key]
        if key in seen:
            result = copy.deepcopy(result)
            result.cache_hit = True
        seen.add(key)
        out.append((index, result))
    return out


def _advance(progress: Progress | None, count: int) -> None:
    if progress is not None and count:
        progress(count)


__all__ = ["Cache", "Item", "Job", "compile_all", "compile_job", "iter_compiled"]
