"""Fixtures for device tests: the loopback shim, built once per session with the system C compiler.

The loopback is a test double implementing shim/hailort_shim.sigs; it is not HailoRT.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LOOPBACK_SOURCE = Path(__file__).parent / "loopback" / "loopback_shim.c"
SHIM_SIGS = Path(__file__).resolve().parents[2] / "shim" / "hailort_shim.sigs"


def _compile(out_dir: Path, name: str, *defines: str) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH to build the loopback shim")
    suffix = ".dylib" if sys.platform == "darwin" else ".so"
    out = out_dir / f"lib{name}{suffix}"
    cmd = [compiler, "-std=c11", "-shared", "-fPIC", "-O1", *defines, "-o", str(out), str(LOOPBACK_SOURCE), "-lm"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out


@pytest.fixture(scope="session")
def loopback_shim_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Path of the loopback library (complete ABI)."""
    return _compile(tmp_path_factory.mktemp("loopback"), "loopback_shim")


@pytest.fixture(scope="session")
def loopback_shim_lib_missing_symbol(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The loopback built without ``loop_hrt_hw_latency``."""
    return _compile(tmp_path_factory.mktemp("loopback_omit"), "loopback_omit", "-DLOOPBACK_OMIT_HW_LATENCY")


@pytest.fixture(scope="session")
def shim_sigs_path() -> Path:
    return SHIM_SIGS
