"""Every child process loop starts is started, watched and ended here (a device's own tools aside).

A child leads a process group of its own, so a kill takes whatever it started too (a compiler's
helpers, a vendor tool); it sees this process's import path, as multiprocessing's spawn does, so
plugins registered from another folder import there too; it dies with its parent (:func:`as_child`).
Its stdout and stderr go to a log whose tail a failure carries, with faulthandler's stacks, asked
for before a hung child is killed. How it ended is a value, its exit code (minus the signal); the
caller names the stage. Data goes as data: a forked child holds its inputs; a spawned one reads
them from its private 0700 folder, where either leaves plain files (no pickles); a long-lived
child talks over a private socket pair (:func:`connected`), never its stdout, where libraries print.
"""

from __future__ import annotations

import faulthandler
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from concurrent.futures import Executor
from contextlib import AbstractContextManager
from multiprocessing.connection import Connection
from pathlib import Path
from subprocess import Popen
from typing import IO, Any, NoReturn, TypeVar

from loop.core.capture import STDERR_TAIL
from loop.flow import keeper

EXIT_GRACE_S = 5.0  # how long a child whose socket closed gets to exit with its own code
POLL_S = 0.2  # how often a parent waiting on a connected child's socket asks whether it still runs
DUMP_GRACE_S = 1.0  # time a hung child gets to print its stacks before its group is killed
LOG = "stderr.txt"  # a child's log, in its folder
WATCHDOG = "loop-watchdog"  # the thread that watches for a parent to go; it holds no lock
PR_SET_PDEATHSIG = 1  # prctl's option: a signal for this process when its parent dies
_RUNNING: dict[int, Child] = {}  # this process's children, killed should its own parent go


class Child(AbstractContextManager["Child"]):
    """A child process that leads its own process group, with its log (and folder, if any)."""

    def __init__(self, pid: int, log: IO[bytes] | None, proc: Popen[bytes] | None, folder: Path | None) -> None:
        self.pid, self.log, self.folder, self._proc = pid, log, folder, proc
        self.keeper: Child | None = None  # kills its group should this process go (see connected)
        self._code: int | None = None
        _RUNNING[pid] = self

    def __exit__(self, *_: object) -> None:
        self.close()

    def poll(self) -> int | None:
        """Its exit code (minus the signal that killed it), or None while it runs."""
        if self._code is None and self._proc is not None:
            self._code = self._proc.poll()
        elif self._code is None:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            self._code = os.waitstatus_to_exitcode(status) if done else None
        return self._code

    def wait(self, timeout_s: float | None = None) -> int | None:
        """Its exit code, or None if it still runs after ``timeout_s``: woken the moment it exits
        where the kernel gives a process a descriptor (Linux's pidfd), else by polling, the
        poll widening to 50 ms (a compile of 60 ms was seen late by half as much again)."""
        deadline, delay = time.monotonic() + (float("inf") if timeout_s is None else timeout_s), 0.001
        ready = _exit_waiter(self.pid)
        while (code := self.poll()) is None and (left := deadline - time.monotonic()) > 0:
            if ready is not None:
                ready(min(left, 60.0))
            else:
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        return code

    def finish(self, timeout_s: float | None) -> int | None:
        """Its exit code, or None if it outlived ``timeout_s`` (its stacks then end its log);
        either way its group is killed, so nothing it started stays."""
        code = self.wait(timeout_s)
        self.stacks()  # a no-op unless it hung
        self.kill()
        return code

    def stacks(self) -> None:
        """Ask a hung child where it is stuck: faulthandler prints its stacks to its log."""
        if hasattr(signal, "SIGUSR1") and self.poll() is None:
            os.kill(self.pid, signal.SIGUSR1)
            self.wait(DUMP_GRACE_S)

    def kill(self) -> int:
        """Kill it, everything in its group and its keeper, and reap it; its exit code."""
        if self.keeper is not None:
            self.keeper.kill()
        if os.name == "nt" and self._proc is not None:
            self._proc.kill()  # Windows has no process groups to signal; the child alone goes
        else:
            keeper.kill_group(self.pid)  # a no-op when all have already exited
        code = self.wait()
        _RUNNING.pop(self.pid, None)
        assert code is not None  # waited for without a timeout
        return code

    def close(self) -> None:
        self.kill()
        if self.log is not None:
            self.log.close()

    def clear(self) -> None:
        """Empty its log, so a failure's tail is the task at hand's, not an earlier one's."""
        if self.log is not None:
            self.log.seek(0)
            self.log.truncate()

    def tail(self) -> str:
        """The end of its log, as a failure carries it (a hung child's stacks asked for first)."""
        self.stacks()
        if self.log is None:
            return ""
        self.log.seek(max(0, self.log.seek(0, os.SEEK_END) - STDERR_TAIL))
        return self.log.read().decode("utf-8", "replace")


