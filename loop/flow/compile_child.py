"""One compile in a child process that leads its own process group.

A compile that hangs or crashes (a native segfault, ``os._exit``) then takes down only
itself: the supervisor kills the whole group on timeout, so helpers the compiler spawned go
too, and the pool, the sweep and the other compiles go on.

Inputs and outputs are data, never pickles. A forked child holds its inputs already; a
spawned one (Windows, or a threaded parent) reads them from its private 0700 folder as JSON,
raw ONNX bytes and a ``.npy`` read without pickles. The result comes back through that
folder as :mod:`loop.store.codec` files, checked against their hashes, because native tools may
write anything to stdout.

Nothing outlives the sweep. The child dies with the process that started it (Linux's
parent-death signal, armed right after ``setsid``, and elsewhere a thread that watches for
its parent to go and kills the child's whole group). A loky worker that runs compiles
watches the sweep the same way (:func:`watch_sweep`): when the sweep is gone, say after a
``kill -9``, it kills its compile's group and exits.

Run as ``python -m loop.flow.compile_child FOLDER PARENT_PID`` by :func:`run_isolated`.
"""

from __future__ import annotations

import faulthandler
import os
import pkgutil
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from loop.compilers.base import Compiler, run_compile
from loop.core.capture import STDERR_TAIL
from loop.core.leftovers import scratch
from loop.core.vocab import CompileOptions, CompileResult, Frames
from loop.store.codec import Damaged, decode, encode, options_from_json, options_to_json

DUMP_GRACE_S = 1.0  # time the child gets to print its stacks before the group is killed
WATCH_S = 0.1  # how often a child or worker looks for its parent
STAGES = ("optimize", "fingerprint", "compile")
WATCHDOG = "loop-watchdog"
PR_SET_PDEATHSIG = 1
_RUNNING: dict[int, Path] = {}  # this worker's compile children (group leaders) and their folders


def resolve(ref: str) -> type[Compiler]:
    """The compiler class named ``module:Class``."""
    found: type[Compiler] = pkgutil.resolve_name(ref)
    return found


def compile_with(compiler: Compiler, model: bytes, calibration: Frames, options: CompileOptions) -> CompileResult:
    """One compile in this process; returns a value, never raises."""
    result = run_compile(compiler, model, calibration, options)
    result.info["versions"] = compiler.describe()
    result.info["host"] = socket.gethostname()
    return result


def run_isolated(ref: str, model: bytes, calibration: Frames, options: CompileOptions) -> CompileResult:
    """Compile in a child process, killed with its group after ``options.timeout_s``."""
    try:
        with scratch("compile") as tmp:
            work = Path(tmp)
            if _can_fork():
                timed_out, code = _supervise_forked(work, (ref, model, calibration, options), options.timeout_s)
            else:
                _write_inputs(work, ref, model, calibration, options)
                timed_out, code = _supervise(work, options.timeout_s)
            result = _outcome(work, timed_out, code, options.timeout_s)
    except Exception as exc:
        result = CompileResult(ok=False, stage="startup", error=f"{type(exc).__name__}: {exc}")
    result.info.setdefault("host", socket.gethostname())
    return result


def _can_fork() -> bool:
    # Forking is safe only from a single-threaded process (a loky worker is one, besides its
    # watchdog, which holds no lock); anything else, and Windows, takes the subprocess path.
    others = [t for t in threading.enumerate() if t.name != WATCHDOG]
    return hasattr(os, "fork") and len(others) == 1


def watch_sweep(sweep: int) -> None:
    """A loky worker's initializer: when the sweep that started it is gone, kill the groups of
    its running compiles, remove their folders and exit (an orphaned worker would otherwise
    wait on a hung compile, or idle, for ever)."""

    def gone() -> None:
        for pid, folder in list(_RUNNING.items()):
            _kill_group(pid)
            shutil.rmtree(folder, ignore_errors=True)
        os._exit(1)

    _watch(sweep, gone)


