"""One compile in a child process that leads its own process group.

A compile that hangs or crashes (a native segfault, ``os._exit``) then takes down only
itself: the supervisor kills the whole group on timeout, so helpers the compiler spawned go
too, and the pool, the sweep and the other compiles go on. Inputs and outputs travel through
files in a private folder, because native tools may write anything to stdout.

Run as ``python -m loop.compile_child FOLDER`` by :func:`run_isolated`.
"""
from __future__ import annotations

import faulthandler
import importlib
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, TextIO

import numpy as np

from loop.compilers.base import STDERR_TAIL, CompileOptions, CompileResult, Compiler, run_compile

DUMP_GRACE_S = 1.0  # time the child gets to print its stacks before the group is killed
STAGES = ("optimize", "fingerprint", "compile")


def resolve(ref: str) -> type[Compiler]:
    """The compiler class named ``module:Class``."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def compile_with(compiler: Compiler, model: bytes, calibration: np.ndarray,
                 options: CompileOptions) -> CompileResult:
    """One compile in this process; returns a value, never raises."""
    result = run_compile(compiler, model, calibration, options)
    result.info["versions"] = compiler.describe()
    result.info["host"] = socket.gethostname()
    return result


def run_isolated(ref: str, model: bytes, calibration: np.ndarray, options: CompileOptions) -> CompileResult:
    """Compile in a child process, killed with its group after ``options.timeout_s``."""
    try:
        with tempfile.TemporaryDirectory(prefix="loop-compile-") as tmp:
            work = Path(tmp)
            (work / "in.pkl").write_bytes(pickle.dumps((ref, model, calibration, options), protocol=5))
            timed_out, code = _supervise_forked(work, ref, options.timeout_s) if _can_fork() else \
                _supervise(work, options.timeout_s)
            result = _outcome(work, timed_out, code, options.timeout_s)
    except Exception as exc:  # noqa: BLE001 - no child at all (fork limit, full disk): still a value
        result = CompileResult(ok=False, stage="startup", error=f"{type(exc).__name__}: {exc}")
    result.info.setdefault("host", socket.gethostname())
    return result


def _can_fork() -> bool:
    # Forking is safe only from a single-threaded process (a loky worker is one); anything
    # else, and Windows, takes the subprocess path.
    return hasattr(os, "fork") and threading.active_count() == 1


def _forked_main(folder: str) -> None:
    code = 1
    try:
        os.setsid()  # its own process group, so a timeout kills whatever it started too
        fd = os.open(Path(folder) / "stderr.txt", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        main(folder)
        code = 0
    finally:
        os._exit(code)


def _supervise_forked(work: Path, ref: str, timeout_s: float | None) -> tuple[bool, int]:
    """Fork the compile from this process, whose imports (the compiler's own included) are
    already warm: a fresh interpreter would pay them per compile (about 0.8 s for ONNX
    Runtime, several seconds for the Dataflow Compiler)."""
    resolve(ref)
    (work / "stderr.txt").touch()  # there even if the child is killed before it opens it
    pid = os.fork()
    if pid == 0:
        _forked_main(str(work))
    status = _wait(pid, timeout_s)
    timed_out = status is None
    if timed_out and hasattr(signal, "SIGUSR1"):
        os.kill(pid, signal.SIGUSR1)
        status = _wait(pid, DUMP_GRACE_S)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if status is None:
        status = os.waitpid(pid, 0)[1]
    return timed_out, os.waitstatus_to_exitcode(status)


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


def _supervise(work: Path, timeout_s: float | None) -> tuple[bool, int]:
    with open(work / "stderr.txt", "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "loop.compile_child", str(work)],
                                stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=_child_env(),
                                **_own_group())
        try:
            proc.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            _dump_stacks(proc)
            timed_out = True
        _kill_group(proc)
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


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the child and everything it started; a no-op when all have already exited."""
    if os.name == "nt":
        proc.kill()  # Windows has no process groups to signal; the child alone goes
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _outcome(work: Path, timed_out: bool, code: int, timeout_s: float | None) -> CompileResult:
    tail = (work / "stderr.txt").read_bytes()[-STDERR_TAIL:].decode("utf-8", "replace")
    stage = _stage(work)
    if timed_out:
        return CompileResult(ok=False, stage=stage, error=f"timeout after {timeout_s:g} s", stderr_tail=tail)
    out = work / "out.pkl"
    if code == 0 and out.exists():
        return pickle.loads(out.read_bytes())
    return CompileResult(ok=False, stage=stage, error=f"compile process died with {_how(code)}", stderr_tail=tail)


def _stage(work: Path) -> str:
    try:
        return (work / "stage").read_text().strip() or "startup"
    except FileNotFoundError:
        return "startup"


def _how(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name} ({-code})"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}" if code else "exit code 0 and no result"


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


def main(folder: str) -> None:
    work = Path(folder)
    stream = _stack_dumps()
    try:
        ref, model, calibration, options = pickle.loads((work / "in.pkl").read_bytes())
        compiler = resolve(ref)()
        for stage in STAGES:  # so a timeout or crash can say where it happened
            setattr(compiler, stage, _marked(getattr(compiler, stage), stage, work / "stage"))
        result = compile_with(compiler, model, calibration, options)
    except Exception as exc:  # noqa: BLE001 - an unloadable compiler is a failed compile
        result = CompileResult(ok=False, stage="startup", error=f"{type(exc).__name__}: {exc}")
    tmp = work / "out.pkl.tmp"
    tmp.write_bytes(pickle.dumps(result, protocol=5))
    os.replace(tmp, work / "out.pkl")
    stream.flush()


if __name__ == "__main__":
    main(sys.argv[1])
