"""One compile in a child process, so a hang or a crash fails that compile alone: how a child is
started, watched, fed and ended is :mod:`loop.flow.supervise`'s. A spawned one reads the model's
path (or its raw ONNX bytes) as JSON and its frames as a ``.npy``; the result, checked against its
hashes, and its stage come back through its folder. Spawned as
``python -m loop.flow.compile_child FOLDER PARENT_PID`` by :func:`run_isolated`.
"""

from __future__ import annotations

import os
import pkgutil
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from loop.author import frames
from loop.compilers.base import Compiler, run_compile
from loop.core import memory
from loop.core.leftovers import scratch
from loop.core.vocab import CompileOptions, CompileResult, Frames, Quantized
from loop.flow import supervise
from loop.store import codec

STAGES = ("optimize", "rescale", "fingerprint", "compile")


def resolve(ref: str) -> type[Compiler]:
    """The compiler class named ``module:Class``."""
    found: type[Compiler] = pkgutil.resolve_name(ref)
    return found


def run_isolated(
    ref: str, model: bytes | Path, calibration: Frames, options: CompileOptions, quantized: Quantized | None = None
) -> CompileResult:
    """Compile in a child process, killed with its group after ``options.timeout_s``."""
    try:
        killed_before = memory.oom_kills()
        with scratch("compile") as tmp, _start(Path(tmp), (ref, model, calibration, options, quantized)) as child:
            code = child.finish(options.timeout_s)
            result = _outcome(Path(tmp), code, child.tail(), options.timeout_s, killed_before)
    except Exception as exc:
        result = CompileResult(ok=False, stage="startup", error=f"{type(exc).__name__}: {exc}")
    result.info = replace(result.info, host=result.info.host or socket.gethostname())
    return result


def _start(work: Path, args: tuple[str, bytes | Path, Frames, CompileOptions, Quantized | None]) -> supervise.Child:
    """A fork, whose imports (the compiler's own included) are warm in this process, where it
    can; else a fresh interpreter that reads its inputs from ``work``."""
    if supervise.can_fork():
        resolve(args[0])
        return supervise.fork(lambda: _compile_to(work, *args), work)
    _write_inputs(work, *args)
    return supervise.spawn("loop.flow.compile_child", str(work), folder=work)


def _write_inputs(
    work: Path,
    ref: str,
    model: bytes | Path,
    calibration: Frames,
    options: CompileOptions,
    quantized: Quantized | None,
) -> None:
    if quantized is not None:
        meta, blob = codec.encode_quantized(quantized)
        (work / "quantized.meta").write_bytes(meta)
        (work / "quantized.blob").write_bytes(blob)
    (work / "ref.txt").write_text(ref)
    (work / "options.json").write_text(codec.options_to_json(options))
    if isinstance(model, Path):  # a file goes by its path: the child runs on this host
        (work / "model.path").write_text(str(model.resolve()))
    else:
        (work / "model.onnx").write_bytes(model)
    frames.save(calibration, work, "calibration")


def _read_inputs(work: Path) -> tuple[str, bytes | Path, Frames, CompileOptions, Quantized | None]:
    quantized = None
    if (work / "quantized.meta").exists():
        quantized = codec.decode_quantized(
            (work / "quantized.meta").read_bytes(), (work / "quantized.blob").read_bytes()
        )[0]
    return (
        (work / "ref.txt").read_text(),
        _read_model(work),
        frames.saved(work, "calibration"),
        codec.options_from_json((work / "options.json").read_text()),
        quantized,
    )


def _read_model(work: Path) -> bytes | Path:
    if (work / "model.path").exists():
        return Path((work / "model.path").read_text())
    return (work / "model.onnx").read_bytes()


def _outcome(
    work: Path, code: int | None, tail: str, timeout_s: float | None, killed_before: int | None = None
) -> CompileResult:
    stage = _stage(work)
    if code is None:
        return CompileResult(ok=False, stage=stage, error=f"timeout after {timeout_s:g} s", stderr_tail=tail)
    meta = work / "out.meta"
    if code == -signal.SIGKILL and out_of_memory(killed_before):
        return CompileResult(ok=False, stage=stage, error=OUT_OF_MEMORY, stderr_tail=tail)
    if code != 0 or not meta.exists():
        return CompileResult(
            ok=False,
            stage=stage,
            error=f"compile process died ({supervise.how_it_died(code)}{'' if code else ' and no result'})",
            stderr_tail=tail,
        )
    try:
        return codec.decode(meta.read_bytes(), (work / "out.blob").read_bytes())[0]
    except (codec.Damaged, OSError) as exc:
        return CompileResult(ok=False, stage=stage, error=f"compile result unreadable: {exc}", stderr_tail=tail)


OUT_OF_MEMORY = "out of memory: the kernel's out-of-memory killer ended the compile (fewer --jobs, or a larger host)"


def out_of_memory(killed_before: int | None) -> bool:
    """Whether the out-of-memory killer has struck in this cgroup since it counted ``killed_before``."""
    now = memory.oom_kills()
    return killed_before is not None and now is not None and now > killed_before


def _stage(work: Path) -> str:
    try:
        return (work / "stage").read_text().strip() or "startup"
    except FileNotFoundError:
        return "startup"


def told(compiler: Compiler, tell: Callable[[str], object]) -> Compiler:
    """``compiler`` with each of its :data:`STAGES` told as it starts, so a timeout or a crash names it."""
    for stage in STAGES:
        method = getattr(compiler, stage)

        def call(*args: Any, _m: Any = method, _s: str = stage, **kwargs: Any) -> Any:
            tell(_s)
            return _m(*args, **kwargs)

        setattr(compiler, stage, call)
    return compiler


def _compile_to(
    work: Path,
    ref: str,
    model: bytes | Path,
    calibration: Frames,
    options: CompileOptions,
    quantized: Quantized | None = None,
) -> None:
    """Compile, and leave the result in ``work`` as data (the supervisor checks its hashes)."""
    try:
        compiler = told(resolve(ref)(), (work / "stage").write_text)
        result = run_compile(compiler, model, calibration, options, quantized)
        result.info = replace(result.info, peak_bytes=memory.peak_bytes())  # this process's: the estimate's evidence
    except Exception as exc:
        result = CompileResult(ok=False, stage="startup", error=f"{type(exc).__name__}: {exc}")
    meta, blob = codec.encode(result)
    (work / "out.blob").write_bytes(blob)
    (work / "out.meta.tmp").write_bytes(meta)
    os.replace(work / "out.meta.tmp", work / "out.meta")  # last: its presence means a whole result


def main(folder: str, parent: int) -> None:
    supervise.as_child(parent)
    _compile_to(Path(folder), *_read_inputs(Path(folder)))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
