"""The style the project keeps is checked with the tests: ruff's rules and format, and mypy.

They run from the ``test`` extra's pinned versions, so a finding here is the same finding on
every machine. Not installed is a failure: the README's test command installs them.
"""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATHS = ("loop", "tests", "benchmarks", "graphs", "shim")  # every Python file the project keeps


def _run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(module) is None:
        pytest.fail(f"{module} is not installed (pip install -e '.[test]')")
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True)


@pytest.mark.parametrize("args", [("check", *PATHS), ("format", "--check", *PATHS)])
def test_ruff(args: tuple[str, ...]) -> None:
    done = _run("ruff", *args)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy(tmp_path: Path) -> None:
    done = _run("mypy", "--cache-dir", str(tmp_path / "mypy"))
    assert done.returncode == 0, done.stdout + done.stderr