def _watch(parent: int, gone: Callable[[], None]) -> None:
    def run() -> None:
        while os.getppid() == parent:
            time.sleep(WATCH_S)
        gone()

    threading.Thread(target=run, name=WATCHDOG, daemon=True).start()


def _die_with_parent(parent: int) -> None:
    """Arm the death of this child (and its group) with ``parent``."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent went before the signal was armed
        os._exit(1)
    # Where the signal is not (or kills only this process), the group's helpers go too.
    _watch(parent, lambda: os.killpg(0, signal.SIGKILL))


def _forked_main(folder: str, parent: int, args: tuple[str, bytes, Frames, CompileOptions]) -> None:
    code = 1
    try:
        os.setsid()  # its own process group, so a timeout kills whatever it started too
        _die_with_parent(parent)
        fd = os.open(Path(folder) / "stderr.txt", os.O_WRONLY | os.O_APPEND)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        _compile_to(Path(folder), *args)
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def _supervise_forked(
    work: Path, args: tuple[str, bytes, Frames, CompileOptions], timeout_s: float | None
) -> tuple[bool, int]:
    """Fork the compile from this process, whose imports (the compiler's own included) are
    already warm: a fresh interpreter would pay them per compile (about 0.8 s for ONNX
    Runtime, several seconds for the Dataflow Compiler)."""
    resolve(args[0])
    (work / "stderr.txt").touch()  # there even if the child is killed before it opens it
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        _forked_main(str(work), parent, args)
    _RUNNING[pid] = work
    try:
        return _reap(pid, timeout_s)
    finally:
        _kill_group(pid)  # even when this worker is interrupted: nothing it started stays
        _RUNNING.pop(pid, None)


def _reap(pid: int, timeout_s: float | None) -> tuple[bool, int]:
    status = _wait(pid, timeout_s)
    timed_out = status is None
    if timed_out and hasattr(signal, "SIGUSR1"):
        os.kill(pid, signal.SIGUSR1)
        status = _wait(pid, DUMP_GRACE_S)
    _kill_group(pid)
    if status is None:
        status = os.waitpid(pid, 0)[1]
    return timed_out, os.waitstatus_to_exitcode(status)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _wait(pid: int, timeout_s: float | None) -> int | None:
    """The child's wait status, or None if it is still running after ``timeout_s``."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    delay = 0.001
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if deadline is not None and time.monotonic() >= deadline:
            return None
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _write_inputs(work: Path, ref: str, model: bytes, calibration: Frames, options: CompileOptions) -> None:
    (work / "ref.txt").write_text(ref)
    (work / "options.json").write_text(options_to_json(options))
    (work / "model.onnx").write_bytes(model)
    if isinstance(calibration, dict):
        np.savez(work / "calibration.npz", **calibration)  # type: ignore[arg-type]  # names, not flags
    else:
        np.save(work / "calibration.npy", calibration, allow_pickle=False)


def _read_inputs(work: Path) -> tuple[str, bytes, Frames, CompileOptions]:
    return (
        (work / "ref.txt").read_text(),
        (work / "model.onnx").read_bytes(),
        _read_frames(work),
        options_from_json((work / "options.json").read_text()),
    )


def _read_frames(work: Path) -> Frames:
    if (work / "calibration.npz").exists():
        with np.load(work / "calibration.npz", allow_pickle=False) as stored:
            return {name: stored[name] for name in stored.files}
    return np.load(work / "calibration.npy", allow_pickle=False)


def _supervise(work: Path, timeout_s: float | None) -> tuple[bool, int]:
    with open(work / "stderr.txt", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "loop.flow.compile_child", str(work), str(os.getpid())],
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
            env=_child_env(),
            **_own_group(),
        )
        try:
            try:
                proc.wait(timeout=timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                _dump_stacks(proc)
                timed_out = True
        finally:
            _kill_spawned(proc)
        return timed_out, proc.wait()


def _child_env() -> dict[str, str]:
    # The child sees this process's import path, as multiprocessing's spawn does, so
    # compilers registered from a plugin or test folder import there too.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _own_group() -> dict[str, Any]:
    if os.name == "nt":
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}  # type: ignore[attr-defined]
    return {"start_new_session": True}


