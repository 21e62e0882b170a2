"""Run a benchmark by name; every run's figures land in one JSON file.

    python benchmarks/run.py list
    python benchmarks/run.py NAME [--tiny] [--out DIR] [-- ARGS ...]
    python benchmarks/run.py all --tiny [--out DIR]

A benchmark is a module of this folder named in ``KEPT``, with ``main(argv) -> dict`` (it runs
and returns its figures) and ``TINY`` (the arguments of its smallest whole run, which CI runs:
tests/test_benchmarks.py). ``--tiny`` puts ``TINY`` before ARGS; ARGS after ``--`` go to the
benchmark as given (``python benchmarks/run.py NAME -- --help`` lists them). Each run writes
``DIR/NAME.json``: its figures beside what ran, when, on which machine and code, and how long it
took. DIR is a new folder under ``runs/benchmarks/`` (which git ignores) unless ``--out`` names
one. ``all`` runs every kept benchmark in this one process, in the order below, and goes on past
a failure (written to its file as ``error``), exiting 1 at the end if any failed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import resource
import subprocess
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# Each kept benchmark and the topic of benchmarks/README.md it answers, in the README's order.
KEPT = {
    "compile_jobs": "compiles",
    "big_graph": "compiles",
    "sweep_memory": "memory",
    "big_model": "memory",
    "harness_overhead": "rates and noise",
    "noise_floor": "rates and noise",
    "link_model": "the link",
    "score_intervals": "scores and their noise",
    "noise_cost": "scores and their noise",
    "weights_4bit": "scores and their noise",
    "score_only": "studies and search cost",
    "scale_only": "studies and search cost",
    "report_scale": "reports and files",
}


def module(name: str) -> Any:
    if name not in KEPT:
        raise SystemExit(f"run.py: no benchmark {name!r}; `python benchmarks/run.py list` names them")
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))  # the benchmarks import each other's helpers by module name
    return importlib.import_module(name)


def summary(name: str) -> str:
    return " ".join((module(name).__doc__ or "").split("\n\n")[0].split())


def machine() -> dict[str, Any]:
    """Where and on what code a run was made: what its figures are read against."""
    import numpy as np
    import onnxruntime as ort

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        commit = head.stdout.strip() or None
    except OSError:  # no git: a copy of the tree, not a clone
        commit = None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "onnxruntime": ort.__version__,
        "numpy": np.__version__,
        "commit": commit,
    }


def plain(value: Any) -> Any:
    """A figure JSON can hold: numpy's numbers and arrays as numbers, anything else as its text."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def cpu_s() -> float:
    """CPU seconds of this process and of the children it has waited for, so far."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run(name: str, argv: Sequence[str], out: Path, tiny: bool) -> bool:
    """One benchmark in this process; its file written whatever happens. True where it ran whole."""
    found: dict[str, Any] = {"benchmark": name, "argv": list(argv), "tiny": tiny}
    found["started"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    found["machine"] = machine()
    t0, cpu0, own = time.perf_counter(), cpu_s(), sys.argv
    sys.argv = [f"run.py {name} --", *argv]  # what its usage line names it by
    try:
        found["figures"] = module(name).main(list(argv))
    except SystemExit as done:  # argparse's --help (0) and its refusals
        if done.code in (0, None):
            return True
        found["error"] = f"exit {done.code}"
    except Exception:
        found["error"] = traceback.format_exc()
    finally:
        sys.argv = own
    found["seconds"] = round(time.perf_counter() - t0, 2)
    found["cpu_s"] = round(cpu_s() - cpu0, 2)  # with the seconds: how far a busy host stretched them
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    path.write_text(json.dumps(found, indent=1, default=plain) + "\n")
    took = f"{found['seconds']} s ({found['cpu_s']} s of CPU)"
    print(f"run.py: {name}: {took}, {'failed' if 'error' in found else 'figures'} in {path}", flush=True)
    return "error" not in found


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=" ".join((__doc__ or "").split("\n\n")[0].split()))
    parser.add_argument("name", help="a benchmark's name, `list`, or `all`")
    parser.add_argument("--tiny", action="store_true", help="its smallest whole run (what CI runs)")
    parser.add_argument("--out", type=Path, help="the folder of the JSON files (default: runs/benchmarks/<time>)")
    args = parser.parse_args(own)
    if args.name == "list":
        for name, topic in KEPT.items():
            print(f"{name:<18} {topic:<24} {summary(name)}")
        return 0
    names = list(KEPT) if args.name == "all" else [args.name]
    for name in names:
        module(name)  # an unknown name is refused before anything runs or is written
    out = args.out or ROOT / "runs" / "benchmarks" / time.strftime("%Y%m%d-%H%M%S")
    ok = [run(n, [*(module(n).TINY if args.tiny else []), *extra], out, args.tiny) for n in names]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
