"""benchmarks/ cannot rot unseen: every script starts and says how it is run, and the ones that
make their own data run whole at a tiny size (the figures in benchmarks/README.md are their
large runs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))

HELP_ALL = """
import contextlib, io, json, runpy, sys
failed = {}
for path in sys.argv[1:]:
    sys.argv = [path, "--help"]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(path, run_name="__main__")
        failed[path] = "no usage: --help returned without exiting"
    except SystemExit as done:
        if done.code not in (0, None) or "usage:" not in out.getvalue():
            failed[path] = f"exit {done.code}: {out.getvalue()[-300:]}"
    except Exception as exc:
        failed[path] = f"{type(exc).__name__}: {exc}"
print(json.dumps(failed))
"""


def test_every_benchmark_starts_and_says_how_it_is_run() -> None:
    """Each script imports what it needs from loop as loop is now and answers --help (one process
    for all: a script that imports an internal since renamed fails here, not in a reader's hands)."""
    assert len(SCRIPTS) >= 30
    scripts = [str(p) for p in SCRIPTS]
    done = subprocess.run([sys.executable, "-c", HELP_ALL, *scripts], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {}


@pytest.mark.parametrize("size_gb", [0.002])
def test_the_big_model_benchmark_runs_whole_at_a_tiny_size(tmp_path: Path, size_gb: float) -> None:
    """benchmarks/big_model.py at 2 MB: the sweep (base, scale_weights, two scale_grid, weights: 4)
    beside plain quantize_static, every run ok and each scale-only one clean, its JSON whole."""
    args = [sys.executable, str(ROOT / "benchmarks" / "big_model.py"), "--gb", str(size_gb)]
    done = subprocess.run([*args, "--out", str(tmp_path), "--jobs", "1"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    runs = found["loop"]["runs"]
    assert set(runs) == {"base", "weights", "grid", "grid2", "four"}
    assert all(r["status"] == "ok" for r in runs.values()), runs
    assert runs["grid"]["verdict"] == runs["grid2"]["verdict"] == "clean"
    assert found["peer"]["quantize_s"] > 0 and found["loop"]["tree_pss_bytes"] > 0


def test_the_squeezenet_benchmark_model_is_torchvisions_shape(tmp_path: Path) -> None:
    """benchmarks/squeezenet.py authors squeezenet1_1 without torch: torchvision's parameter count."""
    import onnx

    out = tmp_path / "squeezenet1_1.onnx"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "squeezenet.py"), str(out)], check=True, timeout=120)
    model = onnx.load(str(out))
    weights = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    assert weights == 1_235_496  # torchvision's squeezenet1_1