def _dump_stacks(proc: subprocess.Popen) -> None:
    """Ask a hanging child where it is stuck (the tail of its stderr says it), then move on."""
    if os.name == "nt":
        return
    try:
        os.kill(proc.pid, signal.SIGUSR1)
        proc.wait(timeout=DUMP_GRACE_S)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass


def _kill_spawned(proc: subprocess.Popen) -> None:
    """Kill the child and everything it started; a no-op when all have already exited."""
    if os.name == "nt":
        proc.kill()  # Windows has no process groups to signal; the child alone goes
        return
    _kill_group(proc.pid)


def _outcome(work: Path, timed_out: bool, code: int, timeout_s: float | None) -> CompileResult:
    tail = (work / "stderr.txt").read_bytes()[-STDERR_TAIL:].decode("utf-8", "replace")
    stage = _stage(work)
    if timed_out:
        return CompileResult(ok=False, stage=stage, error=f"timeout after {timeout_s:g} s", stderr_tail=tail)
    meta = work / "out.meta"
    if code != 0 or not meta.exists():
        return CompileResult(
            ok=False,
            stage=stage,
            error=f"compile process died ({how_it_died(code)}{'' if code else ' and no result'})",
            stderr_tail=tail,
        )
    try:
        return decode(meta.read_bytes(), (work / "out.blob").read_bytes())[0]
    except (Damaged, OSError) as exc:
        return CompileResult(ok=False, stage=stage, error=f"compile result unreadable: {exc}", stderr_tail=tail)


def _stage(work: Path) -> str:
    try:
        return (work / "stage").read_text().strip() or "startup"
    except FileNotFoundError:
        return "startup"


def how_it_died(code: int) -> str:
    """A child's exit status as a reader wants it: ``signal 11, SIGSEGV`` or ``exit code 3``."""
    if code < 0:
        try:
            return f"signal {-code}, {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def _marked(method: Callable[..., Any], stage: str, path: Path) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        path.write_text(stage)
        return method(*args, **kwargs)

    return call


def _stack_dumps() -> TextIO:
    # A copy of fd 2 taken now: run_compile later points fd 2 at its own capture, which is
    # lost if the process dies, while this copy goes straight to the supervisor's file.
    stream = os.fdopen(os.dup(2), "w")
    faulthandler.enable(file=stream, all_threads=True)
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, file=stream, all_threads=True)
    return stream


def _compile_to(work: Path, ref: str, model: bytes, calibration: Frames, options: CompileOptions) -> None:
    """Compile, and leave the result in ``work`` as data (the supervisor checks its hashes)."""
    stream = _stack_dumps()
    try:
        compiler = resolve(ref)()
        for stage in STAGES:  # so a timeout or crash can say where it happened
            setattr(compiler, stage, _marked(getattr(compiler, stage), stage, work / "stage"))
        result = compile_with(compiler, model, calibration, options)
    except Exception as exc:
        result = CompileResult(ok=False, stage="startup", error=f"{type(exc).__name__}: {exc}")
    meta, blob = encode(result)
    (work / "out.blob").write_bytes(blob)
    (work / "out.meta.tmp").write_bytes(meta)
    os.replace(work / "out.meta.tmp", work / "out.meta")  # last: its presence means a whole result
    stream.flush()


def main(folder: str, parent: int | None = None) -> None:
    if parent is not None and os.name != "nt":
        _die_with_parent(parent)
    _compile_to(Path(folder), *_read_inputs(Path(folder)))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else None)
