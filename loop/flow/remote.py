"""Devices on other hosts: a Dask cluster whose workers hold devices as resources.

A worker started with ``dask worker tcp://SCHEDULER:8786 --resources KIND=1`` (``link-sim=1``,
say) holds one device of that kind; each task is placed on a worker holding the resource
its first device's kind names, and run there by that worker's own
:class:`~loop.flow.local_runner.LocalRunner` (a child process per device, reused, under that
host's measuring lock). What Dask does, it does: placement by resource, and a task whose
worker dies is run again on another. The ledger is written only by the sweep, once a result
is back, so a candidate whose worker died mid-measure is recorded exactly once.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from concurrent.futures import Future
from contextlib import AbstractContextManager
from typing import Any

from loop.core.errors import LoopError
from loop.core.kinds import Stage
from loop.core.registry import split_device
from loop.flow.compile_pool import _cluster
from loop.flow.local_runner import LocalRunner
from loop.flow.runner import Runner, RunResult, RunTask, with_bytes

LOST_GRACE_S = 60.0  # no worker holds the device for this long: tasks still out are failed
_WORKER: list[LocalRunner] = []  # this worker process's runner, while a sweep uses it
_LOCK = threading.Lock()  # one task at a time on a worker: it holds one device of the kind


def run_on_worker(task: RunTask, overlap: bool) -> RunResult:
    """The task on this worker's local runner (its device children live on between tasks),
    the result naming the worker."""
    from distributed import get_worker

    with _LOCK:
        if not _WORKER:
            _WORKER.append(LocalRunner())
        _WORKER[0].overlap = overlap
        result = _WORKER[0].run(task)
    worker = get_worker()
    result.worker = str(worker.name) if worker.name is not None else str(worker.address)
    return result


def warm_on_worker(devices: tuple[str, ...]) -> None:
    """Start this worker's device children before the first task comes (see LocalRunner.warm)."""
    if not _LOCK.acquire(timeout=1.0):  # busy: its children are up already
        return
    try:
        if not _WORKER:
            _WORKER.append(LocalRunner())
        _WORKER[0].warm(devices)
    finally:
        _LOCK.release()


def close_on_worker() -> None:
    """Stop this worker's device children: the sweep is over, and a device held open by an
    idle child is a device no one else can use."""
    if not _LOCK.acquire(timeout=5.0):  # a task still out (a lost one): its child stays for it
        return
    try:
        while _WORKER:
            _WORKER.pop().close()
    finally:
        _LOCK.release()


def resource_of(device: str) -> str:
    """The Dask resource a worker holding ``device`` is started with: the device's kind."""
    return split_device(device)[0]


class DaskRunner(Runner):
    """Tasks on the workers of the cluster at ``address`` that hold their device's resource."""

    def __init__(self, address: str, devices: tuple[str, ...], overlap: bool = False) -> None:
        self.address, self.overlap, self.resource = address, overlap, resource_of(devices[0])
        self._context: AbstractContextManager[Any] | None = _cluster(address)
        self.client: Any = self._context.__enter__()  # closed by close()
        self._workers = self._holders()
        if not self._workers:
            self.close()
            raise LoopError(
                f"no worker of the Dask cluster at {address} holds the resource '{self.resource}' "
                f"(start one with: dask worker {address} --resources {self.resource}=1)",
                field="device_cluster",
            )
        self.slots = len(self._workers)
        self._executor = self.client.get_executor(resources={self.resource: 1}, pure=False)
        self._hosts = set(self.client.run(_hostname, workers=list(self._workers)).values())
        self._none_since: float | None = None

    def _holders(self) -> dict[str, dict[str, Any]]:
        workers = self.client.scheduler_info()["workers"]
        return {a: w for a, w in workers.items() if w.get("resources", {}).get(self.resource, 0) >= 1}

    def hosts(self) -> set[str]:
        """The hosts of the workers that held the device when the sweep began."""
        return set(self._hosts)

    def warm(self, devices: tuple[str, ...]) -> None:
        self.client.run(warm_on_worker, devices, workers=list(self._holders()))

    def lost(self) -> str | None:
        if self._holders():
            self._none_since = None
            return None
        now = time.monotonic()
        self._none_since = self._none_since or now
        if now - self._none_since < LOST_GRACE_S:  # a restarted worker comes back in seconds
            return None
        return f"no worker of the Dask cluster at {self.address} holds '{self.resource}' any more"

    def submit(self, task: RunTask) -> Future[RunResult]:
        # another host has no runs folder of ours: the artifacts travel with their bytes
        try:
            task = with_bytes(task)
        except LoopError as exc:  # swapped or damaged since it was stored: a failed run, as on this host
            failed: Future[RunResult] = Future()
            failed.set_result(RunResult.failed(Stage.STORE, str(exc)))
            return failed
        future: Future[RunResult] = self._executor.submit(run_on_worker, task, self.overlap)
        return future

    def run(self, task: RunTask) -> RunResult:
        return self.submit(task).result()

    def close(self) -> None:
        context, self._context = getattr(self, "_context", None), None
        if context is None:
            return
        try:
            self.client.run(close_on_worker, workers=list(self._holders()))
        except OSError:  # a worker gone since: its device children went with it
            pass
        context.__exit__(None, None, None)


def _hostname() -> str:
    import socket

    return socket.gethostname()


def own_host_locks(folder: str | None = None) -> Any:
    """A worker plugin that gives each worker a lock folder of its own, so the workers of one
    ``LocalCluster`` stand for hosts of their own (each measures while the others do, as
    devices on separate hosts would); on real hosts, leave it out."""
    from distributed import WorkerPlugin

    root = folder or tempfile.mkdtemp(prefix="loop-hosts-")

    class OwnHostLocks(WorkerPlugin):
        def setup(self, worker: Any) -> None:
            path = os.path.join(root, str(worker.name).replace(os.sep, "_"))
            os.makedirs(path, exist_ok=True)
            os.environ["LOOP_LOCK_DIR"] = path

    return OwnHostLocks()