def _exit_waiter(pid: int) -> Callable[[float], None] | None:
    """A call that returns once ``pid`` has exited or ``timeout`` seconds have passed, through a
    pidfd (Linux 5.3 and later); None where there is none (the caller polls)."""
    if not hasattr(os, "pidfd_open"):
        return None
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # exited and reaped already, or a kernel without pidfds
        return None

    def wait(timeout: float) -> None:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.poll(timeout * 1000)

    weakref.finalize(wait, os.close, fd)
    return wait


def how_it_died(code: int) -> str:
    """A child's exit code as a reader wants it: ``signal 11, SIGSEGV`` or ``exit code 3``."""
    try:
        return f"signal {-code}, {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
    except ValueError:
        return f"signal {-code}"


def can_fork() -> bool:
    """Forking is safe only from a single-threaded process (a pool worker is one, besides its
    watchdog); anything else, and Windows, spawns."""
    return hasattr(os, "fork") and len([t for t in threading.enumerate() if t.name != WATCHDOG]) == 1


def fork(work: Callable[[], None], folder: Path) -> Child:
    """``work`` in a forked child (if :func:`can_fork`), its log in ``folder``. Its imports are
    warm: a fresh interpreter pays them per child (0.8 s for ONNX Runtime, seconds for Hailo's)."""
    log, parent = _log(folder), os.getpid()
    pid = os.fork()
    if pid == 0:
        _forked(work, log.fileno(), parent)
    return Child(pid, log, None, folder)


def _forked(work: Callable[[], None], log: int, parent: int) -> NoReturn:
    code = 1
    try:
        os.setsid()  # its own process group, so a kill takes whatever it started too
        os.dup2(log, 1)
        os.dup2(log, 2)
        as_child(parent)
        work()
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)  # never the parent's cleanup (atexit, buffers) a second time


def spawn(module: str, arg: str, folder: Path | None = None, pass_fds: tuple[int, ...] = ()) -> Child:
    """``python -m MODULE ARG PARENT``, its log in ``folder`` (else an unnamed temporary file);
    the module calls :func:`as_child` with ``PARENT`` first."""
    return _start([sys.executable, "-m", module, arg, str(os.getpid())], _log(folder), pass_fds, folder)


def connected(module: str) -> tuple[Child, Connection]:
    """``module`` spawned with a keeper, and a private socket to it: ARG is the socket's fd."""
    mine, theirs = socket.socketpair()
    with theirs:
        child = spawn(module, str(theirs.fileno()), pass_fds=(theirs.fileno(),))
    # By path, isolated: it starts fast, and no module of loop/flow/ stands in for its stdlib.
    ids = [str(os.getpid()), str(child.pid)]
    child.keeper = _start([sys.executable, "-I", "-S", keeper.__file__, *ids], None, (), None)
    return child, Connection(mine.detach())


M = TypeVar("M")


class Connected:
    """A child :func:`connected` runs (``module``), started on first use and replaced after it dies
    or hangs; its own protocol is the subclass's."""

    def __init__(self, module: str) -> None:
        self._module = module
        self._child: Child | None = None
        self._conn: Connection | None = None
        self.died = ""  # how the child died, when :meth:`receive` found it gone

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None and self._child.poll() is None else None

    def start(self) -> tuple[Child, Connection]:
        return connected(self._module)

    def ensure(self) -> Connection:
        """The socket to a running child (started now if there is none), its log emptied so a
        failure's tail is the task at hand's."""
        if self.pid is None:
            self.stop()
            self._child, self._conn = self.start()
        assert self._child is not None and self._conn is not None
        self._child.clear()
        return self._conn

    def receive(self, deadline: float, read: Callable[[Connection], M]) -> M | None:
        """The next message, ``read`` from the socket; None once ``deadline`` (monotonic) passes or
        the child has died (:attr:`died` then says how)."""
        assert self._child is not None and self._conn is not None
        self.died = ""
        while (left := deadline - time.monotonic()) > 0:
            try:
                if self._conn.poll(min(left, POLL_S)):
                    return read(self._conn)
                if self._child.poll() is None:
                    continue
            except (EOFError, OSError):
                pass
            except BaseException:  # a message not read whole (Ctrl-C, a torn payload): never reuse that child
                self.stop()
                raise
            self._child.wait(EXIT_GRACE_S)  # its socket closes before it exits: its own code, not our kill's
            self.died = how_it_died(self._child.kill())
            break
        return None

    def ended(self) -> str:
        """End a child that died or hung; its log's tail (a hung child's stacks included)."""
        tail = self._child.tail() if self._child is not None else ""
        self.stop()
        return tail

    def stop(self) -> None:
        """Close the socket, then kill the child, its group and its keeper; a no-op when there is none."""
        if self._conn is not None:
            self._conn.close()
        if self._child is not None:
            self._child.close()
        self._child = self._conn = None


def _log(folder: Path | None) -> IO[bytes]:
    """A child's log, open as long as the child is: in its folder, else an unnamed temporary file."""
    if folder is None:
        return tempfile.TemporaryFile(prefix=f"loop-child-{os.getpid()}-")
    return open(folder / LOG, "a+b")


def _start(argv: list[str], log: IO[bytes] | None, fds: tuple[int, ...], folder: Path | None) -> Child:
    path = os.pathsep.join([p for p in sys.path if p] + [os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    own: dict[str, Any] = {"start_new_session": True}  # its own group (a session)
    if os.name == "nt":
        own = {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}  # type: ignore[attr-defined]
    out = subprocess.DEVNULL if log is None else log
    env = {**os.environ, "PYTHONPATH": path}
    proc = Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, pass_fds=fds, env=env, **own)
    return Child(proc.pid, log, proc, folder)


def pool(workers: int) -> Executor:
    """Joblib's reusable loky workers; once this process is gone (a ``kill -9``), each kills its
    children's groups, removes their folders and exits, rather than wait on a hung child for ever."""
    from joblib.externals.loky import get_reusable_executor  # not in every child that imports this

    executor: Executor = get_reusable_executor(max_workers=workers, initializer=_exit_with, initargs=(os.getpid(),))
    return executor


def _exit_with(parent: int) -> None:
    def gone() -> None:
        for child in list(_RUNNING.values()):
            keeper.kill_group(child.pid)
            if child.folder is not None:
                shutil.rmtree(child.folder, ignore_errors=True)
        os._exit(1)

    _watch(parent, gone)


def as_child(parent: int) -> None:
    """A child's first call: die with ``parent``, and print every thread's stack to the log on
    a fatal signal or on SIGUSR1."""
    if os.name != "nt":
        _die_with(parent)
    # A copy of fd 2 taken now: a compile or a measurement later points fd 2 at its own
    # capture, which is lost if the process dies, while this copy goes straight to the log.
    stacks = os.fdopen(os.dup(2), "w")
    faulthandler.enable(file=stacks, all_threads=True)
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)


def _die_with(parent: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent went before the signal was armed
        os._exit(1)
    # Where the signal is not (or kills only this process), the group's helpers go too.
    _watch(parent, lambda: keeper.kill_group(0))  # 0: its own group


def _watch(parent: int, gone: Callable[[], None]) -> None:
    def run() -> None:
        keeper.outlive(parent)
        gone()

    threading.Thread(target=run, name=WATCHDOG, daemon=True).start()
